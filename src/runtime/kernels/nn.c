/*
 * nn.c — CONV2D and POOL2D over strided views.
 *
 * Convolution is im2col + GEMM in the operand precision (like NumPy and
 * PyTorch; the tests' tolerances allow f32 accumulation): for each batch
 * item, group and block of output pixels, the block's columns of the
 * unfolded input (cg*KH*KW rows, few enough pixels to stay in cache) are
 * packed, then multiplied by the group's weights into the output. A 1x1
 * convolution with stride 1 and no padding over contiguous planes needs no
 * packing: the product reads the input where it is. Blocks run in parallel
 * over the pool. Zero padding is written into the packed columns, never
 * read from outside the input.
 *
 * The product is our AVX-512 microkernel where the CPU has it (8 filters x
 * 32 f32 / 16 f64 pixels per register tile), else sgemm/dgemm with one
 * BLAS thread per pool thread. Measured on the 3x3 conv of 32x64x56x56
 * (f32, same process): the microkernel took 0.3x the time of OpenBLAS
 * 0.3.21, which runs its generic SSE kernel on this CPU. Either way every
 * output element is one dot product in a fixed order: results do not
 * depend on the thread count.
 *
 * bf16 convolution goes to oneDNN's AVX512-BF16 kernels (rt_dnnl_conv_bf16
 * in blas.c: f32 accumulation, rounded once; x handed over pre-padded,
 * which oneDNN 2.6 runs about 3x faster than its own padding); without
 * oneDNN or the ISA (or knob half_kernels 2) x and w are widened to f32
 * here and the f32 path runs.
 *
 * Pooling runs over each (batch, channel) plane in parallel: per output
 * row, contiguous inner loops over the output columns accumulate every
 * window tap. Max pooling treats padding as -inf and propagates NaN;
 * average pooling counts the padding (divides by KH*KW) and sums in double.
 */
#include <limits.h>
#include <math.h>
#include <string.h>


#include "passes/knobs.h"
#include "runtime/rt.h"
#include "runtime/kernels/par.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_MK 1
#else
#define HAVE_MK 0
#endif

/* ------------------------------------------------ the AVX-512 microkernel */

/* C[r][j] = sum_k A[k][r] B[k][j] for r < nrows <= MK_ROWS, j < ncols <= 2
 * vectors: A is a packed panel (MK_ROWS values per k, zero rows past the
 * group's filters), B rows ldb apart, C rows ldc apart. Sixteen
 * accumulators stay in registers; masked loads and stores handle a partial
 * tile, so nothing is read or written past the valid columns. */
enum { MK_ROWS = 8 };

#if HAVE_MK
/* Sixteen named accumulators (an array of vectors would live on the stack). */
#define MK_BODY(T, V, SET1, FMA, ZERO, LOAD, STORE, W)                                                   \
    V c00 = ZERO(), c01 = ZERO(), c10 = ZERO(), c11 = ZERO(), c20 = ZERO(), c21 = ZERO(), c30 = ZERO(), \
      c31 = ZERO(), c40 = ZERO(), c41 = ZERO(), c50 = ZERO(), c51 = ZERO(), c60 = ZERO(), c61 = ZERO(), \
      c70 = ZERO(), c71 = ZERO();                                                                       \
    for (int64_t q = 0; q < k; q++) {                                                                   \
        V b0 = LOAD(m0, b + q * ldb), b1 = LOAD(m1, b + q * ldb + W);                                   \
        const T *ap_ = a + q * MK_ROWS;                                                                 \
        V av;                                                                                           \
        av = SET1(ap_[0]), c00 = FMA(av, b0, c00), c01 = FMA(av, b1, c01);        \
        av = SET1(ap_[1]), c10 = FMA(av, b0, c10), c11 = FMA(av, b1, c11);        \
        av = SET1(ap_[2]), c20 = FMA(av, b0, c20), c21 = FMA(av, b1, c21);        \
        av = SET1(ap_[3]), c30 = FMA(av, b0, c30), c31 = FMA(av, b1, c31);        \
        av = SET1(ap_[4]), c40 = FMA(av, b0, c40), c41 = FMA(av, b1, c41);        \
        av = SET1(ap_[5]), c50 = FMA(av, b0, c50), c51 = FMA(av, b1, c51);        \
        av = SET1(ap_[6]), c60 = FMA(av, b0, c60), c61 = FMA(av, b1, c61);        \
        av = SET1(ap_[7]), c70 = FMA(av, b0, c70), c71 = FMA(av, b1, c71);        \
    }                                                                                                   \
    V out[MK_ROWS][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},                                \
                         {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};                               \
    for (int r = 0; r < nrows; r++) {                                                                   \
        STORE(c + r * ldc, m0, out[r][0]);                                                              \
        STORE(c + r * ldc + W, m1, out[r][1]);                                                          \
    }

