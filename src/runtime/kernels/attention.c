/*
 * attention.c — the ATTENTION primitive: per head, softmax of the
 * masked scores scale * q k^T, times v; fused so that no head's score
 * matrix is ever whole in memory (a flash-attention loop).
 *
 * Work items are (batch, head, block of BQ query rows) and run on the
 * thread pool. A query head h reads kv head h / (H/Hkv) in place (grouped
 * queries share it; nothing is repeated in memory). An item walks only the
 * key blocks its rows can see (causal and sliding masks bound the range; a
 * block where the mask tensor drops every key of the item's rows is
 * skipped), computes a block of scores with one matrix product
 * (f32: the vector kernel mm_f32 below, on K^T and V packed per block;
 * f64: dgemm on the operands in place), and folds it into running row
 * maxima, sums and outputs (online softmax): when a row's max grows, what
 * it has summed so far is rescaled by exp(old - new).
 * The mask tensor [B|1, H|1, Sq|1, Sk|1] is read through strides (0 along
 * its broadcast dims): a bool mask sets dropped scores to -inf, a float
 * mask is added to the scaled scores.
 * Masked scores are -inf and weigh exp(-inf) = 0. A row that sees no key
 * ends with sum 0 and is written as zeros, which is the rule of the
 * composite this primitive replaced (rlx.h).
 *
 * With five or six sources (q, k, v, k2, v2[, mask]) the keys are k's
 * rows then k2's (values likewise), read in place from the two pieces: a
 * key block never straddles them (it ends at k's last row), so the loop is
 * the one above with the block's pointers taken from the piece it lies in.
 * KV-cache decoding attends to the past rows and the step's new ones
 * without concatenating them.
 *
 * f16/bf16 operands are read as they are (no widened copies): the forward
 * converts an item's query rows and each key/value block to f32 while it
 * packs them (the packing the f32 path does anyway), the backward an
 * item's kv head and each query head's q, o, g rows into f32 scratch; both
 * then run the f32 code, and the output (dq, dk, dv) is rounded once. The
 * forward's values are the f32 kernel's on the same values, rounded.
 *
 * Every output row is computed by one item in one fixed order, so values
 * do not depend on the thread count. Scratch for each concurrent item is
 * taken up front on the calling thread (from the buffer pool); workers
 * never allocate.
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>


#include "runtime/exec/pool.h"
#include "runtime/rt.h"

enum {
    BQ = 64,           /* query rows per item */
    BK_MAX = 256,      /* key rows per block */
    GEMM_MNK = 262144, /* BQ * keys per block * D at most this: OpenBLAS stays single-threaded */
    SLOTS_MAX = 64,    /* items in flight at once */
    BQ_BWD_MASKED = 16 /* query rows per block of the backward under a causal or sliding mask */
};

/* A [B, S, H*D] operand as gemm reads it: element (b, s, c) lives at
 * base + b*sb + s*ld + c. */
typedef struct {
    const char *base;
    int64_t sb;
    int ld;
} operand;

typedef struct {
    rlx_dtype dt;  /* of q, k, v and the output */
    rlx_dtype cdt; /* the compute dtype: f32 for f16/bf16 operands, else dt */
    rlx_dtype mdt; /* of an additive mask */
    size_t es, ces; /* element sizes of dt and cdt */
    bool onednn;    /* f32 gemms through oneDNN (rt_gemm_onednn) */
    int64_t sq, sk, heads, group, d, nqb, bk; /* group: query heads per kv head */
    int64_t sk1; /* keys in the first piece (k, v): sk unless split, then k2 and v2 hold the rest */
    int64_t od; /* row length of the output accumulator: d, or for f32 d rounded up to VW */
    int mask, window;
    double scale;
    operand q, k, v, k2, v2;
    /* mask element (b, h, i, j) at mt + (b*ms[0] + h*ms[1] + i*ms[2] + j*ms[3]) * mes; NULL when none */
    const char *mt;
    bool additive; /* a float mask of dtype dt, else bool */
    size_t mes;
    int64_t ms[4];
    char *out; /* contiguous [B, Sq, H*D] */
    char *scratch;
    size_t slot_bytes;
    int nslots;
    atomic_int busy[SLOTS_MAX];
} attn_job;

/* ------------------------------------------------------------ exp rows */

/* The f32 row helpers work on 16-wide vectors (GCC/Clang vector
 * extensions), compiled for AVX-512, AVX2 and the baseline and picked at
 * load time. Lanes are the same 16 on every machine, so the three give
 * the same bits where the compiler does not contract a*b+c into an FMA
 * (GCC in ISO C mode, as here). Vectors never cross a call (no ABI
 * question): the exp is a macro. */
#if defined(__GNUC__)
typedef float vf __attribute__((vector_size(64)));
typedef int32_t vi __attribute__((vector_size(64)));
enum { VW = 16 };
/* Sanitizer builds keep one plain version: a load-time resolver may run
 * before their runtime is up. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define ROW_NO_CLONES
#endif
#endif
#if defined(__x86_64__) && !defined(ROW_NO_CLONES) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define ROW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ROW_CLONES
#endif
#define SEL(m, a, b) ((vf)(((vi)(a) & (m)) | ((vi)(b) & ~(m))))

/* x = exp(x) lane by lane, for x <= 88 (scores minus their max are <= 0):
 * Cephes' polynomial after x = n ln 2 + r; below -87.3 it gives 0 (so
 * -inf gives 0) and NaN stays NaN. n = round(x / ln 2) by the 1.5 * 2^23
 * trick: the low bits of t hold n. */
#define EXP_LANES(x)                                                     \
    do {                                                                 \
        vi under_ = (x) < -87.3f;                                        \
        vf c_ = {0};                                                     \
        (x) = SEL((x) > 88.3f, c_ + 88.3f, (x));                         \
        (x) = SEL(under_, c_ - 87.3f, (x));                              \
        vf t_ = (x) * 1.44269504f + 12582912.0f, n_ = t_ - 12582912.0f;  \
        vf r_ = (x) - n_ * 0.693359375f + n_ * 2.12194440e-4f;           \
        vf y_ = r_ * 1.9875691500e-4f + 1.3981999507e-3f;                \
        y_ = y_ * r_ + 8.3334519073e-3f;                                 \
        y_ = y_ * r_ + 4.1665795894e-2f;                                 \
        y_ = y_ * r_ + 1.6666665459e-1f;                                 \
        y_ = y_ * r_ + 5.0000001201e-1f;                                 \
        y_ = y_ * r_ * r_ + r_ + 1.0f;                                   \
        vi e_ = ((vi)t_ - 0x4B400000 + 127) << 23;                       \
        (x) = (vf)((vi)(y_ * (vf)e_) & ~under_);                         \
    } while (0)

