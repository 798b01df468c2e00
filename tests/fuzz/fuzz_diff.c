/*
 * fuzz_diff.c — the differential fuzzer: decodes the input into a random
 * valid graph (elementwise math, comparisons, casts, reductions, views,
 * where, scans, cat, gather, matmul; f32, f64, i32, i64 and bool, and
 * complex64 with the ops that take it: add, sub, mul, div, neg, abs, conj,
 * real, imag, exp, sum, mean, matmul, fft_c, the views; edge values such
 * as NaN, infinities, signed zeros, INT_MIN), builds it twice
 * over two copies of the same leaf data, realizes one copy with the
 * reference evaluator and the other with the JIT, and compares.
 *
 * Two copies: hash-consing would give the same nodes for the same
 * expression over the same buffers, so the JIT copy is built over its own
 * from_data buffers and is computed fresh.
 *
 * Comparison (as tests/test_jit.c): shapes and dtypes equal; values built
 * only from exact operations (integer arithmetic, +-*, /, sqrt, min/max,
 * comparisons, casts, views, min/max reductions) must be bitwise equal up
 * to the sign of zero; other float values within rtol (3e-4 when an
 * inexact f32 step is behind the value, else 1e-9) of the reference plus
 * rtol times the largest magnitude any value of the graph reaches; NaN where the reference has NaN; two values
 * beyond 1e30 (f32) or 1e300 (f64) of one sign are equal. A c64 value is
 * compared as its real and imaginary parts, each as an f32 value.
 */
#include "fuzz_common.h"

enum { MAXV = 40, MAXLEAF = 4 };

typedef struct {
    rlx_tensor *t;
    bool exact;
    double rtol; /* of the least precise inexact step behind the value */
} val;

typedef struct {
    val v[MAXV];
    int n;
} graph;

typedef struct {
    int dt, rank, mode;
    int64_t shape[RLX_MAX_RANK];
    uint64_t seed;
} leaf_spec;

static bool is_float(rlx_dtype dt) { return dt == RLX_F32 || dt == RLX_F64; }
/* f32 parts: inexact arithmetic as f32's */
static bool is_cx(rlx_dtype dt) { return dt == RLX_C64 || dt == RLX_C128; }
static bool is_inexact_dt(rlx_dtype dt) { return is_float(dt) || is_cx(dt); }