__attribute__((target("avx512f,fma"))) static void mk_f32(int64_t k, const float *a, const float *b, int64_t ldb,
                                                          int ncols, float *c, int64_t ldc, int nrows)
{
    __mmask16 m0 = (__mmask16)(ncols >= 16 ? 0xffff : (1u << ncols) - 1);
    __mmask16 m1 = (__mmask16)(ncols >= 32 ? 0xffff : ncols <= 16 ? 0 : (1u << (ncols - 16)) - 1);
    MK_BODY(float, __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_setzero_ps, _mm512_maskz_loadu_ps,
            _mm512_mask_storeu_ps, 16)
}

__attribute__((target("avx512f,fma"))) static void mk_f64(int64_t k, const double *a, const double *b, int64_t ldb,
                                                          int ncols, double *c, int64_t ldc, int nrows)
{
    __mmask8 m0 = (__mmask8)(ncols >= 8 ? 0xff : (1u << ncols) - 1);
    __mmask8 m1 = (__mmask8)(ncols >= 16 ? 0xff : ncols <= 8 ? 0 : (1u << (ncols - 8)) - 1);
    MK_BODY(double, __m512d, _mm512_set1_pd, _mm512_fmadd_pd, _mm512_setzero_pd, _mm512_maskz_loadu_pd,
            _mm512_mask_storeu_pd, 8)
}

static bool mk_available(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
}
#else
static bool mk_available(void) { return false; }
#endif

/* ------------------------------------------------------------- conv2d */

typedef struct {
    rlx_dtype dt;
    bool onednn; /* f32 gemms through oneDNN (rt_gemm_onednn) */
    int64_t es;
    int64_t groups, cg, og, kh, kw, hin, win, oh, ow, o;
    int64_t k;      /* GEMM inner dim: cg*KH*KW */
    int64_t pix;    /* output pixels per plane: OH*OW */
    int64_t pb;     /* pixels per block */
    int64_t nblk;   /* blocks per plane */
    int s[2], p[2], d[2];
    const char *x;  /* input base (element offset folded in) */
    int64_t xs[4];
    const char *w;  /* weights [O][K] row-major with leading dim wld */
    int64_t wld;
    char *y;        /* output, contiguous */
    bool direct;    /* 1x1, stride 1, no padding, contiguous planes */
    const char *ap; /* microkernel path: weights as panels [groups][otiles][K][MK_ROWS] */
    int64_t otiles;
    int64_t nb;     /* batch items */
} conv_job;

/* Packs rows (ci, u, v) x pixels [p0, p0 + np) of the unfolded input of
 * batch item b, group g into col (row-major, np columns). */
