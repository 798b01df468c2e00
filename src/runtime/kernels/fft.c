/*
 * fft.c — the FFT primitive.
 *
 * A line along attr.fft.axis of length 2N holds N real parts, then N
 * imaginary parts; both directions are unnormalized. Everything computes
 * in double (an f32 line is rounded once when stored).
 *
 * The engine is one kernel: a Stockham radix-4 (and one radix-2) FFT of a
 * power-of-two length over LANES lines at once, stored lane-interleaved
 * (element j of lane b at j*LANES + b, real and imaginary parts in separate
 * arrays, like the layout itself), so every butterfly is a vector operation
 * over the lanes and no stage needs a bit reversal. Lines of length up to
 * BLOCK_MAX go through it LANES at a time (any axis: a block is gathered
 * from and scattered to the strided lines), in parallel over the pool.
 * Longer lines run one at a time as a four-step FFT (M = M1 * M2: column
 * FFTs of length M1, twiddles, transpose, column FFTs of length M2), which
 * is the same kernel over blocks of LANES adjacent columns, in parallel.
 * Lengths that are not powers of two use Bluestein's chirp-z algorithm: a
 * circular convolution with the chirp done by two power-of-two FFTs of
 * length M >= 2N - 1, its multiplications folded into the gathers and
 * scatters. The inverse is the forward transform with real and imaginary
 * parts swapped on the way in and out (ifft(x) = swap(fft(swap(x)))).
 * Plans (twiddles, and Bluestein's chirp and transformed kernel) are
 * cached per length, so a repeated transform computes none of them; large
 * scratch comes from the recycling buffer pool.
 *
 * Twiddles come from cos/sin of exact angles, either directly or as the
 * product of a few table entries (w^(a*L + b) = w^(a*L) w^b), never from
 * recurrences, so the error stays near the double epsilon times log N.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "runtime/rt.h"
#include "runtime/kernels/par.h"

#define TWO_PI 6.283185307179586476925286766559

enum {
    LANES = 8,          /* lines per block: one AVX-512 vector of doubles */
    BLOCK_MAX = 4096,   /* longest transform done as one block */
    MAX_STAGES = 40,
};

#if !defined(__GNUC__)
#define __builtin_prefetch(p) ((void)(p))
#endif

static bool is_pow2(int64_t n) { return n > 0 && !(n & (n - 1)); }

/* ------------------------------------------------------ the block kernel */

/* A power-of-two transform: per stage, its radix and packed twiddles
 * (radix 4: w^p, w^2p, w^3p as 6 doubles per p; radix 2: none, it is the
 * last stage and has only p = 0). */
typedef struct {
    int64_t n;
    int nstages;
    int radix[MAX_STAGES];
    double *tw[MAX_STAGES];
    double *block; /* owns the twiddles */
} sub_plan;

static bool sub_plan_init(sub_plan *sp, int64_t n)
{
    memset(sp, 0, sizeof *sp);
    sp->n = n;
    int64_t total = 0;
    for (int64_t len = n; len > 1; len /= 4)
        total += len >= 4 ? 6 * (len / 4) : 0;
    if (!(sp->block = ir_alloc((size_t)(total ? total : 1) * sizeof(double))))
        return false;
    double *q = sp->block;
    int64_t s = 1;
    for (int64_t len = n; len > 1; len = n / s) {
        int st = sp->nstages++;
        if (len < 4) {
            sp->radix[st] = 2;
            s *= 2;
            continue;
        }
        sp->radix[st] = 4;
        sp->tw[st] = q;
        for (int64_t p = 0; p < len / 4; p++)
            for (int k = 1; k <= 3; k++) {
                double ang = TWO_PI * (double)(k * p) / (double)len;
                *q++ = cos(ang);
                *q++ = -sin(ang);
            }
        s *= 4;
    }
    return true;
}

/* LANES doubles as one vector (GNU vector extension, lowered to whatever
 * the clone's ISA has): element runs are whole vectors, and loads and
 * stores through this type need no alignment and may alias doubles. */
typedef double vlane __attribute__((vector_size(LANES * sizeof(double)), aligned(sizeof(double)), may_alias));
#define VL(p) (*(const vlane *)(p))
#define VS(p) (*(vlane *)(p))

/* One radix-4 stage: sub-transforms of length len at stride s (in
 * elements of LANES doubles); reads a, writes b. */
