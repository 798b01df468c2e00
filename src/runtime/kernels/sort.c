/*
 * sort.c — the ARGSORT and MULTINOMIAL primitives (ops.def, LIB): both
 * backends run these kernels.
 *
 * ARGSORT orders every line along an axis with a stable merge sort of
 * (key, index) pairs, or, when it keeps only its first k <= len/8
 * positions (topk), selects them (quickselect of the k-th key, then a sort
 * of the k), the lines spread over the pool (par.h); a line is
 * sorted by one thread from start to end, so no thread count changes a
 * bit. Every value maps to one unsigned 64-bit key whose order is the
 * value order: NaN (any payload) above +inf, -0 equal to +0, integers
 * exactly (no trip through double); descending complements the key, so
 * equal values keep their order in both directions (NumPy's
 * kind="stable", torch.sort(stable=True)).
 *
 * MULTINOMIAL draws category indices from rows of non-negative weights
 * with rt_rand_uniform's counter-based numbers (the RAND leaf's), so a
 * seed gives the same indices on both backends at any thread count. With
 * replacement: a binary search of the running sum, O(N + S log N) per
 * row. Without: each positive weight w_j gets the key log(u_j)/w_j
 * (Efraimidis and Spirakis: the order of these keys, largest first, is
 * distributed as successive draws without replacement), and the S largest
 * keys, found as argsort's (selected when S is small), are the samples in
 * draw order. Weights are checked before anything is drawn: a negative,
 * infinite or NaN weight, a row without a positive weight, a row whose sum
 * overflows, or (without replacement) fewer positive weights than samples
 * fail the realization with RLX_E_ARG naming the row.
 */
#include <math.h>
#include <string.h>

#include "runtime/kernels/par.h"
#include "runtime/rt.h"

typedef struct {
    uint64_t key;
    int64_t at; /* position along the line */
} sort_pair;

enum { SORT_RUN = 16 }; /* insertion-sorted runs before merging */

/* The order-preserving key of a float value: NaN last, -0 == +0. */
static uint64_t key_of_float(double v)
{
    if (v != v)
        return UINT64_MAX;
    if (v == 0)
        v = 0; /* -0 sorts as +0 */
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return (b >> 63) ? ~b : b | (1ull << 63);
}

static uint64_t key_of_int(int64_t v) { return (uint64_t)v ^ (1ull << 63); }

/* Stable ascending sort of a[0..n) by key; tmp has room for n pairs.
 * Returns the array holding the result (a or tmp). */
static sort_pair *sort_pairs(sort_pair *a, sort_pair *tmp, int64_t n)
{
    for (int64_t s = 0; s < n; s += SORT_RUN) {
        int64_t e = s + SORT_RUN < n ? s + SORT_RUN : n;
        for (int64_t i = s + 1; i < e; i++) {
            sort_pair p = a[i];
            int64_t j = i;
            for (; j > s && a[j - 1].key > p.key; j--) /* strict: equal keys stay behind */
                a[j] = a[j - 1];
            a[j] = p;
        }
    }
    sort_pair *src = a, *dst = tmp;
    for (int64_t w = SORT_RUN; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) /* ties from the left run first: stable */
                dst[k++] = src[j].key < src[i].key ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        sort_pair *t = src;
        src = dst;
        dst = t;
    }
    return src;
}

/* The k-th smallest (from 0) of v[0..n) into *kth, reordering v:
 * quickselect with a median-of-three pivot and a three-way partition
 * (ties end a round at once). False after 2 log2(n) + 2 rounds, an input
 * the pivots suit badly: the caller sorts the line instead, so a line
 * never costs more than O(n log n). */
static bool select_key(uint64_t *v, int64_t n, int64_t k, uint64_t *kth)
{
    int64_t lo = 0, hi = n - 1;
    int budget = 2;
    for (int64_t m = n; m > 1; m >>= 1)
        budget += 2;
    while (lo < hi) {
        if (budget-- == 0)
            return false;
        uint64_t a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi];
        uint64_t p = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
        int64_t lt = lo, i = lo, gt = hi;
        while (i <= gt) {
            uint64_t x = v[i];
            if (x < p) {
                v[i++] = v[lt];
                v[lt++] = x;
            } else if (x > p) {
                v[i] = v[gt];
                v[gt--] = x;
            } else
                i++;
        }
        if (k < lt)
            hi = lt - 1;
        else if (k > gt)
            lo = gt + 1;
        else {
            *kth = p;
            return true;
        }
    }
    *kth = v[k];
    return true;
}

/* The first k of a[0..n)'s stable order when k is small: the k-th key by
 * selection, then every pair below it and the first pairs equal to it in
 * position order, sorted (O(n + k log k)). keys has room for n keys, tmp
 * for n pairs (it may be the same memory). */
