/*
 * q8gemm.c — the library kernel of QMATMUL (rlx_linear_q8): x [..., K]
 * times int8 weights wq [N, K] with per-channel scale and zero point,
 * out[r, n] = scale[n] * sum_k x[r, k] * (wq[n, k] - zp[n]).
 *
 * The weights are dequantized while packing: a panel of rows of wq (64
 * for the dot loop, 256 for gemm), Q8_KB columns at a time (so it stays in
 * L2), becomes wq - zp in x's float dtype (exact: small integers), the
 * panel is multiplied into the output block (gemm for many rows of x; for
 * the few rows of a decode step, where sgemm is slow, a vector dot loop
 * whose 16-lane partial sums are reduced once per output), and each output
 * column is scaled once at the end. Items are blocks of N on the pool, each with its own panel
 * and its own output columns, so results do not depend on the thread
 * count. The weights are read once, a quarter of an f32 weight's bytes,
 * which is what makes matrix-vector shapes faster than sgemm on f32.
 *
 * The reference (oracle/ref_quant.c) computes in double; this kernel
 * accumulates in x's dtype (f32 or f64).
 */
#include <limits.h>
#include <string.h>

#include "runtime/kernels/par.h"
#include "runtime/rt.h"

enum {
    Q8_NB = 64,       /* rows of wq per panel (and per pool item) of the dot loop */
    Q8_NB_GEMM = 256, /* and of gemm: fewer passes over x, larger products */
    Q8_KB = 512,      /* columns per panel: 256 x 512 f32 = 512 KiB at most */
    Q8_DIRECT_M = 16, /* below this many rows of x, f32 runs the dot loop */
};
#define Q8_PANEL_BYTES ((size_t)Q8_NB_GEMM * Q8_KB * sizeof(double)) /* f32 or f64 */

#if defined(__GNUC__)
#define Q8_VEC 1
#define Q8_INLINE __attribute__((always_inline)) inline /* into each RT_SIMD clone of its caller */
typedef float q8_v16f __attribute__((vector_size(64)));
#else
#define Q8_INLINE inline
#endif

typedef struct {
    rlx_dtype dt; /* x and out: f32 or f64 */
    bool onednn;  /* f32 gemms through oneDNN (rt_gemm_onednn) */
    int64_t m, n, k;
    const char *x; /* m rows of k contiguous elements, lda apart */
    int64_t lda;
    const char *w; /* wq: i8 or u8, strides ws0, ws1 */
    rlx_dtype wdt;
    int64_t ws0, ws1;
    const char *s; /* scale, stride ss */
    int64_t ss;
    const char *z; /* zero point or NULL, stride zs */
    rlx_dtype zdt;
    int64_t zs;
    char *out; /* [m, n] contiguous */
    int64_t nbr; /* rows of wq per item: Q8_NB or Q8_NB_GEMM */
} q8_task;

/* dst[0..k) = q[0..k) - zp for a contiguous row of codes: plain loops the
 * compiler vectorizes (sign or zero extension, then a conversion). */
RT_SIMD static void deq_row_f32(const void *q, bool is_u8, int64_t k, float zp, float *dst)
{
    if (is_u8) {
        const uint8_t *u = q;
        for (int64_t i = 0; i < k; i++)
            dst[i] = (float)u[i] - zp;
    } else {
        const int8_t *c = q;
        for (int64_t i = 0; i < k; i++)
            dst[i] = (float)c[i] - zp;
    }
}

/* The panel rows [j0, j1) x columns [k0, k1) of wq - zp, row-major with
 * k1 - k0 columns, in t->dt. */
static void pack_panel(const q8_task *t, int64_t j0, int64_t j1, int64_t k0, int64_t k1, void *panel)
{
    int64_t kb = k1 - k0;
    for (int64_t j = j0; j < j1; j++) {
        double zp = t->z ? (double)rt_ld_i(t->z, t->zdt, j * t->zs) : 0;
        const char *row = t->w + j * t->ws0; /* one-byte elements: offsets are bytes */
        if (t->dt == RLX_F32 && t->ws1 == 1) {
            deq_row_f32(row + k0, t->wdt == RLX_U8, kb, (float)zp, (float *)panel + (j - j0) * kb);
            continue;
        }
        for (int64_t i = k0; i < k1; i++) {
            double v = (double)rt_ld_i(row, t->wdt, i * t->ws1) - zp;
            if (t->dt == RLX_F32)
                ((float *)panel)[(j - j0) * kb + i - k0] = (float)v;
            else
                ((double *)panel)[(j - j0) * kb + i - k0] = v;
        }
    }
}