static void im2col(const conv_job *c, int64_t b, int64_t g, int64_t p0, int64_t np, char *col)
{
    int64_t es = c->es;
    const char *xb = c->x + (b * c->xs[0] + g * c->cg * c->xs[1]) * es;
    int64_t row = 0;
    for (int64_t ci = 0; ci < c->cg; ci++)
        for (int64_t u = 0; u < c->kh; u++)
            for (int64_t v = 0; v < c->kw; v++, row++) {
                char *dst = col + row * np * es;
                int64_t off_v = v * c->d[1] - c->p[1];
                /* Output columns j whose tap lands inside: 0 <= j*s + off_v < W. */
                int64_t jlo = off_v >= 0 ? 0 : (-off_v + c->s[1] - 1) / c->s[1];
                int64_t jhi = c->win - 1 - off_v < 0 ? 0 : (c->win - 1 - off_v) / c->s[1] + 1;
                if (jhi > c->ow)
                    jhi = c->ow;
                if (jlo > jhi)
                    jlo = jhi;
                for (int64_t p = p0, t = 0; p < p0 + np;) {
                    int64_t i = p / c->ow, j0 = p % c->ow;
                    int64_t run = c->ow - j0 < p0 + np - p ? c->ow - j0 : p0 + np - p; /* to the row's end */
                    int64_t y = i * c->s[0] - c->p[0] + u * c->d[0];
                    char *d = dst + t * es;
                    if (y < 0 || y >= c->hin) {
                        memset(d, 0, (size_t)(run * es));
                    } else {
                        const char *xr = xb + (ci * c->xs[1] + y * c->xs[2]) * es;
                        int64_t a = jlo > j0 ? jlo - j0 : 0, e = jhi - j0 < run ? jhi - j0 : run;
                        if (e < a)
                            e = a;
                        memset(d, 0, (size_t)(a * es));
                        memset(d + e * es, 0, (size_t)((run - e) * es));
                        int64_t z0 = (j0 + a) * c->s[1] + off_v, zs = c->s[1] * c->xs[3];
                        if (es == 4) {
                            const float *src = (const float *)xr + z0 * c->xs[3];
                            float *o = (float *)d;
                            if (zs == 1)
                                memcpy(o + a, src, (size_t)(e - a) * sizeof *o);
                            else
                                for (int64_t q = a; q < e; q++)
                                    o[q] = src[(q - a) * zs];
                        } else {
                            const double *src = (const double *)xr + z0 * c->xs[3];
                            double *o = (double *)d;
                            if (zs == 1)
                                memcpy(o + a, src, (size_t)(e - a) * sizeof *o);
                            else
                                for (int64_t q = a; q < e; q++)
                                    o[q] = src[(q - a) * zs];
                        }
                    }
                    p += run;
                    t += run;
                }
            }
}

static void conv_run(const void *task, int64_t begin, int64_t end, void *scratch)
{
    const conv_job *c = task;
    for (int64_t it = begin; it < end; it++) {
        int64_t blk = it % c->nblk, bg = it / c->nblk, g = bg % c->groups, b = bg / c->groups;
        int64_t p0 = blk * c->pb, np = c->pix - p0 < c->pb ? c->pix - p0 : c->pb;
        const char *bm;
        int64_t ldb;
        if (c->direct) {
            bm = c->x + (b * c->xs[0] + g * c->cg * c->xs[1] + p0) * c->es;
            ldb = c->xs[1];
        } else {
            im2col(c, b, g, p0, np, scratch);
            bm = scratch;
            ldb = np;
        }
        const char *am = c->w + g * c->og * c->wld * c->es;
        char *cm = c->y + ((b * c->o + g * c->og) * c->pix + p0) * c->es;
#if HAVE_MK
        if (c->ap) {
            int nr = c->dt == RLX_F32 ? 32 : 16; /* columns per tile: two vectors */
            for (int64_t ot = 0; ot < c->otiles; ot++) {
                const char *pa = c->ap + (g * c->otiles + ot) * c->k * MK_ROWS * c->es;
                int rows = (int)(c->og - ot * MK_ROWS < MK_ROWS ? c->og - ot * MK_ROWS : MK_ROWS);
                char *co = cm + ot * MK_ROWS * c->pix * c->es;
                for (int64_t j = 0; j < np; j += nr) {
                    int cols = (int)(np - j < nr ? np - j : nr);
                    if (c->dt == RLX_F32)
                        mk_f32(c->k, (const float *)pa, (const float *)bm + j, ldb, cols, (float *)co + j, c->pix,
                               rows);
                    else
                        mk_f64(c->k, (const double *)pa, (const double *)bm + j, ldb, cols, (double *)co + j,
                               c->pix, rows);
                }
            }
            continue;
        }
#endif
        rt_gemm(c->dt, c->onednn, false, (int)c->og, (int)np, (int)c->k, 1.0, am, (int)c->wld, bm, (int)ldb, 0.0, cm,
                (int)c->pix);
    }
}

