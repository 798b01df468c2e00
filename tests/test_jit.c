/*
 * test_jit.c — the JIT backend (RLX_BACKEND=jit) against the reference
 * evaluator: a differential test over random graphs, kernel counts,
 * the compile cache, the accuracy of the vector math in ulps, integer and
 * cast semantics, mixed schedules (reference kernels between compiled
 * ones), and LLVM failures reported as RLX_E_JIT.
 *
 * Every comparison builds the same graph twice from the same host data
 * (fresh buffers, so hash-consing cannot share nodes between the two) and
 * realizes one copy with each backend.
 */
#include "harness.h"

#include <stdbool.h>
#include "ir/cast.h"
#include "tensor/ts.h"

void cg_test_inject(int what); /* internal: codegen_llvm/cg.h */
void cg_cache_reset_for_tests(void);
void rt_plan_cache_clear(void); /* internal: runtime/exec/jit_exec.h */
/* internal: runtime/exec/jit_exec.h */
typedef struct {
    uint64_t mapped, mapped_bytes, reused, unmapped, live_bytes, cached_bytes;
} rt_bufpool_counts;
void rt_bufpool_counts_get(rt_bufpool_counts *out);

static void use_jit(bool on) { setenv("RLX_BACKEND", on ? "jit" : "ref", 1); }

static rlx_stats_t stats_now(void)
{
    rlx_stats_t s;
    rlx_stats(&s);
    return s;
}

/* ---------------------------------------------------------- comparisons */

/* got (JIT) against want (reference): same shape and dtype, NaN where
 * want has NaN, values within rtol*|want| + atol; two values beyond 1e30 of
 * one sign count as equal (an approximation may overflow a hair earlier). */
static int compare_ex(rlx_tensor *got, rlx_tensor *want, double rtol, double atol, const char *what, uint64_t seed,
                      bool nonfinite_ok)
{
    if (!got || !want) {
        test_fail(__FILE__, __LINE__, "%s (seed %llu): NULL tensor: %s", what, (unsigned long long)seed,
                  rlx_last_error());
        return 1;
    }
    int64_t gs[RLX_MAX_RANK], ws[RLX_MAX_RANK];
    int gr = rlx_shape(got, gs, RLX_MAX_RANK), wr = rlx_shape(want, ws, RLX_MAX_RANK);
    if (gr != wr || (gr > 0 && memcmp(gs, ws, (size_t)gr * sizeof *gs)) || rlx_dtype_of(got) != rlx_dtype_of(want)) {
        test_fail(__FILE__, __LINE__, "%s (seed %llu): shape or dtype differs", what, (unsigned long long)seed);
        return 1;
    }
    int64_t n = rlx_numel(want);
    double *g = malloc((size_t)(n ? n : 1) * sizeof *g), *w = malloc((size_t)(n ? n : 1) * sizeof *w);
    int bad = 0;
    if (rlx_read_f64(got, g, (size_t)n) || rlx_read_f64(want, w, (size_t)n)) {
        test_fail(__FILE__, __LINE__, "%s (seed %llu): read failed: %s", what, (unsigned long long)seed,
                  rlx_last_error());
        bad = 1;
    }
    for (int64_t i = 0; i < n && !bad; i++) {
        double a = g[i], b = w[i];
        bool ok;
        if (nonfinite_ok && !isfinite(b))
            ok = true;
        else if (isnan(a) || isnan(b))
            ok = isnan(a) && isnan(b);
        else if (fabs(a) > 1e30 || fabs(b) > 1e30)
            ok = (a > 0) == (b > 0) && fabs(a) > 1e30 && fabs(b) > 1e30;
        else
            ok = fabs(a - b) <= atol + rtol * fabs(b);
        if (!ok) {
            test_fail(__FILE__, __LINE__, "%s (seed %llu): element %lld is %.17g, reference %.17g (rtol %g, atol %g)",
                      what, (unsigned long long)seed, (long long)i, a, b, rtol, atol);
            bad = 1;
        }
    }
    free(g);
    free(w);
    return bad;
}

/* nonfinite_ok: where want is inf or NaN, got may be anything (a 16-bit
 * float intermediate overflowed in the reference, not in the JIT's f32). */
static int compare(rlx_tensor *got, rlx_tensor *want, double rtol, double atol, const char *what, uint64_t seed)
{
    return compare_ex(got, want, rtol, atol, what, seed, false);
}

static bool has_nonfinite(rlx_tensor *t)
{
    int64_t n = rlx_numel(t);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    bool any = false;
    if (rlx_read_f64(t, v, (size_t)n) == RLX_OK)
        for (int64_t i = 0; i < n; i++)
            any |= !isfinite(v[i]);
    free(v);
    return any;
}

static double max_abs(rlx_tensor *t)
{
    int64_t n = rlx_numel(t);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v), m = 0;
    if (rlx_read_f64(t, v, (size_t)n) == RLX_OK)
        for (int64_t i = 0; i < n; i++)
            if (isfinite(v[i]) && fabs(v[i]) > m)
                m = fabs(v[i]);
    free(v);
    return m;
}

/* ------------------------------------------------------ random graphs */

typedef struct {
    uint64_t s;
} rng;

static uint64_t rnext(rng *r)
{
    uint64_t x = (r->s += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static int rint_(rng *r, int n) { return (int)(rnext(r) % (uint64_t)n); }
static double runi(rng *r, double lo, double hi) { return lo + (hi - lo) * (double)(rnext(r) >> 11) * 0x1p-53; }

static rlx_tensor *rinput(rng *r, rlx_dtype dt, int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case RLX_I32:
        case RLX_I64: v[i] = (double)(rint_(r, 41) - 20); break;
        /* narrow integers over their whole range, so + - * wrap */
        case RLX_I8: v[i] = (double)(rint_(r, 256) - 128); break;
        case RLX_U8: v[i] = (double)rint_(r, 256); break;
        case RLX_I16: v[i] = (double)(rint_(r, 65536) - 32768); break;
        case RLX_U32: /* small ones divide, large ones (above 2^31) compare unsigned */
            v[i] = rint_(r, 2) ? (double)rint_(r, 50) : (double)(rnext(r) >> 32);
            break;
        default: v[i] = runi(r, -2, 2); break;
        }
    }
    if (n > 2 && ir_dtype_is_float(dt) && rint_(r, 4) == 0)
        v[rint_(r, (int)n)] = 0; /* exact zeros reach sign, division, compare */
    rlx_tensor *d = rlx_from_data(RLX_F64, rank, shape, v);
    free(v);
    rlx_tensor *t = rlx_cast(d, dt);
    /* the input is realized data of dt on either backend */
    use_jit(false);
    rlx_realize(t);
    return t;
}

typedef struct {
    rlx_tensor *t;
    bool exact; /* computed only by correctly rounded ops: must match bit for bit */
} val;

typedef struct {
    rng r;
    rlx_dtype dt; /* of the current value */
    val pool[24];
    int n;
    bool exact;  /* the result so far */
    int ref_ops; /* ops that run through the reference evaluator */
    bool narrow; /* mixed dtypes: the narrow ones, promotion, casts */
    double tol;  /* the relative tolerance of the least precise float met */
    bool half_overflow; /* (reference copy) a 16-bit float value built is inf or NaN */
} gen;

static bool is_half(rlx_dtype dt) { return dt == RLX_F16 || dt == RLX_BF16; }

/* The relative tolerance of a graph whose values pass through float dt:
 * the JIT keeps f16/bf16 intermediates in f32 where the reference
 * rounds each op, a few of their ulps over a chain (bf16 2^-8, f16 2^-10). */
static double tol_of_dtype(rlx_dtype dt)
{
    switch (dt) {
    case RLX_F32: return 3e-4;
    case RLX_F64: return 1e-9;
    case RLX_F16: return 1e-2;
    case RLX_BF16: return 4e-2;
    default: return 0;
    }
}

static void meet(gen *g, rlx_dtype dt)
{
    if (tol_of_dtype(dt) > g->tol)
        g->tol = tol_of_dtype(dt);
}

static const rlx_dtype floats_[4] = {RLX_F32, RLX_F64, RLX_F16, RLX_BF16};
static const rlx_dtype ints_[6] = {RLX_I32, RLX_I64, RLX_I8, RLX_U8, RLX_I16, RLX_U32};

static void push(gen *g, rlx_tensor *t, bool exact)
{
    if (g->n < 24)
        g->pool[g->n++] = (val){t, exact};
}

static bool broadcasts(rlx_tensor *a, rlx_tensor *b)
{
    int64_t sa[RLX_MAX_RANK], sb[RLX_MAX_RANK];
    int ra = rlx_shape(a, sa, RLX_MAX_RANK), rb = rlx_shape(b, sb, RLX_MAX_RANK);
    for (int i = 1; i <= ra && i <= rb; i++) {
        int64_t x = sa[ra - i], y = sb[rb - i];
        if (x != y && x != 1 && y != 1)
            return false;
    }
    return true;
}

/* A partner for cur: from the pool when one broadcasts, else a new input
 * with cur's shape, some dims 1, maybe fewer leading dims. */
static val partner(gen *g, rlx_tensor *cur)
{
    int start = rint_(&g->r, g->n ? g->n : 1);
    for (int k = 0; k < g->n; k++) {
        val v = g->pool[(start + k) % g->n];
        if (rint_(&g->r, 3) && broadcasts(cur, v.t) &&
            ir_dtype_is_float(rlx_dtype_of(v.t)) == ir_dtype_is_float(g->dt))
            return v;
    }
    int64_t s[RLX_MAX_RANK];
    int rank = rlx_shape(cur, s, RLX_MAX_RANK);
    for (int i = 0; i < rank; i++)
        if (rint_(&g->r, 4) == 0)
            s[i] = 1;
    int drop = rank && rint_(&g->r, 4) == 0 ? 1 : 0;
    rlx_dtype pdt = g->dt;
    if (g->narrow && rint_(&g->r, 3) == 0) /* another dtype of its class: promotion */
        pdt = ir_dtype_is_float(g->dt) ? floats_[rint_(&g->r, 4)] : ints_[rint_(&g->r, 6)];
    meet(g, pdt);
    val v = {rinput(&g->r, pdt, rank - drop, s + drop), true};
    push(g, v.t, true);
    return v;
}

static bool is_float(rlx_dtype dt) { return ir_dtype_is_float(dt); }

static rlx_tensor *step_unary(gen *g, rlx_tensor *x, bool *exact)
{
    if (!is_float(g->dt)) {
        switch (rint_(&g->r, 4)) {
        case 0: return rlx_neg(x);
        case 1: return rlx_abs(x);
        case 2: return rlx_sign(x);
        default: return rlx_mul(x, x);
        }
    }
    int k = rint_(&g->r, 20);
    if (k >= 14 && !*exact)
        k = rint_(&g->r, 14); /* floor/compare-like ops need exact inputs */
    if (is_half(g->dt)) {
        /* the JIT holds the result unrounded, the reference rounds it: only
         * ops that do not round keep it exact, and a floor sees x itself;
         * sqrt would magnify a difference next to 0 (where the reference's
         * rounding cancelled to 0 exactly), exp one in a large argument,
         * log next to 0.1 and sin of 3x by 10 and 3: kept well conditioned */
        bool was = *exact;
        if (k != 0 && k != 1 && k != 10 && k < 14)
            *exact = false;
        switch (k) {
        case 2: return rlx_exp(rlx_tanh(x));
        case 3: return rlx_log(rlx_add_s(rlx_abs(x), 1));
        case 7: return rlx_sin(x);
        case 4:
            if (!was)
                return rlx_sqrt(rlx_add_s(rlx_abs(x), 0.25));
            break;
        case 14: return rlx_floor(x);
        case 15: return rlx_round(rlx_mul_s(x, 2)); /* x 2 is exact */
        case 17: return rlx_cast(rlx_cast(x, RLX_I32), g->dt);
        default: break;
        }
    }
    switch (k) {
    case 0: return rlx_neg(x);
    case 1: return rlx_abs(x);
    case 2: *exact = false; return rlx_exp(rlx_mul_s(x, 0.5));
    case 3: *exact = false; return rlx_log(rlx_add_s(rlx_abs(x), 0.1));
    case 4: return rlx_sqrt(rlx_abs(x));
    case 5: *exact = false; return rlx_tanh(x);
    case 6: *exact = false; return rlx_sigmoid(x);
    case 7: *exact = false; return rlx_sin(rlx_mul_s(x, 3));
    case 8: *exact = false; return rlx_cos(x);
    case 9: *exact = false; return rlx_erf(x);
    case 10: return rlx_relu(x);
    case 11: *exact = false; return rlx_gelu_tanh(x);
    case 12: return rlx_mul(x, x);
    case 13: return rlx_recip(rlx_add_s(rlx_abs(x), 0.5));
    case 14: return rlx_floor(rlx_mul_s(x, 3));
    case 15: return rlx_round(rlx_mul_s(x, 2));
    case 16: return rlx_sign(x);
    case 17: return rlx_cast(rlx_cast(rlx_mul_s(x, 7), RLX_I32), g->dt);
    case 18: return rlx_cast(rlx_gt_s(x, 0.25), g->dt);
    default: return rlx_ceil(x);
    }
}

static rlx_tensor *step_binary(gen *g, rlx_tensor *x, bool *exact)
{
    val p = partner(g, x);
    *exact = *exact && p.exact;
    if (!is_float(g->dt)) {
        switch (rint_(&g->r, 9)) {
        case 0: return rlx_add(x, p.t);
        case 1: return rlx_sub(x, p.t);
        case 2: return rlx_mul(x, p.t);
        case 3: return rlx_div(x, p.t); /* division by 0 gives 0 */
        case 4: return rlx_rem(x, p.t);
        case 5: return rlx_maximum(x, p.t);
        case 6: return rlx_minimum(x, p.t);
        case 7: return rlx_where(rlx_lt(x, p.t), x, rlx_neg(p.t));
        default: return rlx_cast(rlx_logical_or(rlx_eq(x, p.t), rlx_ge_s(x, 3)), g->dt);
        }
    }
    int k = rint_(&g->r, 8);
    if ((is_half(g->dt) || is_half(rlx_dtype_of(p.t))) && k != 4 && k != 5 && k != 6)
        *exact = false; /* f16/bf16: all but maximum, minimum, where round */
    switch (k) {
    case 0: return rlx_add(x, p.t);
    case 1: return rlx_sub(x, p.t);
    case 2: return rlx_mul(x, p.t);
    case 3: return rlx_div(x, rlx_add_s(rlx_abs(p.t), 0.25));
    case 4: return rlx_maximum(x, p.t);
    case 5: return rlx_minimum(x, p.t);
    case 6:
        if (*exact)
            return rlx_where(rlx_le(x, p.t), x, p.t);
        return rlx_add(x, p.t);
    default: return rlx_sub(rlx_mul_s(x, 0.75), rlx_mul_s(p.t, 1.25));
    }
}