static const sort_pair *select_pairs(sort_pair *a, int64_t n, int64_t k, uint64_t *keys, sort_pair *tmp)
{
    for (int64_t j = 0; j < n; j++)
        keys[j] = a[j].key;
    uint64_t kth;
    if (!select_key(keys, n, k - 1, &kth))
        return sort_pairs(a, tmp, n);
    int64_t below = 0, m = 0;
    for (int64_t j = 0; j < n; j++)
        below += a[j].key < kth;
    for (int64_t j = 0, equal = k - below; j < n && m < k; j++) /* in place: m <= j */
        if (a[j].key < kth || (a[j].key == kth && equal-- > 0))
            a[m++] = a[j];
    return sort_pairs(a, tmp, k);
}

/* ------------------------------------------------------------- argsort */

typedef struct {
    const ir_node *x;
    const rt_view *in;
    int64_t *out;
    int64_t ostr[IR_MAX_RANK]; /* the output's contiguous strides */
    int ax;
    int64_t len, k; /* the line's length; the positions kept */
    bool desc, fdom;
} argsort_task;

/* Lines [b, e): line l is the l-th position, row-major, of x's shape
 * without the axis. */
static void argsort_run(const void *task, int64_t b, int64_t e, void *scratch)
{
    const argsort_task *t = task;
    const ir_node *x = t->x;
    sort_pair *a = scratch, *tmp = a + t->len;
    int64_t sin = t->in->strides[t->ax], sout = t->ostr[t->ax];
    for (int64_t l = b; l < e; l++) {
        int64_t rest = l, ioff = t->in->off, ooff = 0;
        for (int d = x->rank - 1; d >= 0; d--) {
            if (d == t->ax)
                continue;
            int64_t c = rest % x->shape[d];
            rest /= x->shape[d];
            ioff += c * t->in->strides[d];
            ooff += c * t->ostr[d];
        }
        for (int64_t j = 0; j < t->len; j++) {
            int64_t at = ioff + j * sin;
            uint64_t k = t->fdom ? key_of_float(rt_ld_f(t->in->st->data, x->dtype, at))
                                 : key_of_int(rt_ld_i(t->in->st->data, x->dtype, at));
            a[j].key = t->desc ? ~k : k;
            a[j].at = j;
        }
        /* a small k (topk) selects; 8 is where selection's extra passes stop paying */
        const sort_pair *s = t->k <= t->len / 8 ? select_pairs(a, t->len, t->k, (uint64_t *)tmp, tmp)
                                                : sort_pairs(a, tmp, t->len);
        for (int64_t j = 0; j < t->k; j++)
            t->out[ooff + j * sout] = s[j].at;
    }
}

/* ARGSORT (ops.def): the first attr.sort.k i64 positions of the stable
 * order, ascending or descending, of each line of x along the axis. */
rlx_status rt_eval_argsort(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    int64_t numel = ir_node_numel(n);
    if (numel == 0)
        return RLX_OK;
    argsort_task t = {.x = n->src[0], .in = &in[0], .out = out->st->data, .ax = n->attr.sort.axis,
                      .desc = n->attr.sort.descending != 0, .fdom = ir_dtype_is_float(n->src[0]->dtype)};
    t.len = t.x->shape[t.ax];
    t.k = n->shape[t.ax];
    rt_contiguous_strides(n->rank, n->shape, t.ostr);
    int64_t lines = numel / t.k, chunk = t.len >= 8192 ? 1 : 8192 / t.len;
    int nslots = rt_par_slots(ctx, lines, chunk);
    size_t slot = 2 * (size_t)t.len * sizeof(sort_pair);
    void *scratch = ir_alloc(slot * (size_t)nslots);
    if (!scratch)
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for argsort's scratch (%lld elements per line)",
                       (long long)t.len);
    rt_par_run(argsort_run, &t, lines, chunk, scratch, slot, nslots);
    ir_free(scratch);
    return RLX_OK;
}

/* --------------------------------------------------------- multinomial */

typedef struct {
    const ir_node *x;
    const rt_view *in;
    int64_t *out;
    int64_t n, s, rs, cs; /* categories, samples, row and column strides */
    uint64_t seed;
    bool replacement;
} multinomial_task;

static double weight(const multinomial_task *t, int64_t row, int64_t j)
{
    return rt_ld_f(t->in->st->data, t->x->dtype, t->in->off + row * t->rs + j * t->cs);
}