static rlx_status conv_exec(rt_ctx *ctx, conv_job *cj, const char *wb, const int64_t *ws);

/* a [d0, d1, d2, d3] of bf16 read through strides s, to contiguous f32 at dst. */
static void widen4(const uint16_t *a, const int64_t *d, const int64_t *s, float *dst)
{
    for (int64_t i = 0; i < d[0]; i++)
        for (int64_t j = 0; j < d[1]; j++)
            for (int64_t k = 0; k < d[2]; k++, dst += d[3]) {
                const uint16_t *row = a + i * s[0] + j * s[1] + k * s[2];
                if (s[3] == 1)
                    rt_half_to_f32(RLX_BF16, row, dst, d[3]);
                else
                    for (int64_t l = 0; l < d[3]; l++)
                        dst[l] = ir_bf16_to_f32(row[l * s[3]]);
            }
}

/* a [d0, d1, d2, d3] of 16-bit values read through strides s, to dst:
 * contiguous, or (ld > 0, d0 = d1 = 1) rows of d3 placed ld apart. */
static void copy4(const uint16_t *a, const int64_t *d, const int64_t *s, uint16_t *dst, int64_t ld)
{
    for (int64_t i = 0; i < d[0]; i++)
        for (int64_t j = 0; j < d[1]; j++)
            for (int64_t k = 0; k < d[2]; k++) {
                const uint16_t *row = a + i * s[0] + j * s[1] + k * s[2];
                uint16_t *out = ld ? dst + k * ld : dst;
                if (s[3] == 1)
                    memcpy(out, row, (size_t)d[3] * sizeof *out);
                else
                    for (int64_t l = 0; l < d[3]; l++)
                        out[l] = row[l * s[3]];
                if (!ld)
                    dst += d[3];
            }
}

/* bf16 conv2d: oneDNN's AVX512-BF16 convolution (f32 accumulation,
 * rounded once). Without oneDNN or the ISA, where oneDNN declines, or
 * with knob half_kernels 2: x and w widened to f32 here, the f32 path,
 * the result rounded once. */