/* For the R rows of x (R 4 or 1): acc[r * ldv .. + 16) (+)= the 16 lane
 * partial sums of x[r, 0..kb) * wr[0..kb) (a tail past the last 16 goes
 * to lane 0). One load of wr serves R products; a single row runs four
 * independent chains. Partial sums stay vectors across K blocks, so each
 * output is reduced once (hsum), not once per block. */
static Q8_INLINE void dot_rows(const float *x, int64_t lda, int R, const float *wr, int64_t kb, float *acc,
                               int64_t ldv, bool first)
{
    int64_t i = 0;
#ifdef Q8_VEC
    q8_v16f a[4] = {{0}, {0}, {0}, {0}}, w, xv;
    if (R == 4) {
        for (; i + 16 <= kb; i += 16) {
            memcpy(&w, wr + i, sizeof w);
            for (int r = 0; r < 4; r++) {
                memcpy(&xv, x + r * lda + i, sizeof xv);
                a[r] += xv * w;
            }
        }
    } else {
        for (; i + 64 <= kb; i += 64)
            for (int u = 0; u < 4; u++) {
                memcpy(&w, wr + i + 16 * u, sizeof w);
                memcpy(&xv, x + i + 16 * u, sizeof xv);
                a[u] += xv * w;
            }
        for (; i + 16 <= kb; i += 16) {
            memcpy(&w, wr + i, sizeof w);
            memcpy(&xv, x + i, sizeof xv);
            a[0] += xv * w;
        }
        a[0] += a[1] + (a[2] + a[3]);
    }
    for (int r = 0; r < R; r++) {
        if (!first) {
            memcpy(&xv, acc + r * ldv, sizeof xv);
            a[r] += xv;
        }
        memcpy(acc + r * ldv, &a[r], sizeof a[r]);
    }
#else
    for (int r = 0; r < R; r++)
        for (int l = 0; l < 16; l++)
            acc[r * ldv + l] = first ? 0 : acc[r * ldv + l];
#endif
    for (int r = 0; r < R; r++)
        for (int64_t t = i; t < kb; t++)
            acc[r * ldv] += x[r * lda + t] * wr[t];
}

/* The partial sums vacc [m][nb][16] (+)= x[:, 0..kb) . panel[j, 0..kb)
 * for j < nb; first overwrites them. */
RT_SIMD static void dot_panel(const float *x, int64_t lda, int64_t m, const float *panel, int64_t kb, int64_t nb,
                              float *vacc, bool first)
{
    int64_t ldv = nb * 16;
    for (int64_t j = 0; j < nb; j++) {
        const float *wr = panel + j * kb;
        int64_t r = 0;
        for (; r + 4 <= m; r += 4)
            dot_rows(x + r * lda, lda, 4, wr, kb, vacc + r * ldv + j * 16, ldv, first);
        for (; r < m; r++)
            dot_rows(x + r * lda, lda, 1, wr, kb, vacc + r * ldv + j * 16, ldv, first);
    }
}

/* out[r, j] = the sum of vacc[r][j]'s 16 lanes, as a tree. */
static void dot_finish(const float *vacc, int64_t m, int64_t nb, float *out, int64_t ldo)
{
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < nb; j++) {
            float t[16];
            memcpy(t, vacc + (r * nb + j) * 16, sizeof t);
            for (int w = 8; w >= 1; w /= 2)
                for (int l = 0; l < w; l++)
                    t[l] += t[l + w];
            out[r * ldo + j] = t[0];
        }
}

/* Pool body: items are blocks of t->nbr rows of wq (columns of out). */
static void q8_items(const void *task, int64_t b0, int64_t b1, void *scratch)
{
    const q8_task *t = task;
    size_t es = ir_dtype_size(t->dt);
    bool direct = t->dt == RLX_F32 && t->m < Q8_DIRECT_M;
    float *vacc = (float *)((char *)scratch + Q8_PANEL_BYTES); /* [m][Q8_NB][16] partial sums */
    for (int64_t b = b0; b < b1; b++) {
        int64_t j0 = b * t->nbr, j1 = j0 + t->nbr < t->n ? j0 + t->nbr : t->n, nb = j1 - j0;
        char *o = t->out + (size_t)j0 * es;
        for (int64_t k0 = 0; k0 < t->k; k0 += Q8_KB) {
            int64_t k1 = k0 + Q8_KB < t->k ? k0 + Q8_KB : t->k, kb = k1 - k0;
            pack_panel(t, j0, j1, k0, k1, scratch);
            const char *xk = t->x + (size_t)k0 * es;
            if (direct)
                dot_panel((const float *)xk, t->lda, t->m, scratch, kb, nb, vacc, k0 == 0);
            else
                rt_gemm(t->dt, t->onednn, true, (int)t->m, (int)nb, (int)kb, 1.0, xk, (int)t->lda, scratch, (int)kb,
                        k0 > 0 ? 1.0 : 0.0, o, (int)t->n);
        }
        if (direct)
            dot_finish(vacc, t->m, nb, (float *)o, t->n);
        for (int64_t j = j0; j < j1; j++) { /* the per-channel scale, once per output */
            double sc = rt_ld_f(t->s, t->dt, j * t->ss);
            for (int64_t r = 0; r < t->m; r++) {
                if (t->dt == RLX_F32)
                    ((float *)t->out)[r * t->n + j] *= (float)sc;
                else
                    ((double *)t->out)[r * t->n + j] *= sc;
            }
        }
    }
}