/* RLX_OK when every row is a distribution the draw can use. */
static rlx_status multinomial_check(rt_ctx *ctx, const multinomial_task *t, int64_t rows)
{
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0;
        int64_t pos = 0;
        for (int64_t j = 0; j < t->n; j++) {
            double w = weight(t, r, j);
            if (!(w >= 0) || isinf(w))
                return rt_fail(ctx, RLX_E_ARG, "multinomial: row %lld has weight %g at %lld (weights must be finite and >= 0)",
                               (long long)r, w, (long long)j);
            sum += w;
            pos += w > 0;
        }
        if (pos == 0)
            return rt_fail(ctx, RLX_E_ARG, "multinomial: row %lld has no positive weight", (long long)r);
        if (isinf(sum))
            return rt_fail(ctx, RLX_E_ARG, "multinomial: the weights of row %lld sum to infinity", (long long)r);
        if (!t->replacement && pos < t->s)
            return rt_fail(ctx, RLX_E_ARG,
                           "multinomial: %lld samples without replacement, row %lld has %lld positive weights",
                           (long long)t->s, (long long)r, (long long)pos);
    }
    return RLX_OK;
}

/* Row r with replacement: sample s is the first category whose running
 * sum exceeds u_s * total (a zero weight never is: its sum equals the one
 * before); a product rounded up to the total takes the last positive one. */
static void draw_with(const multinomial_task *t, int64_t r, double *cum, int64_t *o)
{
    double acc = 0;
    int64_t last = 0;
    for (int64_t j = 0; j < t->n; j++) {
        double w = weight(t, r, j);
        acc += w;
        cum[j] = acc;
        if (w > 0)
            last = j;
    }
    for (int64_t s = 0; s < t->s; s++) {
        double target = rt_rand_uniform(t->seed, (uint64_t)(r * t->s + s), RLX_F64) * acc;
        int64_t lo = 0, hi = t->n;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (cum[mid] > target)
                hi = mid;
            else
                lo = mid + 1;
        }
        o[s] = lo < t->n ? lo : last;
    }
}

/* Row r without replacement: the S largest keys log(u)/w, ties to the
 * lower index. */
static void draw_without(const multinomial_task *t, int64_t r, sort_pair *a, int64_t *o)
{
    int64_t m = 0;
    for (int64_t j = 0; j < t->n; j++) {
        double w = weight(t, r, j);
        if (w > 0) {
            double u = 1 - rt_rand_uniform(t->seed, (uint64_t)(r * t->n + j), RLX_F64); /* (0, 1] */
            a[m].key = ~key_of_float(log(u) / w); /* largest first */
            a[m++].at = j;
        }
    }
    const sort_pair *s = t->s <= m / 8 ? select_pairs(a, m, t->s, (uint64_t *)(a + t->n), a + t->n)
                                       : sort_pairs(a, a + t->n, m);
    for (int64_t k = 0; k < t->s; k++)
        o[k] = s[k].at;
}

static void multinomial_run(const void *task, int64_t b, int64_t e, void *scratch)
{
    const multinomial_task *t = task;
    for (int64_t r = b; r < e; r++) {
        if (t->replacement)
            draw_with(t, r, scratch, t->out + r * t->s);
        else
            draw_without(t, r, scratch, t->out + r * t->s);
    }
}

/* MULTINOMIAL (ops.def): attr.multinomial.samples category indices per
 * row of weights [N] or [B, N], drawn with attr.multinomial.seed. */
rlx_status rt_eval_multinomial(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *x = n->src[0];
    multinomial_task t = {.x = x, .in = &in[0], .n = x->shape[x->rank - 1], .s = n->attr.multinomial.samples,
                          .cs = in[0].strides[x->rank - 1], .seed = n->attr.multinomial.seed,
                          .replacement = n->attr.multinomial.replacement != 0};
    t.rs = x->rank == 2 ? in[0].strides[0] : 0;
    int64_t rows = x->rank == 2 ? x->shape[0] : 1;
    if (rows == 0 || t.s == 0) /* nothing drawn, nothing to check (the JIT skips empty results too) */
        return rt_alloc_out(ctx, n, out, false);
    if (multinomial_check(ctx, &t, rows) || rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    t.out = out->st->data;
    int64_t chunk = t.n >= 16384 ? 1 : 16384 / t.n;
    int nslots = rt_par_slots(ctx, rows, chunk);
    size_t slot = t.replacement ? (size_t)t.n * sizeof(double) : 2 * (size_t)t.n * sizeof(sort_pair);
    void *scratch = ir_alloc(slot * (size_t)nslots);
    if (!scratch)
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for multinomial's scratch (%lld categories)", (long long)t.n);
    rt_par_run(multinomial_run, &t, rows, chunk, scratch, slot, nslots);
    ir_free(scratch);
    return RLX_OK;
}
