/*
 * blas.c — the library-call primitives MATMUL and SOLVE, through CBLAS and
 * LAPACKE. This is the only file of librlx that includes their headers.
 *
 * Operands arrive as strided views with equal batch dims. A float matrix
 * whose last two dims are row-major or column-major with a usable leading
 * dimension goes to gemm as it is (transposed views cost nothing); any other
 * layout (broadcast rows, negative or odd strides) is packed into a scratch
 * matrix first. Integer matmul is a plain loop with wrapping int64
 * accumulation. Solve runs gesv per batch on column-major copies, and turns
 * a singular matrix into RLX_E_LINALG naming its batch index.
 */
#include <limits.h>
#include <string.h>

#include <cblas.h>
#include <lapacke.h>

#include "runtime/rt.h"

/* One operand matrix of the current batch, as gemm wants it. */
typedef struct {
    const void *p;
    enum CBLAS_TRANSPOSE trans;
    int ld;
} gemm_arg;

/* Packs rows x cols of a strided matrix at element offset off into dst
 * (row-major), converting nothing: dst has the source dtype. */
static void pack(void *dst, const void *src, rlx_dtype dt, int64_t off, int64_t rows, int64_t cols, int64_t sr,
                 int64_t sc)
{
    size_t es = ir_dtype_size(dt);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            memcpy((char *)dst + (i * cols + j) * (int64_t)es, (const char *)src + (off + i * sr + j * sc) * (int64_t)es,
                   es);
}

/* Chooses how gemm reads a rows x cols matrix with strides (sr, sc) at
 * element offset off: in place when one stride is 1 and the other a valid
 * leading dimension, else packed into scratch. */
static gemm_arg gemm_operand(const rt_view *v, rlx_dtype dt, int64_t off, int64_t rows, int64_t cols, int64_t sr,
                             int64_t sc, void *scratch)
{
    size_t es = ir_dtype_size(dt);
    const char *base = (const char *)v->st->data;
    /* A stride along a dim of size 1 is never used: any value will do. */
    int64_t rsr = rows == 1 ? (cols > 1 ? cols : 1) : sr;
    int64_t rsc = cols == 1 ? 1 : sc;
    if (rsc == 1 && rsr >= (cols > 1 ? cols : 1) && rsr <= INT_MAX)
        return (gemm_arg){base + off * (int64_t)es, CblasNoTrans, (int)rsr};
    int64_t tsr = rows == 1 ? 1 : sr;
    int64_t tsc = cols == 1 ? (rows > 1 ? rows : 1) : sc;
    if (tsr == 1 && tsc >= (rows > 1 ? rows : 1) && tsc <= INT_MAX)
        return (gemm_arg){base + off * (int64_t)es, CblasTrans, (int)tsc};
    pack(scratch, base, dt, off, rows, cols, sr, sc);
    return (gemm_arg){scratch, CblasNoTrans, (int)(cols > 1 ? cols : 1)};
}

/* Integer matmul of one batch: wrapping int64 accumulation, like the rest
 * of the integer domain. */
static void int_matmul(void *dst, int64_t doff, rlx_dtype dt, const rt_view *a, int64_t aoff, const int64_t *as,
                       const rt_view *b, int64_t boff, const int64_t *bs, int64_t m, int64_t k, int64_t n)
{
    const void *ap = a->st->data, *bp = b->st->data;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            uint64_t acc = 0;
            for (int64_t p = 0; p < k; p++)
                acc += (uint64_t)rt_ld_i(ap, dt, aoff + i * as[0] + p * as[1]) *
                       (uint64_t)rt_ld_i(bp, dt, boff + p * bs[0] + j * bs[1]);
            rt_st_i(dst, dt, doff + i * n + j, (int64_t)acc);
        }
    }
}