static rlx_tensor *step_view(gen *g, rlx_tensor *x)
{
    int64_t s[RLX_MAX_RANK];
    int rank = rlx_shape(x, s, RLX_MAX_RANK);
    int ax = rank ? rint_(&g->r, rank) : 0;
    switch (rint_(&g->r, 7)) {
    case 0:
        if (rank >= 2) {
            int perm[RLX_MAX_RANK];
            for (int i = 0; i < rank; i++)
                perm[i] = i;
            for (int i = rank - 1; i > 0; i--) {
                int j = rint_(&g->r, i + 1), t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
            return rlx_transpose(x, rank, perm);
        }
        return rlx_unsqueeze(x, 0);
    case 1:
        if (rank && s[ax] > 1)
            return rlx_slice(x, ax, 1, RLX_END, 1 + rint_(&g->r, 2));
        return rlx_flatten(x);
    case 2:
        if (rank)
            return rlx_flip(x, ax);
        return rlx_flatten(x);
    case 3: { /* a new leading axis, broadcast */
        int64_t t[RLX_MAX_RANK];
        if (rank >= 4)
            return rlx_flatten(x);
        t[0] = 3;
        memcpy(t + 1, s, (size_t)rank * sizeof *s);
        return rlx_broadcast_to(rlx_unsqueeze(x, 0), rank + 1, t);
    }
    case 4: /* reshape of a maybe non-contiguous view */
        return rlx_reshape(rlx_t(x), 1, (int64_t[]){-1});
    case 5:
        if (rank >= 2) { /* merge the first two dims */
            int64_t t[RLX_MAX_RANK];
            t[0] = s[0] * s[1];
            memcpy(t + 1, s + 2, (size_t)(rank - 2) * sizeof *s);
            return rlx_reshape(x, rank - 1, t);
        }
        return rlx_unsqueeze(x, rank);
    default:
        if (rank)
            return rlx_narrow(x, ax, s[ax] > 1 ? 1 : 0, s[ax] > 1 ? s[ax] - 1 : s[ax]);
        return x;
    }
}

static rlx_tensor *step_reduce(gen *g, rlx_tensor *x, bool *exact)
{
    int64_t s[RLX_MAX_RANK];
    int rank = rlx_shape(x, s, RLX_MAX_RANK), axes[RLX_MAX_RANK], na = 0;
    for (int i = 0; i < rank; i++)
        if (rint_(&g->r, 2))
            axes[na++] = i;
    bool keep = rint_(&g->r, 2);
    int k = rint_(&g->r, 5);
    if (!is_float(g->dt)) {
        if (k == 0)
            return rlx_max(x, axes, na, keep);
        if (k == 1)
            return rlx_min(x, axes, na, keep);
        return rlx_cast(rlx_sum(x, axes, na, keep), g->dt);
    }
    if (k >= 2)
        *exact = false; /* a different summation order (f32 sums in f64) */
    switch (k) {
    case 0: return rlx_max(x, axes, na, keep);
    case 1: return rlx_min(x, axes, na, keep);
    case 2: return rlx_sum(x, axes, na, keep);
    case 3: *exact = false; return rlx_mean(x, axes, na, keep);
    default: { /* prod over few elements */
        int64_t cnt = 1;
        for (int i = 0; i < na; i++)
            cnt *= s[axes[i]];
        *exact = false;
        return cnt <= 16 ? rlx_prod(x, axes, na, keep) : rlx_sum(x, axes, na, keep);
    }
    }
}

/* Ops the JIT hands to the reference evaluator: a mixed schedule. */
static rlx_tensor *step_ref(gen *g, rlx_tensor *x, bool *exact)
{
    g->ref_ops++;
    int64_t s[RLX_MAX_RANK];
    int rank = rlx_shape(x, s, RLX_MAX_RANK);
    int ax = rank ? rint_(&g->r, rank) : 0;
    switch (rint_(&g->r, 5)) {
    case 0:
        if (rank)
            return rlx_pad(x, ax, 1, 2, 0.5);
        break;
    case 1:
        if (rank) {
            rlx_tensor *xs[2] = {x, x};
            return rlx_cat(xs, 2, ax);
        }
        break;
    case 2:
        if (rank && is_float(g->dt))
            return rlx_cumsum(x, ax, false);
        break;
    case 3:
        if (is_float(g->dt)) {
            *exact = false;
            return rlx_pow_s(rlx_add_s(rlx_abs(x), 0.5), 1.5);
        }
        break;
    default:
        if (is_float(g->dt)) {
            *exact = false;
            return rlx_elu(x); /* expm1 */
        }
        break;
    }
    return rlx_add(x, x);
}

/* A cast to another dtype (narrow graphs): floats become integers only
 * when exact (truncation is discontinuous); never bool (neg refuses it). */
static rlx_tensor *step_cast(gen *g, rlx_tensor *x, bool exact)
{
    bool to_float = !exact && is_float(g->dt) ? true : rint_(&g->r, 2);
    rlx_dtype to = to_float ? floats_[rint_(&g->r, 4)] : ints_[rint_(&g->r, 6)];
    return rlx_cast(x, to);
}

/* Builds random graph number seed; the same seed builds the same graph on
 * new input buffers. *scale gets the largest magnitude of its values;
 * narrow: dtypes mix (promotion, casts, the narrow ones), *tol the
 * relative tolerance its floats allow. */
static rlx_tensor *random_graph_ex(uint64_t seed, rlx_dtype dt, bool narrow, bool *exact, double *scale, int *ref_ops,
                                   double *tol)
{
    gen g;
    memset(&g, 0, sizeof g);
    g.r.s = seed * 0x2545f4914f6cdd1dull + 1;
    g.dt = dt;
    g.narrow = narrow;
    meet(&g, dt);
    static const int64_t dims[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 33};
    int rank = rint_(&g.r, 5);
    int64_t shape[RLX_MAX_RANK];
    for (int i = 0; i < rank; i++)
        shape[i] = dims[rint_(&g.r, 10)];
    rlx_tensor *cur = rinput(&g.r, dt, rank, shape);
    push(&g, cur, true);
    bool ex = true;
    int steps = 2 + rint_(&g.r, 9);
    for (int i = 0; i < steps && cur; i++) {
        int c = rint_(&g.r, 100);
        rlx_tensor *next;
        if (c < 32)
            next = step_unary(&g, cur, &ex);
        else if (c < 64)
            next = step_binary(&g, cur, &ex);
        else if (c < 78)
            next = step_view(&g, cur);
        else if (c < 93)
            next = step_reduce(&g, cur, &ex);
        else
            next = step_ref(&g, cur, &ex);
        if (narrow && next && rint_(&g.r, 5) == 0)
            next = step_cast(&g, next, ex);
        if (!next)
            break;
        cur = next;
        g.dt = rlx_dtype_of(cur);
        meet(&g, g.dt);
        push(&g, cur, ex);
    }
    *exact = ex;
    *ref_ops = g.ref_ops;
    if (scale) { /* the reference copy: magnitudes of every value built */
        use_jit(false);
        *scale = 0;
        for (int i = 0; i < g.n; i++) {
            double m = max_abs(g.pool[i].t);
            if (m > *scale)
                *scale = m;
        }
        double m = max_abs(cur);
        if (m > *scale)
            *scale = m;
        for (int i = 0; i < g.n && narrow; i++)
            g.half_overflow |= is_half(rlx_dtype_of(g.pool[i].t)) && has_nonfinite(g.pool[i].t);
    }
    if (tol)
        *tol = g.half_overflow ? -g.tol : g.tol; /* negative: see check_graph_ex */
    return cur;
}

static int check_graph_ex(uint64_t seed, rlx_dtype dt, bool narrow)
{
    bool exact, ex2;
    double scale, tol;
    int refs;
    rlx_scope_begin();
    rlx_tensor *want = random_graph_ex(seed, dt, narrow, &exact, &scale, &refs, &tol);
    use_jit(false);
    rlx_realize(want);
    rlx_tensor *got = random_graph_ex(seed, dt, narrow, &ex2, NULL, &refs, NULL);
    use_jit(true);
    if (got && rlx_realize(got) != RLX_OK)
        test_fail(__FILE__, __LINE__, "seed %llu: JIT realize failed: %s", (unsigned long long)seed, rlx_last_error());
    use_jit(false);
    /* a 16-bit intermediate past its range is inf in the reference and
     * may be finite in the JIT's f32: such elements are not compared */
    bool overflow = tol < 0;
    tol = fabs(tol);
    double rtol = exact || !ir_dtype_is_float(rlx_dtype_of(want)) ? 0 : tol;
    int bad = compare_ex(got, want, rtol, rtol * scale, narrow ? "random narrow graph" : "random graph", seed, overflow);
    rlx_scope_end();
    return bad;
}
static int check_graph(uint64_t seed, rlx_dtype dt) { return check_graph_ex(seed, dt, false); }

TEST(jit_random_graphs)
{
    /* 1,000 graphs: f32 and f64 float mixes, plus integer graphs */
    int bad = 0, n = 0;
    rlx_stats_reset();
    const char *env = getenv("RLX_TEST_GRAPHS");
    uint64_t count = env ? (uint64_t)atoi(env) : 1000;
    for (uint64_t seed = 1; seed <= count && bad < 5; seed++, n++) {
        rlx_dtype dt = seed % 10 < 5 ? RLX_F32 : seed % 10 < 8 ? RLX_F64 : seed % 2 ? RLX_I32 : RLX_I64;
        bad += check_graph(seed, dt);
    }
    rlx_stats_t s = stats_now();
    printf("  %d random graphs: %llu kernels compiled (%.1f s), %llu cache hits\n", n,
           (unsigned long long)s.kernels_compiled, s.compile_seconds, (unsigned long long)s.cache_hits);
    CHECK_EQ_INT(bad, 0);
}

/* Random graphs over every dtype: inputs of the narrow ones, partners of
 * another dtype of the class (promotion), casts between any two, the
 * float tolerance that of the least precise float met (integers and
 * exactly computed floats bit for bit). */
TEST(jit_random_graphs_narrow)
{
    static const rlx_dtype start[6] = {RLX_BF16, RLX_F16, RLX_I8, RLX_U8, RLX_I16, RLX_U32};
    int bad = 0, n = 0;
    /* RLX_TEST_GRAPHS as jit_random_graphs (half as many here);
     * RLX_TEST_SEED=s starts at the graph a failure named (seed s) */
    const char *env = getenv("RLX_TEST_GRAPHS"), *from = getenv("RLX_TEST_SEED");
    uint64_t count = env ? (uint64_t)atoi(env) / 2 : 500;
    uint64_t first = from && atoll(from) > 100000 ? (uint64_t)atoll(from) - 100000 : 1;
    for (uint64_t seed = first; seed <= count && bad < 5; seed++, n++)
        bad += check_graph_ex(seed + 100000, start[seed % 6], true);
    printf("  %d random graphs over the narrow dtypes\n", n);
    CHECK_EQ_INT(bad, 0);
}

/* --------------------------------------------------------- kernel counts */

static rlx_tensor *w2(rlx_tensor *x)
{
    /* tanh(square(exp((relu(x*1.5 + 0.5) - 0.25) * x) + x) - 1) */
    rlx_tensor *t = rlx_relu(rlx_add_s(rlx_mul_s(x, 1.5), 0.5));
    t = rlx_exp(rlx_mul(rlx_sub_s(t, 0.25), x));
    return rlx_tanh(rlx_sub_s(rlx_add(rlx_mul(t, t), x), 1));
}

static rlx_tensor *data_f32(int64_t n, uint64_t seed)
{
    rng r = {seed};
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)runi(&r, -2, 2);
    rlx_tensor *t = rlx_from_data(RLX_F32, 1, &n, v);
    free(v);
    return t;
}

/* Realizes build(x) with the JIT; checks kernels run and the values. */
static void check_kernels(rlx_tensor *(*build)(rlx_tensor *, rlx_tensor *), int64_t n, uint64_t want_kernels,
                          double rtol, const char *what)
{
    rlx_tensor *x = data_f32(n, 7), *y = data_f32(n, 8);
    rlx_tensor *x2 = data_f32(n, 7), *y2 = data_f32(n, 8);
    rlx_tensor *want = build(x, y), *got = build(x2, y2);
    use_jit(false);
    rlx_realize(want);
    use_jit(true);
    rlx_stats_reset();
    CHECK_EQ_INT(rlx_realize(got), RLX_OK);
    use_jit(false);
    rlx_stats_t s = stats_now();
    if (s.kernels_run != want_kernels)
        test_fail(__FILE__, __LINE__, "%s: %llu kernels, expected %llu", what, (unsigned long long)s.kernels_run,
                  (unsigned long long)want_kernels);
    compare(got, want, rtol, rtol, what, 0);
}

static rlx_tensor *b_w2(rlx_tensor *x, rlx_tensor *y) { (void)y; return w2(x); }
static rlx_tensor *b_w1(rlx_tensor *x, rlx_tensor *y) { return rlx_gelu_tanh(rlx_add_s(rlx_mul(x, y), 0.5)); }
static rlx_tensor *b_sumxy(rlx_tensor *x, rlx_tensor *y) { return rlx_sum(rlx_mul(x, y), NULL, 0, false); }
static rlx_tensor *b_chain10(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *t = x;
    for (int i = 0; i < 5; i++)
        t = rlx_add(rlx_mul_s(t, 0.9), y); /* 10 elementwise ops */
    return t;
}
static rlx_tensor *b_mixed(rlx_tensor *x, rlx_tensor *y)
{
    /* exp fused, cumsum through the reference, then a fused tail */
    rlx_tensor *c = rlx_cumsum(rlx_exp(rlx_mul(x, y)), 0, false);
    return rlx_tanh(rlx_mul_s(c, 0.01));
}
static rlx_tensor *b_multiuse(rlx_tensor *x, rlx_tensor *y)
{
    /* e feeds a row reduction and the consumer that reads the reduced value
     * back over the row: one kernel (e computed once, kept for the pass) */
    rlx_tensor *e = rlx_exp(rlx_mul(x, y));
    rlx_tensor *m = rlx_reshape(e, 2, (int64_t[]){64, -1});
    return rlx_div(m, rlx_sum(m, (int[]){1}, 1, true));
}