/* The largest of s[0..n), -inf when none; NaN never wins (its weight
 * makes the row NaN later, as it did in the composite). */
ROW_CLONES static float max_row_f32(const float *s, int64_t n)
{
    vf m = {0};
    m -= INFINITY;
    int64_t c = 0;
    for (; c + VW <= n; c += VW) {
        vf x;
        memcpy(&x, s + c, sizeof x);
        m = SEL(x > m, x, m);
    }
    float r = -INFINITY;
    for (int i = 0; i < VW; i++)
        r = m[i] > r ? m[i] : r;
    for (; c < n; c++)
        r = s[c] > r ? s[c] : r;
    return r;
}

ROW_CLONES static void scale_row_f32(float *o, int64_t n, float a)
{
    int64_t c = 0;
    for (; c + VW <= n; c += VW) {
        vf x;
        memcpy(&x, o + c, sizeof x);
        x *= a;
        memcpy(o + c, &x, sizeof x);
    }
    for (; c < n; c++)
        o[c] *= a;
}

/* s[c] = exp(s[c] - m) for c < n; returns their sum. */
ROW_CLONES static double exp_row_f32(float *s, int64_t n, float m)
{
    vf acc = {0};
    int64_t c = 0;
    for (; c + VW <= n; c += VW) {
        vf x;
        memcpy(&x, s + c, sizeof x);
        x -= m;
        EXP_LANES(x);
        memcpy(s + c, &x, sizeof x);
        acc += x;
    }
    if (c < n) { /* the tail, padded with -inf (which adds 0) */
        float tmp[VW];
        for (int i = 0; i < VW; i++)
            tmp[i] = c + i < n ? s[c + i] : -INFINITY;
        vf x;
        memcpy(&x, tmp, sizeof x);
        x -= m;
        EXP_LANES(x);
        memcpy(tmp, &x, sizeof x);
        memcpy(s + c, tmp, (size_t)(n - c) * sizeof *s);
        acc += x;
    }
    double sum = 0;
    for (int i = 0; i < VW; i++)
        sum += acc[i];
    return sum;
}
/* c[m x nc] = alpha * a[m x k] . b[k x nc] (+ c when acc); nc a multiple
 * of VW, b and c rows of whole vectors. Tiles of 4 rows by one vector,
 * each element summed over p in order (the same bits on every clone). */
ROW_CLONES static void mm_f32(int64_t m, int64_t nc, int64_t k, const float *a, int64_t lda, const float *b,
                              int64_t ldb, float *c, int64_t ldc, float alpha, bool acc)
{
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) {
        const float *a0 = a + i * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
        for (int64_t j = 0; j < nc; j += VW) {
            vf c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
            for (int64_t p = 0; p < k; p++) {
                vf bv;
                memcpy(&bv, b + p * ldb + j, sizeof bv);
                c0 += bv * a0[p];
                c1 += bv * a1[p];
                c2 += bv * a2[p];
                c3 += bv * a3[p];
            }
            vf t[4] = {c0, c1, c2, c3};
            for (int r = 0; r < 4; r++) {
                vf old = {0};
                if (acc)
                    memcpy(&old, c + (i + r) * ldc + j, sizeof old);
                old += t[r] * alpha;
                memcpy(c + (i + r) * ldc + j, &old, sizeof old);
            }
        }
    }
    for (; i < m; i++) {
        const float *a0 = a + i * lda;
        for (int64_t j = 0; j < nc; j += VW) {
            vf c0 = {0};
            for (int64_t p = 0; p < k; p++) {
                vf bv;
                memcpy(&bv, b + p * ldb + j, sizeof bv);
                c0 += bv * a0[p];
            }
            vf old = {0};
            if (acc)
                memcpy(&old, c + i * ldc + j, sizeof old);
            old += c0 * alpha;
            memcpy(c + i * ldc + j, &old, sizeof old);
        }
    }
}

/* The sum of a vector's lanes, halves added (the same order on every clone). */
typedef float vf8 __attribute__((vector_size(32)));
typedef float vf4 __attribute__((vector_size(16)));
static inline float sum_lanes(vf x)
{
    vf8 a, b;
    memcpy(&a, &x, sizeof a);
    memcpy(&b, (char *)&x + sizeof a, sizeof b);
    a += b;
    vf4 c, e;
    memcpy(&c, &a, sizeof c);
    memcpy(&e, (char *)&a + sizeof c, sizeof e);
    c += e;
    return (c[0] + c[2]) + (c[1] + c[3]);
}

/* s[c] = scale * (q . k row c) for c < n, key rows ld apart, d long: one
 * query row's scores over the key rows in place (no K^T packing). */
ROW_CLONES static void dot_rows_f32(const float *q, const float *k, int64_t ld, int64_t n, int64_t d, float scale,
                                    float *s)
{
    for (int64_t c = 0; c < n; c++) {
        const float *kr = k + c * ld;
        vf acc = {0};
        int64_t e = 0;
        for (; e + VW <= d; e += VW) {
            vf a, b;
            memcpy(&a, q + e, sizeof a);
            memcpy(&b, kr + e, sizeof b);
            acc += a * b;
        }
        float t = sum_lanes(acc);
        for (; e < d; e++)
            t += q[e] * kr[e];
        s[c] = t * scale;
    }
}

/* o[e] += sum over c < n of w[c] * v row c [e], for e < d, value rows ld
 * apart, read in place (no packing): keys summed in order, as mm_f32 sums
 * them over packed rows, so the bits are the ones it gives. */
ROW_CLONES static void axpy_rows_f32(const float *w, const float *v, int64_t ld, int64_t n, int64_t d, float *o)
{
    int64_t e = 0;
    for (; e + VW <= d; e += VW) {
        vf t = {0}, old;
        for (int64_t c = 0; c < n; c++) {
            vf x;
            memcpy(&x, v + c * ld + e, sizeof x);
            t += x * w[c];
        }
        memcpy(&old, o + e, sizeof old);
        old += t;
        memcpy(o + e, &old, sizeof old);
    }
    for (; e < d; e++) {
        float t = 0;
        for (int64_t c = 0; c < n; c++)
            t += v[c * ld + e] * w[c];
        o[e] += t;
    }
}
#else
enum { VW = 16 };