static uint64_t next_rand(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ull;
    uint64_t x = *s;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The values of a leaf, from its mode and seed (identical for both copies). */
static double leaf_value(const leaf_spec *l, uint64_t *s)
{
    static const double edge[] = {0.0, -0.0, 1.0, -1.0, 0.5, NAN, INFINITY, -INFINITY, 1e30, -1e30,
                                  1e-40, 2147483647.0, -2147483648.0, 3.5, -2.5, 1e-300, 65504.0, 88.8,
                                  -104.0, 710.0};
    uint64_t r = next_rand(s);
    switch (l->mode) {
    case 0: return (double)((int64_t)(r % 33) - 16) / 4; /* exact quarters in [-4, 4] */
    case 1: return ((double)(r >> 11) * 0x1p-53 - 0.5) * 6; /* uniform [-3, 3) */
    case 2: return edge[r % (sizeof edge / sizeof *edge)];
    default: return (double)(int64_t)(r % 2001) - 1000;
    }
}

static rlx_tensor *make_leaf(const leaf_spec *l)
{
    int64_t n = 1;
    for (int i = 0; i < l->rank; i++)
        n *= l->shape[i];
    unsigned char *buf = malloc((size_t)(n ? n : 1) * ir_dtype_size((rlx_dtype)l->dt));
    uint64_t s = l->seed;
    for (int64_t i = 0; i < n; i++) {
        double v = leaf_value(l, &s);
        switch (l->dt) {
        case RLX_C64: /* (v, the next value): both parts from the leaf's mode */
            ((float *)buf)[2 * i] = (float)v;
            ((float *)buf)[2 * i + 1] = (float)leaf_value(l, &s);
            break;
        case RLX_C128:
            ((double *)buf)[2 * i] = v;
            ((double *)buf)[2 * i + 1] = leaf_value(l, &s);
            break;
        case RLX_BOOL: buf[i] = v > 0; break;
        case RLX_I32: ((int32_t *)buf)[i] = v != v ? 0 : v >= 2147483647.0 ? INT32_MAX : v <= -2147483648.0 ? INT32_MIN : (int32_t)v; break;
        case RLX_I64: ((int64_t *)buf)[i] = v != v ? 0 : v >= 9e18 ? INT64_MAX : v <= -9e18 ? INT64_MIN : (int64_t)v; break;
        case RLX_F32: ((float *)buf)[i] = (float)v; break;
        default: ((double *)buf)[i] = v; break;
        }
    }
    rlx_tensor *t = rlx_from_data((rlx_dtype)l->dt, l->rank, l->shape, buf);
    free(buf);
    return t;
}

static double dtype_rtol(rlx_dtype dt) { return dt == RLX_F32 || dt == RLX_C64 ? 3e-4 : 1e-9; } /* c128: f64's */

static void push(graph *g, rlx_tensor *t, bool exact, double rtol)
{
    if (t && g->n < MAXV)
        g->v[g->n++] = (val){t, exact, rtol};
}

static int shape_of(rlx_tensor *t, int64_t *s) { return rlx_shape(t, s, RLX_MAX_RANK); }

static const val *pick(fz_reader *r, const graph *g) { return &g->v[fz_u8(r) % g->n]; }

/* One step: appends a new value built from existing ones. Decisions use
 * only the bytes and the shapes and dtypes of values, never their data,
 * so both copies make the same decisions. */
static void step(fz_reader *r, graph *g)
{
    const val *a = pick(r, g), *b = pick(r, g), *c0 = a;
    rlx_tensor *x = a->t;
    rlx_dtype dt = rlx_dtype_of(x);
    int64_t s[RLX_MAX_RANK];
    int rank = shape_of(x, s);
    int ax = rank ? fz_u8(r) % rank : 0;
    bool ex = a->exact;
    uint8_t k = fz_u8(r);
    rlx_tensor *y = NULL;
    switch (k % 13) {
    case 12: { /* complex64/128: built from real values, or complex ops on a complex value */
        bool cx = is_cx(dt);
        switch (fz_u8(r) % 10) {
        case 0: y = rlx_complex(x, b->t); ex = ex && b->exact; break; /* refuses c64 parts */
        case 1: y = cx ? rlx_conj(x) : rlx_cast(x, dt == RLX_F64 ? RLX_C128 : RLX_C64); break;
        case 2: y = rlx_real(x); break;
        case 3: y = rlx_imag(x); break;
        case 4: y = cx ? rlx_exp(x) : NULL; ex = false; break;
        case 5: y = cx ? rlx_abs(x) : NULL; ex = false; break;
        case 6: { /* mul, div with a complex or real operand: inexact */
            rlx_tensor *bt = b->t;
            if (fz_u8(r) & 1) {
                y = rlx_mul(x, bt);
            } else {
                if (!b->exact || is_cx(rlx_dtype_of(bt)))
                    bt = rlx_add_s(rlx_abs(bt), 0.25); /* an inexact divisor near 0 (abs of c64 is f32) */
                y = rlx_div(x, bt);
            }
            ex = false;
            break;
        }
        case 7:
            if (rank) {
                y = rlx_fft_c(x, ax, fz_u8(r) & 1);
                ex = false;
            }
            break;
        case 8: {
            int axes[RLX_MAX_RANK], na = 0;
            uint8_t m = fz_u8(r);
            for (int i = 0; i < rank; i++)
                if (m >> i & 1)
                    axes[na++] = i;
            y = (m & 0x80) ? rlx_mean(x, axes, na, m & 0x40) : rlx_sum(x, axes, na, m & 0x40);
            ex = false;
            break;
        }
        default: /* add, sub, neg: exact parts (one rounding of the exact sum) */
            switch (fz_u8(r) % 3) {
            case 0: y = rlx_add(x, b->t); ex = ex && b->exact; break;
            case 1: y = rlx_sub(x, b->t); ex = ex && b->exact; break;
            default: y = rlx_neg(x); break;
            }
            break;
        }
        break;
    }
    case 0: { /* exact unary */
        switch (fz_u8(r) % 10) {
        case 0: y = rlx_neg(x); break;
        case 1: y = rlx_abs(x); break;
        case 2: y = rlx_relu(x); break;
        case 3: y = ex ? rlx_sign(x) : rlx_abs(x); break;
        case 4: y = ex ? rlx_round(x) : rlx_neg(x); break;
        case 5: y = ex ? rlx_floor(x) : rlx_abs(x); break;
        case 6: y = ex ? rlx_ceil(x) : rlx_neg(x); break;
        case 7: y = ex ? rlx_logical_not(x) : rlx_relu(x); break;
        case 8: y = rlx_sqrt(ex ? x : rlx_abs(x)); break; /* an inexact -0 vs +1e-9 would give NaN vs a number */
        default: y = rlx_contiguous(x); break;
        }
        break;
    }
    case 1: { /* transcendental unary */
        static rlx_tensor *(*const fns[])(rlx_tensor *) = {
            rlx_exp, rlx_log, rlx_tanh, rlx_sigmoid, rlx_sin, rlx_cos, rlx_atan, rlx_erf, rlx_rsqrt,
            rlx_recip, rlx_gelu, rlx_gelu_tanh, rlx_silu, rlx_softplus, rlx_elu, rlx_mish, rlx_softsign,
            rlx_log_sigmoid, rlx_hard_swish, rlx_hard_sigmoid, rlx_tan};
        int f = fz_u8(r) % (sizeof fns / sizeof *fns);
        if (!ex && f == 20)
            f = 2; /* tan of an inexact value near a pole */
        if (!ex && (f == 1 || f == 8 || f == 9))
            x = rlx_add_s(rlx_abs(x), 0.25); /* log, rsqrt, recip: keep inexact values off 0 */
        y = fns[f](x);
        ex = false;
        break;
    }
    case 2:
    case 3: { /* binary, broadcasting when the shapes allow */
        static rlx_tensor *(*const fns[])(rlx_tensor *, rlx_tensor *) = {
            rlx_add, rlx_sub, rlx_mul, rlx_div, rlx_maximum, rlx_minimum, rlx_eq, rlx_ne, rlx_lt, rlx_le,
            rlx_gt, rlx_ge, rlx_logical_and, rlx_logical_or, rlx_rem, rlx_pow, rlx_atan2};
        int f = fz_u8(r) % (sizeof fns / sizeof *fns);
        bool both = a->exact && b->exact;
        if (f >= 6 && !both)
            f = f % 6; /* comparisons, rem, pow and atan2 of inexact values jump on a rounding */
        rlx_tensor *bt = b->t;
        if (f == 3 && !b->exact)
            bt = rlx_add_s(rlx_abs(bt), 0.25); /* an inexact divisor near 0 */
        y = fns[f](x, bt);
        ex = both && f < 14; /* rem, pow and atan2 of floats are not exact (ints are compared exactly anyway) */
        if (y && is_cx(rlx_dtype_of(y)) && (f == 2 || f == 3))
            ex = false; /* complex products round their sums of products */
        break;
    }
    case 4: { /* binary with a scalar */
        static rlx_tensor *(*const fns[])(rlx_tensor *, double) = {
            rlx_add_s, rlx_sub_s, rlx_mul_s, rlx_div_s, rlx_maximum_s, rlx_minimum_s, rlx_rsub_s,
            rlx_rdiv_s, rlx_clamp_min, rlx_clamp_max, rlx_eq_s, rlx_lt_s, rlx_ge_s, rlx_rem_s, rlx_pow_s};
        int f = fz_u8(r) % (sizeof fns / sizeof *fns);
        if (f >= 10 && !ex)
            f -= 10; /* comparisons and rem of inexact values jump on a rounding */
        if (f == 7 && !ex)
            f = 6; /* s / x with an inexact x near 0 */
        y = fns[f](x, fz_double(r));
        ex = ex && f < 13 && !(is_cx(dt) && f >= 2);
        break;
    }
    case 5: { /* reductions */
        int axes[RLX_MAX_RANK], na = 0;
        uint8_t m = fz_u8(r);
        for (int i = 0; i < rank; i++)
            if (m >> i & 1)
                axes[na++] = i;
        bool keep = fz_u8(r) & 1;
        switch (fz_u8(r) % 9) {
        case 0: y = rlx_max(x, axes, na, keep); break;
        case 1: y = rlx_min(x, axes, na, keep); break;
        case 2: y = rlx_sum(x, axes, na, keep); ex = ex && !is_inexact_dt(dt); break;
        case 3: y = rlx_prod(x, axes, na, keep); ex = ex && !is_float(dt); break;
        case 4: y = rlx_mean(x, axes, na, keep); ex = false; break;
        case 5: y = rlx_var(x, axes, na, keep); ex = false; break;
        case 6: y = rlx_norm(x, axes, na, keep); ex = false; break;
        case 7:
            if (ex && rank)
                y = (m & 1) ? rlx_argmax(x, ax, keep) : rlx_argmin(x, ax, keep);
            break;
        default:
            if (rank) {
                y = (m & 1) ? rlx_logsumexp(x, ax, keep) : rlx_softmax(x, ax);
                ex = false;
            }
            break;
        }
        break;
    }
    case 6: { /* views */
        switch (fz_u8(r) % 12) {
        case 0: {
            int perm[RLX_MAX_RANK];
            for (int i = 0; i < rank; i++)
                perm[i] = i;
            for (int i = rank - 1; i > 0; i--) {
                int j = fz_u8(r) % (i + 1), t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
            y = rlx_transpose(x, rank, perm);
            break;
        }
        case 1: {
            int64_t st = fz_i64(r) % 9, sp = fz_u8(r) < 80 ? RLX_END : fz_i64(r) % 9, stp = fz_u8(r) % 7 - 3;
            if (fz_u8(r) < 40)
                st = RLX_END;
            y = rank ? rlx_slice(x, ax, st, sp, stp ? stp : 1) : NULL;
            break;
        }
        case 2: y = rank ? rlx_flip(x, ax) : NULL; break;
        case 3: y = rank ? rlx_pad(x, ax, fz_u8(r) % 4, fz_u8(r) % 4, fz_double(r)) : NULL; break;
        case 4: {
            int64_t t[RLX_MAX_RANK];
            if (rank >= RLX_MAX_RANK - 1)
                break;
            t[0] = fz_u8(r) % 4;
            memcpy(t + 1, s, (size_t)rank * sizeof *s);
            for (int i = 1; i <= rank; i++)
                if (t[i] == 1 && (fz_u8(r) & 1))
                    t[i] = 1 + fz_u8(r) % 4; /* expand a unit axis */
            y = rlx_broadcast_to(x, rank + 1, t);
            break;
        }
        case 5: y = rlx_reshape(rlx_t(x), 1, (int64_t[]){-1}); break;
        case 6:
            if (rank >= 2) {
                int64_t t[RLX_MAX_RANK];
                t[0] = s[0] * s[1];
                memcpy(t + 1, s + 2, (size_t)(rank - 2) * sizeof *s);
                y = rlx_reshape(x, rank - 1, t);
            } else {
                y = rlx_unsqueeze(x, fz_u8(r) % (rank + 1));
            }
            break;
        case 7:
            if (rank) {
                int64_t st = s[ax] ? fz_u8(r) % s[ax] : 0;
                y = rlx_narrow(x, ax, st, fz_u8(r) % (s[ax] - st + 1));
            }
            break;
        case 8: y = rank && s[ax] ? rlx_select(x, ax, fz_i64(r) % s[ax]) : NULL; break;
        case 9: y = rank ? rlx_roll(x, ax, fz_i64(r)) : NULL; break;
        case 10: y = rank ? rlx_tile(x, ax, fz_u8(r) % 3) : NULL; break;
        default: y = rank && s[ax] == 1 ? rlx_squeeze(x, ax) : rlx_unsqueeze(x, 0); break;
        }
        break;
    }
    case 7: { /* casts */
        rlx_dtype to = (rlx_dtype)(fz_u8(r) % 5);
        if (!ex && !is_float(to))
            to = is_float(dt) ? dt : RLX_F64; /* truncating an inexact value may flip */
        y = rlx_cast(x, to);
        break;
    }
    case 8: { /* where */
        const val *c = pick(r, g);
        c0 = c;
        if (c->exact) {
            y = rlx_where(rlx_dtype_of(c->t) == RLX_BOOL ? c->t : rlx_gt_s(c->t, 0), x, b->t);
            ex = a->exact && b->exact;
        }
        break;
    }
    case 9: { /* REF kernels in the schedule: cumsum, cat, gather, matmul */
        switch (fz_u8(r) % 4) {
        case 0:
            if (rank) {
                y = rlx_cumsum(x, ax, fz_u8(r) & 1); /* refuses c64 */
                ex = ex && !is_float(dt);
            }
            break;
        case 1:
            if (rank) {
                rlx_tensor *xs[3] = {x, b->t, x};
                y = rlx_cat(xs, 2 + fz_u8(r) % 2, ax);
                ex = ex && b->exact;
            }
            break;
        case 2:
            if (rank && s[ax] > 0) {
                int64_t n = fz_u8(r) % 6, idx[6];
                for (int i = 0; i < n; i++)
                    idx[i] = (int64_t)(fz_u8(r) % (2 * s[ax])) - s[ax]; /* negative ones count from the end */
                y = rlx_gather(x, rlx_from_data(RLX_I64, 1, &n, idx), ax); /* the scope frees the indices */
            }
            break;
        default:
            if (rank >= 1 && rlx_rank(b->t) >= 1) {
                y = rlx_matmul(x, rlx_t(b->t)); /* the scope frees rlx_t's result */
                ex = ex && b->exact && y && !is_inexact_dt(rlx_dtype_of(y));
            }
            break;
        }
        break;
    }
    case 10: { /* constants and iota (fused leaves of the JIT) */
        switch (fz_u8(r) % 3) {
        case 0: y = rlx_add(x, rlx_full(dt, rank, s, fz_double(r))); break;
        case 1: {
            int64_t n = rank ? s[rank - 1] : 1;
            y = rlx_mul(x, rlx_arange(dt == RLX_BOOL ? RLX_I32 : dt, 0, (double)n, 1));
            break;
        }
        default: y = rlx_add(x, rlx_rand(is_float(dt) ? dt : RLX_F32, rank, s, fz_u8(r))); ex = ex && is_float(dt); break;
        }
        break;
    }
    default: { /* composites */
        switch (fz_u8(r) % 3) {
        case 0: {
            double lo = fz_double(r), hi = fz_double(r);
            y = rlx_clamp(x, lo, hi);
            break;
        }
        case 1:
            if (b->exact && rlx_dtype_of(b->t) == RLX_BOOL)
                y = rlx_masked_fill(x, b->t, fz_double(r));
            break;
        default:
            if (rank) {
                y = rlx_layer_norm(x, NULL, NULL, 1e-5);
                ex = false;
            }
            break;
        }
        break;
    }
    }
    if (!y) {
        rlx_clear_error(); /* an invalid combination: skipped, in both copies */
        return;
    }
    if (is_cx(dt) && !is_cx(rlx_dtype_of(y)) && k % 13 == 0)
        ex = false; /* abs of c64 is a hypot */
    ir_node *n = (ir_node *)y;
    if (!fz_cheap(&n, 1))
        return; /* left in the scope, never realized */
    /* an f64 value computed from an inexact f32 one is only as precise:
     * keep the loosest tolerance of the inputs (b and c may be unused:
     * looser is safe) and add this step's when it is inexact */
    double rtol = fmax(a->rtol, fmax(b->rtol, c0->rtol));
    if (!ex)
        rtol = fmax(rtol, fmax(dtype_rtol(rlx_dtype_of(y)), dtype_rtol(dt)));
    push(g, y, ex, rtol);
}

/* Builds the graph of the input over the given leaves. */
static void build(fz_reader r, graph *g, rlx_tensor *const *leaves, int nleaves, int steps)
{
    g->n = 0;
    for (int i = 0; i < nleaves; i++)
        push(g, leaves[i], true, 0);
    for (int i = 0; i < steps && !fz_empty(&r) && g->n < MAXV; i++)
        step(&r, g);
}

/* t's values as doubles (complex: 2n, the parts in turn); *n gets the count. */
static double *read_values(rlx_tensor *t, int64_t *n, rlx_status *st)
{
    *n = rlx_numel(t);
    bool cx = is_cx(rlx_dtype_of(t));
    if (cx)
        *n *= 2;
    double *v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *v);
    if (rlx_dtype_of(t) == RLX_C128) {
        *st = rlx_read(t, v, (size_t)*n * sizeof *v);
    } else if (cx) {
        float *f = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *f);
        *st = rlx_read(t, f, (size_t)*n * sizeof *f);
        for (int64_t i = 0; *st == RLX_OK && i < *n; i++)
            v[i] = f[i];
        free(f);
    } else {
        *st = rlx_read_f64(t, v, (size_t)*n);
    }
    return v;
}