RT_SIMD static void stage4(int64_t len, int64_t s, const double *tw, const double *ar, const double *ai, double *br,
                           double *bi)
{
    int64_t q4 = len / 4, w = s * LANES;
    for (int64_t p = 0; p < q4; p++) {
        const double *t = tw + 6 * p;
        double w1r = t[0], w1i = t[1], w2r = t[2], w2i = t[3], w3r = t[4], w3i = t[5];
        const double *a0r = ar + s * p * LANES, *a0i = ai + s * p * LANES;
        const double *a1r = a0r + q4 * w, *a1i = a0i + q4 * w;
        const double *a2r = a1r + q4 * w, *a2i = a1i + q4 * w;
        const double *a3r = a2r + q4 * w, *a3i = a2i + q4 * w;
        double *y0r = br + 4 * p * w, *y0i = bi + 4 * p * w;
        double *y1r = y0r + w, *y1i = y0i + w, *y2r = y1r + w, *y2i = y1i + w, *y3r = y2r + w, *y3i = y2i + w;
        for (int64_t e = 0; e < w; e += LANES) {
            vlane apcr = VL(a0r + e) + VL(a2r + e), apci = VL(a0i + e) + VL(a2i + e);
            vlane amcr = VL(a0r + e) - VL(a2r + e), amci = VL(a0i + e) - VL(a2i + e);
            vlane bpdr = VL(a1r + e) + VL(a3r + e), bpdi = VL(a1i + e) + VL(a3i + e);
            vlane bmdr = VL(a1r + e) - VL(a3r + e), bmdi = VL(a1i + e) - VL(a3i + e);
            /* X1 = (a - c) - j(b - d), X3 = (a - c) + j(b - d) */
            vlane x1r = amcr + bmdi, x1i = amci - bmdr;
            vlane x3r = amcr - bmdi, x3i = amci + bmdr;
            vlane x2r = apcr - bpdr, x2i = apci - bpdi;
            VS(y0r + e) = apcr + bpdr;
            VS(y0i + e) = apci + bpdi;
            VS(y1r + e) = x1r * w1r - x1i * w1i;
            VS(y1i + e) = x1r * w1i + x1i * w1r;
            VS(y2r + e) = x2r * w2r - x2i * w2i;
            VS(y2i + e) = x2r * w2i + x2i * w2r;
            VS(y3r + e) = x3r * w3r - x3i * w3i;
            VS(y3i + e) = x3r * w3i + x3i * w3r;
        }
    }
}

/* The final radix-2 stage (length 2, stride n/2): no twiddles. */
RT_SIMD static void stage2(int64_t w, const double *ar, const double *ai, double *br, double *bi)
{
    for (int64_t e = 0; e < w; e += LANES) {
        vlane a = VL(ar + e), b = VL(ar + e + w), c = VL(ai + e), d = VL(ai + e + w);
        VS(br + e) = a + b;
        VS(bi + e) = c + d;
        VS(br + e + w) = a - b;
        VS(bi + e + w) = c - d;
    }
}

/* Forward transform of the LANES lines in (xr, xi); (yr, yi) is scratch of
 * the same size. Returns true when the result is in y, false in x. */
static bool block_fft(const sub_plan *sp, double *xr, double *xi, double *yr, double *yi)
{
    double *ar = xr, *ai = xi, *br = yr, *bi = yi;
    int64_t s = 1;
    for (int st = 0; st < sp->nstages; st++) {
        if (sp->radix[st] == 4) {
            stage4(sp->n / s, s, sp->tw[st], ar, ai, br, bi);
            s *= 4;
        } else {
            stage2(s * LANES, ar, ai, br, bi);
            s *= 2;
        }
        double *t = ar;
        ar = br, br = t;
        t = ai;
        ai = bi, bi = t;
    }
    return ar != xr;
}

/* ------------------------------------------------------------ the plan */

/* exp(-2 pi i k / base) for k < count*step as lo[k % step] * hi[k / step]:
 * two short tables of exact-angle values. */
typedef struct {
    int64_t step; /* a power of two */
    int shift;
    double *lo, *hi; /* complex pairs */
} twiddle2;

static double *twiddle2_init(twiddle2 *t, int64_t base, int64_t count, int64_t step, double *q)
{
    t->step = step;
    for (t->shift = 0; ((int64_t)1 << t->shift) < step; t->shift++)
        ;
    t->lo = q;
    for (int64_t k = 0; k < step; k++, q += 2) {
        double ang = TWO_PI * (double)k / (double)base;
        q[0] = cos(ang), q[1] = -sin(ang);
    }
    t->hi = q;
    for (int64_t k = 0; k < count; k++, q += 2) {
        double ang = TWO_PI * (double)((k * step) % base) / (double)base;
        q[0] = cos(ang), q[1] = -sin(ang);
    }
    return q;
}

static inline void twiddle2_get(const twiddle2 *t, int64_t k, double *wr, double *wi)
{
    const double *a = t->lo + 2 * (k & (t->step - 1)), *b = t->hi + 2 * (k >> t->shift);
    *wr = a[0] * b[0] - a[1] * b[1];
    *wi = a[0] * b[1] + a[1] * b[0];
}

typedef struct {
    int64_t n;     /* transform length N */
    int64_t m;     /* power-of-two length of the inner transforms */
    bool blue;     /* Bluestein (N not a power of two) */
    bool four;     /* inner transforms as four-step (m > BLOCK_MAX) */
    sub_plan full; /* length m, block path */
    sub_plan s1, s2;
    int64_t m1, m2; /* four-step: m = m1 * m2 */
    twiddle2 tw4;   /* four-step twiddles w_m^(c k1) */
    double *wr, *wi; /* Bluestein chirp exp(-i pi k^2 / N), k < N */
    double *br, *bi; /* transform of the conjugate chirp, times 1/m, length m */
    double *tables;  /* owns tw4, chirp and br/bi */
    size_t bytes;    /* of everything the plan owns */
    bool ready;      /* br/bi computed (always true without Bluestein) */
    /* the plan cache's bookkeeping, guarded by cache_lock */
    bool cached;
    int refs;
    uint64_t used;
} fft_plan;