/* f32 division by a value fixed along the vectorized loop is a multiply
 * by an f64 reciprocal (cg_kernel.c): checked bit for bit against IEEE f32
 * division over many quotients, including zeros, infinities, NaN and
 * subnormal divisors. */
TEST(jit_division_by_row_value)
{
    enum { R = 64, C = 4096 };
    float *x = malloc(sizeof(float) * R * C), d[R];
    CHECK(x != NULL);
    uint64_t st = 12345;
    for (int i = 0; i < R * C; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t bits = (uint32_t)(st >> 32);
        memcpy(&x[i], &bits, 4); /* every f32 pattern, NaN and inf included */
    }
    for (int r = 0; r < R; r++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        d[r] = (float)((double)(st >> 11) / 9007199254740992.0 * 8 - 4);
    }
    d[0] = 0.0f, d[1] = -0.0f, d[2] = INFINITY, d[3] = NAN, d[4] = 1e-40f, d[5] = -3e-45f, d[6] = 3e38f;
    /* a subnormal quotient that a multiply by the f64 reciprocal rounds
     * twice (0x1.c12p-138; IEEE gives 0x1.c1p-138) */
    d[7] = 0x1.a4cp+54f, x[7 * C] = 0x1.710786p-83f;
    use_jit(true);
    rlx_tensor *tx = rlx_from_data(RLX_F32, 2, (int64_t[]){R, C}, x);
    rlx_tensor *td = rlx_from_data(RLX_F32, 2, (int64_t[]){R, 1}, d);
    rlx_tensor *q = rlx_div(tx, td);
    CHECK_EQ_INT(rlx_realize(q), RLX_OK);
    const float *got = rlx_data(q);
    long bad = 0;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            float want = x[r * C + c] / d[r], g = got[r * C + c];
            if (!(memcmp(&want, &g, 4) == 0 || (isnan(want) && isnan(g))) && bad++ < 3)
                printf("  x %a / d %a: got %a, want %a\n", x[r * C + c], d[r], g, want);
        }
    CHECK_EQ_INT(bad, 0);
    use_jit(false);
    free(x);
}

/* In a row kernel's store pass, f32 division by a per-row value runs
 * without a division (Markstein's correction, guarded per row; a row that
 * fails the guard is computed again with divisions, cg_kernel.c). Checked
 * bit for bit against IEEE division on x / max(d) (d's rows constant, so
 * max(d) is the row's divisor): 3000 divisors (zeros, infinities, NaN,
 * subnormals, the normal range's ends, all-ones significands, random ones
 * over every exponent); per row dividends of every exponent the guard
 * accepts with random significands, signs and zeros (the fast path), the
 * same with one out-of-range value (the whole row again), or random bits;
 * then softmax rows whose tiny exp values fail the guard, so the values
 * kept in the output row are recomputed. */
static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

TEST(jit_division_in_row_kernel)
{
    enum { R = 3000, C = 1024 };
    float *x = malloc(sizeof(float) * R * C), *d = malloc(sizeof(float) * R * C), *b = malloc(sizeof(float) * R);
    CHECK(x && d && b);
    static const uint32_t edge[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x00000001,
                                    0x807fffff, 0x00800000, 0x80800000, 0x00800001, 0x7e7fffff, 0x7e800000,
                                    0xfe800001, 0x7f7fffff, 0x3f800000, 0xbf800000, 0x3fffffff, 0x3f7fffff,
                                    0x3f800001, 0x40400000, 0x3eaaaaab, 0x01000000, 0x0d800000, 0x71800000,
                                    0x33000000, 0x4c000000, 0xc0f00000, 0x4b7fffff, 0x34ffffff, 0x00ffffff};
    rng r = {2024};
    for (int i = 0; i < R; i++) {
        uint32_t bu;
        if (i < (int)(sizeof edge / sizeof *edge))
            bu = edge[i];
        else if (i % 5 == 0) /* any exponent */
            bu = (uint32_t)rnext(&r) & 0xff7fffffu;
        else /* exponents -30..30 */
            bu = ((uint32_t)rnext(&r) & 0x807fffffu) | (uint32_t)(127 - 30 + rint_(&r, 61)) << 23;
        b[i] = bits_f32(bu);
        for (int c = 0; c < C; c++)
            d[(int64_t)i * C + c] = b[i];
        /* the exponents the guard accepts for this divisor, to its edges */
        int eb = b[i] != 0 && isfinite(b[i]) ? ilogbf(b[i]) : 0;
        int elo = eb - 123 > -100 ? eb - 123 : -100, ehi = eb + 125 < 127 ? eb + 125 : 127;
        int kind = i % 4;
        for (int c = 0; c < C; c++) {
            uint32_t u = (uint32_t)rnext(&r);
            if (kind == 3)
                ; /* any bits */
            else if (rint_(&r, 32) == 0)
                u &= 0x80000000u; /* signed zero */
            else
                u = (u & 0x807fffffu) | (uint32_t)(elo + 127 + rint_(&r, ehi - elo + 1)) << 23;
            x[(int64_t)i * C + c] = bits_f32(u);
        }
        if (kind == 2) { /* one value out of the guard's range */
            static const uint32_t out[] = {0x00000001, 0x007fffff, 0x0b000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f7fffff};
            x[(int64_t)i * C + rint_(&r, C)] = bits_f32(out[rint_(&r, 7)] | ((uint32_t)rnext(&r) & 0x80000000u));
        }
    }
    use_jit(true);
    rlx_tensor *tx = rlx_from_data(RLX_F32, 2, (int64_t[]){R, C}, x);
    rlx_tensor *td = rlx_from_data(RLX_F32, 2, (int64_t[]){R, C}, d);
    rlx_tensor *q = rlx_div(tx, rlx_max(td, (int[]){1}, 1, true));
    rlx_stats_reset();
    CHECK_EQ_INT(rlx_realize(q), RLX_OK);
    CHECK_EQ_INT(stats_now().kernels_run, 1);
    const float *got = rlx_data(q);
    long bad = 0;
    for (int64_t i = 0; i < (int64_t)R * C; i++) {
        float want = x[i] / b[i / C], g = got[i];
        if (!(memcmp(&want, &g, 4) == 0 || (isnan(want) && isnan(g))) && bad++ < 3)
            printf("  row %lld: x %a / d %a: got %a, want %a\n", (long long)(i / C), x[i], b[i / C], g, want);
    }
    CHECK_EQ_INT(bad, 0);
    /* softmax rows spanning 90: exp values below the guard's 2^-100 */
    enum { SR = 16, SC = 999 };
    rlx_tensor *out[2];
    for (int k = 0; k < 2; k++) {
        rng sr = {77};
        for (int i = 0; i < SR * SC; i++)
            x[i] = (float)runi(&sr, -90, 0) * (i % SC % 7 == 0 ? 0.01f : 1);
        out[k] = rlx_softmax(rlx_from_data(RLX_F32, 2, (int64_t[]){SR, SC}, x), -1);
        use_jit(k == 1);
        rlx_stats_reset();
        CHECK_EQ_INT(rlx_realize(out[k]), RLX_OK);
        if (k == 1)
            CHECK_EQ_INT(stats_now().kernels_run, 1);
    }
    compare(out[1], out[0], 2e-5, 1e-37, "softmax rows failing the guard", 0);
    use_jit(false);
    free(x);
    free(d);
    free(b);
}

TEST(jit_kernel_counts)
{
    check_kernels(b_w2, 10001, 1, 2e-6, "W2 10-op chain");
    check_kernels(b_w1, 10001, 1, 2e-6, "W1 gelu_tanh(x*a+b)");
    check_kernels(b_sumxy, 10001, 1, 1e-6, "sum(x*y)");
    check_kernels(b_chain10, 999, 1, 0, "10 elementwise ops");
    check_kernels(b_mixed, 1000, 3, 2e-5, "exp | cumsum (reference) | tanh");
    check_kernels(b_multiuse, 64 * 16, 1, 2e-6, "softmax-like with a shared exp");
}

/* Row fusion: a reduction over the trailing dims whose value is read back
 * over the same rows joins its reader as a phase, so these composites are
 * one kernel each; other layouts still work, with more kernels. */
typedef struct {
    const char *what;
    int64_t rows, cols;
    int kernels; /* expected; 0: not checked */
} row_case;

static rlx_tensor *row_build(int i, rlx_tensor *x, rlx_tensor *g, rlx_tensor *b)
{
    int last = -1, first = 0;
    switch (i) {
    case 0: return rlx_softmax(x, -1);
    case 1: return rlx_log_softmax(x, -1);
    case 2: return rlx_layer_norm(x, g, b, 1e-5);
    case 3: return rlx_rms_norm(x, g, 1e-6);
    case 4: return rlx_logsumexp(x, -1, false);
    case 5: return rlx_logsumexp(x, -1, true);
    case 6: return rlx_mean(x, &last, 1, false);
    case 7: return rlx_var(x, &last, 1, true);
    case 8: return rlx_sub(x, rlx_mean(x, &first, 1, true)); /* rows along dim 0: two kernels */
    case 9: return rlx_softmax(x, 0);
    case 10: return rlx_softmax(rlx_reshape(x, 3, (int64_t[]){2, -1, 12}), -1); /* rank 3 */
    default: return rlx_softmax(rlx_t(x), -1); /* rows read across the layout */
    }
}

TEST(jit_row_fusion)
{
    static const row_case cases[] = {
        {"softmax", 64, 1000, 1},      {"log_softmax", 7, 33, 1},  {"layer_norm", 64, 100, 1},
        {"rms_norm", 5, 4096, 1},      {"logsumexp", 64, 77, 1},   {"logsumexp keepdim", 3, 20000, 1},
        {"mean", 10, 99, 1},           {"var", 16, 24, 1},         {"x - mean over rows", 32, 40, 2},
        {"softmax axis 0", 32, 40, 0}, {"softmax rank 3", 8, 36, 1}, {"softmax of x^T", 24, 36, 0},
    };
    for (int i = 0; i < (int)(sizeof cases / sizeof *cases); i++) {
        const row_case *rc = &cases[i];
        int64_t sh[2] = {rc->rows, rc->cols};
        rlx_tensor *out[2];
        for (int k = 0; k < 2; k++) {
            rng r = {(uint64_t)i + 40};
            rlx_tensor *x = rinput(&r, RLX_F32, 2, sh);
            rlx_tensor *g = rinput(&r, RLX_F32, 1, &sh[1]), *b = rinput(&r, RLX_F32, 1, &sh[1]);
            out[k] = row_build(i, x, g, b);
            use_jit(k == 1);
            rlx_stats_reset();
            CHECK_EQ_INT(rlx_realize(out[k]), RLX_OK);
            rlx_stats_t s = stats_now();
            if (k == 1 && rc->kernels && s.kernels_run != (uint64_t)rc->kernels)
                test_fail(__FILE__, __LINE__, "%s: %llu kernels, expected %d", rc->what,
                          (unsigned long long)s.kernels_run, rc->kernels);
        }
        use_jit(false);
        compare(out[1], out[0], 2e-5, 2e-6, rc->what, (uint64_t)i);
    }
    /* empty rows, no rows, and rows holding inf and NaN */
    {
        float special[12] = {1, INFINITY, 2, 3, -INFINITY, -INFINITY, -INFINITY, -INFINITY, NAN, 1, 2, 3};
        int64_t e1[2] = {3, 0}, e2[2] = {0, 5}, sp[2] = {3, 4};
        rlx_tensor *out[2][5];
        for (int k = 0; k < 2; k++) {
            rlx_tensor *sx = tf32(2, sp, special);
            out[k][0] = rlx_logsumexp(rlx_zeros(RLX_F32, 2, e1), -1, false);
            out[k][1] = rlx_softmax(rlx_zeros(RLX_F32, 2, e2), -1);
            out[k][2] = rlx_softmax(sx, -1);
            out[k][3] = rlx_logsumexp(sx, -1, true);
            out[k][4] = rlx_layer_norm(sx, NULL, NULL, 0);
            use_jit(k == 1);
            CHECK_EQ_INT(rlx_realize_many(out[k], 5), RLX_OK);
        }
        use_jit(false);
        for (int i = 0; i < 5; i++)
            compare(out[1][i], out[0][i], 1e-6, 1e-7, "special rows", (uint64_t)i);
    }
    /* the same in f64, where the reference and the JIT agree closely */
    for (int i = 0; i < 8; i++) {
        int64_t sh[2] = {9, 130};
        rlx_tensor *out[2];
        for (int k = 0; k < 2; k++) {
            rng r = {(uint64_t)i + 90};
            rlx_tensor *x = rinput(&r, RLX_F64, 2, sh);
            rlx_tensor *g = rinput(&r, RLX_F64, 1, &sh[1]), *b = rinput(&r, RLX_F64, 1, &sh[1]);
            out[k] = row_build(i, x, g, b);
            use_jit(k == 1);
            CHECK_EQ_INT(rlx_realize(out[k]), RLX_OK);
        }
        use_jit(false);
        compare(out[1], out[0], 1e-12, 1e-14, "f64 row fusion", (uint64_t)i);
    }
}

/* softmax and log_softmax keep exp(x - max) in the output row between the
 * pass that sums it and the pass that scales it (cg_kernel.c): values on
 * odd row lengths (vector tails), in f32 and f64, against the reference and
 * against the definition (rows of softmax sum to 1, exp(log_softmax) is
 * softmax); one kernel each; a cast after the division (the output's dtype
 * differs from exp's, so exp stays in a stack row); empty and rank-0 inputs. */