static double max_abs_finite(rlx_tensor *t)
{
    int64_t n;
    rlx_status st;
    double *v = read_values(t, &n, &st), m = 0;
    if (st == RLX_OK)
        for (int64_t i = 0; i < n; i++)
            if (isfinite(v[i]) && fabs(v[i]) > m)
                m = fabs(v[i]);
    free(v);
    return m;
}

static void compare(rlx_tensor *got, rlx_tensor *want, bool exact, double vtol, double scale, int index)
{
    int64_t gs[RLX_MAX_RANK], ws[RLX_MAX_RANK];
    int gr = shape_of(got, gs), wr = shape_of(want, ws);
    rlx_dtype dt = rlx_dtype_of(want);
    FUZZ_ASSERT(gr == wr && (gr == 0 || !memcmp(gs, ws, (size_t)gr * sizeof *gs)) && rlx_dtype_of(got) == dt,
                "value %d: shape or dtype differs between the copies", index);
    int64_t n, nb;
    rlx_status sa, sb;
    double *a = read_values(got, &n, &sa), *b = read_values(want, &nb, &sb);
    FUZZ_ASSERT(sa == RLX_OK, "value %d: reading the JIT copy", index);
    FUZZ_ASSERT(sb == RLX_OK && nb == n, "value %d: reading the reference copy", index);
    double rtol = fmax(vtol, dtype_rtol(dt)), big = dt == RLX_F32 || dt == RLX_C64 ? 1e30 : 1e300;
    for (int64_t i = 0; i < n; i++) {
        double x = a[i], y = b[i];
        bool ok;
        if (isnan(x) || isnan(y))
            ok = isnan(x) && isnan(y);
        else if (exact || !is_inexact_dt(dt))
            ok = x == y;
        else if (fabs(x) > big || fabs(y) > big)
            ok = (x > 0) == (y > 0) && fabs(x) > big && fabs(y) > big;
        else
            ok = fabs(x - y) <= rtol * scale + rtol * fabs(y);
        FUZZ_ASSERT(ok, "value %d (%s, %s): element %lld is %.17g with the JIT, %.17g with the reference "
                        "(scale %g)", index, rlx_dtype_name(dt), exact ? "exact" : "inexact", (long long)i, x, y,
                    scale);
    }
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static long live0 = -1;
    if (live0 < 0) {
        rlx_set_num_threads(2);
        live0 = ir_live_nodes();
    }
    fz_reader r = {data, size};
    int nleaves = 1 + fz_u8(&r) % MAXLEAF, steps = 1 + fz_u8(&r) % 24;
    leaf_spec spec[MAXLEAF];
    /* a base shape; each leaf takes it with some dims set to 1 or dropped,
     * so binary ops between values mostly broadcast */
    int64_t base[RLX_MAX_RANK];
    int brank = fz_u8(&r) % 6;
    for (int i = 0; i < brank; i++) {
        uint8_t b = fz_u8(&r);
        base[i] = b < 16 ? 0 : b < 200 ? 1 + b % 7 : 1 + b % 40;
    }
    for (int l = 0; l < nleaves; l++) {
        uint8_t b = fz_u8(&r), m = fz_u8(&r);
        /* mask bits 5-7 are unused by the shape (rank <= 5) */
        spec[l].dt = (m & 0xe0) == 0xe0 ? RLX_C64 : (m & 0xe0) == 0xc0 ? RLX_C128 : b % 5;
        spec[l].mode = (b >> 3) % 4;
        spec[l].seed = fz_u8(&r);
        int drop = (b >> 5) % (brank + 1);
        spec[l].rank = brank - drop;
        for (int i = 0; i < spec[l].rank; i++)
            spec[l].shape[i] = (m >> i & 1) ? 1 : base[drop + i];
    }
    rlx_scope_begin();
    rlx_tensor *la[MAXLEAF], *lb[MAXLEAF];
    for (int l = 0; l < nleaves; l++) {
        la[l] = make_leaf(&spec[l]);
        lb[l] = make_leaf(&spec[l]);
        FUZZ_ASSERT(la[l] && lb[l], "leaf %d", l);
    }
    uint8_t roots_sel = fz_u8(&r);
    graph ga, gb;
    build(r, &ga, la, nleaves, steps); /* the reference copy */
    build(r, &gb, lb, nleaves, steps); /* the JIT copy */
    FUZZ_ASSERT(ga.n == gb.n, "the two copies have %d and %d values", ga.n, gb.n);
    /* the JIT realizes the last value and, per bit of roots_sel, a few others
     * in one schedule; the reference copy realizes every value */
    rlx_tensor *roots[9];
    int idx[9], nr = 0;
    for (int i = 0; i < 8; i++)
        if (roots_sel >> i & 1 && ga.n > nleaves)
            idx[nr++] = nleaves + (int)((unsigned)(i * 7 + roots_sel) % (unsigned)(ga.n - nleaves));
    idx[nr++] = ga.n - 1;
    for (int i = 0; i < nr; i++)
        roots[i] = gb.v[idx[i]].t;
    rlx_set_option("backend", "ref");
    double scale = 0;
    bool ref_ok = true;
    for (int i = 0; i < ga.n && ref_ok; i++) {
        ref_ok = rlx_realize(ga.v[i].t) == RLX_OK;
        if (ref_ok) {
            double m = max_abs_finite(ga.v[i].t);
            if (m > scale)
                scale = m;
        }
    }
    rlx_status ref_st = rlx_last_status();
    rlx_clear_error();
    if (getenv("FUZZ_VERBOSE")) {
        fprintf(stderr, "JIT roots:");
        for (int i = 0; i < nr; i++)
            fprintf(stderr, " v%d", idx[i]);
        fprintf(stderr, "\n");
        fz_dump_graph((ir_node *const *)roots, nr);
    }
    rlx_set_option("backend", "jit");
    rlx_status jit_st = rlx_realize_many(roots, nr);
    rlx_set_option("backend", "ref");
    if (!ref_ok) {
        /* the reference failed (an out-of-range gather cannot happen here,
         * so only memory): the JIT may fail too */
        FUZZ_ASSERT(ref_st == RLX_E_NOMEM, "the reference failed: %d", (int)ref_st);
    } else {
        FUZZ_ASSERT(jit_st == RLX_OK, "the JIT failed where the reference did not: %s", rlx_last_error());
        for (int i = 0; i < nr; i++)
            compare(gb.v[idx[i]].t, ga.v[idx[i]].t, ga.v[idx[i]].exact, ga.v[idx[i]].rtol, scale, idx[i]);
    }
    rlx_clear_error();
    rlx_scope_end();
    FUZZ_ASSERT(ir_live_nodes() == live0, "%ld graph nodes leaked", ir_live_nodes() - live0);
    return 0;
}
