/*
 * fuzz_common.h — what the librlx fuzzers share: a reader that turns the
 * fuzzer's bytes into arguments (mostly small and valid, sometimes at the
 * edges: negative, huge, overflowing, NaN), and a cost model that keeps a
 * fuzzer from realizing graphs too large to compute in a few milliseconds
 * (a legal 10^12-element realization is slow, not a bug).
 *
 * The fuzzers link the library's sources, so they may use internal headers
 * (ir/ir.h) for the cost walk and the live-node count, as the tests do.
 */
#ifndef RLX_FUZZ_COMMON_H
#define RLX_FUZZ_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "rlx.h"

/* Aborts the fuzzer (a crash it reports and minimizes) with a message. */
#define FUZZ_ASSERT(cond, ...)                                                  \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "fuzz check failed at %s:%d: %s\n  ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n  last error: %d '%s'\n", (int)rlx_last_status(), rlx_last_error()); \
            abort();                                                            \
        }                                                                       \
    } while (0)

typedef struct {
    const uint8_t *p;
    size_t n;
} fz_reader;

static inline bool fz_empty(const fz_reader *r) { return r->n == 0; }

static inline uint8_t fz_u8(fz_reader *r)
{
    if (!r->n)
        return 0;
    r->n--;
    return *r->p++;
}

static inline uint64_t fz_u64(fz_reader *r)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | fz_u8(r);
    return v;
}

static inline uint32_t fz_u32(fz_reader *r)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | fz_u8(r);
    return v;
}

/* A dim: mostly 0..7, sometimes up to 64, sometimes an edge value. */
static inline int64_t fz_dim(fz_reader *r)
{
    static const int64_t edge[] = {-1, -2, INT64_MIN, INT64_MAX, INT64_MAX - 1, (int64_t)1 << 31,
                                   (int64_t)1 << 32, (int64_t)1 << 62, (int64_t)1 << 61, 1000000000000000LL,
                                   (int64_t)1 << 45, (int64_t)1 << 47, 3037000500LL, 65536, 100, 257};
    uint8_t b = fz_u8(r);
    if (b < 200)
        return b % 8;
    if (b < 232)
        return b % 65;
    if (b < 252)
        return edge[b % (sizeof edge / sizeof *edge)];
    return (int64_t)fz_u64(r);
}

/* A signed index or offset: small mostly, edges sometimes. */
static inline int64_t fz_i64(fz_reader *r)
{
    static const int64_t edge[] = {INT64_MIN, INT64_MAX, INT64_MIN + 1, INT64_MAX - 1, (int64_t)1 << 62,
                                   -((int64_t)1 << 62), (int64_t)1 << 32, -((int64_t)1 << 32)};
    uint8_t b = fz_u8(r);
    if (b < 224)
        return (int64_t)(b % 21) - 10;
    if (b < 248)
        return edge[b % (sizeof edge / sizeof *edge)];
    return (int64_t)fz_u64(r);
}

/* An axis or small int argument. */
static inline int fz_int(fz_reader *r)
{
    static const int edge[] = {INT32_MIN, INT32_MAX, INT32_MIN + 1, 1 << 30, -(1 << 30), 65536, 1 << 16 | 1, 1000};
    uint8_t b = fz_u8(r);
    if (b < 232)
        return (int)(b % 21) - 10;
    if (b < 252)
        return edge[b % (sizeof edge / sizeof *edge)];
    return (int)fz_u32(r);
}