TEST(jit_softmax_tails)
{
    static const int64_t cols[] = {1, 3, 17, 33, 1001, 4097};
    for (int di = 0; di < 2; di++) {
        rlx_dtype dt = di ? RLX_F64 : RLX_F32;
        double rtol = di ? 1e-12 : 2e-5, atol = di ? 1e-14 : 2e-6;
        for (int ci = 0; ci < (int)(sizeof cols / sizeof *cols); ci++) {
            int64_t sh[2] = {5, cols[ci]};
            rlx_tensor *out[2][3];
            for (int k = 0; k < 2; k++) {
                rng r = {(uint64_t)ci + 7};
                rlx_tensor *x = rinput(&r, dt, 2, sh);
                out[k][0] = rlx_softmax(x, -1);
                out[k][1] = rlx_log_softmax(x, -1);
                out[k][2] = rlx_cast(rlx_softmax(rlx_mul_s(x, 3), -1), di ? RLX_F32 : RLX_F64);
                use_jit(k == 1);
                for (int j = 0; j < 3; j++) {
                    rlx_stats_reset();
                    CHECK_EQ_INT(rlx_realize(out[k][j]), RLX_OK);
                    if (k == 1 && stats_now().kernels_run != 1)
                        test_fail(__FILE__, __LINE__, "case %d, %lld cols, %s: %llu kernels, expected 1", j,
                                  (long long)cols[ci], rlx_dtype_name(dt),
                                  (unsigned long long)stats_now().kernels_run);
                }
            }
            use_jit(false);
            for (int j = 0; j < 3; j++)
                compare(out[1][j], out[0][j], rtol, atol, "softmax tails", (uint64_t)(ci * 10 + j));
            int64_t n = 5 * cols[ci];
            double *p = malloc((size_t)n * sizeof *p), *lp = malloc((size_t)n * sizeof *lp);
            CHECK(p && lp);
            CHECK_EQ_INT(rlx_read_f64(out[1][0], p, (size_t)n), RLX_OK);
            CHECK_EQ_INT(rlx_read_f64(out[1][1], lp, (size_t)n), RLX_OK);
            for (int64_t row = 0; row < 5; row++) {
                double sum = 0;
                for (int64_t c = 0; c < cols[ci]; c++) {
                    sum += p[row * cols[ci] + c];
                    CHECK_NEAR(exp(lp[row * cols[ci] + c]), p[row * cols[ci] + c], di ? 1e-12 : 1e-5);
                }
                CHECK_NEAR(sum, 1.0, di ? 1e-12 : 1e-5);
            }
            free(p);
            free(lp);
        }
    }
    /* no rows, empty rows: nothing to compute, no crash */
    use_jit(true);
    rlx_tensor *e[4] = {rlx_softmax(rlx_zeros(RLX_F32, 2, (int64_t[]){0, 5}), -1),
                        rlx_log_softmax(rlx_zeros(RLX_F32, 2, (int64_t[]){3, 0}), -1),
                        rlx_softmax(rlx_zeros(RLX_F64, 2, (int64_t[]){3, 0}), -1),
                        rlx_log_softmax(rlx_zeros(RLX_F64, 2, (int64_t[]){0, 5}), -1)};
    CHECK_EQ_INT(rlx_realize_many(e, 4), RLX_OK);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_INT(rlx_numel(e[i]), 0);
    /* rank 0 has no axis to normalize over: an error, not a crash */
    rlx_tensor *s = rlx_scalar(RLX_F32, 2.5);
    CHECK(rlx_softmax(s, -1) == NULL);
    CHECK_EQ_INT(rlx_last_status(), RLX_E_ARG);
    CHECK(rlx_log_softmax(s, 0) == NULL);
    CHECK_EQ_INT(rlx_last_status(), RLX_E_ARG);
    rlx_clear_error();
    /* rows split between threads: the same bits at 1 and 2 threads */
    rlx_tensor *t[2];
    for (int k = 0; k < 2; k++) {
        rng r = {5};
        rlx_tensor *x = rinput(&r, RLX_F32, 2, (int64_t[]){64, 4097});
        t[k] = rlx_softmax(x, -1);
        rlx_set_num_threads(k + 1);
        use_jit(true);
        CHECK_EQ_INT(rlx_realize(t[k]), RLX_OK);
    }
    rlx_set_num_threads(0);
    use_jit(false);
    CHECK(memcmp(rlx_data(t[0]), rlx_data(t[1]), 64 * 4097 * sizeof(float)) == 0);
}

/* ------------------------------------------------------------- the cache */

TEST(jit_cache_hit)
{
    use_jit(true);
    rlx_tensor *a = w2(data_f32(4099, 1));
    rlx_stats_reset();
    CHECK_EQ_INT(rlx_realize(a), RLX_OK);
    rlx_stats_t s1 = stats_now();
    rlx_tensor *b = w2(data_f32(4099, 2)); /* same structure, new data */
    CHECK_EQ_INT(rlx_realize(b), RLX_OK);
    rlx_stats_t s2 = stats_now();
    CHECK_EQ_INT(s2.kernels_compiled, s1.kernels_compiled); /* no compile */
    CHECK_EQ_INT(s2.cache_hits, s1.cache_hits + 1);
    CHECK_EQ_INT(s2.kernels_run, s1.kernels_run + 1);
    rlx_tensor *ref = w2(data_f32(4099, 2));
    use_jit(false);
    rlx_realize(ref);
    compare(b, ref, 2e-6, 2e-6, "cached kernel on new data", 2);
}

/* A CONST's value is a kernel argument, not part of the code: graphs that
 * differ only in a scalar (a learning rate, an offset, an integer step,
 * a value equal to another constant of the graph) reuse the kernel. */
static rlx_tensor *sgd(rlx_tensor *w, rlx_tensor *g, double lr) { return rlx_sub(w, rlx_mul_s(g, lr)); }
static rlx_tensor *affine_c(rlx_tensor *x, double b) { return rlx_add_s(rlx_mul_s(x, 0.5), b); }

TEST(jit_const_args)
{
    static const double lrs[3] = {0.1, 0.01, -3.5};
    static const double offs[2] = {0.25, 0.5}; /* the second equals the scale: one CONST node */
    static const int32_t steps[2] = {3, -7};
    int64_t n = 1000;
    int32_t iv[1000];
    for (int i = 0; i < 1000; i++)
        iv[i] = i - 500;
    for (int kind = 0; kind < 3; kind++) {
        int runs = kind == 0 ? 3 : 2;
        for (int r = 0; r < runs; r++) {
            rlx_tensor *got, *want;
            if (kind == 0) {
                got = sgd(data_f32(n, 1), data_f32(n, 2), lrs[r]);
                want = sgd(data_f32(n, 1), data_f32(n, 2), lrs[r]);
            } else if (kind == 1) {
                got = affine_c(data_f32(n, 3), offs[r]);
                want = affine_c(data_f32(n, 3), offs[r]);
            } else {
                got = rlx_mul_s(rlx_add_s(ti32(1, &n, iv), steps[r]), steps[r]);
                want = rlx_mul_s(rlx_add_s(ti32(1, &n, iv), steps[r]), steps[r]);
            }
            use_jit(false);
            rlx_realize(want);
            use_jit(true);
            rlx_stats_reset();
            CHECK_EQ_INT(rlx_realize(got), RLX_OK);
            use_jit(false);
            rlx_stats_t s = stats_now();
            CHECK_EQ_INT(s.kernels_run, 1);
            if (r > 0) { /* the same kernel with another constant: a hit */
                CHECK_EQ_INT(s.kernels_compiled, 0);
                CHECK_EQ_INT(s.cache_hits, 1);
            }
            compare(got, want, kind == 2 ? 0 : 1e-6, kind == 2 ? 0 : 1e-6, "kernel with a changed constant",
                    (uint64_t)(kind * 10 + r));
        }
    }
}

/* internal: runtime/exec/jit_exec.h, ir/ir.h */
typedef struct {
    uint64_t hits, misses, built, evicted;
    long entries, nodes;
} rt_plan_cache_counts;
void rt_plan_cache_counts_get(rt_plan_cache_counts *out);
void rt_plan_cache_clear(void);
long ir_detached_nodes(void);

static rt_plan_cache_counts plan_counts(void)
{
    rt_plan_cache_counts c;
    rt_plan_cache_counts_get(&c);
    return c;
}

/* Graphs of one structure each (kind), on round r's payloads and scalar v. */
enum { PC_KINDS = 9 };
static rlx_tensor *plan_graph(int kind, int r, double v)
{
    int64_t n4 = 4, s22[2] = {2, 2}, s34[2] = {3, 4}, s42[2] = {4, 2};
    uint64_t seed = (uint64_t)(r * 16 + kind);
    switch (kind) {
    case 0: return sgd(data_f32(n4, seed), data_f32(n4, seed + 1000), v);
    case 1: { /* integers: a constant step and scale */
        int32_t iv[4] = {r - 2, 7 * r, -5, 100 + r};
        return rlx_mul_s(rlx_add_s(ti32(1, &n4, iv), (int)(v * 4) + 7), (int)(v * 4) + 6);
    }
    case 2: { /* one leaf read twice ... */
        rlx_tensor *a = data_f32(n4, seed);
        return rlx_add(a, a);
    }
    case 3: /* ... and two leaves: another structure */
        return rlx_add(data_f32(n4, seed), data_f32(n4, seed + 1000));
    case 4: /* the same op on another shape */
        return rlx_add(rlx_reshape(data_f32(n4, seed), 2, s22), rlx_reshape(data_f32(n4, seed + 1000), 2, s22));
    case 5: /* a reference kernel (matmul) reading a constant */
        return rlx_matmul(rlx_reshape(data_f32(12, seed), 2, s34), rlx_full(RLX_F32, 2, s42, v));
    case 6: /* a reduction between two constants */
        return rlx_add_s(rlx_sum(rlx_mul_s(rlx_reshape(data_f32(12, seed), 2, s34), v), (int[]){1}, 1, false), -v * 3);
    case 7: { /* a bool constant: its value is part of the structure */
        rlx_tensor *x = data_f32(n4, seed);
        rlx_tensor *m = rlx_logical_or(rlx_gt(x, rlx_zeros(RLX_F32, 1, &n4)), rlx_full(RLX_BOOL, 1, &n4, r % 2));
        return rlx_where(m, x, rlx_full(RLX_F32, 1, &n4, v));
    }
    default: /* f64, two constants that are sometimes equal (one node) */
        return rlx_exp(rlx_add_s(rlx_mul_s(rlx_cast(data_f32(n4, seed), RLX_F64), v), r % 2 ? v : 0.25));
    }
}

/* A realization repeated with the same structure runs its cached plan
 * (runtime/exec/plan_cache.c) with new payloads and new scalar constants: the
 * values are the reference's, the plan is built the second time a
 * structure is seen and hit after, and graphs of another structure
 * (interleaved, one leaf read twice or two leaves, another shape, another
 * bool constant) never run each other's plan. */
TEST(jit_plan_cache)
{
    static const double vs[5] = {0.25, -2.5, 3.0, 0.007, 1.5};
    rt_plan_cache_clear();
    rt_plan_cache_counts c0 = plan_counts();
    uint64_t compiled_late = 0;
    for (int r = 0; r < 5; r++) {
        for (int kind = 0; kind < PC_KINDS; kind++) {
            rlx_tensor *got = plan_graph(kind, r, vs[r]), *want = plan_graph(kind, r, vs[r]);
            use_jit(false);
            rlx_realize(want);
            use_jit(true);
            rlx_stats_t s0 = stats_now();
            CHECK_EQ_INT(rlx_realize(got), RLX_OK);
            if (r >= 2)
                compiled_late += stats_now().kernels_compiled - s0.kernels_compiled;
            use_jit(false);
            compare(got, want, kind == 1 ? 0 : 1e-6, kind == 1 ? 0 : 1e-6, "a cached plan", (uint64_t)(r * 16 + kind));
        }
    }
    rt_plan_cache_counts c1 = plan_counts();
    /* kinds 0-6 and 8 (whose constants differ in value only) are built in
     * round 1 and hit in rounds 2-4; kind 7 alternates its bool constant
     * (two structures), kind 8's constants are equal in odd rounds (two
     * structures) */
    CHECK(c1.hits - c0.hits >= 18);
    CHECK(c1.built - c0.built >= 8);
    CHECK_EQ_INT(compiled_late, 0);
    CHECK(c1.entries > 0 && ir_detached_nodes() > 0);
    rt_plan_cache_clear();
    CHECK_EQ_INT(plan_counts().entries, 0);
    CHECK_EQ_INT(ir_detached_nodes(), 0); /* the templates are freed */
}

/* The cache is bounded (least recently used evicted), and a changed knob
 * is never served a plan made under the old one. */
TEST(jit_plan_cache_bounds)
{
    use_jit(true);
    rt_plan_cache_clear();
    rt_plan_cache_counts c0 = plan_counts();
    for (int64_t n = 1; n <= 80; n++) { /* 80 structures, each twice: cached */
        for (int k = 0; k < 2; k++) {
            rlx_tensor *x = rlx_arange(RLX_F32, 0, (double)n, 1);
            rlx_tensor *y = rlx_add_s(rlx_mul_s(x, 2), (double)k);
            float last;
            CHECK_EQ_INT(rlx_read_f32(rlx_slice(y, 0, n - 1, n, 1), &last, 1), RLX_OK);
            CHECK_EQ_INT((int64_t)last, 2 * (n - 1) + k);
        }
    }
    rt_plan_cache_counts c1 = plan_counts();
    CHECK(c1.entries <= 64 && c1.entries > 0);
    CHECK(c1.evicted - c0.evicted >= 16);
    /* fusion off: (a+b)*c is two kernels, not its cached one */
    int64_t n4 = 4;
    for (int k = 0; k < 4; k++) {
        if (k == 3)
            CHECK_EQ_INT(rlx_set_option("fuse_elementwise", "0"), RLX_OK);
        rlx_tensor *y = rlx_mul(rlx_add(data_f32(n4, 1), data_f32(n4, 2)), data_f32(n4, 3));
        rlx_stats_reset();
        CHECK_EQ_INT(rlx_realize(y), RLX_OK);
        CHECK_EQ_INT(stats_now().kernels_run, k == 3 ? 2 : 1);
    }
    CHECK_EQ_INT(rlx_set_option("fuse_elementwise", "default"), RLX_OK);
    use_jit(false);
    rt_plan_cache_clear();
    CHECK_EQ_INT(ir_detached_nodes(), 0);
}

/* Large outputs come from the buffer pool: after the first realization
 * of a schedule, realizing it again maps no new memory (the blocks of the
 * released results are taken again), and the values stay right. */