/* The row stride of x's view when its rows [..., K] are k contiguous
 * elements at one stride (>= k) apart, else -1 (x must be packed). */
static int64_t rows_stride(const ir_node *x, const rt_view *v)
{
    int r = x->rank;
    int64_t k = x->shape[r - 1];
    if (k > 1 && v->strides[r - 1] != 1)
        return -1;
    int64_t lda = k > 0 ? k : 1, expect = -1;
    for (int d = r - 2; d >= 0; d--) {
        if (x->shape[d] == 1)
            continue;
        if (expect < 0) { /* the innermost row axis sets the stride */
            lda = v->strides[d];
            if (lda < k)
                return -1;
        } else if (v->strides[d] != expect) {
            return -1;
        }
        expect = v->strides[d] * x->shape[d];
    }
    return lda;
}

rlx_status rt_eval_qmatmul(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *x = n->src[0], *w = n->src[1], *z = n->nsrc > 3 ? n->src[3] : NULL;
    q8_task t = {.dt = n->dtype,
                 .onednn = rt_gemm_onednn(ctx),
                 .n = w->shape[0],
                 .k = w->shape[1],
                 .m = ir_numel(x->rank - 1, x->shape)};
    if (rt_alloc_out(ctx, n, out, t.k == 0))
        return ctx->status;
    if (t.m == 0 || t.n == 0 || t.k == 0)
        return RLX_OK; /* an empty sum is 0: the zero-filled output */
    rt_view xp = in[0];
    int64_t lda = rows_stride(x, &in[0]);
    bool packed = lda < 0;
    if (packed) {
        if (rt_materialize(ctx, x, &in[0], &xp))
            return ctx->status;
        lda = t.k;
    }
    if (t.m > INT_MAX || t.n > INT_MAX || t.k > INT_MAX || lda > INT_MAX) {
        if (packed)
            ir_storage_release(xp.st);
        return rt_fail(ctx, RLX_E_UNSUPPORTED, "qmatmul of [%lld,%lld] x [%lld,%lld]^T: dims past gemm's int",
                       (long long)t.m, (long long)t.k, (long long)t.n, (long long)t.k);
    }
    t.x = rt_base(&xp, x->dtype);
    t.lda = lda;
    t.w = rt_base(&in[1], w->dtype);
    t.wdt = w->dtype;
    t.ws0 = in[1].strides[0];
    t.ws1 = in[1].strides[1];
    t.s = rt_base(&in[2], n->src[2]->dtype);
    t.ss = in[2].strides[0];
    if (z) {
        t.z = rt_base(&in[3], z->dtype);
        t.zdt = z->dtype;
        t.zs = in[3].strides[0];
    }
    t.out = rt_base(out, n->dtype);
    t.nbr = t.dt == RLX_F32 && t.m < Q8_DIRECT_M ? Q8_NB : Q8_NB_GEMM;
    int64_t blocks = (t.n + t.nbr - 1) / t.nbr;
    int nslots = rt_par_slots(ctx, blocks, 1);
    size_t slot = Q8_PANEL_BYTES + (size_t)Q8_DIRECT_M * Q8_NB * 16 * sizeof(float);
    void *scratch = ir_alloc(slot * (size_t)nslots);
    if (!scratch) {
        if (packed)
            ir_storage_release(xp.st);
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for qmatmul panels");
    }
    /* single-threaded BLAS on every panel, even with one slot: no
     * oversubscription, and the same bits on any thread count */
    int prev = rt_blas_threads(1);
    rt_par_run(q8_items, &t, blocks, 1, scratch, slot, nslots);
    rt_blas_threads(prev);
    ir_free(scratch);
    if (packed)
        ir_storage_release(xp.st);
    return RLX_OK;
}