static void plan_free(fft_plan *p)
{
    if (!p)
        return;
    ir_free(p->full.block);
    ir_free(p->s1.block);
    ir_free(p->s2.block);
    ir_free(p->tables);
    ir_free(p);
}

/* ---------------------------------------------------- line input/output */

/* A complex line of doubles or floats: element i has its real part at
 * base[i * stride] and its imaginary part imoff elements further. Reads
 * past n give 0, writes past n are dropped. Values pass through swap
 * (real <-> imaginary), then a multiplier (mr, mi) unless NULL, then
 * post (swap again) on writes. */
typedef struct {
    char *base;
    rlx_dtype dt;
    int64_t stride, imoff, n;
    const double *mr, *mi;
    bool swap, post;
} line_io;

/* A float vector of LANES, for conversions. */
typedef float vlanef __attribute__((vector_size(LANES * sizeof(float)), aligned(sizeof(float)), may_alias));

#if defined(__GNUC__)
#define RT_INLINE static inline __attribute__((always_inline))
#else
#define RT_INLINE static inline
#endif

/* Loads elements i .. i+cnt-1 into r[t*os], im[t*os] (zeros past n). */
RT_INLINE void io_load_run(const line_io *io, int64_t i, int64_t cnt, double *r, double *im, int64_t os)
{
    int64_t c = i >= io->n ? 0 : io->n - i < cnt ? io->n - i : cnt, st = io->stride, io_ = io->imoff;
    if (cnt == LANES && c == LANES && os == 1 && st == 1) { /* a whole row: vector moves */
        vlane a, b;
        if (io->dt == RLX_F32) {
            const float *sp = (const float *)io->base + i;
            a = __builtin_convertvector(*(const vlanef *)sp, vlane);
            b = __builtin_convertvector(*(const vlanef *)(sp + io_), vlane);
        } else {
            const double *sp = (const double *)io->base + i;
            a = VL(sp), b = VL(sp + io_);
        }
        if (io->swap) {
            vlane t = a;
            a = b, b = t;
        }
        if (io->mr) {
            vlane mr = VL(io->mr + i), mi = VL(io->mi + i), t = a * mr - b * mi;
            b = a * mi + b * mr, a = t;
        }
        VS(r) = a, VS(im) = b;
        return;
    }
    double *pr = io->swap ? im : r, *pi = io->swap ? r : im;
    if (io->dt == RLX_F32) {
        const float *sp = (const float *)io->base + i * st;
        if (st == 1)
            for (int64_t t = 0; t < c; t++)
                pr[t * os] = sp[t], pi[t * os] = sp[t + io_];
        else
            for (int64_t t = 0; t < c; t++)
                pr[t * os] = sp[t * st], pi[t * os] = sp[t * st + io_];
    } else {
        const double *sp = (const double *)io->base + i * st;
        if (st == 1)
            for (int64_t t = 0; t < c; t++)
                pr[t * os] = sp[t], pi[t * os] = sp[t + io_];
        else
            for (int64_t t = 0; t < c; t++)
                pr[t * os] = sp[t * st], pi[t * os] = sp[t * st + io_];
    }
    if (io->mr) {
        const double *mr = io->mr + i, *mi = io->mi + i;
        for (int64_t t = 0; t < c; t++) {
            double a = r[t * os], b = im[t * os];
            r[t * os] = a * mr[t] - b * mi[t];
            im[t * os] = a * mi[t] + b * mr[t];
        }
    }
    for (int64_t t = c; t < cnt; t++)
        r[t * os] = im[t * os] = 0;
}

/* Stores r[t*os], im[t*os] as elements i .. i+cnt-1 (dropping those past
 * n); tmp holds 2*cnt doubles when a multiplier is set. */