static rlx_status conv_bf16(rt_ctx *ctx, const ir_node *n, conv_job *c, const char *wb, const int64_t *ws)
{
    const ir_node *x = n->src[0], *w = n->src[1];
    if (knob_value(sched_knobs(ctx), KNOB_HALF_KERNELS, KCLASS_ANY, -1) != 2) {
        /* oneDNN takes no negative strides (the flipped weights of a
         * transposed convolution): those operands go as contiguous bf16 copies */
        const char *xb = c->x, *wb1 = wb;
        const int64_t *xs = c->xs, *ws1 = ws, *xd = x->shape;
        int64_t cw[4] = {w->shape[1] * w->shape[2] * w->shape[3], w->shape[2] * w->shape[3], w->shape[3], 1};
        uint16_t *px = NULL, *pw = NULL;
        bool ok = true;
        const int zero[2] = {0, 0}, *pad = c->p;
        /* oneDNN 2.6's bf16 convolution runs about 3x slower with padding
         * than on an input padded beforehand (measured: 3x3 of 2x64x56x56,
         * 3.9 ms against 1.3-1.5 ms), so x goes padded, as a bf16 copy
         * (also when its strides are negative) */
        int64_t pd[4] = {xd[0], xd[1], xd[2] + 2 * (int64_t)pad[0], xd[3] + 2 * (int64_t)pad[1]};
        int64_t cx[4] = {pd[1] * pd[2] * pd[3], pd[2] * pd[3], pd[3], 1};
        if (pad[0] || pad[1] || xs[0] < 0 || xs[1] < 0 || xs[2] < 0 || xs[3] < 0) {
            ok = (px = ir_calloc((size_t)(pd[0] * cx[0]), sizeof *px)) != NULL;
            if (ok)
                for (int64_t i = 0; i < xd[0]; i++)
                    for (int64_t j = 0; j < xd[1]; j++)
                        copy4((const uint16_t *)(const void *)xb + i * xs[0] + j * xs[1], (const int64_t[4]){1, 1, xd[2], xd[3]},
                              (const int64_t[4]){0, 0, xs[2], xs[3]}, px + i * cx[0] + j * cx[1] + pad[0] * cx[2] + pad[1], cx[2]);
            xb = (const char *)px, xs = cx, xd = pd, pad = zero;
        }
        if (ok && (ws[0] < 0 || ws[1] < 0 || ws[2] < 0 || ws[3] < 0)) {
            ok = (pw = ir_alloc((size_t)ir_node_numel(w) * sizeof *pw)) != NULL;
            if (ok)
                copy4((const uint16_t *)(const void *)wb, w->shape, ws, pw, 0);
            wb1 = (const char *)pw, ws1 = cw;
        }
        ok = ok && rt_dnnl_conv_bf16(xb, xd, xs, wb1, w->shape, ws1, c->y, n->shape, (int)c->groups, c->s, pad, c->d,
                                     rt_threads(ctx));
        ir_free(px);
        ir_free(pw);
        if (ok)
            return RLX_OK;
    }
    int64_t nx = ir_node_numel(x), nw = ir_node_numel(w), ny = ir_node_numel(n);
    float *x32 = ir_alloc((size_t)nx * sizeof *x32), *w32 = ir_alloc((size_t)nw * sizeof *w32);
    float *y32 = ir_alloc((size_t)ny * sizeof *y32);
    rlx_status st = RLX_OK;
    if (!x32 || !w32 || !y32) {
        st = rt_fail(ctx, RLX_E_NOMEM, "out of memory widening a bf16 conv2d");
    } else {
        widen4((const uint16_t *)(const void *)c->x, x->shape, c->xs, x32);
        widen4((const uint16_t *)(const void *)wb, w->shape, ws, w32);
        conv_job f = *c;
        f.dt = RLX_F32;
        f.es = sizeof(float);
        f.x = (const char *)x32;
        f.y = (char *)y32;
        int64_t xs[4] = {x->shape[1] * x->shape[2] * x->shape[3], x->shape[2] * x->shape[3], x->shape[3], 1};
        int64_t w4[4] = {w->shape[1] * w->shape[2] * w->shape[3], w->shape[2] * w->shape[3], w->shape[3], 1};
        memcpy(f.xs, xs, sizeof xs);
        if ((st = conv_exec(ctx, &f, (const char *)w32, w4)) == RLX_OK)
            rt_f32_to_half(RLX_BF16, y32, c->y, ny);
    }
    ir_free(x32);
    ir_free(w32);
    ir_free(y32);
    return st;
}