static void dot_rows_f32(const float *q, const float *k, int64_t ld, int64_t n, int64_t d, float scale, float *s)
{
    for (int64_t c = 0; c < n; c++) {
        float t = 0;
        for (int64_t e = 0; e < d; e++)
            t += q[e] * k[c * ld + e];
        s[c] = t * scale;
    }
}

static void axpy_rows_f32(const float *w, const float *v, int64_t ld, int64_t n, int64_t d, float *o)
{
    for (int64_t e = 0; e < d; e++) {
        float t = 0;
        for (int64_t c = 0; c < n; c++)
            t += v[c * ld + e] * w[c];
        o[e] += t;
    }
}

static void mm_f32(int64_t m, int64_t nc, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float *c, int64_t ldc, float alpha, bool acc)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < nc; j++) {
            float t = 0;
            for (int64_t p = 0; p < k; p++)
                t += a[i * lda + p] * b[p * ldb + j];
            c[i * ldc + j] = (acc ? c[i * ldc + j] : 0) + t * alpha;
        }
}

static float max_row_f32(const float *s, int64_t n)
{
    float r = -INFINITY;
    for (int64_t c = 0; c < n; c++)
        r = s[c] > r ? s[c] : r;
    return r;
}

static void scale_row_f32(float *o, int64_t n, float a)
{
    for (int64_t c = 0; c < n; c++)
        o[c] *= a;
}

static double exp_row_f32(float *s, int64_t n, float m)
{
    double sum = 0;
    for (int64_t c = 0; c < n; c++)
        sum += (s[c] = expf(s[c] - m));
    return sum;
}
#endif

static double max_row_f64(const double *s, int64_t n)
{
    double r[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}; /* four chains, not one */
    int64_t c = 0;
    for (; c + 4 <= n; c += 4)
        for (int i = 0; i < 4; i++)
            r[i] = s[c + i] > r[i] ? s[c + i] : r[i];
    for (; c < n; c++)
        r[0] = s[c] > r[0] ? s[c] : r[0];
    double a = r[0] > r[1] ? r[0] : r[1], b = r[2] > r[3] ? r[2] : r[3];
    return a > b ? a : b;
}

static double exp_row_f64(double *s, int64_t n, double m)
{
    double sum = 0;
    for (int64_t c = 0; c < n; c++)
        sum += (s[c] = exp(s[c] - m));
    return sum;
}

/* ---------------------------------------------------------------- item */