RT_INLINE void io_store_run(const line_io *io, int64_t i, int64_t cnt, const double *r, const double *im, int64_t os,
                         double *tmp)
{
    int64_t c = i >= io->n ? 0 : io->n - i < cnt ? io->n - i : cnt, st = io->stride, io_ = io->imoff;
    if (cnt == LANES && c == LANES && os == 1 && st == 1) { /* a whole row: vector moves */
        vlane a = VL(r), b = VL(im);
        if (io->swap) {
            vlane t = a;
            a = b, b = t;
        }
        if (io->mr) {
            vlane mr = VL(io->mr + i), mi = VL(io->mi + i), t = a * mr - b * mi;
            b = a * mi + b * mr, a = t;
        }
        if (io->post) {
            vlane t = a;
            a = b, b = t;
        }
        if (io->dt == RLX_F32) {
            float *dp = (float *)io->base + i;
            *(vlanef *)dp = __builtin_convertvector(a, vlanef);
            *(vlanef *)(dp + io_) = __builtin_convertvector(b, vlanef);
        } else {
            double *dp = (double *)io->base + i;
            VS(dp) = a, VS(dp + io_) = b;
        }
        return;
    }
    if (io->mr) {
        /* (swap(v) * m), then swap again if post: into tmp, contiguous. */
        const double *mr = io->mr + i, *mi = io->mi + i;
        const double *ar = io->swap ? im : r, *ai = io->swap ? r : im;
        double *tr = tmp, *ti = tmp + cnt;
        for (int64_t t = 0; t < c; t++) {
            double a = ar[t * os], b = ai[t * os];
            tr[t] = a * mr[t] - b * mi[t];
            ti[t] = a * mi[t] + b * mr[t];
        }
        r = io->post ? ti : tr, im = io->post ? tr : ti, os = 1;
    } else if (io->swap != io->post) {
        const double *t = r;
        r = im, im = t;
    }
    if (io->dt == RLX_F32) {
        float *dp = (float *)io->base + i * st;
        if (st == 1)
            for (int64_t t = 0; t < c; t++)
                dp[t] = (float)r[t * os], dp[t + io_] = (float)im[t * os];
        else
            for (int64_t t = 0; t < c; t++)
                dp[t * st] = (float)r[t * os], dp[t * st + io_] = (float)im[t * os];
    } else {
        double *dp = (double *)io->base + i * st;
        if (st == 1)
            for (int64_t t = 0; t < c; t++)
                dp[t] = r[t * os], dp[t + io_] = im[t * os];
        else
            for (int64_t t = 0; t < c; t++)
                dp[t * st] = r[t * os], dp[t * st + io_] = im[t * os];
    }
}

/* --------------------------------------------------------- four-step */

/* The four-step's intermediate matrix [m2][m1] has rows MID_PAD doubles
 * longer than m1: a power-of-two row stride would map the rows a column
 * block reads onto a few cache sets. Work items take GROUPS lane blocks of
 * adjacent columns, so each row read or written spans whole cache lines. */
enum { MID_PAD = 8, GROUPS = 2, PREFETCH = 8 };

static int64_t mid_ld(const fft_plan *p) { return p->m1 + MID_PAD; }
static size_t mid_doubles(const fft_plan *p) { return 2 * (size_t)(p->m2 * mid_ld(p)); }

/* Step 1: columns c of A[n1][c] = in[m2 n1 + c] get a length-m1 FFT and
 * the twiddle w_m^(c k1), and land transposed in mid row c. */
typedef struct {
    const fft_plan *p;
    line_io in;
    double *mid;
} step1_task;

/* Step 2: columns k of mid get a length-m2 FFT; element k2 of column k is
 * element k + m1 k2 of the result, which goes to out. */
typedef struct {
    const fft_plan *p;
    double *mid;
    line_io out;
} step2_task;

RT_SIMD static void step1_run(const void *task, int64_t begin, int64_t end, void *scratch)
{
    const step1_task *k = task;
    const fft_plan *p = k->p;
    int64_t m1 = p->m1, m2 = p->m2, ld = mid_ld(p), imo = m2 * ld, sz = m1 * LANES;
    double *buf = scratch; /* per group: x re, x im, y re, y im */
    for (int64_t blk = begin; blk < end; blk++) {
        int64_t c0 = blk * GROUPS * LANES;
        int64_t es = (int64_t)ir_dtype_size(k->in.dt);
        for (int64_t n1 = 0; n1 < m1; n1++) {
            /* Rows are a page or more apart: the hardware prefetcher does
             * not follow, so fetch PREFETCH rows ahead. */
            if (n1 + PREFETCH < m1 && m2 * (n1 + PREFETCH) + c0 < k->in.n) {
                const char *q = k->in.base + (m2 * (n1 + PREFETCH) + c0) * k->in.stride * es;
                __builtin_prefetch(q);
                __builtin_prefetch(q + 64);
                __builtin_prefetch(q + k->in.imoff * es);
                __builtin_prefetch(q + k->in.imoff * es + 64);
            }
            for (int g = 0; g < GROUPS; g++) {
                double *xr = buf + 4 * g * sz;
                io_load_run(&k->in, m2 * n1 + c0 + g * LANES, LANES, xr + n1 * LANES, xr + sz + n1 * LANES, 1);
            }
        }
        for (int g = 0; g < GROUPS; g++) {
            double *xr = buf + 4 * g * sz, *xi = xr + sz, *yr = xi + sz, *yi = yr + sz;
            bool in_y = block_fft(&p->s1, xr, xi, yr, yi);
            const double *rr = in_y ? yr : xr, *ri = in_y ? yi : xi;
            for (int b = 0; b < LANES; b++) {
                int64_t c = c0 + g * LANES + b;
                double *orr = k->mid + c * ld, *ori = orr + imo;
                for (int64_t k1 = 0; k1 < m1; k1++)
                    orr[k1] = rr[k1 * LANES + b], ori[k1] = ri[k1 * LANES + b];
                /* w^(c k1) for k1 = 8j + t: w^(c t) (a vector) times w^(8 c j). */
                double wr[LANES], wi[LANES];
                for (int t = 0; t < LANES; t++)
                    twiddle2_get(&p->tw4, c * t, &wr[t], &wi[t]);
                vlane vr = VL(wr), vi = VL(wi);
                for (int64_t k1 = 0; k1 < m1; k1 += LANES) {
                    double fr, fi;
                    twiddle2_get(&p->tw4, c * k1, &fr, &fi);
                    vlane tr = vr * fr - vi * fi, ti = vr * fi + vi * fr;
                    vlane a = VL(orr + k1), d = VL(ori + k1);
                    VS(orr + k1) = a * tr - d * ti;
                    VS(ori + k1) = a * ti + d * tr;
                }
            }
        }
    }
}