static inline double fz_double(fz_reader *r)
{
    static const double table[] = {0.0, 1.0, -1.0, 0.5, 2.0, -2.5, 3.0, 1e-3, 100.0, -0.0,
                                   NAN, INFINITY, -INFINITY, 1e300, -1e300, 1e-310, 2147483648.0,
                                   9.3e18, -9.3e18, 0.25};
    uint8_t b = fz_u8(r);
    if (b < 240)
        return table[b % (sizeof table / sizeof *table)];
    uint64_t bits = fz_u64(r);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* A dtype: mostly valid (the wide five more often than the six narrow
 * ones, so that deep float paths stay reachable), sometimes not. */
static inline int fz_dtype(fz_reader *r)
{
    uint8_t b = fz_u8(r);
    if (b < 150)
        return b % 5;
    if (b < 240)
        return RLX_F16 + b % 8; /* F16 BF16 I8 U8 I16 U32 C64 C128 */
    static const int bad[] = {-1, 13, 14, 100, INT32_MIN, INT32_MAX};
    return bad[b % 6];
}

/* A rank: mostly 0..4, sometimes up to 9, or negative. */
static inline int fz_rank(fz_reader *r)
{
    uint8_t b = fz_u8(r);
    if (b < 220)
        return b % 5;
    if (b < 250)
        return b % 10;
    return b & 1 ? -1 : 64;
}

/* ------------------------------------------------------------ cost model */

enum { FZ_MAX_WORK = 1 << 22, FZ_MAX_NODE_BYTES = 1 << 24 };

static bool fz_stop_realized(const ir_node *n, void *ctx)
{
    (void)ctx;
    return ir_node_storage(n) != NULL;
}

static inline double fz_numel(const ir_node *n)
{
    double e = 1;
    for (int i = 0; i < n->rank; i++)
        e *= n->shape[i] < 0 ? 1 : (double)n->shape[i];
    return e;
}

/* True when realizing roots costs little enough for a fuzzer: every
 * unrealized node is at most FZ_MAX_NODE_BYTES and the estimated work of
 * all of them is at most FZ_MAX_WORK element operations. */
static inline bool fz_cheap(ir_node *const *roots, int n)
{
    for (int i = 0; i < n; i++)
        if (!roots[i])
            return true; /* the call fails on the NULL at once */
    ir_node **order;
    long count = ir_postorder(roots, n, fz_stop_realized, NULL, &order);
    if (count < 0)
        return false;
    double work = 0;
    bool ok = true;
    for (long i = 0; i < count && ok; i++) {
        const ir_node *nd = order[i];
        if (ir_node_storage(nd))
            continue;
        double out = fz_numel(nd), w = out;
        if (out * (double)ir_dtype_size(nd->dtype) > FZ_MAX_NODE_BYTES)
            ok = false;
        for (int s = 0; s < nd->nsrc; s++) {
            double in = fz_numel(nd->src[s]);
            if (in > w)
                w = in;
        }
        switch (nd->op) {
        case IR_OP_MATMUL: /* out * k multiply-adds */
            if (nd->src[0]->rank > 0)
                w += out * (double)nd->src[0]->shape[nd->src[0]->rank - 1];
            break;
        case IR_OP_CONV2D: /* out * C/groups * KH * KW */
            if (nd->src[1]->rank == 4)
                w += out * (double)nd->src[1]->shape[1] * (double)nd->src[1]->shape[2] * (double)nd->src[1]->shape[3];
            break;
        case IR_OP_POOL2D:
            w += out * (double)nd->attr.pool.kernel[0] * (double)nd->attr.pool.kernel[1];
            break;
        case IR_OP_SOLVE: /* an LU per batch, then the solves */
            if (nd->src[0]->rank >= 2) {
                double k = (double)nd->src[0]->shape[nd->src[0]->rank - 1];
                w += fz_numel(nd->src[0]) * k + fz_numel(nd->src[1]) * k;
            }
            break;
        case IR_OP_ATTENTION: /* QK^T and PV: 2 * B*H*Sq*Sk*D = 2 * out * Sk */
            if (nd->nsrc >= 2 && nd->src[1]->rank == 3)
                w += 2 * out * (double)(nd->src[1]->shape[1] < 0 ? 1 : nd->src[1]->shape[1]);
            break;
        case IR_OP_FFT: /* counted as a plain DFT: out * N */
            if (nd->rank > 0 && nd->attr.fft.axis >= 0 && nd->attr.fft.axis < nd->rank)
                w += out * (double)nd->shape[nd->attr.fft.axis];
            break;
        default:
            break;
        }
        work += w + 16;
        if (work > FZ_MAX_WORK)
            ok = false;
    }
    ir_free(order);
    return ok;
}

/* ------------------------------------------------------------ debugging */

/* Prints the graph under roots, one node a line (FUZZ_VERBOSE=1 in the
 * environment turns it on in the fuzzers): what a bug report needs to
 * rebuild a failing case by hand. */
static inline void fz_dump_graph(ir_node *const *roots, int n)
{
    ir_node **order;
    long count = ir_postorder(roots, n, NULL, NULL, &order);
    if (count < 0)
        return;
    for (long i = 0; i < count; i++) {
        const ir_node *nd = order[i];
        char shp[160];
        fprintf(stderr, "  n%ld = %s %s%s", i, ir_ops[nd->op].name, rlx_dtype_name(nd->dtype),
                ir_shape_str(shp, sizeof shp, nd->rank, nd->shape));
        fprintf(stderr, "%s (", ir_node_storage(nd) ? " realized" : "");
        for (int s = 0; s < nd->nsrc; s++)
            for (long j = 0; j < i; j++)
                if (order[j] == nd->src[s])
                    fprintf(stderr, "%sn%ld", s ? ", " : "", j);
        fprintf(stderr, ")");
        const ir_attrs *a = &nd->attr;
        int r = nd->nsrc ? nd->src[0]->rank : 0;
        switch (nd->op) {
        case IR_OP_CONST: fprintf(stderr, " value=%.17g", a->cst.value); break;
        case IR_OP_IOTA: fprintf(stderr, " start=%g step=%g axis=%d", a->iota.start, a->iota.step, a->iota.axis); break;
        case IR_OP_RAND: fprintf(stderr, " seed=%llu normal=%d", (unsigned long long)a->rand.seed, a->rand.normal); break;
        case IR_OP_CAST: fprintf(stderr, " to=%s", rlx_dtype_name(a->cast.dtype)); break;
        case IR_OP_CAT: case IR_OP_GATHER: fprintf(stderr, " axis=%d", a->ax.axis); break;
        case IR_OP_CUMSUM: fprintf(stderr, " axis=%d exclusive=%d", a->scan.axis, a->scan.exclusive); break;
        case IR_OP_PERMUTE:
            fprintf(stderr, " perm=");
            for (int d = 0; d < r; d++)
                fprintf(stderr, "%s%d", d ? "," : "", a->perm.perm[d]);
            break;
        case IR_OP_PAD:
            fprintf(stderr, " value=%g", a->pad.value);
            for (int d = 0; d < r; d++)
                fprintf(stderr, " [%lld,%lld]", (long long)a->pad.before[d], (long long)a->pad.after[d]);
            break;
        case IR_OP_SLICE:
            for (int d = 0; d < r; d++)
                fprintf(stderr, " [start %lld step %lld len %lld]", (long long)a->slice.start[d],
                        (long long)a->slice.step[d], (long long)a->slice.len[d]);
            break;
        default:
            if (ir_ops[nd->op].cls == IR_CLS_REDUCE)
                fprintf(stderr, " mask=0x%x", a->red.mask);
            break;
        }
        fprintf(stderr, "\n");
    }
    ir_free(order);
}

#endif