static void gemm(const attn_job *j, bool trans_b, int m, int n, int k, double alpha, const void *a, int lda,
                 const void *b, int ldb, double beta, void *c, int ldc)
{
    rt_gemm(j->dt, j->onednn, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* Folds the scores s[0..n) of one row into its running max *mx, sum *l
 * and output o[0..d); leaves the row's weights in s for the P.V gemm. */
static void fold_row(const attn_job *j, void *s, int64_t n, double *mx, double *l, void *o)
{
    bool f32 = j->cdt == RLX_F32;
    double bm = f32 ? max_row_f32(s, n) : max_row_f64(s, n);
    double nm = bm > *mx ? bm : *mx;
    if (nm == -INFINITY) { /* nothing visible yet: no weight */
        memset(s, 0, (size_t)n * j->ces);
        return;
    }
    double alpha = *mx == -INFINITY ? 0 : exp(*mx - nm);
    if (alpha != 1) {
        if (f32)
            scale_row_f32(o, j->d, (float)alpha);
        else
            for (int64_t e = 0; e < j->d; e++)
                ((double *)o)[e] *= alpha;
    }
    double sum = f32 ? exp_row_f32(s, n, (float)nm) : exp_row_f64(s, n, nm);
    *l = *l * alpha + sum;
    *mx = nm;
}

/* Whether the mask tensor keeps element e (offset in elements). */
static bool mask_keeps(const attn_job *j, int64_t e)
{
    const char *p = j->mt + e * (int64_t)j->mes;
    if (!j->additive)
        return *(const unsigned char *)p != 0;
    return rt_ld_f(p, j->mdt, 0) != -INFINITY;
}

/* Whether the mask tensor keeps any key of [j0, j0+n) for rows [i0, i0+m)
 * of the item whose mask rows start at element base. */
static bool block_visible(const attn_job *j, int64_t base, int64_t i0, int64_t m, int64_t j0, int64_t n)
{
    int64_t rows = j->ms[2] ? m : 1, cols = j->ms[3] ? n : 1; /* broadcast dims: one look */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            if (mask_keeps(j, base + (i0 + r) * j->ms[2] + (j0 + c) * j->ms[3]))
                return true;
    return false;
}

/* Applies the mask tensor to scores s[lo, hi) of a row whose mask row
 * starts at element base; column c is key j0 + c. */
static void mask_row(const attn_job *j, void *s, int64_t base, int64_t j0, int64_t lo, int64_t hi)
{
    for (int64_t c = lo; c < hi; c++) {
        const char *p = j->mt + (base + (j0 + c) * j->ms[3]) * (int64_t)j->mes;
        if (!j->additive) {
            if (!*(const unsigned char *)p) {
                if (j->cdt == RLX_F32)
                    ((float *)s)[c] = -INFINITY;
                else
                    ((double *)s)[c] = -INFINITY;
            }
        } else if (j->cdt == RLX_F32) {
            ((float *)s)[c] += j->mdt == RLX_F32 ? *(const float *)(const void *)p : (float)rt_ld_f(p, j->mdt, 0);
        } else {
            ((double *)s)[c] += *(const double *)(const void *)p;
        }
    }
}

/* Sets s[c] of a row to -inf for c in [lo, hi). */
static void mask_cols(const attn_job *j, void *s, int64_t lo, int64_t hi)
{
    for (int64_t c = lo; c < hi; c++) {
        if (j->cdt == RLX_F32)
            ((float *)s)[c] = -INFINITY;
        else
            ((double *)s)[c] = -INFINITY;
    }
}

/* One item: rows [i0, i0+m) of head hh of batch b. */
static void run_item(const attn_job *j, char *slot, int64_t item)
{
    int64_t qb = j->nqb - 1 - item % j->nqb; /* the longest causal rows first */
    int64_t bh = item / j->nqb, hh = bh % j->heads, b = bh / j->heads;
    int64_t i0 = qb * BQ, m = j->sq - i0 < BQ ? j->sq - i0 : BQ, d = j->d, bk = j->bk;
    size_t es = j->es, ces = j->ces;
    bool half = j->dt != j->cdt; /* f16/bf16 operands: converted to f32 while packing */
    double *mx = (double *)(void *)slot, *l = mx + BQ;
    int64_t od = j->od;
    char *sc = slot + 2 * BQ * sizeof(double), *o = sc + (size_t)(BQ * bk) * ces;
    float *kt = (float *)(void *)(o + (size_t)(BQ * od) * ces), *vp = kt + d * bk; /* f32 packing */
    float *qf = vp + bk * od; /* half: the item's query rows in f32 */
    for (int64_t r = 0; r < m; r++) {
        mx[r] = -INFINITY;
        l[r] = 0;
    }
    memset(o, 0, (size_t)(m * od) * ces);
    /* Query row i sits at key position p0 + (i - i0). */
    int64_t p0 = j->sk - j->sq + i0, jlo = 0, jhi = j->sk;
    if (j->mask != RLX_MASK_NONE)
        jhi = p0 + m < 0 ? 0 : p0 + m < jhi ? p0 + m : jhi;
    if (j->mask == RLX_MASK_SLIDING && p0 - j->window + 1 > 0)
        jlo = p0 - j->window + 1;
    const char *qp = j->q.base + (b * j->q.sb + i0 * j->q.ld + hh * d) * (int64_t)es;
    int64_t qld = j->q.ld;
    if (half) {
        for (int64_t r = 0; r < m; r++)
            rt_half_to_f32(j->dt, qp + r * qld * (int64_t)es, qf + r * d, d);
        qp = (const char *)qf;
        qld = d;
    }
    int64_t kh = hh / j->group, mbase = b * j->ms[0] + hh * j->ms[1];
    for (int64_t j0 = jlo, n; j0 < jhi; j0 += n) {
        n = jhi - j0 < bk ? jhi - j0 : bk;
        if (j0 < j->sk1 && j0 + n > j->sk1) /* a block ends where the first piece does */
            n = j->sk1 - j0;
        if (j->mt && !block_visible(j, mbase, i0, m, j0, n))
            continue;
        bool second = j0 >= j->sk1;
        const operand *ko = second ? &j->k2 : &j->k, *vo = second ? &j->v2 : &j->v;
        int64_t jl = second ? j0 - j->sk1 : j0; /* the block's first row in its piece */
        const char *kp = ko->base + (b * ko->sb + jl * ko->ld + kh * d) * (int64_t)es;
        const char *vb = vo->base + (b * vo->sb + jl * vo->ld + kh * d) * (int64_t)es;
        int64_t nv = (n + VW - 1) / VW * VW;
        /* One f32 query row (a decode step): packing K^T and V would cost
         * more than the products, which read the rows in place. */
        bool one_row = j->cdt == RLX_F32 && m == 1;
        const float *vrows = (const float *)(const void *)vb; /* one_row: the value rows, ld vld */
        int64_t vld = vo->ld;
        if (one_row) {
            const float *krows = (const float *)(const void *)kp;
            int64_t kld = ko->ld;
            if (half) { /* the block's key and value rows in f32 */
                for (int64_t c = 0; c < n; c++) {
                    rt_half_to_f32(j->dt, kp + c * kld * (int64_t)es, kt + c * d, d);
                    rt_half_to_f32(j->dt, vb + c * vld * (int64_t)es, vp + c * d, d);
                }
                krows = kt, kld = d;
                vrows = vp, vld = d;
            }
            dot_rows_f32((const float *)(const void *)qp, krows, kld, n, d, (float)j->scale, (float *)(void *)sc);
        } else if (j->cdt == RLX_F32) { /* K^T and V in whole vectors, zero-padded */
            const float *kf = (const float *)(const void *)kp;
            int64_t kld = ko->ld;
            if (half) { /* the key rows in f32 first (vp is free until V is packed) */
                for (int64_t c = 0; c < n; c++)
                    rt_half_to_f32(j->dt, kp + c * kld * (int64_t)es, vp + c * d, d);
                kf = vp;
                kld = d;
            }
            for (int64_t c = 0; c < n; c++)
                for (int64_t e = 0; e < d; e++)
                    kt[e * bk + c] = kf[c * kld + e];
            for (int64_t e = 0; n < nv && e < d; e++)
                memset(kt + e * bk + n, 0, (size_t)(nv - n) * sizeof *kt);
            for (int64_t c = 0; c < n; c++) {
                if (half)
                    rt_half_to_f32(j->dt, vb + c * vo->ld * (int64_t)es, vp + c * od, d);
                else
                    memcpy(vp + c * od, (const float *)(const void *)vb + c * vo->ld, (size_t)d * sizeof *vp);
                memset(vp + c * od + d, 0, (size_t)(od - d) * sizeof *vp);
            }
            mm_f32(m, nv, d, (const float *)(const void *)qp, qld, kt, bk, (float *)(void *)sc, bk,
                   (float)j->scale, false);
        } else {
            gemm(j, true, (int)m, (int)n, (int)d, j->scale, qp, j->q.ld, kp, ko->ld, 0, sc, (int)bk);
        }
        for (int64_t r = 0; r < m; r++) {
            char *row = sc + (size_t)(r * bk) * ces;
            /* This row sees keys [a, e) of the block. */
            int64_t pr = p0 + r, a = j0, e = j0 + n;
            if (j->mask != RLX_MASK_NONE && pr + 1 < e)
                e = pr + 1;
            if (j->mask == RLX_MASK_SLIDING && pr - j->window + 1 > a)
                a = pr - j->window + 1;
            if (e < a)
                e = a;
            mask_cols(j, row, 0, a - j0);
            mask_cols(j, row, e - j0, n);
            if (j->mt)
                mask_row(j, row, mbase + (i0 + r) * j->ms[2], j0, a - j0, e - j0);
            fold_row(j, row, n, &mx[r], &l[r], o + (size_t)(r * od) * ces);
        }
        if (one_row)
            axpy_rows_f32((const float *)(void *)sc, vrows, vld, n, d, (float *)(void *)o);
        else if (j->cdt == RLX_F32)
            mm_f32(m, od, n, (const float *)(void *)sc, bk, vp, od, (float *)(void *)o, od, 1, true);
        else
            gemm(j, false, (int)m, (int)d, (int)n, 1, sc, (int)bk, vb, vo->ld, 1, o, (int)d);
    }
    int64_t hd = j->heads * d;
    for (int64_t r = 0; r < m; r++) {
        char *dst = j->out + ((b * j->sq + i0 + r) * hd + hh * d) * (int64_t)es;
        double inv = l[r] > 0 || l[r] != l[r] ? 1 / l[r] : 0; /* no visible key: zeros */
        float *of = (float *)(void *)o + r * od;
        for (int64_t e = 0; e < d; e++) {
            if (j->cdt == RLX_F32)
                of[e] = (float)(of[e] * inv);
            else
                ((double *)(void *)dst)[e] = ((const double *)(void *)o)[r * od + e] * inv;
        }
        if (half) /* rounded once, from the f32 row */
            rt_f32_to_half(j->dt, of, dst, d);
        else if (j->cdt == RLX_F32)
            memcpy(dst, of, (size_t)d * sizeof *of);
    }
}

/* A free scratch slot, taken: at most nslots chunks run at once, so one
 * is always there (forward and backward jobs alike). */
static int take_slot(atomic_int *busy, int nslots)
{
    for (int s = 0;; s = (s + 1) % nslots) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&busy[s], &expect, 1))
            return s;
    }
}