rlx_status rt_eval_conv2d(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *x = n->src[0], *w = n->src[1];
    conv_job c;
    memset(&c, 0, sizeof c);
    c.dt = n->dtype;
    c.onednn = rt_gemm_onednn(ctx);
    c.es = (int64_t)ir_dtype_size(c.dt);
    c.groups = n->attr.conv.groups;
    c.hin = x->shape[2], c.win = x->shape[3];
    c.o = n->shape[1], c.oh = n->shape[2], c.ow = n->shape[3];
    c.cg = w->shape[1], c.kh = w->shape[2], c.kw = w->shape[3];
    c.og = c.o / c.groups;
    c.k = c.cg * c.kh * c.kw;
    c.pix = c.oh * c.ow;
    memcpy(c.s, n->attr.conv.stride, sizeof c.s);
    memcpy(c.p, n->attr.conv.pad, sizeof c.p);
    memcpy(c.d, n->attr.conv.dil, sizeof c.d);
    int64_t nb = c.nb = n->shape[0];
    /* Zero-filled only when there is nothing to multiply (no input channels). */
    if (rt_alloc_out(ctx, n, out, c.k == 0))
        return ctx->status;
    if (nb == 0 || c.pix == 0 || c.o == 0 || c.k == 0)
        return RLX_OK;
    if (c.og > INT_MAX || c.k > INT_MAX || c.pix > INT_MAX)
        return rt_fail(ctx, RLX_E_UNSUPPORTED, "conv2d dims (%lld x %lld x %lld) exceed the BLAS int range",
                       (long long)c.og, (long long)c.k, (long long)c.pix);
    c.x = (const char *)in[0].st->data + in[0].off * c.es;
    memcpy(c.xs, in[0].strides, sizeof c.xs);
    c.y = out->st->data;
    const char *wb = (const char *)in[1].st->data + in[1].off * c.es;
    if (c.dt == RLX_BF16)
        return conv_bf16(ctx, n, &c, wb, in[1].strides);
    return conv_exec(ctx, &c, wb, in[1].strides);
}

/* The convolution of job c (x, y and the dims set) with weights element
 * (o, ci, u, v) at wb + (o ws[0] + ci ws[1] + u ws[2] + v ws[3]) elements. */
static rlx_status conv_exec(rt_ctx *ctx, conv_job *cj, const char *wb, const int64_t *ws)
{
    conv_job c = *cj;
    int64_t nb = cj->nb;
    /* Weights as [O][K]: in place when each filter is contiguous. */
    char *wpack = NULL;
    if (ws[3] == 1 && ws[2] == c.kw && ws[1] == c.kh * c.kw && ws[0] >= c.k && ws[0] <= INT_MAX) {
        c.w = wb;
        c.wld = ws[0];
    } else {
        if (!(wpack = ir_alloc((size_t)(c.o * c.k * c.es))))
            return rt_fail(ctx, RLX_E_NOMEM, "out of memory packing conv2d weights");
        char *q = wpack;
        for (int64_t o = 0; o < c.o; o++)
            for (int64_t ci = 0; ci < c.cg; ci++)
                for (int64_t u = 0; u < c.kh; u++)
                    for (int64_t v = 0; v < c.kw; v++, q += c.es)
                        memcpy(q, wb + (o * ws[0] + ci * ws[1] + u * ws[2] + v * ws[3]) * c.es, (size_t)c.es);
        c.w = wpack;
        c.wld = c.k;
    }
    c.direct = c.kh == 1 && c.kw == 1 && c.s[0] == 1 && c.s[1] == 1 && c.p[0] == 0 && c.p[1] == 0 &&
               c.xs[3] == 1 && c.xs[2] == c.win && c.xs[1] >= c.pix && c.xs[1] <= INT_MAX;
    /* Pixel blocks whose packed columns fit in about 256 KiB (L2), at least
     * 64 pixels wide so GEMM keeps its efficiency. */
    int64_t pb = ((int64_t)1 << 18) / (c.k * c.es) / 32 * 32; /* whole microkernel tiles */
    pb = pb < 64 ? 64 : pb;
    c.pb = c.direct ? (c.pix < 4096 ? c.pix : 4096) : (c.pix < pb ? c.pix : pb);
    c.nblk = (c.pix + c.pb - 1) / c.pb;
    char *apack = NULL;
    if (mk_available()) {
        c.otiles = (c.og + MK_ROWS - 1) / MK_ROWS;
        if (!(apack = ir_alloc((size_t)(c.groups * c.otiles * c.k * MK_ROWS * c.es)))) {
            ir_free(wpack);
            return rt_fail(ctx, RLX_E_NOMEM, "out of memory packing conv2d weights");
        }
        for (int64_t g = 0; g < c.groups; g++)
            for (int64_t ot = 0; ot < c.otiles; ot++)
                for (int64_t q = 0; q < c.k; q++)
                    for (int r = 0; r < MK_ROWS; r++) {
                        int64_t o = ot * MK_ROWS + r;
                        char *d = apack + (((g * c.otiles + ot) * c.k + q) * MK_ROWS + r) * c.es;
                        if (o < c.og)
                            memcpy(d, c.w + ((g * c.og + o) * c.wld + q) * c.es, (size_t)c.es);
                        else
                            memset(d, 0, (size_t)c.es);
                    }
        c.ap = apack;
    }
    int64_t items = nb * c.groups * c.nblk;
    int nslots = rt_par_slots(ctx, items, 1);
    size_t slot = c.direct ? 64 : (size_t)(c.k * c.pb * c.es);
    void *scratch = ir_alloc(slot * (size_t)nslots);
    if (!scratch) {
        ir_free(wpack);
        ir_free(apack);
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for conv2d scratch");
    }
    /* Single-threaded BLAS inside our parallel loop: no oversubscription. */
    int prev = nslots > 1 && !c.ap ? rt_blas_threads(1) : 0;
    rt_par_run(conv_run, &c, items, 1, scratch, slot, nslots);
    if (prev)
        rt_blas_threads(prev);
    ir_free(scratch);
    ir_free(wpack);
    ir_free(apack);
    return RLX_OK;
}