RT_SIMD static void step2_run(const void *task, int64_t begin, int64_t end, void *scratch)
{
    const step2_task *k = task;
    const fft_plan *p = k->p;
    int64_t m1 = p->m1, m2 = p->m2, ld = mid_ld(p), imo = m2 * ld, sz = m2 * LANES;
    double *buf = scratch;
    double tmp[2 * LANES];
    for (int64_t blk = begin; blk < end; blk++) {
        int64_t k0 = blk * GROUPS * LANES;
        for (int64_t n2 = 0; n2 < m2; n2++)
            for (int g = 0; g < GROUPS; g++) {
                double *xr = buf + 4 * g * sz;
                if (n2 + PREFETCH < m2) {
                    __builtin_prefetch(k->mid + (n2 + PREFETCH) * ld + k0 + g * LANES);
                    __builtin_prefetch(k->mid + imo + (n2 + PREFETCH) * ld + k0 + g * LANES);
                }
                memcpy(xr + n2 * LANES, k->mid + n2 * ld + k0 + g * LANES, LANES * sizeof *xr);
                memcpy(xr + sz + n2 * LANES, k->mid + imo + n2 * ld + k0 + g * LANES, LANES * sizeof *xr);
            }
        const double *rr[GROUPS], *ri[GROUPS];
        for (int g = 0; g < GROUPS; g++) {
            double *xr = buf + 4 * g * sz, *xi = xr + sz, *yr = xi + sz, *yi = yr + sz;
            bool in_y = block_fft(&p->s2, xr, xi, yr, yi);
            rr[g] = in_y ? yr : xr, ri[g] = in_y ? yi : xi;
        }
        for (int64_t k2 = 0; k2 < m2; k2++)
            for (int g = 0; g < GROUPS; g++)
                io_store_run(&k->out, k0 + g * LANES + m1 * k2, LANES, rr[g] + k2 * LANES, ri[g] + k2 * LANES, 1,
                             tmp);
    }
}

/* Scratch of one four-step work item. */
static size_t four_slot_bytes(const fft_plan *p)
{
    int64_t mx = p->m1 > p->m2 ? p->m1 : p->m2;
    return 4 * GROUPS * (size_t)mx * LANES * sizeof(double);
}

/* One length-m transform in -> mid (mid_doubles) -> out, on the pool. */
static void four_step(const fft_plan *p, const line_io *in, double *mid, const line_io *out, void *scratch,
                      size_t slot_bytes, int nslots)
{
    step1_task a = {p, *in, mid};
    rt_par_run(step1_run, &a, p->m2 / (GROUPS * LANES), 1, scratch, slot_bytes, nslots);
    step2_task b = {p, mid, *out};
    rt_par_run(step2_run, &b, p->m1 / (GROUPS * LANES), 1, scratch, slot_bytes, nslots);
}

/* ------------------------------------------------------------- planning */

static bool plan_init(fft_plan *p, int64_t n)
{
    memset(p, 0, sizeof *p);
    p->n = n;
    p->blue = n > 1 && !is_pow2(n);
    int64_t m = 1;
    while (m < (p->blue ? 2 * n - 1 : n))
        m <<= 1;
    p->m = m;
    p->four = m > BLOCK_MAX;
    size_t tables = 0;
    if (p->four) {
        int lg = 0;
        while (((int64_t)1 << lg) < m)
            lg++;
        p->m1 = (int64_t)1 << (lg / 2);
        p->m2 = m / p->m1;
        tables += 2 * (size_t)(p->m1 + p->m2);
        if (!sub_plan_init(&p->s1, p->m1) || !sub_plan_init(&p->s2, p->m2))
            return false;
    } else if (!sub_plan_init(&p->full, m)) {
        return false;
    }
    int64_t cstep = 1; /* the chirp's tables: base 2n */
    while (cstep * cstep < 2 * n)
        cstep <<= 1;
    if (p->blue)
        tables += 2 * (size_t)n + 2 * (size_t)m + 2 * (size_t)(cstep + 2 * n / cstep + 1);
    if (tables && !(p->tables = ir_alloc(tables * sizeof(double))))
        return false;
    p->bytes = tables * sizeof(double) + 8 * (size_t)(p->four ? p->m1 + p->m2 : m) * sizeof(double);
    p->ready = !p->blue;
    double *q = p->tables;
    if (p->four)
        q = twiddle2_init(&p->tw4, m, p->m2, p->m1, q);
    if (!p->blue)
        return true;
    /* w_k = exp(-i pi k^2 / n) = exp(-2 pi i (k^2 mod 2n) / 2n): k^2 mod 2n
     * keeps the angle exact; the chirp has period 2n in k^2. */
    twiddle2 ct;
    p->wr = q, q += n;
    p->wi = q, q += n;
    p->br = q, q += m;
    p->bi = q, q += m;
    twiddle2_init(&ct, 2 * n, 2 * n / cstep + 1, cstep, q);
    for (int64_t k = 0; k < n; k++)
        twiddle2_get(&ct, (int64_t)((uint64_t)k * (uint64_t)k % (2 * (uint64_t)n)), &p->wr[k], &p->wi[k]);
    return true;
}