static void run_chunk(void *const *bufs, const double *consts, int64_t lo, int64_t hi)
{
    (void)consts;
    attn_job *j = bufs[0];
    int s = take_slot(j->busy, j->nslots);
    for (int64_t i = lo; i < hi; i++)
        run_item(j, j->scratch + (size_t)s * j->slot_bytes, i);
    atomic_store(&j->busy[s], 0);
}

/* ---------------------------------------------------------- evaluator */

/* op as gemm reads it, from view v of node x [B, S, H*D]: in place when
 * the last stride is 1 and the row stride a valid leading dimension;
 * otherwise a contiguous copy is made into *tmp. */
static rlx_status operand_of(rt_ctx *ctx, const ir_node *x, const rt_view *v, int64_t d, rt_view *tmp, operand *op)
{
    int64_t s = x->shape[1], hd = x->shape[2];
    const rt_view *u = v;
    if ((hd > 1 && v->strides[2] != 1) || (s > 1 && (v->strides[1] < d || v->strides[1] > INT32_MAX))) {
        if (rt_materialize(ctx, x, v, tmp))
            return ctx->status;
        u = tmp;
    }
    int64_t ld = s <= 1 ? d : u->strides[1]; /* one row: any ld >= d will do */
    if (ld > INT32_MAX)
        return rt_fail(ctx, RLX_E_UNSUPPORTED, "attention: rows of %lld elements are too long for gemm",
                       (long long)ld);
    op->base = rt_base(u, x->dtype);
    op->sb = u->strides[0];
    op->ld = (int)ld;
    return RLX_OK;
}

/* Drops the contiguous copies operand_of made of the first count sources
 * (tmp[i].st set) and their bytes from the context's live count. */
static void release_copies(rt_ctx *ctx, const ir_node *n, rt_view *tmp, int count)
{
    for (int i = 0; i < count; i++) {
        if (tmp[i].st) {
            ir_storage_release(tmp[i].st);
            size_t bytes = ir_node_bytes(n->src[i]);
            ctx->live_bytes -= ctx->live_bytes >= bytes ? bytes : ctx->live_bytes;
        }
    }
}

rlx_status rt_eval_attention(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *q = n->src[0], *k = n->src[1];
    int nops = n->nsrc >= 5 ? 5 : 3; /* q, k, v[, k2, v2]: the mask, if any, is last */
    attn_job *j = ir_calloc(1, sizeof *j);
    ir_storage *scratch = NULL;
    rt_view tmp[5];
    memset(tmp, 0, sizeof tmp);
    if (!j)
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for attention");
    j->dt = n->dtype;
    j->cdt = n->dtype == RLX_F64 ? RLX_F64 : RLX_F32;
    j->onednn = rt_gemm_onednn(ctx);
    j->es = ir_dtype_size(n->dtype);
    j->ces = ir_dtype_size(j->cdt);
    j->sq = q->shape[1];
    j->sk1 = j->sk = k->shape[1];
    if (nops == 5)
        j->sk += n->src[3]->shape[1];
    j->heads = n->attr.attn.heads;
    j->group = j->heads / n->attr.attn.kv_heads;
    j->d = n->attr.attn.head_dim;
    j->mask = n->attr.attn.mask;
    j->window = n->attr.attn.window;
    j->scale = n->attr.attn.scale;
    j->nqb = (j->sq + BQ - 1) / BQ;
    j->bk = GEMM_MNK / (BQ * j->d);
    j->bk = j->bk < VW ? VW : j->bk > BK_MAX ? BK_MAX : j->bk / VW * VW; /* whole vectors of keys */
    j->od = j->cdt == RLX_F32 ? (j->d + VW - 1) / VW * VW : j->d;
    operand *ops[5] = {&j->q, &j->k, &j->v, &j->k2, &j->v2};
    for (int i = 0; i < nops; i++)
        if (operand_of(ctx, n->src[i], &in[i], j->d, &tmp[i], ops[i]))
            goto done;
    if (n->nsrc == nops + 1) {
        const ir_node *m = n->src[nops];
        j->additive = m->dtype != RLX_BOOL;
        j->mdt = m->dtype;
        j->mes = ir_dtype_size(m->dtype);
        j->mt = rt_base(&in[nops], m->dtype);
        for (int i = 0; i < 4; i++) /* a broadcast dim reads one place */
            j->ms[i] = m->shape[i] == 1 ? 0 : in[nops].strides[i];
    }
    if (rt_alloc_out(ctx, n, out, false))
        goto done;
    j->out = out->st->data;
    int64_t items = q->shape[0] * j->heads * j->nqb;
    int nt = rt_threads(ctx);
    nt = nt < 1 ? 1 : nt > SLOTS_MAX ? SLOTS_MAX : nt;
    j->nslots = items < nt ? (int)(items > 0 ? items : 1) : nt;
    /* K^T, V (f32), and for f16/bf16 the query rows in f32 */
    size_t pack = j->cdt == RLX_F32 ? (size_t)(j->d * j->bk + j->bk * j->od + (j->dt != RLX_F32 ? BQ * j->d : 0)) : 0;
    j->slot_bytes = (2 * BQ * sizeof(double) + ((size_t)(BQ * j->bk + BQ * j->od) + pack) * j->ces + 63) & ~(size_t)63;
    /* from the recycling pool: a step's every attention call takes the same
     * pages again instead of faulting fresh ones in */
    if ((size_t)j->nslots > SIZE_MAX / j->slot_bytes ||
        !(scratch = rt_bufpool_storage((size_t)j->nslots * j->slot_bytes))) {
        rt_fail(ctx, RLX_E_NOMEM, "out of memory for attention scratch");
        goto done;
    }
    j->scratch = scratch->data;
    for (int s = 0; s < SLOTS_MAX; s++)
        atomic_init(&j->busy[s], 0);
    void *bufs[1] = {j};
    int prev = rt_blas_threads(1); /* f64 items call dgemm on our threads: never 2 x 2 */
    rt_pool_run(run_chunk, bufs, NULL, items, 1, j->nslots);
    rt_blas_threads(prev);
done:
    release_copies(ctx, n, tmp, nops);
    ir_storage_release(scratch);
    ir_free(j);
    return ctx->status;
}

