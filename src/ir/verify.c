/* verify.c — re-checks every node under a root against its op's rule. */
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

static bool check_node(const ir_node *n, char *err, size_t errcap)
{
    const ir_op_info *info = &ir_ops[n->op];
    if (!ir_dtype_valid((int)n->dtype) || n->rank < 0 || n->rank > IR_MAX_RANK) {
        snprintf(err, errcap, "%s: bad type", info->name);
        return false;
    }
    if (info->cls == IR_CLS_LEAF)
        return n->nsrc == 0 && (n->op != IR_OP_BUFFER || ir_node_storage(n) != NULL);
    rlx_dtype dt;
    int rank;
    int64_t shape[IR_MAX_RANK];
    char why[160];
    if (!ir_infer(n->op, n->nsrc, n->src, &n->attr, &dt, &rank, shape, why, sizeof why)) {
        snprintf(err, errcap, "%s: %s", info->name, why);
        return false;
    }
    if (dt != n->dtype || !ir_shape_eq(rank, shape, n->rank, n->shape)) {
        snprintf(err, errcap, "%s: stored type differs from its rule", info->name);
        return false;
    }
    return true;
}

rlx_status ir_verify_roots(ir_node *const *roots, int nroots, char *err, size_t errcap)
{
    ir_node **order;
    long n = ir_postorder(roots, nroots, NULL, NULL, &order);
    if (n < 0) {
        snprintf(err, errcap, "out of memory");
        return RLX_E_NOMEM;
    }
    bool ok = true;
    for (long i = 0; i < n && ok; i++)
        ok = check_node(order[i], err, errcap);
    ir_free(order);
    return ok ? RLX_OK : RLX_E_INTERNAL;
}

bool ir_verify(ir_node *root, char *err, size_t errcap) { return ir_verify_roots(&root, 1, err, errcap) == RLX_OK; }

/* A CAT's length along its axis overflows int64 (ir_infer refuses it). */
static bool cat_overflows(int nsrc, ir_node *const *src, const ir_attrs *a)
{
    int ax = a->ax.axis;
    int64_t len = 0;
    for (int i = 0; i < nsrc; i++) {
        if (ax < 0 || ax >= src[i]->rank || src[i]->shape[ax] < 0)
            return false;
        if (src[i]->shape[ax] > INT64_MAX - len)
            return true;
        len += src[i]->shape[ax];
    }
    return false;
}

rlx_status ir_make_failure(ir_op op, int nsrc, ir_node *const *src, const ir_attrs *attr, rlx_dtype dt, int rank,
                           const int64_t *shape)
{
    static const ir_attrs none;
    const ir_attrs *a = attr ? attr : &none;
    int64_t shp[IR_MAX_RANK] = {0};
    if ((unsigned)op >= IR_OP_COUNT || op == IR_OP_BUFFER)
        return RLX_E_INTERNAL;
    if (ir_ops[op].cls == IR_CLS_LEAF) {
        if (rank < 0 || rank > IR_MAX_RANK || (op == IR_OP_INPUT && !a->input.name))
            return RLX_E_INTERNAL;
        if (rank > 0)
            memcpy(shp, shape, (size_t)rank * sizeof *shape);
    } else if (ir_c64_refuses(op, nsrc, src)) {
        return RLX_E_DTYPE;
    } else if (!ir_infer(op, nsrc, src, a, &dt, &rank, shp, NULL, 0)) {
        return op == IR_OP_CAT && cat_overflows(nsrc, src, a) ? RLX_E_SHAPE : RLX_E_INTERNAL;
    }
    return ir_shape_bytes_ok(dt, rank, shp) ? RLX_E_NOMEM : RLX_E_SHAPE;
}