/* The Bluestein kernel: conj(w_k) at k and at -k (mod m), transformed,
 * times 1/m (exact: m is a power of two). Four-step only: u is 2m doubles
 * of scratch, mid the intermediate. */
static void plan_bluestein_kernel(fft_plan *p, double *mid, double *u, void *scratch, size_t slot_bytes, int nslots)
{
    int64_t n = p->n, m = p->m;
    double *br = p->four ? u : p->br, *bi = p->four ? u + m : p->bi;
    memset(br, 0, (size_t)m * sizeof *br);
    memset(bi, 0, (size_t)m * sizeof *bi);
    for (int64_t k = 0; k < n; k++) {
        br[k] = p->wr[k];
        bi[k] = -p->wi[k];
        if (k) {
            br[m - k] = p->wr[k];
            bi[m - k] = -p->wi[k];
        }
    }
    if (p->four) {
        line_io in = {(char *)u, RLX_F64, 1, m, m, NULL, NULL, false, false};
        line_io out = {(char *)p->br, RLX_F64, 1, p->bi - p->br, m, NULL, NULL, false, false};
        four_step(p, &in, mid, &out, scratch, slot_bytes, nslots);
    } else {
        /* One lane of a block: spread, transform, collect. */
        double *xr = scratch, *xi = xr + m * LANES, *yr = xi + m * LANES, *yi = yr + m * LANES;
        memset(xr, 0, 2 * (size_t)m * LANES * sizeof *xr);
        for (int64_t k = 0; k < m; k++)
            xr[k * LANES] = br[k], xi[k * LANES] = bi[k];
        bool in_y = block_fft(&p->full, xr, xi, yr, yi);
        const double *rr = in_y ? yr : xr, *ri = in_y ? yi : xi;
        for (int64_t k = 0; k < m; k++)
            p->br[k] = rr[k * LANES], p->bi[k] = ri[k * LANES];
    }
    double inv_m = 1.0 / (double)m;
    for (int64_t k = 0; k < m; k++)
        p->br[k] *= inv_m, p->bi[k] *= inv_m;
    p->ready = true;
}

/* ------------------------------------------------------- the plan cache */

/* Plans of recent lengths, kept so that repeated transforms of one length
 * skip the twiddles and, for Bluestein, a whole transform of the kernel. A
 * cached plan is read-only and may serve several realizations at once;
 * refs counts them. At most CACHE_PLANS plans of CACHE_BYTES together; the
 * least recently used plan nobody holds makes room. Eight slots scanned
 * in place, not an ir_table: the LRU choice scans them all anyway. */
enum { CACHE_PLANS = 8 };
#define CACHE_BYTES ((size_t)96 << 20)

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static fft_plan *cache[CACHE_PLANS];
static uint64_t cache_clock;

/* A plan of length n: a cached one (ready) or a new one the caller
 * completes; NULL when out of memory. */
static fft_plan *plan_get(int64_t n)
{
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < CACHE_PLANS; i++)
        if (cache[i] && cache[i]->n == n) {
            fft_plan *p = cache[i];
            p->refs++;
            p->used = ++cache_clock;
            pthread_mutex_unlock(&cache_lock);
            return p;
        }
    pthread_mutex_unlock(&cache_lock);
    fft_plan *p = ir_alloc(sizeof *p);
    if (p && !plan_init(p, n)) {
        plan_free(p);
        p = NULL;
    }
    return p;
}

/* Releases a plan from plan_get: a new, ready plan joins the cache if
 * room can be made, else it is freed. */