/* ----------------------------------------------------------- backward */

/* ATTENTION_BWD: dq, dk, dv of ATTENTION from q, k, v, its output o and
 * the cotangent g, packed [dq | dk | dv]. Work items are (batch, kv head):
 * an item owns the kv head's dk and dv columns and the dq columns of its
 * G query heads, so no two items write one place and each place is summed
 * in one fixed order (any thread count gives the same bits). Per query
 * head and block of BQ rows it recomputes the block's scores over the keys
 * its rows can see (BQ x Sk at most, never S x S per head), the softmax
 * rows exactly (max, exp, sum), then dP = g V^T, dS = P (dP - rowsum(g o)),
 * dq = scale dS K (written once), dk += scale dS^T Q, dv += P^T g. */
typedef struct {
    rlx_dtype dt;  /* of the operands and the output */
    rlx_dtype cdt; /* the compute dtype: f32 for f16/bf16 operands, else dt */
    rlx_dtype mdt; /* of an additive mask */
    size_t es, ces; /* element sizes of dt and cdt */
    bool onednn;    /* f32 gemms through oneDNN (rt_gemm_onednn) */
    int64_t b, sq, sk, heads, group, d, kvh;
    int64_t bq; /* query rows per block */
    int mask, window;
    double scale;
    operand q, k, v, o, g;
    const char *mt;
    bool additive;
    size_t mes;
    int64_t ms[4];
    char *dq, *dk, *dv; /* contiguous [B, Sq, H*D], [B, Sk, Hkv*D] x 2 */
    char *scratch;
    size_t slot_bytes;
    size_t half_at; /* f16/bf16: where a slot's f32 copies of one item's operands start */
    int nslots;
    atomic_int busy[SLOTS_MAX];
} bwd_job;

static inline double ldf(const bwd_job *j, const void *p, int64_t i)
{
    return j->cdt == RLX_F32 ? ((const float *)p)[i] : ((const double *)p)[i];
}

static inline void stf(const bwd_job *j, void *p, int64_t i, double x)
{
    if (j->cdt == RLX_F32)
        ((float *)p)[i] = (float)x;
    else
        ((double *)p)[i] = x;
}

/* Scores row s[0..n) (key j0 + c at c) to weights: keys outside [a, e)
 * weigh 0, the mask tensor applies inside, then exp(s - max) over the sum
 * on the visible range; a row with no visible key is zeros. */
static void probs_row(const bwd_job *j, void *s, int64_t n, int64_t a, int64_t e, int64_t j0, int64_t mrow)
{
    bool f32 = j->cdt == RLX_F32;
    int64_t lo = a - j0, hi = e - j0, w = hi - lo;
    memset(s, 0, (size_t)lo * j->ces);
    memset((char *)s + hi * (int64_t)j->ces, 0, (size_t)(n - hi) * j->ces);
    void *v = (char *)s + lo * (int64_t)j->ces;
    if (j->mt)
        for (int64_t c = lo; c < hi; c++) {
            const char *p = j->mt + (mrow + (j0 + c) * j->ms[3]) * (int64_t)j->mes;
            if (!j->additive) {
                if (!*(const unsigned char *)p)
                    stf(j, s, c, -INFINITY);
            } else {
                stf(j, s, c, ldf(j, s, c) + rt_ld_f(p, j->mdt, 0));
            }
        }
    double mx = w <= 0 ? -INFINITY : f32 ? max_row_f32(v, w) : max_row_f64(v, w);
    if (mx == -INFINITY) {
        memset(v, 0, (size_t)(w > 0 ? w : 0) * j->ces);
        return;
    }
    double sum = f32 ? exp_row_f32(v, w, (float)mx) : exp_row_f64(v, w, mx);
    double inv = 1 / sum;
    if (f32)
        scale_row_f32(v, w, (float)inv);
    else
        for (int64_t c = 0; c < w; c++)
            ((double *)v)[c] *= inv;
}

/* dS = P (dP - rs[r]) over m rows of n, into dp (a weight of 0 gives 0). */
static void ds_block(const bwd_job *j, const void *p, void *dp, const double *rs, int64_t m, int64_t n)
{
    if (j->cdt == RLX_F32) {
        const float *pf = p;
        float *df = dp;
        for (int64_t r = 0; r < m; r++) {
            float rr = (float)rs[r];
            for (int64_t c = 0; c < n; c++) {
                float x = pf[r * n + c];
                df[r * n + c] = x == 0 ? 0 : x * (df[r * n + c] - rr);
            }
        }
    } else {
        const double *pd = p;
        double *dd = dp;
        for (int64_t r = 0; r < m; r++)
            for (int64_t c = 0; c < n; c++) {
                double x = pd[r * n + c];
                dd[r * n + c] = x == 0 ? 0 : x * (dd[r * n + c] - rs[r]);
            }
    }
}

/* t[c * ldt + r] = x[r * ldx + c] for r < m, c < n. */
static void transpose_block(const bwd_job *j, const void *x, int64_t ldx, void *t, int64_t ldt, int64_t m, int64_t n)
{
    if (j->cdt == RLX_F32) {
        for (int64_t r = 0; r < m; r++)
            for (int64_t c = 0; c < n; c++)
                ((float *)t)[c * ldt + r] = ((const float *)x)[r * ldx + c];
    } else {
        for (int64_t r = 0; r < m; r++)
            for (int64_t c = 0; c < n; c++)
                ((double *)t)[c * ldt + r] = ((const double *)x)[r * ldx + c];
    }
}