TEST(jit_buffer_pool)
{
    const int64_t n = (int64_t)1 << 20; /* 4 MiB of f32 */
    rlx_tensor *x = data_f32(n, 5), *xr = data_f32(n, 5);
    rlx_tensor *want = w2(xr);
    use_jit(false);
    CHECK_EQ_INT(rlx_realize(want), RLX_OK);
    rt_bufpool_counts c0, c1;
    for (int r = 0; r < 4; r++) {
        rlx_scope_begin();
        use_jit(true);
        rlx_tensor *y = w2(x);
        rlx_tensor *z = rlx_add_s(rlx_mul(y, y), 1); /* two results alive at once */
        rlx_tensor *yz[2] = {y, z};
        CHECK_EQ_INT(rlx_realize_many(yz, 2), RLX_OK);
        use_jit(false);
        compare(y, want, 2e-6, 2e-6, "pooled output", (uint64_t)r);
        rlx_scope_end(); /* gives both blocks back */
        if (r == 0) {
            rt_bufpool_counts_get(&c0);
            CHECK(c0.cached_bytes >= 2 * (uint64_t)n * 4);
        }
    }
    rt_bufpool_counts_get(&c1);
    CHECK_EQ_INT(c1.mapped, c0.mapped);             /* nothing new from the OS */
    CHECK_EQ_INT(c1.mapped_bytes, c0.mapped_bytes);
    CHECK(c1.reused >= c0.reused + 6);              /* 3 more rounds of 2 blocks */
    CHECK_EQ_INT(c1.live_bytes, c0.live_bytes);
}

/* ------------------------------------------------- views and schedules */

TEST(jit_views_and_roots)
{
    int64_t sh[3] = {5, 7, 11};
    rng r = {99};
    rlx_tensor *xs[2], *outs[2][8];
    for (int k = 0; k < 2; k++) {
        r.s = 99;
        xs[k] = rinput(&r, RLX_F32, 3, sh);
        rlx_tensor *x = xs[k];
        rlx_tensor *xt = rlx_transpose(x, 3, (int[]){2, 0, 1});
        outs[k][0] = rlx_add(xt, rlx_exp(xt));                                 /* permuted loads */
        outs[k][1] = rlx_mul(rlx_slice(x, 2, RLX_END, RLX_END, -2), rlx_flip(rlx_slice(x, 2, 0, RLX_END, 2), 2));
        outs[k][2] = rlx_reshape(rlx_t(rlx_sin(x)), 2, (int64_t[]){-1, 5});     /* reshape of a transposed value */
        outs[k][3] = rlx_reshape(x, 2, (int64_t[]){35, 11});                    /* a root view: shares storage */
        outs[k][4] = rlx_sum(rlx_mul(xt, xt), (int[]){0, 2}, 2, false);        /* non-adjacent reduced axes */
        outs[k][5] = rlx_max(rlx_cos(x), (int[]){0}, 1, true);                 /* row-buffer reduction */
        outs[k][6] = rlx_add_s(rlx_pad(x, 1, 2, 1, -1.0), 1);                    /* reference pad, fused add */
        outs[k][7] = rlx_broadcast_to(rlx_sum(x, (int[]){1}, 1, true), 3, sh); /* root expand of a reduction */
        if (k == 0) {
            use_jit(false);
            rlx_realize_many(outs[0], 8);
        } else {
            use_jit(true);
            CHECK_EQ_INT(rlx_realize_many(outs[1], 8), RLX_OK);
            use_jit(false);
        }
    }
    for (int i = 0; i < 8; i++)
        compare(outs[1][i], outs[0][i], 2e-6, 2e-6, "view case", (uint64_t)i);
    CHECK(rlx_shares_storage(outs[1][3], xs[1]));
}

/* Deep chains are cut into several kernels, results unchanged. */
TEST(jit_long_chain)
{
    rlx_tensor *t[2];
    for (int k = 0; k < 2; k++) {
        t[k] = data_f32(257, 3);
        for (int i = 0; i < 600; i++)
            t[k] = rlx_add_s(rlx_mul_s(t[k], 0.999), 0.001);
        use_jit(k == 1);
        CHECK_EQ_INT(rlx_realize(t[k]), RLX_OK);
    }
    use_jit(false);
    compare(t[1], t[0], 0, 0, "600-op chain", 0);
}

/* --------------------------------------------------- integers and casts */

TEST(jit_int_semantics)
{
    int32_t a[8] = {7, -7, INT32_MIN, 5, 0, 100000, -3, 9};
    int32_t b[8] = {0, 2, -1, -1, 0, 100000, 7, -4};
    float f[8] = {NAN, 3e9f, -3e9f, -2.7f, 2.7f, -0.0f, INFINITY, 1e-30f};
    int64_t n = 8;
    rlx_tensor *out[2][9];
    for (int k = 0; k < 2; k++) {
        rlx_tensor *x = ti32(1, &n, a), *y = ti32(1, &n, b), *z = tf32(1, &n, f);
        out[k][0] = rlx_div(x, y);
        out[k][1] = rlx_rem(x, y);
        out[k][2] = rlx_mul(x, y); /* wraps */
        out[k][3] = rlx_cast(z, RLX_I32);
        out[k][4] = rlx_cast(z, RLX_I64);
        out[k][5] = rlx_cast(z, RLX_BOOL);
        out[k][6] = rlx_neg(rlx_abs(x));
        out[k][7] = rlx_cast(rlx_cast(x, RLX_BOOL), RLX_I64);
        out[k][8] = rlx_sum(rlx_cast(rlx_gt(x, y), RLX_I32), NULL, 0, false);
        use_jit(k == 1);
        CHECK_EQ_INT(rlx_realize_many(out[k], 9), RLX_OK);
    }
    use_jit(false);
    for (int i = 0; i < 9; i++)
        compare(out[1][i], out[0][i], 0, 0, "integer/cast case", (uint64_t)i);
}

TEST(jit_reductions)
{
    int64_t sh[3] = {6, 5, 9}, e[2] = {4, 0};
    for (int dtk = 0; dtk < 2; dtk++) {
        rlx_dtype dt = dtk ? RLX_F64 : RLX_F32;
        rlx_tensor *out[2][10];
        for (int k = 0; k < 2; k++) {
            rng r = {5};
            rlx_tensor *x = rinput(&r, dt, 3, sh);
            rlx_tensor *empty = rlx_zeros(dt, 2, e);
            int i = 0;
            out[k][i++] = rlx_sum(x, NULL, 0, false);
            out[k][i++] = rlx_sum(x, (int[]){0}, 1, false);
            out[k][i++] = rlx_sum(x, (int[]){2}, 1, true);
            out[k][i++] = rlx_prod(rlx_add_s(x, 2), (int[]){1}, 1, false);
            out[k][i++] = rlx_max(x, (int[]){0, 2}, 2, false);
            out[k][i++] = rlx_min(rlx_t(x), (int[]){1}, 1, false);
            out[k][i++] = rlx_sum(empty, (int[]){1}, 1, false); /* empty axis: 0 */
            out[k][i++] = rlx_max(empty, (int[]){1}, 1, false); /* -inf */
            out[k][i++] = rlx_sum(rlx_cast(rlx_gt_s(x, 0), RLX_I64), (int[]){1}, 1, false);
            out[k][i++] = rlx_max(rlx_gt_s(x, 1.5), (int[]){2}, 1, false); /* bool */
            use_jit(k == 1);
            CHECK_EQ_INT(rlx_realize_many(out[k], 10), RLX_OK);
        }
        use_jit(false);
        for (int i = 0; i < 10; i++)
            compare(out[1][i], out[0][i], dt == RLX_F32 ? 1e-6 : 1e-13, 1e-6, "reduction case", (uint64_t)i);
    }
}

/* ----------------------------------------------------- math accuracy */

static int64_t ord32(float f)
{
    int32_t i;
    memcpy(&i, &f, 4);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

static int64_t ord64(double d)
{
    int64_t i;
    memcpy(&i, &d, 8);
    return i < 0 ? INT64_MIN - i : i;
}

static double ref_fn(int f, double x)
{
    switch (f) {
    case 0: return exp(x);
    case 1: return log(x);
    case 2: return tanh(x);
    case 3: return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
    case 4: return erf(x);
    case 5: return sin(x);
    case 6: return cos(x);
    case 7: return tan(x);
    case 8: return atan(x);
    case 9: return expm1(x);
    default: return log1p(x);
    }
}

static rlx_tensor *jit_fn(int f, rlx_tensor *x)
{
    switch (f) {
    case 0: return rlx_exp(x);
    case 1: return rlx_log(x);
    case 2: return rlx_tanh(x);
    case 3: return rlx_sigmoid(x);
    case 4: return rlx_erf(x);
    case 5: return rlx_sin(x);
    case 6: return rlx_cos(x);
    case 7: return rlx_tan(x);
    case 8: return rlx_atan(x);
    case 9: return ts_unary("test", IR_OP_EXPM1, x); /* (inside softplus and elu) */
    default: return ts_unary("test", IR_OP_LOG1P, x);
    }
}

/* 7..10 are fused for f32 only (computed through f64 kernels) */
enum { NFN = 11, NFN64 = 7 };
static const char *fn_names[NFN] = {"exp", "log", "tanh", "sigmoid", "erf", "sin", "cos", "tan", "atan", "expm1", "log1p"};

/* f32 over a sweep of every 2^8th bit pattern (both signs, subnormals,
 * inf, NaN): ulps against libm's double result rounded to f32. The exp,
 * tanh and sigmoid bounds (1, 2, 2) also hold over all 2^32 inputs
 * (checked once through the JIT, see bench/RESULTS.md). */
TEST(jit_ulp_f32)
{
    static const int64_t bound[NFN] = {1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1};
    const int64_t n = ((int64_t)1 << 32) >> 8;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    for (int64_t i = 0; i < n; i++) {
        uint32_t b = (uint32_t)(i << 8) | (uint32_t)(i & 0xff);
        memcpy(&x[i], &b, 4);
    }
    use_jit(true);
    for (int f = 0; f < NFN; f++) {
        rlx_scope_begin();
        rlx_tensor *t = jit_fn(f, tf32(1, &n, x));
        if (rlx_read_f32(t, y, (size_t)n) != RLX_OK) {
            test_fail(__FILE__, __LINE__, "%s: %s", fn_names[f], rlx_last_error());
            rlx_scope_end();
            continue;
        }
        int64_t worst = 0;
        float wx = 0;
        for (int64_t i = 0; i < n; i++) {
            float want = (float)ref_fn(f, (double)x[i]);
            if (isnan(want) || isnan(y[i])) {
                if (isnan(want) != isnan(y[i]) && worst < INT32_MAX) {
                    worst = INT32_MAX;
                    wx = x[i];
                }
                continue;
            }
            int64_t d = llabs(ord32(y[i]) - ord32(want));
            if (d > worst) {
                worst = d;
                wx = x[i];
            }
        }
        printf("  f32 %-7s max %lld ulp (at %.9g)\n", fn_names[f], (long long)worst, (double)wx);
        if (worst > bound[f])
            test_fail(__FILE__, __LINE__, "f32 %s: %lld ulp at %.9g (bound %lld)", fn_names[f], (long long)worst,
                      (double)wx, (long long)bound[f]);
        rlx_scope_end();
    }
    use_jit(false);
    free(x);
    free(y);
}

/* f64 over log-uniform magnitudes of both signs (sin/cos: |x| < 1e7). */
/* f32 pow and atan2 (fused through f64 kernels): ulps against libm in
 * double rounded to f32 over random pairs, and every pair of a grid of
 * special values (signed zeros, infinities, NaN, +-1, odd and even
 * integers, subnormals) bit for bit, as C99 Annex F defines them. */
TEST(jit_ulp_f32_binary)
{
    static const float sv[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 2.0f, -2.0f, 3.0f, -3.0f, 2.5f, -2.5f,
                               INFINITY, -INFINITY, NAN, 1e-40f, -1e-40f, 1e30f, -1e30f, 16777217.0f, 0.75f};
    enum { NS = sizeof sv / sizeof *sv, NR = 1 << 18 };
    const int64_t n = NR + NS * NS;
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b), *y = malloc((size_t)n * sizeof *y);
    rng r = {77};
    use_jit(true);
    for (int f = 0; f < 2; f++) {
        for (int64_t i = 0; i < NR; i++) {
            a[i] = (float)exp2(runi(&r, -30, 30)) * (rint_(&r, 2) ? -1 : 1);
            b[i] = f == 0 && rint_(&r, 4) == 0 ? (float)(rint_(&r, 41) - 20) : (float)runi(&r, -20, 20);
            if (f == 1)
                b[i] = (float)exp2(runi(&r, -30, 30)) * (rint_(&r, 2) ? -1 : 1);
        }
        for (int i = 0; i < NS * NS; i++) {
            a[NR + i] = sv[i / NS];
            b[NR + i] = sv[i % NS];
        }
        rlx_scope_begin();
        rlx_tensor *ta = tf32(1, &n, a), *tb = tf32(1, &n, b);
        rlx_tensor *t = f == 0 ? rlx_pow(ta, tb) : rlx_atan2(ta, tb);
        CHECK_EQ_INT(rlx_read_f32(t, y, (size_t)n), RLX_OK);
        int64_t worst = 0, bad = 0;
        for (int64_t i = 0; i < n; i++) {
            float want = (float)(f == 0 ? pow(a[i], b[i]) : atan2(a[i], b[i]));
            bool same = memcmp(&want, &y[i], 4) == 0 || (isnan(want) && isnan(y[i]));
            if (i >= NR && !same && bad++ < 5)
                printf("  %s(%a, %a) = %a, want %a\n", f ? "atan2" : "pow", a[i], b[i], y[i], want);
            if (i < NR && !same) {
                int64_t d = isnan(want) != isnan(y[i]) ? INT32_MAX : llabs(ord32(y[i]) - ord32(want));
                worst = d > worst ? d : worst;
            }
        }
        printf("  f32 %-7s max %lld ulp over %d random pairs\n", f ? "atan2" : "pow", (long long)worst, NR);
        CHECK_EQ_INT(bad, 0);
        CHECK(worst <= 1);
        rlx_scope_end();
    }
    use_jit(false);
    free(a);
    free(b);
    free(y);
}