static void plan_put(fft_plan *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&cache_lock);
    if (p->cached) {
        p->refs--;
        pthread_mutex_unlock(&cache_lock);
        return;
    }
    if (p->ready && p->bytes <= CACHE_BYTES) {
        for (;;) {
            size_t total = p->bytes;
            int free_slot = -1, lru = -1;
            for (int i = 0; i < CACHE_PLANS; i++) {
                if (!cache[i]) {
                    free_slot = i;
                    continue;
                }
                total += cache[i]->bytes;
                if (cache[i]->refs == 0 && (lru < 0 || cache[i]->used < cache[lru]->used))
                    lru = i;
            }
            if (free_slot >= 0 && total <= CACHE_BYTES) {
                p->cached = true;
                p->refs = 0;
                p->used = ++cache_clock;
                cache[free_slot] = p;
                pthread_mutex_unlock(&cache_lock);
                return;
            }
            if (lru < 0)
                break; /* every cached plan is in use: do not cache this one */
            plan_free(cache[lru]);
            cache[lru] = NULL;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    plan_free(p);
}

/* Scratch of at least RT_BUFPOOL_MIN bytes comes from the recycling buffer
 * pool (huge pages, and no page faults when a transform repeats); smaller
 * from the heap. */
typedef struct {
    ir_storage *st;
    void *p;
} work_buf;

static void *work_get(work_buf *b, size_t bytes)
{
    b->st = NULL;
    if (bytes >= RT_BUFPOOL_MIN) {
        b->st = rt_bufpool_storage(bytes);
        b->p = b->st ? b->st->data : NULL;
    } else {
        b->p = ir_alloc(bytes);
    }
    return b->p;
}

static void work_put(work_buf *b)
{
    if (b->st)
        ir_storage_release(b->st);
    else
        ir_free(b->p);
    b->st = NULL, b->p = NULL;
}

/* ------------------------------------------------------------ the node */

typedef struct {
    const fft_plan *p;
    int64_t lines;
    char *src; /* only read */
    char *dst;
    rlx_dtype sdt, ddt;
    int64_t is, os;  /* strides along the axis */
    int64_t soff;    /* source view offset */
    const int64_t *sstr, *dstr;
    int64_t lshape[IR_MAX_RANK];
    int rank;
    bool inverse;
} fft_job;

/* Element offsets (source, destination) of line li. */
static void line_offsets(const fft_job *j, int64_t li, int64_t *so, int64_t *dof)
{
    int64_t s = j->soff, d = 0;
    for (int k = j->rank - 1; k >= 0; k--) {
        int64_t len = j->lshape[k], i = len > 1 ? li % len : 0;
        li = len > 1 ? li / len : li;
        s += i * j->sstr[k];
        d += i * j->dstr[k];
    }
    *so = s, *dof = d;
}

/* Multiplies rows 0..n-1 of a block by (wr[k], wi[k]). */
RT_SIMD static void block_mul(int64_t n, const double *wr, const double *wi, double *r, double *im)
{
    for (int64_t k = 0; k < n; k++) {
        vlane a = VL(r + k * LANES), e = VL(im + k * LANES);
        VS(r + k * LANES) = a * wr[k] - e * wi[k];
        VS(im + k * LANES) = a * wi[k] + e * wr[k];
    }
}

/* Block path: items are groups of LANES lines. Lines whose offsets are
 * consecutive (the axis is not the last and the last dim is contiguous)
 * move as rows of LANES adjacent elements; others one lane at a time. */
RT_SIMD static void block_run(const void *task, int64_t begin, int64_t end, void *scratch)
{
    const fft_job *j = task;
    const fft_plan *p = j->p;
    int64_t n = p->n, m = p->m, sz = m * LANES;
    int64_t ses = (int64_t)ir_dtype_size(j->sdt), des = (int64_t)ir_dtype_size(j->ddt);
    double *xr = scratch, *xi = xr + sz, *yr = xi + sz, *yi = yr + sz;
    for (int64_t g = begin; g < end; g++) {
        int64_t so[LANES], dof[LANES];
        int nl = 0;
        bool srow = true, drow = true;
        for (; nl < LANES && g * LANES + nl < j->lines; nl++) {
            line_offsets(j, g * LANES + nl, &so[nl], &dof[nl]);
            srow = srow && so[nl] == so[0] + nl;
            drow = drow && dof[nl] == dof[0] + nl;
        }
        srow = srow && nl == LANES;
        drow = drow && nl == LANES;
        if (srow) {
            for (int64_t k = 0; k < n; k++) {
                line_io row = {j->src + (so[0] + k * j->is) * ses, j->sdt, 1, n * j->is, LANES, NULL, NULL,
                               j->inverse, false};
                io_load_run(&row, 0, LANES, xr + k * LANES, xi + k * LANES, 1);
            }
        } else {
            for (int b = 0; b < LANES; b++) {
                /* Lanes past the last line transform zeros and are not stored. */
                line_io in = {j->src + (b < nl ? so[b] : 0) * ses, j->sdt, j->is, n * j->is, b < nl ? n : 0,
                              NULL, NULL, j->inverse, false};
                io_load_run(&in, 0, n, xr + b, xi + b, LANES);
            }
        }
        if (p->blue) {
            memset(xr + n * LANES, 0, (size_t)(m - n) * LANES * sizeof *xr);
            memset(xi + n * LANES, 0, (size_t)(m - n) * LANES * sizeof *xi);
            block_mul(n, p->wr, p->wi, xr, xi);
        }
        bool in_y = block_fft(&p->full, xr, xi, yr, yi);
        double *rr = in_y ? yr : xr, *ri = in_y ? yi : xi;
        if (p->blue) {
            block_mul(m, p->br, p->bi, rr, ri);
            /* The convolution's inverse transform: swapped parts. */
            double *sr = in_y ? xr : yr, *si = in_y ? xi : yi;
            if (block_fft(&p->full, ri, rr, si, sr))
                rr = sr, ri = si;
            block_mul(n, p->wr, p->wi, rr, ri);
        }
        if (drow) {
            for (int64_t k = 0; k < n; k++) {
                line_io row = {j->dst + (dof[0] + k * j->os) * des, j->ddt, 1, n * j->os, LANES, NULL, NULL,
                               false, j->inverse};
                io_store_run(&row, 0, LANES, rr + k * LANES, ri + k * LANES, 1, NULL);
            }
        } else {
            for (int b = 0; b < nl; b++) {
                line_io out = {j->dst + dof[b] * des, j->ddt, j->os, n * j->os, n, NULL, NULL, false, j->inverse};
                io_store_run(&out, 0, n, rr + b, ri + b, LANES, NULL);
            }
        }
    }
}

rlx_status rt_eval_fft(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    int axis = n->attr.fft.axis;
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    int64_t numel = ir_node_numel(n), len = n->shape[axis];
    if (numel == 0)
        return RLX_OK;
    int64_t half = len / 2, lines = numel / len;
    work_buf wb = {0}, sb = {0};
    double *work;
    void *scratch;
    fft_plan *pp = plan_get(half);
    if (!pp)
        goto nomem;
    const fft_plan *pl = pp; /* may be shared with other realizations: read only */
    fft_job j = {.p = pp, .lines = lines, .src = in[0].st->data, .dst = out->st->data, .sdt = n->src[0]->dtype,
                 .ddt = n->dtype, .is = in[0].strides[axis], .os = out->strides[axis], .soff = in[0].off,
                 .sstr = in[0].strides, .dstr = out->strides, .rank = n->rank, .inverse = n->attr.fft.inverse != 0};
    memcpy(j.lshape, n->shape, (size_t)n->rank * sizeof *j.lshape);
    j.lshape[axis] = 1;
    size_t es = ir_dtype_size(n->dtype);
    if (!pl->four) {
        int64_t groups = (lines + LANES - 1) / LANES;
        int64_t chunk = 1 + 16384 / (pl->m * LANES); /* a chunk of at least ~16K butterflies */
        int nslots = rt_par_slots(ctx, groups, chunk);
        size_t slot = 4 * (size_t)pl->m * LANES * sizeof(double);
        if (!(scratch = work_get(&sb, slot * (size_t)nslots)))
            goto nomem;
        if (!pp->ready)
            plan_bluestein_kernel(pp, NULL, NULL, scratch, slot, 1);
        rt_par_run(block_run, &j, groups, chunk, scratch, slot, nslots);
    } else {
        size_t slot = four_slot_bytes(pl);
        int nslots = rt_par_slots(ctx, pl->m1 / (GROUPS * LANES), 1);
        if (!(scratch = work_get(&sb, slot * (size_t)nslots)) ||
            !(work = work_get(&wb, (mid_doubles(pl) + (pl->blue ? 2 * (size_t)pl->m : 0)) * sizeof(double))))
            goto nomem;
        /* mid: the four-step's intermediate; t: Bluestein's spectrum. */
        double *mid = work, *t = work + mid_doubles(pl);
        if (!pp->ready)
            plan_bluestein_kernel(pp, mid, t, scratch, slot, nslots);
        for (int64_t li = 0; li < lines; li++) {
            int64_t so, dof;
            line_offsets(&j, li, &so, &dof);
            line_io src = {j.src + so * (int64_t)ir_dtype_size(j.sdt), j.sdt, j.is, half * j.is, half,
                           pl->blue ? pl->wr : NULL, pl->blue ? pl->wi : NULL, j.inverse, false};
            line_io dst = {j.dst + dof * (int64_t)es, j.ddt, j.os, half * j.os, half, NULL, NULL, j.inverse, false};
            if (!pl->blue) {
                /* The inverse swaps on the way in and out. */
                dst.swap = false, dst.post = j.inverse;
                four_step(pp, &src, mid, &dst, scratch, slot, nslots);
                continue;
            }
            /* Forward: chirp-multiplied line -> t; times the kernel in place. */
            line_io tin = {(char *)t, RLX_F64, 1, pl->m, pl->m, pl->br, pl->bi, false, false};
            four_step(pp, &src, mid, &tin, scratch, slot, nslots);
            /* Inverse with swapped parts: t -> mid -> the line, times the chirp. */
            line_io uin = {(char *)t, RLX_F64, 1, pl->m, pl->m, NULL, NULL, true, false};
            line_io fin = {dst.base, j.ddt, j.os, half * j.os, half, pl->wr, pl->wi, true, j.inverse};
            four_step(pp, &uin, mid, &fin, scratch, slot, nslots);
        }
    }
    plan_put(pp);
    work_put(&sb);
    work_put(&wb);
    return RLX_OK;
nomem:
    plan_put(pp);
    work_put(&sb);
    work_put(&wb);
    return rt_fail(ctx, RLX_E_NOMEM, "out of memory planning an fft of length %lld", (long long)half);
}