static const char *at(const bwd_job *j, const operand *op, int64_t b, int64_t row, int64_t col)
{
    return op->base + (b * op->sb + row * op->ld + col) * (int64_t)j->es;
}

/* One query head's operands in the compute dtype: row r of q at
 * q + r * lq elements, of k at k + r * lk, and so on (in place for
 * f32/f64, f32 copies for f16/bf16). */
typedef struct {
    const char *q, *k, *v, *o, *g;
    int lq, lk, lv, lo, lg;
    char *dq, *dk, *dv;
    int ldq, ldkv;
} head_ops;

/* The blocks of query rows of one head (mask rows from element mbase):
 * dq of its rows written, dk and dv of its kv head added into. */
static void bwd_head(const bwd_job *j, char *slot, const head_ops *h, int64_t mbase)
{
    int64_t d = j->d, sk = j->sk, es = (int64_t)j->ces;
    double *rs = (double *)(void *)slot;
    int64_t bq = j->bq;
    char *s = slot + bq * sizeof(double), *dp = s + bq * sk * es, *t = dp + bq * sk * es;
    for (int64_t i0 = 0; i0 < j->sq; i0 += bq) {
        int64_t m = j->sq - i0 < bq ? j->sq - i0 : bq;
        char *dqb = h->dq + i0 * h->ldq * es;
        /* Query row i0 + r sits at key position p0 + r; the block sees keys [jlo, jhi). */
        int64_t p0 = sk - j->sq + i0, jlo = 0, jhi = sk;
        if (j->mask != RLX_MASK_NONE)
            jhi = p0 + m < 0 ? 0 : p0 + m < jhi ? p0 + m : jhi;
        if (j->mask == RLX_MASK_SLIDING && p0 - j->window + 1 > 0)
            jlo = p0 - j->window + 1 < jhi ? p0 - j->window + 1 : jhi;
        int64_t n = jhi - jlo;
        if (n <= 0) { /* no row sees a key: dq rows are zeros */
            for (int64_t r = 0; r < m; r++)
                memset(dqb + r * h->ldq * es, 0, (size_t)(d * es));
            continue;
        }
        const char *qp = h->q + i0 * h->lq * es, *gp = h->g + i0 * h->lg * es, *op = h->o + i0 * h->lo * es;
        const char *kp = h->k + jlo * h->lk * es, *vp = h->v + jlo * h->lv * es;
        rt_gemm(j->cdt, j->onednn, true, (int)m, (int)n, (int)d, j->scale, qp, h->lq, kp, h->lk, 0, s, (int)n);
        for (int64_t r = 0; r < m; r++) {
            int64_t pr = p0 + r, a = jlo, e = jhi;
            if (j->mask != RLX_MASK_NONE && pr + 1 < e)
                e = pr + 1;
            if (j->mask == RLX_MASK_SLIDING && pr - j->window + 1 > a)
                a = pr - j->window + 1;
            probs_row(j, s + r * n * es, n, a, e < a ? a : e, jlo, mbase + (i0 + r) * j->ms[2]);
            double acc = 0; /* rowsum(g o) = rowsum(dP P) */
            for (int64_t c = 0; c < d; c++)
                acc += ldf(j, gp + r * h->lg * es, c) * ldf(j, op + r * h->lo * es, c);
            rs[r] = acc;
        }
        rt_gemm(j->cdt, j->onednn, true, (int)m, (int)n, (int)d, 1, gp, h->lg, vp, h->lv, 0, dp, (int)n);
        ds_block(j, s, dp, rs, m, n);
        /* dv += P^T g; dk += scale dS^T q; dq = scale dS k */
        transpose_block(j, s, n, t, m, m, n);
        rt_gemm(j->cdt, j->onednn, false, (int)n, (int)d, (int)m, 1, t, (int)m, gp, h->lg, 1, h->dv + jlo * h->ldkv * es,
                h->ldkv);
        transpose_block(j, dp, n, t, m, m, n);
        rt_gemm(j->cdt, j->onednn, false, (int)n, (int)d, (int)m, j->scale, t, (int)m, qp, h->lq, 1,
                h->dk + jlo * h->ldkv * es, h->ldkv);
        rt_gemm(j->cdt, j->onednn, false, (int)m, (int)d, (int)n, j->scale, dp, (int)n, kp, h->lk, 0, dqb, h->ldq);
    }
}

/* Rows [0, rows) of columns [col, col + d) of op (batch b) to f32 rows of d. */
static void rows_to_f32(const bwd_job *j, const operand *op, int64_t b, int64_t rows, int64_t col, float *dst)
{
    for (int64_t r = 0; r < rows; r++)
        rt_half_to_f32(j->dt, at(j, op, b, r, col), dst + r * j->d, j->d);
}

/* f32 rows of d to rows of ld elements of the output at dst, rounded once. */
static void rows_from_f32(const bwd_job *j, const float *src, int64_t rows, char *dst, int64_t ld)
{
    for (int64_t r = 0; r < rows; r++)
        rt_f32_to_half(j->dt, src + r * j->d, dst + r * ld * (int64_t)j->es, j->d);
}