TEST(jit_ulp_f64)
{
    static const int64_t bound[NFN64] = {2, 2, 3, 3, 3, 3, 3};
    const int64_t n = 1 << 20;
    double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    use_jit(true);
    for (int f = 0; f < NFN64; f++) {
        rng r = {(uint64_t)f + 11};
        double lo = f == 1 ? -1074 : -60, hi = f == 0 ? 9.5 : f == 1 ? 1023 : f >= 5 ? 23 : 5;
        for (int64_t i = 0; i < n; i++) {
            x[i] = exp2(runi(&r, lo, hi));
            if (f != 1 && rint_(&r, 2))
                x[i] = -x[i];
        }
        x[0] = 0;
        x[1] = INFINITY;
        x[2] = -INFINITY;
        x[3] = NAN;
        rlx_scope_begin();
        rlx_tensor *t = jit_fn(f, tf64(1, &n, x));
        if (rlx_read_f64(t, y, (size_t)n) != RLX_OK) {
            test_fail(__FILE__, __LINE__, "%s: %s", fn_names[f], rlx_last_error());
            rlx_scope_end();
            continue;
        }
        int64_t worst = 0;
        double wx = 0;
        for (int64_t i = 0; i < n; i++) {
            double want = ref_fn(f, x[i]);
            if (isnan(want) || isnan(y[i])) {
                if (isnan(want) != isnan(y[i]) && worst < INT32_MAX) {
                    worst = INT32_MAX;
                    wx = x[i];
                }
                continue;
            }
            int64_t d = ord64(y[i]) - ord64(want);
            d = d < 0 ? -d : d;
            if (d > worst) {
                worst = d;
                wx = x[i];
            }
        }
        printf("  f64 %-7s max %lld ulp (at %.17g)\n", fn_names[f], (long long)worst, wx);
        if (worst > bound[f])
            test_fail(__FILE__, __LINE__, "f64 %s: %lld ulp at %.17g (bound %lld)", fn_names[f], (long long)worst,
                      wx, (long long)bound[f]);
        rlx_scope_end();
    }
    use_jit(false);
    free(x);
    free(y);
}

/* ------------------------------------------------------------ threads */

/* Large kernels split their outer loop over the pool; the bits do not
 * depend on the thread count (outer dims are never reduced). */
TEST(jit_threads_deterministic)
{
    int64_t sh[2] = {300, 1001}, big[2] = {1024, 1024};
    rlx_tensor *out[3][6];
    for (int k = 0; k < 3; k++) {
        rng r = {77};
        rlx_tensor *x = rinput(&r, RLX_F32, 2, sh);
        out[k][0] = w2(x);
        out[k][1] = rlx_sum(rlx_exp(x), (int[]){1}, 1, false);
        out[k][2] = rlx_sum(rlx_mul(x, x), (int[]){0}, 1, false);
        out[k][3] = rlx_softmax(x, -1); /* a phased row kernel */
        /* 4 MiB: the exp pass runs in chunks prefetching the next row */
        rlx_tensor *xb = rlx_mul_s(rinput(&r, RLX_F32, 2, big), 20);
        out[k][4] = rlx_softmax(xb, -1);
        out[k][5] = rlx_log_softmax(xb, -1);
        rlx_set_num_threads(k == 0 ? 1 : k == 1 ? 2 : 3);
        use_jit(true);
        CHECK_EQ_INT(rlx_realize_many(out[k], 6), RLX_OK);
        use_jit(false);
    }
    rlx_set_num_threads(0);
    {
        rng r = {77};
        rinput(&r, RLX_F32, 2, sh);
        rlx_tensor *xb = rlx_mul_s(rinput(&r, RLX_F32, 2, big), 20);
        rlx_tensor *want[2] = {rlx_softmax(xb, -1), rlx_log_softmax(xb, -1)};
        CHECK_EQ_INT(rlx_realize_many(want, 2), RLX_OK);
        compare(out[0][4], want[0], 2e-5, 1e-30, "softmax, 4 MiB", 0);
        compare(out[0][5], want[1], 2e-5, 2e-6, "log_softmax, 4 MiB", 0);
    }
    for (int k = 1; k < 3; k++)
        for (int i = 0; i < 6; i++) {
            size_t bytes = (size_t)rlx_numel(out[0][i]) * sizeof(float);
            CHECK(memcmp(rlx_data(out[0][i]), rlx_data(out[k][i]), bytes) == 0);
        }
}

/* ------------------------------------------------------ LLVM failures */

TEST(jit_llvm_errors)
{
    int64_t n = 17;
    use_jit(true);
    cg_test_inject(1); /* the next module fails the verifier */
    rlx_tensor *a = rlx_mul_s(data_f32(n, 1), 3.25);
    CHECK_ERR(rlx_realize(a), RLX_E_JIT, "rlx_realize");
    cg_test_inject(2); /* the next lookup fails */
    rlx_tensor *b = rlx_mul_s(data_f32(n, 1), 4.25);
    rlx_clear_error();
    CHECK_EQ_INT(rlx_realize(b), RLX_E_JIT);
    CHECK(strstr(rlx_last_error(), "rlx_no_such_kernel") != NULL);
    rlx_clear_error();
    /* and the JIT still works afterwards */
    rlx_tensor *c = rlx_mul_s(data_f32(n, 1), 5.25);
    CHECK_EQ_INT(rlx_realize(c), RLX_OK);
    use_jit(false);
}

/* ------------------------------------------------- allocation failures */

/* exp(x/2) of n values (sum: their sum) realized by the JIT; checks the
 * values, and that a kernel was compiled when fresh. Nonzero on success. */
static int exp_half(int64_t n, bool sum, bool fresh)
{
    float *v = malloc((size_t)n * sizeof *v);
    double *got = calloc((size_t)n, sizeof *got), total = 0;
    for (int64_t i = 0; i < n; i++) {
        v[i] = (float)(i % 7) - 3;
        total += exp(0.5 * v[i]);
    }
    rlx_scope_begin();
    rlx_stats_t s0 = stats_now();
    int ax0 = 0;
    rlx_tensor *r = rlx_exp(rlx_mul_s(rlx_from_data(RLX_F32, 1, &n, v), 0.5));
    if (sum)
        r = rlx_sum(r, &ax0, 1, false);
    int64_t nr = sum ? 1 : n;
    int ok = r && rlx_read_f64(r, got, (size_t)nr) == RLX_OK;
    for (int64_t i = 0; ok && i < nr; i++)
        CHECK(test_close(got[i], sum ? total : exp(0.5 * v[i]), 1e-5, 1e-5));
    if (ok && fresh)
        CHECK(stats_now().kernels_compiled > s0.kernels_compiled); /* it reached code generation */
    rlx_scope_end();
    free(v);
    free(got);
    return ok;
}

/* Realizations that compile kernels: each run has a new length, so it
 * keys, compiles, links and caches a reduction kernel never seen before
 * (the disk cache is off in tests), and failing its allocations in turn
 * walks code generation too, not only the graph layers. Each run first
 * realizes an elementwise kernel of one fixed length, compiled by the
 * first run that gets that far and a cache hit after. */
static int64_t fresh_len = 3001;

static int fresh_kernel_workload(void)
{
    int64_t n = fresh_len++;
    return exp_half(2999, false, false) && exp_half(n, true, true);
}

/* --------------------------------------------------------------- pads */

/* The pad cases of one dtype over x, y [5,7,11] (and e, an empty one). */
enum { NPAD = 16 };
static void pad_cases(rlx_dtype dt, rlx_tensor *x, rlx_tensor *y, rlx_tensor *e, rlx_tensor **out)
{
    bool fl = is_float(dt), bo = dt == RLX_BOOL;
    double v = bo ? 1 : fl ? -1.5 : 7;
    rlx_tensor *xt = rlx_transpose(x, 3, (int[]){2, 0, 1});                    /* non-contiguous [11,5,7] */
    out[0] = rlx_pad(x, 1, 2, 1, v);                                            /* a root pad */
    out[1] = rlx_add(rlx_pad(xt, 2, 3, 0, v), rlx_pad(rlx_transpose(y, 3, (int[]){2, 0, 1}), 2, 0, 3, 0));
    out[2] = rlx_pad(bo ? rlx_logical_and(x, y) : rlx_div(x, y), 0, 1, 1, v);   /* an expression under a pad */
    out[3] = rlx_pad(rlx_pad(x, 2, 1, 0, 0), 0, 0, 2, v);                       /* nested, other values */
    out[4] = rlx_pad(rlx_pad(x, 2, 2, 1, v), 2, 1, 3, 0);                       /* nested on one axis */
    out[5] = rlx_reshape(rlx_pad(x, 2, 1, 1, v), 2, (int64_t[]){35, 13});       /* a reshape above */
    /* the attention-gradient pattern: permute, reshape, pad */
    out[6] = rlx_pad(rlx_reshape(rlx_transpose(x, 3, (int[]){1, 0, 2}), 2, (int64_t[]){7, 55}), 1, 55, 0, v);
    out[7] = rlx_slice(rlx_pad(x, 1, 3, 3, v), 1, 3, 10, 1);                    /* only the interior */
    out[8] = rlx_slice(rlx_pad(x, 1, 3, 3, v), 1, 0, 3, 1);                     /* only the padding */
    out[9] = rlx_slice(rlx_pad(x, 2, 4, 4, v), 2, RLX_END, RLX_END, -3);        /* a strided, reversed reader */
    rlx_tensor *q = rlx_narrow(x, 2, 0, 4), *k = rlx_narrow(y, 2, 4, 4), *w = rlx_narrow(x, 2, 8, 3);
    out[10] = rlx_add(rlx_add(rlx_pad(q, 2, 0, 7, 0), rlx_pad(k, 2, 4, 3, 0)), rlx_pad(w, 2, 8, 0, 0));
    out[11] = rlx_sum(rlx_pad(x, 2, 1, 2, v), (int[]){2}, 1, false);            /* reduced */
    out[12] = rlx_pad(e, 1, 1, 2, v);                                           /* of an empty value */
    out[13] = rlx_pad(rlx_broadcast_to(rlx_narrow(x, 1, 0, 1), 3, (int64_t[]){5, 4, 11}), 1, 1, 1, v); /* of a broadcast */
    out[14] = fl ? rlx_softmax(rlx_pad(x, 2, 1, 2, -2), 2) : rlx_pad(rlx_add(x, y), 2, 1, 0, v); /* a row kernel */
    out[15] = fl ? rlx_matmul(rlx_pad(x, 2, 1, 0, v), rlx_pad(rlx_transpose(y, 3, (int[]){0, 2, 1}), 1, 1, 0, 0))
                 : rlx_pad(x, 0, 0, 0, v);                                      /* a library kernel reads pads */
}

TEST(jit_pad_fusion)
{
    int64_t sh[3] = {5, 7, 11}, es[2] = {0, 3};
    for (int dt = RLX_BOOL; dt <= RLX_F64; dt++) {
        rlx_tensor *outs[2][NPAD];
        rlx_stats_t s0 = stats_now(), s1 = s0;
        for (int b = 0; b < 2; b++) {
            rng r = {7 + (uint64_t)dt};
            rlx_tensor *x = rinput(&r, (rlx_dtype)dt, 3, sh), *y = rinput(&r, (rlx_dtype)dt, 3, sh);
            rlx_tensor *e = rinput(&r, (rlx_dtype)dt, 2, es);
            pad_cases((rlx_dtype)dt, x, y, e, outs[b]);
            use_jit(b == 1);
            s0 = stats_now();
            CHECK_EQ_INT(rlx_realize_many(outs[b], NPAD), RLX_OK);
            s1 = stats_now();
            use_jit(false);
        }
        /* no reference-evaluator kernel: only matmul's library kernel */
        uint64_t loops = s1.cache_hits + s1.cache_misses - s0.cache_hits - s0.cache_misses;
        uint64_t refs = s1.kernels_run - s0.kernels_run - loops;
        CHECK_EQ_INT((int)refs, is_float((rlx_dtype)dt) ? 1 : 0);
        for (int i = 0; i < NPAD; i++) {
            double tol = (i == 11 || i >= 14) && is_float((rlx_dtype)dt) ? 1e-6 : 0; /* sums: the JIT reassociates */
            compare(outs[1][i], outs[0][i], tol, tol, rlx_dtype_name((rlx_dtype)dt), (uint64_t)i);
        }
    }
}

/* A pad of -0: the fill keeps its sign (a select, never an add of 0). */
TEST(jit_pad_negative_zero)
{
    double xv[3] = {1, -0.0, 2};
    for (int dt = RLX_F32; dt <= RLX_F64; dt++) {
        rlx_tensor *x = rlx_cast(rlx_from_data(RLX_F64, 1, (int64_t[]){3}, xv), (rlx_dtype)dt);
        use_jit(false);
        rlx_realize(x);
        use_jit(true);
        rlx_tensor *p = rlx_pad(x, 0, 2, 1, -0.0);
        CHECK_EQ_INT(rlx_realize(p), RLX_OK);
        use_jit(false);
        double v[6];
        CHECK(rlx_read_f64(p, v, 6) == RLX_OK);
        for (int i = 0; i < 6; i++)
            CHECK(v[i] == (i == 2 ? 1 : i == 4 ? 2 : 0) && (bool)signbit(v[i]) == (i < 2 || i == 3 || i == 5));
    }
}

/* The cat cases of one dtype over x, y [5,7,11] (e: [0,3], empty). */
enum { NCAT = 10 };
static void cat_cases(rlx_dtype dt, rlx_tensor *x, rlx_tensor *y, rlx_tensor *e, rlx_tensor **out)
{
    rlx_tensor *xt = rlx_transpose(x, 3, (int[]){0, 2, 1}), *yt = rlx_transpose(y, 3, (int[]){0, 2, 1}); /* [5,11,7] */
    out[0] = rlx_cat((rlx_tensor *[]){x, y}, 2, 1);                                          /* a root cat */
    out[1] = rlx_cat((rlx_tensor *[]){xt, yt, xt}, 3, 2);                                    /* non-contiguous */
    out[2] = rlx_add(rlx_cat((rlx_tensor *[]){rlx_narrow(x, 2, 0, 4), rlx_narrow(y, 2, 4, 7)}, 2, 2), y);
    out[3] = rlx_slice(rlx_cat((rlx_tensor *[]){x, y, x}, 3, 0), 0, 3, 12, 2);               /* a strided reader */
    out[4] = rlx_slice(rlx_cat((rlx_tensor *[]){x, y}, 2, 0), 0, 6, 9, 1);                   /* one input only */
    out[5] = rlx_reshape(rlx_cat((rlx_tensor *[]){x, y}, 2, 2), 2, (int64_t[]){35, 22});     /* a reshape above */
    out[6] = rlx_cat((rlx_tensor *[]){rlx_pad(x, 1, 1, 0, 1), rlx_narrow(y, 1, 0, 0), y}, 3, 1); /* a pad, an empty input */
    out[7] = rlx_cat((rlx_tensor *[]){e, e}, 2, 0);                                          /* empty */
    rlx_tensor *many[12];
    for (int i = 0; i < 12; i++)
        many[i] = rlx_narrow(i % 2 ? x : y, 2, i % 11, 1);
    out[8] = rlx_cat(many, 12, 2);                                                          /* many inputs */
    out[9] = dt == RLX_BOOL ? rlx_logical_or(rlx_cat((rlx_tensor *[]){x, y}, 2, 0), rlx_cat((rlx_tensor *[]){y, x}, 2, 0))
                            : rlx_sum(rlx_cat((rlx_tensor *[]){x, y}, 2, 2), (int[]){2}, 1, false); /* reduced */
}