/* ------------------------------------------------------------- pool2d */

typedef struct {
    rlx_dtype dt;
    const char *x; /* input base (offset folded in) */
    int64_t xs[4];
    char *y;
    int64_t ch, hin, win, oh, ow;
    int k[2], s[2], p[2];
    bool avg;
} pool_job;

/* Max of one plane. zs is the input's column stride (1 on the fast path). */
#define MAX_PLANE(T)                                                                                   \
    for (int64_t i = 0; i < c->oh; i++) {                                                              \
        T *o = (T *)dst + i * c->ow;                                                                   \
        for (int64_t j = 0; j < c->ow; j++)                                                            \
            o[j] = (T)-INFINITY;                                                                       \
        for (int u = 0; u < c->k[0]; u++) {                                                            \
            int64_t y = i * c->s[0] - c->p[0] + u;                                                     \
            if (y < 0 || y >= c->hin)                                                                  \
                continue;                                                                              \
            const T *row = (const T *)src + y * c->xs[2];                                              \
            for (int v = 0; v < c->k[1]; v++) {                                                        \
                int64_t off = v - c->p[1], jlo, jhi;                                                   \
                pool_range(c, off, &jlo, &jhi);                                                        \
                const T *r = row + off * zs;                                                           \
                for (int64_t j = jlo; j < jhi; j++) {                                                  \
                    T e = r[j * sz], a = o[j];                                                         \
                    o[j] = ((e > a) | (e != e)) ? e : a; /* NaN, once seen, stays */                   \
                }                                                                                      \
            }                                                                                          \
        }                                                                                              \
    }