static void bwd_item(const bwd_job *j, char *slot, int64_t item)
{
    int64_t kh = item % j->kvh, b = item / j->kvh, d = j->d, sk = j->sk, sq = j->sq, es = (int64_t)j->es;
    int64_t hd = j->heads * d, kd = j->kvh * d;
    char *dkb = j->dk + (b * sk * kd + kh * d) * es, *dvb = j->dv + (b * sk * kd + kh * d) * es;
    bool half = j->dt != j->cdt;
    /* f16/bf16: the kv head's k, v, dk, dv [Sk, D] and a query head's q, o, g, dq [Sq, D] in f32 */
    float *k32 = NULL, *v32 = NULL, *dk32 = NULL, *dv32 = NULL, *q32 = NULL, *o32 = NULL, *g32 = NULL, *dq32 = NULL;
    head_ops h;
    if (half) {
        k32 = (float *)(void *)(slot + j->half_at), v32 = k32 + sk * d, dk32 = v32 + sk * d, dv32 = dk32 + sk * d;
        q32 = dv32 + sk * d, o32 = q32 + sq * d, g32 = o32 + sq * d, dq32 = g32 + sq * d;
        rows_to_f32(j, &j->k, b, sk, kh * d, k32);
        rows_to_f32(j, &j->v, b, sk, kh * d, v32);
        memset(dk32, 0, (size_t)(2 * sk * d) * sizeof *dk32);
        h = (head_ops){(char *)q32, (char *)k32, (char *)v32, (char *)o32, (char *)g32, (int)d, (int)d, (int)d, (int)d,
                       (int)d, (char *)dq32, (char *)dk32, (char *)dv32, (int)d, (int)d};
    } else {
        h = (head_ops){NULL, at(j, &j->k, b, 0, kh * d), at(j, &j->v, b, 0, kh * d), NULL, NULL, j->q.ld, j->k.ld,
                       j->v.ld, j->o.ld, j->g.ld, NULL, dkb, dvb, (int)hd, (int)kd};
    }
    for (int64_t hh = kh * j->group; hh < (kh + 1) * j->group; hh++) {
        char *dq = j->dq + (b * sq * hd + hh * d) * es;
        if (half) {
            rows_to_f32(j, &j->q, b, sq, hh * d, q32);
            rows_to_f32(j, &j->o, b, sq, hh * d, o32);
            rows_to_f32(j, &j->g, b, sq, hh * d, g32);
        } else {
            h.q = at(j, &j->q, b, 0, hh * d);
            h.o = at(j, &j->o, b, 0, hh * d);
            h.g = at(j, &j->g, b, 0, hh * d);
            h.dq = dq;
        }
        bwd_head(j, slot, &h, j->mt ? b * j->ms[0] + hh * j->ms[1] : 0);
        if (half)
            rows_from_f32(j, dq32, sq, dq, hd);
    }
    if (half) { /* dk and dv summed over the group in f32, rounded once */
        rows_from_f32(j, dk32, sk, dkb, kd);
        rows_from_f32(j, dv32, sk, dvb, kd);
    }
}

static void bwd_chunk(void *const *bufs, const double *consts, int64_t lo, int64_t hi)
{
    (void)consts;
    bwd_job *j = bufs[0];
    int s = take_slot(j->busy, j->nslots);
    for (int64_t i = lo; i < hi; i++)
        bwd_item(j, j->scratch + (size_t)s * j->slot_bytes, i);
    atomic_store(&j->busy[s], 0);
}

rlx_status rt_eval_attention_bwd(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *q = n->src[0], *k = n->src[1];
    bwd_job *j = ir_calloc(1, sizeof *j);
    ir_storage *scratch = NULL;
    rt_view tmp[5];
    memset(tmp, 0, sizeof tmp);
    if (!j)
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for attention_bwd");
    j->dt = n->dtype;
    j->cdt = n->dtype == RLX_F64 ? RLX_F64 : RLX_F32;
    j->onednn = rt_gemm_onednn(ctx);
    j->es = ir_dtype_size(n->dtype);
    j->ces = ir_dtype_size(j->cdt);
    j->b = q->shape[0];
    j->sq = q->shape[1];
    j->sk = k->shape[1];
    j->heads = n->attr.attn.heads;
    j->kvh = n->attr.attn.kv_heads;
    j->group = j->heads / j->kvh;
    j->d = n->attr.attn.head_dim;
    j->mask = n->attr.attn.mask;
    j->window = n->attr.attn.window;
    j->scale = n->attr.attn.scale;
    operand *ops[5] = {&j->q, &j->k, &j->v, &j->o, &j->g};
    for (int i = 0; i < 5; i++)
        if (operand_of(ctx, n->src[i], &in[i], j->d, &tmp[i], ops[i]))
            goto done;
    if (n->nsrc == 6) {
        const ir_node *m = n->src[5];
        j->additive = m->dtype != RLX_BOOL;
        j->mdt = m->dtype;
        j->mes = ir_dtype_size(m->dtype);
        j->mt = rt_base(&in[5], m->dtype);
        for (int i = 0; i < 4; i++)
            j->ms[i] = m->shape[i] == 1 ? 0 : in[5].strides[i];
    }
    /* Causal and sliding rows see more keys the later they sit: smaller
     * blocks skip more of the masked corner (BQ_BWD_MASKED, measured). */
    size_t bq = (size_t)(j->mask == RLX_MASK_NONE ? BQ : BQ_BWD_MASKED);
    j->bq = (int64_t)bq;
    if (j->sk > INT32_MAX / BQ) {
        rt_fail(ctx, RLX_E_UNSUPPORTED, "attention_bwd: %lld keys are too many", (long long)j->sk);
        goto done;
    }
    if (rt_alloc_out(ctx, n, out, true)) /* zeros: dk and dv accumulate */
        goto done;
    j->dq = out->st->data;
    j->dk = j->dq + (size_t)(j->b * j->sq * j->heads * j->d) * j->es;
    j->dv = j->dk + (size_t)(j->b * j->sk * j->kvh * j->d) * j->es;
    int64_t items = j->b * j->kvh;
    int nt = rt_threads(ctx);
    nt = nt < 1 ? 1 : nt > SLOTS_MAX ? SLOTS_MAX : nt;
    j->nslots = items < nt ? (int)(items > 0 ? items : 1) : nt;
    /* row sums, then scores/P, dP/dS and a transposed block, BQ x Sk each */
    j->half_at = (bq * sizeof(double) + (size_t)(3 * bq * (j->sk > 0 ? j->sk : 1)) * j->ces + 63) & ~(size_t)63;
    size_t half = j->dt != j->cdt ? (size_t)(4 * (j->sk + j->sq) * j->d) * sizeof(float) : 0;
    j->slot_bytes = (j->half_at + half + 63) & ~(size_t)63;
    if ((size_t)j->nslots > SIZE_MAX / j->slot_bytes ||
        !(scratch = rt_bufpool_storage((size_t)j->nslots * j->slot_bytes))) {
        rt_fail(ctx, RLX_E_NOMEM, "out of memory for attention_bwd scratch");
        goto done;
    }
    j->scratch = scratch->data;
    for (int s = 0; s < SLOTS_MAX; s++)
        atomic_init(&j->busy[s], 0);
    void *bufs[1] = {j};
    int prev = rt_blas_threads(1);
    if (items > 0 && j->sq > 0 && j->sk > 0)
        rt_pool_run(bwd_chunk, bufs, NULL, items, 1, j->nslots);
    rt_blas_threads(prev);
done:
    release_copies(ctx, n, tmp, 5);
    ir_storage_release(scratch);
    ir_free(j);
    return ctx->status;
}