TEST(jit_cat_fusion)
{
    int64_t sh[3] = {5, 7, 11}, es[2] = {0, 3};
    for (int dt = RLX_BOOL; dt <= RLX_F64; dt++) {
        rlx_tensor *outs[2][NCAT];
        rlx_stats_t s0 = stats_now(), s1 = s0;
        for (int b = 0; b < 2; b++) {
            rng r = {17 + (uint64_t)dt};
            rlx_tensor *x = rinput(&r, (rlx_dtype)dt, 3, sh), *y = rinput(&r, (rlx_dtype)dt, 3, sh);
            rlx_tensor *e = rinput(&r, (rlx_dtype)dt, 2, es);
            cat_cases((rlx_dtype)dt, x, y, e, outs[b]);
            use_jit(b == 1);
            s0 = stats_now();
            CHECK_EQ_INT(rlx_realize_many(outs[b], NCAT), RLX_OK);
            s1 = stats_now();
            use_jit(false);
        }
        uint64_t loops = s1.cache_hits + s1.cache_misses - s0.cache_hits - s0.cache_misses;
        CHECK_EQ_INT((int)(s1.kernels_run - s0.kernels_run - loops), 0); /* no reference-evaluator kernel */
        for (int i = 0; i < NCAT; i++) {
            double tol = i == 9 && is_float((rlx_dtype)dt) ? 1e-6 : 0; /* sums: the JIT reassociates */
            compare(outs[1][i], outs[0][i], tol, tol, rlx_dtype_name((rlx_dtype)dt), (uint64_t)i);
        }
    }
    /* -0 stays -0: a cat is selects, never a sum of zero-padded pieces */
    double zv[2] = {-0.0, 1};
    rlx_tensor *z = rlx_from_data(RLX_F64, 1, (int64_t[]){2}, zv);
    use_jit(true);
    rlx_tensor *cz = rlx_cat((rlx_tensor *[]){z, z}, 2, 0);
    CHECK_EQ_INT(rlx_realize(cz), RLX_OK);
    use_jit(false);
    double cv[4];
    CHECK(rlx_read_f64(cz, cv, 4) == RLX_OK && signbit(cv[0]) && signbit(cv[2]) && cv[1] == 1 && cv[3] == 1);
}

/* The q/k/v gradient of a fused projection: per-head values [B,H,S,D]
 * permuted to [B,S,H,D], reshaped to [B,S,H*D] and padded into their
 * third of [B,S,3*H*D], summed: one LOOP kernel (the loop splits the row
 * into heads, so no permuted copy is made), equal to the reference. */
TEST(jit_pad_head_split_one_kernel)
{
    int64_t sh[4] = {2, 4, 6, 8};
    rlx_tensor *outs[2];
    rlx_stats_t s0 = stats_now(), s1 = s0;
    for (int b = 0; b < 2; b++) {
        rng r = {5};
        rlx_tensor *sum = NULL;
        for (int j = 0; j < 3; j++) {
            rlx_tensor *g = rinput(&r, RLX_F32, 4, sh);
            rlx_tensor *h = rlx_reshape(rlx_transpose(g, 4, (int[]){0, 2, 1, 3}), 3, (int64_t[]){2, 6, 32});
            rlx_tensor *p = rlx_pad(h, 2, 32 * j, 32 * (2 - j), 0);
            sum = sum ? rlx_add(sum, p) : p;
        }
        outs[b] = sum;
        use_jit(b == 1);
        s0 = stats_now();
        CHECK_EQ_INT(rlx_realize(sum), RLX_OK);
        s1 = stats_now();
        use_jit(false);
    }
    CHECK_EQ_INT((int)(s1.kernels_run - s0.kernels_run), 1);
    CHECK_EQ_INT((int)(s1.cache_hits + s1.cache_misses - s0.cache_hits - s0.cache_misses), 1);
    compare(outs[1], outs[0], 0, 0, "head split", 0);
}

/* Row reductions nested in a row reduction's source, more than a kernel
 * takes as phases (each z - mean(z) reads the reduction before it): the
 * scheduler cuts the chain instead of building a kernel the row plan
 * refuses (found by rlx-soak: "row plan: kernel of 9 phases, at most 8"). */
TEST(jit_nested_row_reductions_past_the_phase_limit)
{
    for (int depth = 6; depth <= 12; depth++) {
        double got[2][6];
        for (int b = 0; b < 2; b++) {
            rlx_set_option("backend", b ? "jit" : "ref");
            rlx_scope_begin();
            rlx_tensor *z = rlx_rand(RLX_F64, 2, (int64_t[]){6, 5}, 11);
            for (int i = 0; i < depth; i++)
                z = rlx_sub(rlx_mul_s(z, 1.5), rlx_sum(z, (int[]){1}, 1, true));
            rlx_tensor *r = rlx_sum(rlx_mul(z, z), (int[]){1}, 1, false);
            CHECK_EQ_INT(rlx_read_f64(r, got[b], 6), RLX_OK);
            rlx_scope_end();
        }
        for (int k = 0; k < 6; k++)
            CHECK_NEAR(got[1][k], got[0][k], 1e-9 * fabs(got[0][k]) + 1e-12);
    }
    rlx_set_option("backend", "jit");
}

TEST(jit_allocation_failures)
{
    use_jit(true);
    cg_cache_reset_for_tests(); /* an empty kernel cache, so a run grows it */
    CHECK_EQ_INT(rlx_set_option("generic_kernels", "0"), RLX_OK); /* each new length: a new kernel */
    ALLOC_WALK(fresh_kernel_workload, 10);
    CHECK_EQ_INT(rlx_set_option("generic_kernels", "default"), RLX_OK);
    use_jit(false);
}

/* ------------------------------------------------------ narrow dtypes */

/* LOOP kernels (lookups) and all kernels run by the last realizations. */
typedef struct {
    uint64_t lookups, run;
} kcount;
static kcount kcount_now(void)
{
    rlx_stats_t s = stats_now();
    return (kcount){s.cache_hits + s.cache_misses, s.kernels_run};
}

/* x cast to `to` on the JIT as one LOOP kernel compiled now (inj: the
 * cg_test_inject code for its compile, 0 none); its payload into out. */
static void jit_cast_bits(rlx_dtype from, const void *data, int64_t n, rlx_dtype to, int inj, void *out,
                          const char *what)
{
    rlx_scope_begin();
    rlx_tensor *x = rlx_from_data(from, 1, &n, data);
    rlx_tensor *y = rlx_cast(x, to);
    cg_cache_reset_for_tests();
    rt_plan_cache_clear();
    if (inj)
        cg_test_inject(inj);
    use_jit(true);
    kcount k0 = kcount_now();
    rlx_status st = rlx_realize(y);
    kcount k1 = kcount_now();
    use_jit(false);
    if (st != RLX_OK || k1.lookups - k0.lookups != 1 || k1.run - k0.run != 1)
        test_fail(__FILE__, __LINE__, "%s: status %d, %llu LOOP kernels of %llu (want one): %s", what, (int)st,
                  (unsigned long long)(k1.lookups - k0.lookups), (unsigned long long)(k1.run - k0.run),
                  rlx_last_error());
    if (rlx_read(y, out, (size_t)n * ir_dtype_size(to)) != RLX_OK)
        memset(out, 0, (size_t)n * ir_dtype_size(to));
    rlx_scope_end();
}

static uint16_t half_bits(rlx_dtype dt, double v) { return dt == RLX_F16 ? ir_f16_bits(v) : ir_bf16_bits(v); }
static double half_value(rlx_dtype dt, uint16_t h) { return dt == RLX_F16 ? ir_f16_value(h) : ir_bf16_value(h); }

/* Counts the elements of got that differ from want (16-bit patterns),
 * reporting the first. */
static int diff16(const uint16_t *got, const uint16_t *want, const double *src, int64_t n, const char *what)
{
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i] && !bad++)
            test_fail(__FILE__, __LINE__, "%s: element %lld (%a) gives 0x%04x, reference 0x%04x", what, (long long)i,
                      src[i], got[i], want[i]);
    return bad;
}

/* f16 and bf16 casts on the JIT against ir/cast.h bit for bit: every
 * pattern to f32 and back; 10^6 f32 values (random bits: NaN, inf,
 * subnormals; ties and their neighbours; the overflow edge); f64 values
 * next to ties (rounding through f32 to nearest would round twice);
 * integers of every width. f16 also without F16C (integer code). */
TEST(jit_half_cast_sweep)
{
    enum { NR = 1 << 20 };
    uint16_t *pat = malloc(65536 * sizeof *pat), *h = malloc(NR * sizeof *h), *want = malloc(NR * sizeof *want);
    float *f = malloc(NR * sizeof *f);
    double *d = malloc(NR * sizeof *d);
    int64_t *iv = malloc(NR * sizeof *iv);
    for (int v = 0; v < 3; v++) {
        rlx_dtype dt = v == 2 ? RLX_BF16 : RLX_F16;
        int inj = v == 1 ? 3 : 0;
        char what[96];
        const char *nm = v == 0 ? "f16" : v == 1 ? "f16 (no F16C)" : "bf16";
        /* every pattern to f32: the exact value (a quiet NaN of its sign for a NaN), and back */
        for (int i = 0; i < 65536; i++)
            pat[i] = (uint16_t)i;
        jit_cast_bits(dt, pat, 65536, RLX_F32, inj, f, (snprintf(what, sizeof what, "%s -> f32", nm), what));
        int bad = 0;
        for (int i = 0; i < 65536 && bad < 3; i++) {
            double e = half_value(dt, (uint16_t)i);
            bool ok = isnan(e) ? isnan(f[i]) && !signbit(f[i]) == !signbit(e) : memcmp(&(float){(float)e}, &f[i], 4) == 0;
            if (!ok && !bad++)
                test_fail(__FILE__, __LINE__, "%s -> f32: 0x%04x gives %a, want %a", nm, i, (double)f[i], e);
        }
        jit_cast_bits(RLX_F32, f, 65536, dt, inj, h, (snprintf(what, sizeof what, "%s -> f32 -> %s", nm, nm), what));
        for (int i = 0; i < 65536; i++) {
            want[i] = half_bits(dt, half_value(dt, (uint16_t)i)); /* itself, NaN canonical */
            d[i] = (double)f[i];
        }
        bad += diff16(h, want, d, 65536, what);
        /* f32 values */
        rng r = {(uint64_t)v + 11};
        for (int64_t i = 0; i < NR; i++) {
            uint32_t u = (uint32_t)rnext(&r);
            uint16_t p = (uint16_t)rnext(&r);
            int k = rint_(&r, 6);
            float x;
            if (k == 0) { /* any bits */
                memcpy(&x, &u, 4);
            } else if (k <= 3) { /* the tie between p and the next pattern, or next to it */
                double lo = half_value(dt, (uint16_t)(p & 0x7fff)), hi = half_value(dt, (uint16_t)((p & 0x7fff) + 1));
                x = (float)((lo + hi) / 2);
                if (!isfinite(hi) || isnan(lo))
                    x = (float)lo;
                x = k == 1 ? x : k == 2 ? nextafterf(x, INFINITY) : nextafterf(x, 0);
                if (p & 0x8000)
                    x = -x;
            } else if (k == 4) { /* the overflow edge (f16 65520) and the subnormals */
                x = dt == RLX_F16 ? 65520.0f + (float)(rint_(&r, 65) - 32) * 0.5f
                                  : ldexpf(1.0f + (float)rint_(&r, 1 << 23) * 0x1p-23f, -133 + rint_(&r, 12));
            } else {
                x = (float)ldexp(runi(&r, -1, 1), rint_(&r, 300) - 150);
            }
            f[i] = x;
            d[i] = x;
            want[i] = half_bits(dt, x);
        }
        jit_cast_bits(RLX_F32, f, NR, dt, inj, h, (snprintf(what, sizeof what, "f32 -> %s", nm), what));
        bad += diff16(h, want, d, NR, what);
        /* f64 values a hair off a tie: rounded once, not through f32 */
        for (int64_t i = 0; i < NR; i++) {
            uint16_t p = (uint16_t)(rnext(&r) & 0x7fff);
            double lo = half_value(dt, p), hi = half_value(dt, (uint16_t)(p + 1));
            double x = isfinite(hi) && !isnan(lo) ? (lo + hi) / 2 : runi(&r, -7e4, 7e4);
            int k = rint_(&r, 4);
            x = k == 0 ? x : k == 1 ? x * (1 + 0x1p-40) : k == 2 ? x * (1 - 0x1p-40) : ldexp(runi(&r, -1, 1), rint_(&r, 2200) - 1100);
            d[i] = rint_(&r, 2) ? -x : x;
            want[i] = half_bits(dt, d[i]);
        }
        jit_cast_bits(RLX_F64, d, NR, dt, inj, h, (snprintf(what, sizeof what, "f64 -> %s", nm), what));
        bad += diff16(h, want, d, NR, what);
        /* integers: (double)i rounded once */
        static const rlx_dtype its[4] = {RLX_I32, RLX_U32, RLX_I64, RLX_I16};
        for (int t = 0; t < 4; t++) {
            int64_t n = 1 << 16;
            void *buf = malloc((size_t)n * 8);
            for (int64_t i = 0; i < n; i++) {
                int sh = rint_(&r, 64);
                int64_t x = (int64_t)(rnext(&r) >> sh);
                if (rint_(&r, 2))
                    x = -x;
                switch (its[t]) {
                case RLX_I32: ((int32_t *)buf)[i] = (int32_t)x; d[i] = (int32_t)x; break;
                case RLX_U32: ((uint32_t *)buf)[i] = (uint32_t)x; d[i] = (uint32_t)x; break;
                case RLX_I16: ((int16_t *)buf)[i] = (int16_t)x; d[i] = (int16_t)x; break;
                default: ((int64_t *)buf)[i] = x; d[i] = (double)x; break;
                }
                want[i] = half_bits(dt, d[i]);
            }
            snprintf(what, sizeof what, "%s -> %s", rlx_dtype_name(its[t]), nm);
            jit_cast_bits(its[t], buf, n, dt, inj, h, what);
            bad += diff16(h, want, d, n, what);
            free(buf);
        }
        (void)iv;
        CHECK_EQ_INT(bad, 0);
    }
    free(pat);
    free(h);
    free(want);
    free(f);
    free(d);
    free(iv);
}

