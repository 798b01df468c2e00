/*
 * ad.h — reverse-mode differentiation: the VJP table and its driver.
 *
 * Each primitive of ops.def has one row in ad_vjps (vjp.c), keyed by its
 * ir_op: a leaf, an op through which no gradient flows (comparisons,
 * floor, stop_gradient, ...), or a rule that turns the cotangent of a node
 * into cotangents of its sources. A row left empty is a bug that the
 * coverage test of tests/test_grad.c reports, and that rlx_grad turns into
 * RLX_E_INTERNAL rather than a silent zero.
 *
 * Rules are written with public calls on handles and run inside a
 * composite scope opened by the driver (grad.c), so their intermediates are
 * released and their errors name rlx_grad.
 */
#ifndef RLX_AD_H
#define RLX_AD_H

#include "tensor/ts.h"

typedef enum {
    AD_MISSING = 0, /* an empty row: never valid */
    AD_LEAF = 1,    /* no sources */
    AD_ZERO = 2,    /* no gradient flows to the sources */
    AD_RULE = 3     /* the rule computes the sources' cotangents */
} ad_kind;

/* A VJP rule. n is the node, g its cotangent (n's shape and dtype). For
 * each source k with need[k], the rule sets dx[k] to the cotangent of
 * src[k] (src[k]'s shape and dtype), a handle in the open scope; sources
 * without need may be left NULL. A NULL dx[k] with need[k] is a failure
 * (an error is recorded). Sources that are not floats never have need. */
typedef void (*ad_rule)(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx);

typedef struct {
    ad_kind kind;
    ad_rule rule; /* AD_RULE only */
} ad_vjp;

extern const ad_vjp ad_vjps[IR_OP_COUNT];
/* n's row: ad_vjps', or where n or a source is complex (c64, c128) the
 * complex rule; NULL when that rule is not written (rlx_grad refuses). */
const ad_vjp *ad_vjp_of(const ir_node *n);

/* Coverage hooks for the tests (tests/test_grad.c declares them). */
int ad_op_count(void);
const char *ad_op_name(int op);   /* NULL outside 0..count-1 */
int ad_vjp_kind(int op);          /* an ad_kind; -1 outside the range */
bool ad_vjp_used(int op);         /* has rlx_grad applied this op's rule? */
void ad_vjp_mark_used(ir_op op);

#endif