rlx_status rt_eval_matmul(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *a = n->src[0];
    int r = n->rank, nb = r - 2;
    rlx_dtype dt = n->dtype;
    int64_t m = a->shape[r - 2], k = a->shape[r - 1], nc = n->shape[r - 1];
    int64_t batches = ir_numel(nb, n->shape);
    /* Zero-filled: an empty inner dimension gives zeros without a call. */
    if (rt_alloc_out(ctx, n, out, true))
        return ctx->status;
    if (batches == 0 || m == 0 || nc == 0 || k == 0)
        return RLX_OK;
    bool fl = ir_dtype_is_float(dt);
    if (fl && (m > INT_MAX || k > INT_MAX || nc > INT_MAX))
        return rt_fail(ctx, RLX_E_UNSUPPORTED, "matmul dims %lld x %lld x %lld exceed the BLAS int range",
                       (long long)m, (long long)k, (long long)nc);
    size_t es = ir_dtype_size(dt);
    void *sa = NULL, *sb = NULL;
    if (fl && (!(sa = ir_alloc((size_t)(m * k) * es)) || !(sb = ir_alloc((size_t)(k * nc) * es)))) {
        ir_free(sa);
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for matmul scratch");
    }
    const int64_t *strides[2] = {in[0].strides, in[1].strides};
    const int64_t *as = in[0].strides + nb, *bs = in[1].strides + nb;
    rt_iter it;
    rt_iter_init(&it, nb, n->shape, 2, strides);
    it.off[0] = in[0].off;
    it.off[1] = in[1].off;
    char *dst = out->st->data;
    for (int64_t bi = 0; bi < batches; bi++, rt_iter_next(&it)) {
        int64_t doff = bi * m * nc;
        if (!fl) {
            int_matmul(dst, doff, dt, &in[0], it.off[0], as, &in[1], it.off[1], bs, m, k, nc);
            continue;
        }
        gemm_arg ga = gemm_operand(&in[0], dt, it.off[0], m, k, as[0], as[1], sa);
        gemm_arg gb = gemm_operand(&in[1], dt, it.off[1], k, nc, bs[0], bs[1], sb);
        if (dt == RLX_F32)
            cblas_sgemm(CblasRowMajor, ga.trans, gb.trans, (int)m, (int)nc, (int)k, 1.0f, ga.p, ga.ld, gb.p, gb.ld,
                        0.0f, (float *)dst + doff, (int)nc);
        else
            cblas_dgemm(CblasRowMajor, ga.trans, gb.trans, (int)m, (int)nc, (int)k, 1.0, ga.p, ga.ld, gb.p, gb.ld,
                        0.0, (double *)dst + doff, (int)nc);
    }
    ir_free(sa);
    ir_free(sb);
    return RLX_OK;
}

rlx_status rt_eval_solve(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *a = n->src[0];
    int r = n->rank, nb = r - 2;
    rlx_dtype dt = n->dtype;
    int64_t nn = a->shape[r - 1], k = n->shape[r - 1];
    int64_t batches = ir_numel(nb, n->shape);
    if (rt_alloc_out(ctx, n, out, true))
        return ctx->status;
    if (batches == 0 || nn == 0 || k == 0)
        return RLX_OK;
    if (nn > INT_MAX || k > INT_MAX || nn * k > INT_MAX)
        return rt_fail(ctx, RLX_E_UNSUPPORTED, "solve of %lld x %lld exceeds the LAPACK int range", (long long)nn,
                       (long long)k);
    /* Column-major copies in double or float, as gesv overwrites both. */
    size_t es = ir_dtype_size(dt);
    void *ca = ir_alloc((size_t)(nn * nn) * es), *cb = ir_alloc((size_t)(nn * k) * es);
    lapack_int *ipiv = ir_alloc((size_t)nn * sizeof *ipiv);
    if (!ca || !cb || !ipiv) {
        ir_free(ca);
        ir_free(cb);
        ir_free(ipiv);
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for solve scratch");
    }
    const int64_t *strides[2] = {in[0].strides, in[1].strides};
    const int64_t *as = in[0].strides + nb, *bs = in[1].strides + nb;
    const void *ap = in[0].st->data, *bp = in[1].st->data;
    rt_iter it;
    rt_iter_init(&it, nb, n->shape, 2, strides);
    it.off[0] = in[0].off;
    it.off[1] = in[1].off;
    char *dst = out->st->data;
    for (int64_t bi = 0; bi < batches && ctx->status == RLX_OK; bi++, rt_iter_next(&it)) {
        /* Transposing copy: element (i, j) goes to [i + j * nn]. */
        for (int64_t i = 0; i < nn; i++) {
            for (int64_t j = 0; j < nn; j++)
                rt_st_f(ca, dt, i + j * nn, rt_ld_f(ap, dt, it.off[0] + i * as[0] + j * as[1]));
            for (int64_t j = 0; j < k; j++)
                rt_st_f(cb, dt, i + j * nn, rt_ld_f(bp, dt, it.off[1] + i * bs[0] + j * bs[1]));
        }
        lapack_int info = dt == RLX_F32 ? LAPACKE_sgesv(LAPACK_COL_MAJOR, (lapack_int)nn, (lapack_int)k, ca,
                                                        (lapack_int)nn, ipiv, cb, (lapack_int)nn)
                                        : LAPACKE_dgesv(LAPACK_COL_MAJOR, (lapack_int)nn, (lapack_int)k, ca,
                                                        (lapack_int)nn, ipiv, cb, (lapack_int)nn);
        if (info > 0) {
            rt_fail(ctx, RLX_E_LINALG, "matrix %lld of the batch is singular (U[%d,%d] = 0)", (long long)bi,
                    (int)info - 1, (int)info - 1);
            break;
        }
        if (info < 0) {
            rt_fail(ctx, RLX_E_INTERNAL, "gesv rejected argument %d", (int)-info);
            break;
        }
        int64_t doff = bi * nn * k;
        for (int64_t i = 0; i < nn; i++)
            for (int64_t j = 0; j < k; j++)
                rt_st_f(dst, dt, doff + i * k + j, rt_ld_f(cb, dt, i + j * nn));
    }
    ir_free(ca);
    ir_free(cb);
    ir_free(ipiv);
    return ctx->status;
}