/* Every cast between two dtypes on the JIT, bit for bit the reference's
 * (NaN for NaN): values at the edges of every range (wrapping, saturating,
 * rounding, overflowing), each first cast into the source dtype by the
 * reference. */
TEST(jit_cast_all_pairs)
{
    static const double vals[] = {0, -0.0, 1, -1, 2.5, -2.5, 0.1, 127, 128, -128, -129, 255, 256, 300.7, -1.5,
                                  32767, 32768, -32769, 65504, 65519.99, 65520, 1e10, -1e10, 2147483648.0,
                                  -2147483649.0, 4294967295.0, 4294967296.0, 3e38, 1e-8, 1e-40, 0x1.00801p0,
                                  9007199254740993.0, INFINITY, -INFINITY, NAN};
    int64_t n = (int64_t)(sizeof vals / sizeof *vals);
    int bad = 0;
    for (int from = RLX_BOOL; from <= RLX_U32; from++)
        for (int to = RLX_BOOL; to <= RLX_U32; to++) {
            if (from == to)
                continue;
            rlx_tensor *out[2];
            for (int k = 0; k < 2; k++) {
                use_jit(false);
                rlx_tensor *x = rlx_cast(rlx_from_data(RLX_F64, 1, &n, vals), (rlx_dtype)from);
                rlx_realize(x);
                out[k] = rlx_cast(x, (rlx_dtype)to);
                use_jit(k == 1);
                kcount k0 = kcount_now();
                CHECK_EQ_INT(rlx_realize(out[k]), RLX_OK);
                kcount k1 = kcount_now();
                if (k == 1 && k1.run - k0.run != k1.lookups - k0.lookups && !bad++)
                    test_fail(__FILE__, __LINE__, "cast %s -> %s ran a REF kernel", rlx_dtype_name((rlx_dtype)from),
                              rlx_dtype_name((rlx_dtype)to));
            }
            use_jit(false);
            char what[64];
            snprintf(what, sizeof what, "cast %s -> %s", rlx_dtype_name((rlx_dtype)from), rlx_dtype_name((rlx_dtype)to));
            bad += compare(out[1], out[0], 0, 0, what, 0);
        }
    CHECK_EQ_INT(bad, 0);
}

/* Exact narrow integer and cast cases on the JIT: the value the rules
 * give, and the reference's, each a LOOP kernel. */
TEST(jit_narrow_int_semantics)
{
    uint8_t ua[6] = {200, 250, 0, 255, 7, 128}, ub[6] = {100, 7, 0, 2, 0, 255};
    int8_t sa[6] = {-128, -128, 127, -7, 100, -1}, sb[6] = {-1, 2, 1, 2, 0, -1};
    uint32_t wa[6] = {3000000000u, 4294967295u, 5, 2147483648u, 0, 7}, wb[6] = {1, 2, 3000000000u, 2147483647u, 9, 0};
    int16_t ha[6] = {32767, -32768, 300, -300, 1, 0};
    float fa[6] = {-1.5f, 300.7f, NAN, 255.9f, -0.0f, 1e10f};
    int32_t ia[6] = {300, -1, 256, -129, 65535, 70000};
    int64_t n = 6;
    enum { NC = 26 };
    /* the values the rules give, for the cases that have one written here */
    static const double expect[][6] = {
        {44, 1, 0, 1, 7, 127},                       /* u8 a + b */
        {2, 35, 0, 127, 0, 0},                       /* u8 a / b (by 0: 0) */
        {0, 5, 0, 1, 0, 128},                        /* u8 a % b */
        {-128, -64, 127, -3, 0, 1},                  /* i8 a / b (-128 / -1 wraps) */
        {-128, 0, 127, -14, 0, 1},                   /* i8 a * b */
        {1, 1, 0, 1, 0, 1},                          /* u32 a > b */
        {3000000000.0, 2147483647, 0, 1, 0, 0},      /* u32 a / b */
        {0, 255, 0, 255, 0, 255},                    /* f32 -> u8: truncate, saturate, NaN 0 */
        {44, 255, 0, 127, 255, 112},                 /* i32 -> u8: wrap */
        {-32768, -32767, 301, -299, 2, 1},           /* i16 a + 1 */
        {56, 6, 0, 1, 249, 128},                     /* u8 -a */
    };
    rlx_tensor *out[2][NC];
    for (int k = 0; k < 2; k++) {
        rlx_tensor *u = rlx_from_data(RLX_U8, 1, &n, ua), *v = rlx_from_data(RLX_U8, 1, &n, ub);
        rlx_tensor *s = rlx_from_data(RLX_I8, 1, &n, sa), *t = rlx_from_data(RLX_I8, 1, &n, sb);
        rlx_tensor *w = rlx_from_data(RLX_U32, 1, &n, wa), *x = rlx_from_data(RLX_U32, 1, &n, wb);
        rlx_tensor *h = rlx_from_data(RLX_I16, 1, &n, ha), *f = tf32(1, &n, fa);
        rlx_tensor *i = rlx_from_data(RLX_I32, 1, &n, ia);
        int c = 0;
        out[k][c++] = rlx_add(u, v);
        out[k][c++] = rlx_div(u, v);
        out[k][c++] = rlx_rem(u, v);
        out[k][c++] = rlx_div(s, t);
        out[k][c++] = rlx_mul(s, t);
        out[k][c++] = rlx_gt(w, x);
        out[k][c++] = rlx_div(w, x);
        out[k][c++] = rlx_cast(f, RLX_U8);
        out[k][c++] = rlx_cast(i, RLX_U8);
        out[k][c++] = rlx_add(h, rlx_ones(RLX_I16, 1, &n));
        out[k][c++] = rlx_neg(u);
        /* compared with the reference only */
        out[k][c++] = rlx_rem(w, x);
        out[k][c++] = rlx_maximum(w, x);
        out[k][c++] = rlx_minimum(u, v);
        out[k][c++] = rlx_lt(u, v);
        out[k][c++] = rlx_cast(t, RLX_U32); /* -1 is 4294967295 */
        out[k][c++] = rlx_cast(w, RLX_I8);
        out[k][c++] = rlx_cast(w, RLX_F32);
        out[k][c++] = rlx_cast(f, RLX_I8);
        out[k][c++] = rlx_cast(f, RLX_U32);
        out[k][c++] = rlx_cast(u, RLX_I64);
        out[k][c++] = rlx_abs(s);
        out[k][c++] = rlx_sign(w);
        out[k][c++] = rlx_max(w, NULL, 0, false);
        out[k][c++] = rlx_min(rlx_cast(s, RLX_U8), NULL, 0, false);
        out[k][c++] = rlx_add(s, u); /* promotion: i16 */
        use_jit(k == 1);
        kcount k0 = kcount_now();
        CHECK_EQ_INT(rlx_realize_many(out[k], NC), RLX_OK);
        kcount k1 = kcount_now();
        if (k == 1 && k1.run - k0.run != k1.lookups - k0.lookups)
            test_fail(__FILE__, __LINE__, "%llu of %llu kernels are not LOOP kernels",
                      (unsigned long long)(k1.run - k0.run - (k1.lookups - k0.lookups)), (unsigned long long)(k1.run - k0.run));
    }
    use_jit(false);
    for (int c = 0; c < NC; c++) {
        compare(out[1][c], out[0][c], 0, 0, "narrow integer case", (uint64_t)c);
        if (c < (int)(sizeof expect / sizeof *expect)) {
            double got[6];
            CHECK_EQ_INT(rlx_read_f64(out[1][c], got, 6), RLX_OK);
            for (int e = 0; e < 6; e++)
                if (got[e] != expect[c][e])
                    test_fail(__FILE__, __LINE__, "case %d element %d: %.17g, want %.17g", c, e, got[e], expect[c][e]);
        }
    }
}

/* A bf16 (f16) elementwise chain is one LOOP kernel, computed in f32 and
 * rounded once: the reference rounds each op, so a few ulps apart. */
static rlx_tensor *narrow_chain(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *t = rlx_add_s(rlx_mul(x, y), 0.5);
    return rlx_sub(rlx_mul_s(rlx_gelu_tanh(t), 1.5), rlx_div(y, rlx_add_s(rlx_abs(x), 1)));
}

TEST(jit_narrow_kernel_counts)
{
    int64_t n = 10001, rc[2] = {64, 33};
    for (int v = 0; v < 2; v++) {
        rlx_dtype dt = v ? RLX_F16 : RLX_BF16;
        rlx_tensor *got = NULL, *want = NULL, *sgot = NULL, *swant = NULL;
        for (int k = 0; k < 2; k++) {
            rlx_tensor *x = rlx_cast(data_f32(n, 7), dt), *y = rlx_cast(data_f32(n, 8), dt);
            rlx_tensor *m = rlx_cast(rlx_reshape(data_f32(rc[0] * rc[1], 9), 2, rc), dt);
            use_jit(false);
            rlx_realize(x);
            rlx_realize(y);
            rlx_realize(m);
            rlx_tensor *r = narrow_chain(x, y), *sm = rlx_softmax(m, -1);
            use_jit(k == 1);
            rlx_stats_reset();
            CHECK_EQ_INT(rlx_realize(r), RLX_OK);
            rlx_stats_t s1 = stats_now();
            CHECK_EQ_INT(rlx_realize(sm), RLX_OK);
            rlx_stats_t s2 = stats_now();
            if (k == 1 && (s1.kernels_run != 1 || s1.cache_hits + s1.cache_misses != 1))
                test_fail(__FILE__, __LINE__, "%s chain: %llu kernels, want one LOOP kernel", rlx_dtype_name(dt),
                          (unsigned long long)s1.kernels_run);
            if (k == 1 && s2.kernels_run - s1.kernels_run != 1)
                test_fail(__FILE__, __LINE__, "%s softmax: %llu kernels, want one", rlx_dtype_name(dt),
                          (unsigned long long)(s2.kernels_run - s1.kernels_run));
            *(k ? &got : &want) = r;
            *(k ? &sgot : &swant) = sm;
        }
        use_jit(false);
        /* 4 spacings of dt at 1: the chain's terms are of order 1 (its
         * result may cancel), the softmax's values relative */
        double sp = dt == RLX_BF16 ? 0x1p-7 : 0x1p-10;
        compare(got, want, 4 * sp, 4 * sp, "narrow chain", (uint64_t)dt);
        compare(sgot, swant, 4 * sp, 1e-6, "narrow softmax", (uint64_t)dt);
    }
}

/* rlx-bench's W12 on a small batch: a u8 image [2, 3, 9, 11] (every byte
 * value) normalized per channel to f32, (cast(x)/255 - mean[c]) / std[c],
 * is one LOOP kernel on the JIT and, on both backends, within 4 f32
 * epsilons (of 1 or of the value) of the same expression as a C loop in f32. */
TEST(jit_u8_image_normalize)
{
    enum { N = 2, C = 3, HW = 9 * 11 };
    static const float mean[C] = {0.485f, 0.456f, 0.406f}, sd[C] = {0.229f, 0.224f, 0.225f};
    int64_t shape[4] = {N, C, 9, 11}, cshape[4] = {1, C, 1, 1};
    uint8_t x[N * C * HW];
    for (int i = 0; i < N * C * HW; i++)
        x[i] = (uint8_t)(i * 37 + 5); /* 37 is odd: all 256 values in the first 256 */
    for (int k = 0; k < 2; k++) {
        use_jit(k == 1);
        rlx_tensor *tx = rlx_from_data(RLX_U8, 4, shape, x), *tm = rlx_from_data(RLX_F32, 4, cshape, mean),
                   *ts = rlx_from_data(RLX_F32, 4, cshape, sd);
        CHECK_EQ_INT(rlx_realize(tx), RLX_OK);
        CHECK_EQ_INT(rlx_realize(tm), RLX_OK);
        CHECK_EQ_INT(rlx_realize(ts), RLX_OK);
        rlx_tensor *y = rlx_div(rlx_sub(rlx_div_s(rlx_cast(tx, RLX_F32), 255), tm), ts);
        rlx_stats_reset();
        CHECK_EQ_INT(rlx_realize(y), RLX_OK);
        rlx_stats_t st = stats_now();
        if (k == 1 && (st.kernels_run != 1 || st.cache_hits + st.cache_misses != 1))
            test_fail(__FILE__, __LINE__, "u8 normalize: %llu kernels (%llu compiled or cached), want one LOOP kernel",
                      (unsigned long long)st.kernels_run, (unsigned long long)(st.cache_hits + st.cache_misses));
        CHECK_EQ_INT(rlx_dtype_of(y), RLX_F32);
        float got[N * C * HW];
        CHECK_EQ_INT(rlx_read_f32(y, got, N * C * HW), RLX_OK);
        int bad = 0;
        for (int i = 0; i < N * C * HW && bad < 3; i++) {
            int c = i / HW % C;
            float want = ((float)x[i] / 255.0f - mean[c]) / sd[c];
            if (!(fabsf(got[i] - want) <= 4 * 0x1p-23f * fmaxf(1, fabsf(want)))) {
                test_fail(__FILE__, __LINE__, "u8 normalize on %s: [%d] (x %d) is %.9g, the C loop %.9g",
                          k ? "jit" : "ref", i, x[i], got[i], want);
                bad++;
            }
        }
    }
    use_jit(true);
}

TEST_MAIN(T(jit_kernel_counts), T(jit_nested_row_reductions_past_the_phase_limit), T(jit_division_by_row_value), T(jit_division_in_row_kernel), T(jit_row_fusion),
          T(jit_softmax_tails), T(jit_cache_hit), T(jit_const_args), T(jit_plan_cache), T(jit_plan_cache_bounds),
          T(jit_buffer_pool), T(jit_threads_deterministic), T(jit_views_and_roots), T(jit_pad_fusion), T(jit_pad_negative_zero), T(jit_cat_fusion), T(jit_pad_head_split_one_kernel), T(jit_long_chain), T(jit_int_semantics),
          T(jit_reductions), T(jit_llvm_errors), T(jit_allocation_failures), T(jit_ulp_f32), T(jit_ulp_f32_binary), T(jit_ulp_f64), T(jit_random_graphs),
          T(jit_random_graphs_narrow), T(jit_half_cast_sweep), T(jit_narrow_int_semantics), T(jit_narrow_kernel_counts),
          T(jit_cast_all_pairs), T(jit_u8_image_normalize))