#define AVG_PLANE(T)                                                                                   \
    for (int64_t i = 0; i < c->oh; i++) {                                                              \
        for (int64_t j = 0; j < c->ow; j++)                                                            \
            acc[j] = 0;                                                                                \
        for (int u = 0; u < c->k[0]; u++) {                                                            \
            int64_t y = i * c->s[0] - c->p[0] + u;                                                     \
            if (y < 0 || y >= c->hin)                                                                  \
                continue;                                                                              \
            const T *row = (const T *)src + y * c->xs[2];                                              \
            for (int v = 0; v < c->k[1]; v++) {                                                        \
                int64_t off = v - c->p[1], jlo, jhi;                                                   \
                pool_range(c, off, &jlo, &jhi);                                                        \
                const T *r = row + off * zs;                                                           \
                for (int64_t j = jlo; j < jhi; j++)                                                    \
                    acc[j] += r[j * sz];                                                               \
            }                                                                                          \
        }                                                                                              \
        T *o = (T *)dst + i * c->ow;                                                                   \
        for (int64_t j = 0; j < c->ow; j++)                                                            \
            o[j] = (T)(acc[j] / div);                                                                  \
    }

/* Output columns j whose tap at column offset off (j*s + off) is inside. */
static inline void pool_range(const pool_job *c, int64_t off, int64_t *jlo, int64_t *jhi)
{
    int64_t s = c->s[1];
    *jlo = off >= 0 ? 0 : (-off + s - 1) / s;
    *jhi = c->win - 1 - off < 0 ? 0 : (c->win - 1 - off) / s + 1;
    if (*jhi > c->ow)
        *jhi = c->ow;
    if (*jlo > *jhi)
        *jlo = *jhi;
}

/* One plane; zs the input column stride, passed as a constant 1 on the
 * contiguous path so the inner loops vectorize. */
static inline void pool_plane(const pool_job *c, const char *src, char *dst, double *acc, int64_t zs)
{
    int64_t sz = c->s[1] * zs;
    double div = (double)c->k[0] * c->k[1];
    if (c->dt == RLX_F32) {
        if (c->avg) {
            AVG_PLANE(float)
        } else {
            MAX_PLANE(float)
        }
    } else {
        if (c->avg) {
            AVG_PLANE(double)
        } else {
            MAX_PLANE(double)
        }
    }
}

RT_SIMD static void pool_run(const void *task, int64_t begin, int64_t end, void *scratch)
{
    const pool_job *c = task;
    int64_t es = (int64_t)ir_dtype_size(c->dt);
    for (int64_t pl = begin; pl < end; pl++) {
        int64_t b = pl / c->ch, ch = pl % c->ch;
        const char *src = c->x + (b * c->xs[0] + ch * c->xs[1]) * es;
        char *dst = c->y + pl * c->oh * c->ow * es;
        if (c->xs[3] == 1)
            pool_plane(c, src, dst, scratch, 1);
        else
            pool_plane(c, src, dst, scratch, c->xs[3]);
    }
}

rlx_status rt_eval_pool2d(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *x = n->src[0];
    pool_job c = {.dt = n->dtype, .avg = n->attr.pool.kind == IR_POOL_AVG};
    c.ch = n->shape[1], c.hin = x->shape[2], c.win = x->shape[3], c.oh = n->shape[2], c.ow = n->shape[3];
    memcpy(c.k, n->attr.pool.kernel, sizeof c.k);
    memcpy(c.s, n->attr.pool.stride, sizeof c.s);
    memcpy(c.p, n->attr.pool.pad, sizeof c.p);
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    int64_t planes = n->shape[0] * c.ch;
    if (planes == 0 || c.oh == 0 || c.ow == 0)
        return RLX_OK;
    c.x = (const char *)in[0].st->data + in[0].off * (int64_t)ir_dtype_size(c.dt);
    memcpy(c.xs, in[0].strides, sizeof c.xs);
    c.y = out->st->data;
    int64_t per = c.oh * c.ow * c.k[0] * c.k[1];
    int64_t chunk = per >= 16384 ? 1 : 16384 / (per ? per : 1);
    int nslots = rt_par_slots(ctx, planes, chunk);
    size_t slot = (size_t)c.ow * sizeof(double);
    double *scratch = ir_alloc(slot * (size_t)nslots);
    if (!scratch)
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for pool2d scratch");
    rt_par_run(pool_run, &c, planes, chunk, scratch, slot, nslots);
    ir_free(scratch);
    return RLX_OK;
}
