/*
 * prog_gen.h — random compiled programs over dynamic dims, checked against
 * the same graph built over concrete data (test_program_random.c from
 * seeds, tests/fuzz/fuzz_program.c from fuzz bytes).
 *
 * A recipe is a random graph over 1-3 rlx_input leaves (f32 or f64, rank
 * 1-4, each dim static 1..5, the symbol B (-2) or S (-3), or an anonymous
 * -1). Every decision is taken from the generator's draws and the
 * recipe's own shape tracker (static sizes, and an id per dynamic dim:
 * dims of one id are equal in every binding), never from bound sizes, so
 * one recipe is valid for every binding: elementwise ops join only equal
 * ids or a static 1, so a binding can never make a join fail. Generation
 * builds the traced graph step by step (a step tracing refuses is
 * dropped); pg_check then compiles it (with its gradients, sometimes),
 * and runs a sequence of bindings (sizes 0..9, repeats, runs of one size
 * class so plans are derived from kept ones, sometimes program_specs 1 or
 * 2 so they are evicted); each run's outputs must equal, in shape and
 * within a tolerance in value, the recipe replayed over the bound values
 * as constants and realized on the reference backend, and a run must
 * fail exactly when that replay fails (an op refusing the bound sizes).
 *
 * Needs rlx.h and ir/ir.h (the inputs a program reads), not the harness:
 * the fuzzer links none.
 */
#ifndef RLX_TEST_PROG_GEN_H
#define RLX_TEST_PROG_GEN_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "rlx.h"

/* ---------------------------------------------------------- the draws */

/* One interface for fuzz bytes (an exhausted input draws 0) and a seeded
 * splitmix64. */
typedef struct {
    const uint8_t *p;
    size_t n;
    bool bytes;
    uint64_t s;
} pg_rng;

static inline pg_rng pg_rng_seed(uint64_t seed) { return (pg_rng){NULL, 0, false, seed}; }
static inline pg_rng pg_rng_bytes(const uint8_t *p, size_t n) { return (pg_rng){p, n, true, 0}; }

static inline uint64_t pg_mix(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ull;
    uint64_t x = *s;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A draw in [0, n), n >= 1. */
static inline uint32_t pg_next(pg_rng *g, uint32_t n)
{
    uint32_t v;
    if (!g->bytes) {
        v = (uint32_t)(pg_mix(&g->s) >> 32);
    } else if (g->n) {
        v = *g->p++;
        g->n--;
    } else {
        v = 0;
    }
    return n ? v % n : 0;
}

/* -------------------------------------------------------------- recipe */

enum {
    PG_MAXIN = 3,
    PG_MAXR = 4, /* the tracker's rank limit (keeps the reference cheap) */
    PG_MAXV = 24,
    PG_MAXOUT = 3,
    PG_MAXVAR = 2 + PG_MAXIN * PG_MAXR, /* B, S and every anonymous dim */
    PG_ID_B = 1,
    PG_ID_S = 2,
    PG_ID_BS = 3, /* a dim merged from a B dim and the S dim after it */
    PG_ID_ANON = 4,
    PG_NEW = -100, /* a builder's "dynamic or static as tracing says" */
    PG_MAXID = 512,
    PG_MAXELEMS = 1 << 18, /* a value's largest element count (the reference stays fast) */
};

typedef enum {
    PG_UNARY, PG_BINARY, PG_WHERE, PG_REDUCE, PG_ROWOP, PG_LINEAR, PG_GRAM, PG_PERMUTE, PG_UNSQUEEZE,
    PG_MERGE, PG_SPLIT, PG_SYMSPLIT, PG_SLICE, PG_FLIP, PG_ROLL, PG_NARROW, PG_CAT, PG_PAD, PG_CUMSUM,
    PG_INDEX, PG_SELECT, PG_CHUNK, PG_SPLITN, PG_TILE, PG_NOPS
} pg_opk;

static const char *const pg_op_names[PG_NOPS] = {
    "unary", "binary", "where", "reduce", "rowop", "linear", "gram", "permute", "unsqueeze", "merge",
    "split", "symsplit", "slice", "flip", "roll", "narrow", "cat", "pad", "cumsum", "index", "select", "chunk",
    "splitn", "tile"};

/* st >= 0: static size (id 0); st < 0: dynamic, id says which size */
typedef struct {
    int64_t st;
    int id;
} pg_dim;

typedef struct {
    int rank;
    pg_dim d[RLX_MAX_RANK];
    bool exact; /* built from exact operations only: comparisons are safe */
    double mag; /* a rough bound of |values| (sums taken over at most 64 terms) */
    int64_t newhi; /* the largest size of the dims the step makes (PG_NEW) */
} pg_shape;

typedef struct {
    int op, sub, a, b, c, ax, ax2;
    bool keep;
    int64_t i0, i1, i2;
    double f;
    int perm[PG_MAXR];
    uint64_t seed; /* constants (weights) */
} pg_step;

typedef struct {
    rlx_dtype dt;
    int nin, nanon, nextid;
    int64_t hi[PG_MAXID]; /* per dynamic dim id: its largest size in any binding (sizes <= 9) */
    pg_shape in[PG_MAXIN];
    int nv;                /* values: the inputs, then one per step */
    pg_step step[PG_MAXV]; /* step[v] makes value v (v >= nin) */
    pg_shape shape[PG_MAXV];
    bool live[PG_MAXV]; /* reachable from the outputs */
    int nout, out[PG_MAXOUT];
    bool grad;      /* also d sum(o0 * w(o0)) / d every input, */
    bool loss_tanh; /* w tanh where o0 can be large (sin of it would follow its rounding), else sin */
} pg_recipe;

/* ---------------------------------------------------- message buffer */

typedef struct {
    char *p;
    size_t cap, len;
} pg_msg;

static inline void pg_say(pg_msg *m, const char *fmt, ...)
{
    if (!m->p || m->len + 1 >= m->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(m->p + m->len, m->cap - m->len, fmt, ap);
    va_end(ap);
    if (k > 0)
        m->len = m->len + (size_t)k < m->cap ? m->len + (size_t)k : m->cap - 1;
}

static inline void pg_say_dim(pg_msg *m, const pg_recipe *R, pg_dim d)
{
    if (d.st >= 0)
        pg_say(m, "%lld", (long long)d.st);
    else if (d.id == PG_ID_B)
        pg_say(m, "B");
    else if (d.id == PG_ID_S)
        pg_say(m, "S");
    else if (d.id == PG_ID_BS)
        pg_say(m, "B*S");
    else if (d.id < PG_ID_ANON + R->nanon)
        pg_say(m, "a%d", d.id - PG_ID_ANON);
    else
        pg_say(m, "d%d", d.id);
}

static inline void pg_say_shape(pg_msg *m, const pg_recipe *R, const pg_shape *s)
{
    pg_say(m, "[");
    for (int i = 0; i < s->rank; i++) {
        pg_say(m, i ? "," : "");
        pg_say_dim(m, R, s->d[i]);
    }
    pg_say(m, "]");
}

/* The recipe, readable: enough to rewrite it as a C test. */
static inline void pg_dump(pg_msg *m, const pg_recipe *R)
{
    pg_say(m, "recipe %s, %d input(s):", rlx_dtype_name(R->dt), R->nin);
    for (int i = 0; i < R->nin; i++) {
        pg_say(m, " x%d", i);
        pg_say_shape(m, R, &R->in[i]);
    }
    pg_say(m, "\n");
    for (int v = R->nin; v < R->nv; v++) {
        const pg_step *s = &R->step[v];
        pg_say(m, "  %sv%d = %s.%d(v%d", R->live[v] ? "" : "(dead) ", v, pg_op_names[s->op], s->sub, s->a);
        if (s->b >= 0)
            pg_say(m, ", v%d", s->b);
        if (s->c >= 0)
            pg_say(m, ", v%d", s->c);
        pg_say(m, ") ax %d ax2 %d keep %d i %lld %lld %lld f %g perm %d%d%d%d seed %llu -> ", s->ax, s->ax2,
               (int)s->keep, (long long)s->i0, (long long)s->i1, (long long)s->i2, s->f, s->perm[0], s->perm[1],
               s->perm[2], s->perm[3], (unsigned long long)s->seed);
        pg_say_shape(m, R, &R->shape[v]);
        pg_say(m, "\n");
    }
    pg_say(m, "  outputs:");
    for (int o = 0; o < R->nout; o++)
        pg_say(m, " v%d", R->out[o]);
    pg_say(m, R->grad ? "; and d sum(v%d * %s(v%d)) / d every input\n" : "\n", R->out[0],
           R->loss_tanh ? "tanh" : "sin", R->out[0]);
}

/* ------------------------------------------------------ building */

static inline bool pg_is_dyn(pg_dim d) { return d.st < 0; }

static inline int64_t pg_hi(const pg_recipe *R, pg_dim d)
{
    return d.st >= 0 ? d.st : d.id > 0 && d.id < PG_MAXID ? R->hi[d.id] : 1 << 20;
}

/* A constant of n values in [-1, 1) from seed (the same in both builds). */
static inline rlx_tensor *pg_const(rlx_dtype dt, int rank, const int64_t *shape, uint64_t seed)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    if (!v || !f) {
        free(v);
        free(f);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        v[i] = (double)(pg_mix(&seed) >> 11) * 0x1p-52 - 1;
        f[i] = (float)v[i];
    }
    rlx_tensor *t = rlx_from_data(dt, rank, shape, dt == RLX_F32 ? (const void *)f : (const void *)v);
    free(v);
    free(f);
    return t;
}

/* Value v of step s over the values built so far: x traced (syms NULL:
 * reshape targets name -1 and the symbols) or concrete (syms the bound B
 * and S: targets are the concrete sizes). */
static inline rlx_tensor *pg_apply(const pg_recipe *R, const pg_step *s, rlx_tensor *const *val,
                                   const int64_t *syms)
{
    rlx_tensor *x = val[s->a], *y = s->b >= 0 ? val[s->b] : NULL;
    int ax = s->ax;
    int64_t sh[RLX_MAX_RANK], tg[RLX_MAX_RANK];
    int r = rlx_shape(x, sh, RLX_MAX_RANK), tr = 0;
    switch (s->op) {
    case PG_UNARY:
        switch (s->sub) {
        case 0: return rlx_neg(x);
        case 1: return rlx_exp(rlx_tanh(x));
        case 2: return rlx_sin(x);
        case 3: return rlx_abs(x);
        default: return rlx_sqrt(rlx_abs(x));
        }
    case PG_BINARY:
        switch (s->sub) {
        case 0: return rlx_add(x, y);
        case 1: return rlx_mul(x, y);
        case 2: return rlx_sub(x, y);
        default: return rlx_maximum(x, y);
        }
    case PG_WHERE: return rlx_where(rlx_gt(x, y), val[s->c], x);
    case PG_REDUCE:
        switch (s->sub) {
        case 0: return rlx_sum(x, &ax, 1, s->keep);
        case 1: return rlx_mean(x, &ax, 1, s->keep);
        case 2: return rlx_max(x, &ax, 1, s->keep);
        default: return rlx_var(x, &ax, 1, s->keep);
        }
    case PG_ROWOP: {
        if (s->sub == 0)
            return rlx_softmax(x, -1);
        if (s->sub == 1)
            return rlx_log_softmax(x, -1);
        int64_t d = r > 0 ? sh[r - 1] : 0;
        rlx_tensor *gm = s->sub == 3 ? rlx_add_s(pg_const(R->dt, 1, &d, s->seed), 1.5) : NULL;
        rlx_tensor *bt = s->sub == 3 ? pg_const(R->dt, 1, &d, s->seed + 1) : NULL;
        return rlx_layer_norm(x, gm, bt, 1e-5);
    }
    case PG_LINEAR: {
        int64_t k = r > 0 ? sh[r - 1] : 0, n = s->i0;
        if (s->sub == 2)
            return rlx_matmul(x, pg_const(R->dt, 2, (int64_t[]){k, n}, s->seed));
        rlx_tensor *w = pg_const(R->dt, 2, (int64_t[]){n, k}, s->seed);
        return rlx_linear(x, w, s->sub == 1 ? pg_const(R->dt, 1, &n, s->seed + 1) : NULL);
    }
    case PG_GRAM: return rlx_matmul(x, rlx_t(x));
    case PG_PERMUTE: return rlx_transpose(x, r, s->perm);
    case PG_UNSQUEEZE: return rlx_unsqueeze(x, ax);
    case PG_MERGE:
    case PG_SPLIT:
    case PG_SYMSPLIT:
        if (r < 0 || ax >= r || (s->op == PG_MERGE && ax + 1 >= r))
            return rlx_reshape(x, 0, NULL); /* refused: not reached in a valid recipe */
        for (int i = 0; i < ax; i++)
            tg[tr++] = sh[i];
        if (s->op == PG_MERGE) {
            tg[tr++] = sh[ax] < 0 || sh[ax + 1] < 0 ? -1 : sh[ax] * sh[ax + 1];
            ax++;
        } else if (s->op == PG_SPLIT) {
            tg[tr++] = s->i0;
            tg[tr++] = s->i0 ? sh[ax] / s->i0 : 0;
        } else {
            tg[tr++] = syms ? syms[0] : -2;
            tg[tr++] = syms ? syms[1] : -3;
        }
        for (int i = ax + 1; i < r; i++)
            tg[tr++] = sh[i];
        if (s->op == PG_SYMSPLIT) /* beside symbols the -1 is inferred from the count: so in the replay too */
            for (int i = 0; i < tr; i++)
                if (i != ax && i != ax + 1 && pg_is_dyn(R->shape[s->a].d[i < ax ? i : i - 1]))
                    tg[i] = -1;
        return rlx_reshape(x, tr, tg);
    case PG_SLICE: return rlx_slice(x, ax, s->i0, s->i1, s->i2);
    case PG_FLIP: return rlx_flip(x, ax);
    case PG_ROLL: return rlx_roll(x, ax, s->i0);
    case PG_NARROW: return rlx_narrow(x, ax, 0, s->i0);
    case PG_CAT: return rlx_cat((rlx_tensor *[]){x, y}, 2, ax);
    case PG_PAD: return rlx_pad(x, ax, s->i0, s->i1, s->f);
    case PG_CUMSUM: return rlx_cumsum(x, ax, s->keep);
    case PG_INDEX: {
        rlx_tensor *idx = y ? rlx_arange_of(y, s->ax2, RLX_I64) : rlx_arange(RLX_I64, 0, (double)s->i1, 1);
        if (s->sub & 1)
            idx = rlx_flip(idx, 0);
        if (s->sub & 2)
            idx = rlx_roll(idx, 0, s->i0);
        return s->sub & 4 ? rlx_gather(x, idx, ax) : rlx_index_select(x, ax, idx);
    }
    case PG_SELECT: return rlx_select(x, ax, s->i0);
    case PG_CHUNK:
    case PG_SPLITN: {
        rlx_tensor *out[3] = {0};
        int64_t sizes[2] = {s->sub ? -1 : s->i0, s->sub ? s->i0 : -1};
        rlx_status st = s->op == PG_CHUNK ? rlx_chunk(x, ax, (int)s->i0, out) : rlx_split(x, ax, 2, sizes, out);
        return st == RLX_OK ? out[s->i1] : NULL;
    }
    case PG_TILE: return rlx_tile(x, ax, s->i0);
    default: return NULL;
    }
}

/* ---------------------------------------------------- the tracker */

/* Whether dims a and b may meet in an elementwise op, and the result. */
static inline bool pg_join_dim(pg_dim a, pg_dim b, pg_dim *out)
{
    if (!pg_is_dyn(a) && !pg_is_dyn(b) && (a.st == b.st || a.st == 1 || b.st == 1)) {
        *out = a.st == 1 ? b : a;
        return true;
    }
    if (pg_is_dyn(a) && pg_is_dyn(b) && a.id == b.id) {
        *out = a;
        return true;
    }
    if (pg_is_dyn(a) && b.st == 1) {
        *out = a;
        return true;
    }
    if (pg_is_dyn(b) && a.st == 1) {
        *out = b;
        return true;
    }
    return false;
}

/* NumPy broadcasting over the tracker (ranks aligned right). */
static inline bool pg_join(const pg_shape *a, const pg_shape *b, pg_shape *out)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    pg_shape o = {.rank = r, .exact = a->exact && b->exact};
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        pg_dim da = ia >= 0 ? a->d[ia] : (pg_dim){1, 0}, db = ib >= 0 ? b->d[ib] : (pg_dim){1, 0};
        if (!pg_join_dim(da, db, &o.d[i]))
            return false;
    }
    if (out)
        *out = o;
    return true;
}

static inline bool pg_same_dim(pg_dim a, pg_dim b) { return a.st == b.st && (a.st >= 0 || a.id == b.id); }

/* A value index whose shape qualifies (ok), or -1; tries every value from a random start. */
static inline int pg_pick_where(pg_rng *g, const pg_recipe *R, bool (*ok)(const pg_shape *, const pg_shape *, int),
                                const pg_shape *ref, int arg)
{
    int start = (int)pg_next(g, (uint32_t)R->nv);
    for (int k = 0; k < R->nv; k++) {
        int v = (start + k) % R->nv;
        if (ok(ref, &R->shape[v], arg))
            return v;
    }
    return -1;
}

static inline bool pg_ok_join(const pg_shape *a, const pg_shape *b, int need_exact)
{
    return (!need_exact || b->exact) && pg_join(a, b, NULL);
}

/* b can be cat with a along axis arg: every other dim the same. */
static inline bool pg_ok_cat(const pg_shape *a, const pg_shape *b, int ax)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (i != ax && !pg_same_dim(a->d[i], b->d[i]))
            return false;
    return true;
}

static inline bool pg_ok_any(const pg_shape *a, const pg_shape *b, int arg)
{
    (void)a;
    (void)arg;
    return b->rank > 0;
}

/* Draws a step for value R->nv and its tracker shape (dims PG_NEW where
 * tracing decides); false when the drawn op does not apply. */
static inline bool pg_draw_op(pg_rng *g, pg_recipe *R, pg_step *s, pg_shape *o)
{
    int nv = R->nv;
    *s = (pg_step){.op = (int)pg_next(g, PG_NOPS), .b = -1, .c = -1};
    s->a = pg_next(g, 2) ? nv - 1 : (int)pg_next(g, (uint32_t)nv);
    /* symbol reshapes need B and S merged first: steer toward both */
    uint32_t steer = pg_next(g, 8);
    for (int v = 0; v < nv && steer < 2; v++) {
        const pg_shape *sv = &R->shape[v];
        for (int i = 0; i < sv->rank; i++) {
            bool bs = sv->d[i].st < 0 && sv->d[i].id == PG_ID_BS;
            bool adj = i + 1 < sv->rank && sv->d[i].st < 0 && sv->d[i].id == PG_ID_B && sv->d[i + 1].st < 0 &&
                       sv->d[i + 1].id == PG_ID_S;
            if ((steer == 0 && bs) || (steer == 1 && adj)) {
                s->op = steer == 0 ? PG_SYMSPLIT : PG_MERGE;
                s->a = v;
            }
        }
    }
    s->sub = (int)pg_next(g, 8);
    const pg_shape *x = &R->shape[s->a];
    int r = x->rank;
    s->ax = r ? (int)pg_next(g, (uint32_t)r) : 0;
    s->keep = pg_next(g, 2);
    s->seed = pg_mix(&(uint64_t){(uint64_t)nv * 7919u + pg_next(g, 1000)});
    *o = *x;
    pg_dim nd = {-1, PG_NEW};
    o->newhi = r ? pg_hi(R, x->d[s->ax]) : 1; /* slices, narrows, chunks: no larger */
    switch (s->op) {
    case PG_UNARY:
        s->sub %= 5;
        if (s->sub == 2 && x->mag > 64)
            s->sub = 1; /* sin of a large value would follow its last bits */
        o->exact = x->exact && (s->sub == 0 || s->sub == 3);
        return true;
    case PG_BINARY:
        s->sub %= 4;
        /* maximum only of exact values: the gradient of a near tie would
         * follow the rounding */
        s->b = pg_pick_where(g, R, pg_ok_join, x, s->sub == 3);
        if (s->b < 0 || (s->sub == 3 && !x->exact))
            return false;
        pg_join(x, &R->shape[s->b], o);
        o->exact = o->exact && s->sub == 3;
        return true;
    case PG_WHERE: {
        if (!x->exact)
            return false;
        s->b = pg_pick_where(g, R, pg_ok_join, x, 1);
        if (s->b < 0)
            return false;
        pg_shape j = *x;
        pg_join(x, &R->shape[s->b], &j);
        s->c = pg_pick_where(g, R, pg_ok_join, &j, 0);
        if (s->c < 0)
            return false;
        pg_join(&j, &R->shape[s->c], o);
        o->exact = x->exact && R->shape[s->c].exact;
        return true;
    }
    case PG_REDUCE:
        s->sub %= 4;
        if (!r || (s->sub == 2 && !x->exact))
            return false;
        if (s->keep) {
            o->d[s->ax] = (pg_dim){1, 0};
        } else {
            o->rank--;
            memmove(o->d + s->ax, o->d + s->ax + 1, (size_t)(o->rank - s->ax) * sizeof *o->d);
        }
        o->exact = x->exact && s->sub == 2;
        return true;
    case PG_ROWOP:
        s->sub %= 4;
        o->exact = false;
        return r > 0 && !pg_is_dyn(x->d[r - 1]);
    case PG_LINEAR:
        s->sub %= 3;
        s->i0 = 1 + pg_next(g, 4);
        if (!r || pg_is_dyn(x->d[r - 1]))
            return false;
        o->d[r - 1] = (pg_dim){s->i0, 0};
        o->exact = false;
        return true;
    case PG_GRAM:
        if (r < 2 || pg_is_dyn(x->d[r - 1]))
            return false;
        o->d[r - 1] = x->d[r - 2];
        o->exact = false;
        return true;
    case PG_PERMUTE:
        if (r < 2)
            return false;
        for (int i = 0; i < r; i++)
            s->perm[i] = i;
        for (int i = r - 1; i > 0; i--) {
            int j = (int)pg_next(g, (uint32_t)i + 1), t = s->perm[i];
            s->perm[i] = s->perm[j];
            s->perm[j] = t;
        }
        for (int i = 0; i < r; i++)
            o->d[i] = x->d[s->perm[i]];
        return true;
    case PG_UNSQUEEZE:
        if (r >= PG_MAXR)
            return false;
        s->ax = (int)pg_next(g, (uint32_t)r + 1);
        memmove(o->d + s->ax + 1, o->d + s->ax, (size_t)(r - s->ax) * sizeof *o->d);
        o->d[s->ax] = (pg_dim){1, 0};
        o->rank++;
        return true;
    case PG_MERGE: {
        if (r < 2)
            return false;
        s->ax = (int)pg_next(g, (uint32_t)r - 1);
        for (int i = 0; i + 1 < r && pg_next(g, 2); i++)
            if (x->d[i].id == PG_ID_B && x->d[i + 1].id == PG_ID_S && x->d[i].st < 0 && x->d[i + 1].st < 0)
                s->ax = i; /* often B*S, which symsplit takes apart */
        pg_dim a = x->d[s->ax], b = x->d[s->ax + 1], m;
        if (!pg_is_dyn(a) && !pg_is_dyn(b))
            m = (pg_dim){a.st * b.st, 0};
        else if (a.st == 1)
            m = b;
        else if (b.st == 1)
            m = a;
        else if (a.id == PG_ID_B && b.id == PG_ID_S)
            m = (pg_dim){-1, PG_ID_BS};
        else if (pg_is_dyn(a) && pg_is_dyn(b))
            return false; /* several dynamic dims merge into a -1 only beside symbols */
        else
            m = nd;
        o->newhi = pg_hi(R, a) * pg_hi(R, b);
        o->d[s->ax] = m;
        memmove(o->d + s->ax + 1, o->d + s->ax + 2, (size_t)(r - s->ax - 2) * sizeof *o->d);
        o->rank--;
        return true;
    }
    case PG_SPLIT: {
        if (!r || r >= PG_MAXR || pg_is_dyn(x->d[s->ax]))
            return false;
        int64_t k = x->d[s->ax].st, p = 1;
        for (int64_t q = 2; q < k; q++)
            if (k % q == 0 && (p == 1 || pg_next(g, 2)))
                p = q;
        s->i0 = p;
        memmove(o->d + s->ax + 1, o->d + s->ax, (size_t)(r - s->ax) * sizeof *o->d);
        o->d[s->ax] = (pg_dim){p, 0};
        o->d[s->ax + 1] = (pg_dim){k / p, 0};
        o->rank++;
        return true;
    }
    case PG_SYMSPLIT: {
        int at = -1, ndyn = 0;
        for (int i = 0; i < r; i++) {
            if (x->d[i].st < 0 && x->d[i].id == PG_ID_BS && at < 0)
                at = i;
            else
                ndyn += pg_is_dyn(x->d[i]);
        }
        if (at < 0 || ndyn > 1 || r >= PG_MAXR)
            return false; /* beside symbols at most one -1 */
        s->ax = at;
        memmove(o->d + at + 1, o->d + at, (size_t)(r - at) * sizeof *o->d);
        o->d[at] = (pg_dim){-1, PG_ID_B};
        o->d[at + 1] = (pg_dim){-1, PG_ID_S};
        o->rank++;
        return true;
    }
    case PG_SLICE: {
        static const int64_t starts[] = {0, 1, 2, -1, -2, -3, RLX_END};
        static const int64_t stops[] = {RLX_END, -1, -2, 1, 3, 0, 5};
        static const int64_t steps[] = {1, 1, 2, 3, -1, -2};
        if (!r)
            return false;
        s->i0 = starts[pg_next(g, 7)];
        s->i1 = stops[pg_next(g, 7)];
        s->i2 = steps[pg_next(g, 6)];
        o->d[s->ax] = nd;
        return true;
    }
    case PG_FLIP:
        return r > 0;
    case PG_ROLL:
        s->i0 = (int64_t)pg_next(g, 21) - 10;
        return r > 0;
    case PG_NARROW:
        s->i0 = pg_next(g, 4);
        o->d[s->ax] = nd;
        return r > 0;
    case PG_CAT:
        if (!r)
            return false;
        s->b = pg_pick_where(g, R, pg_ok_cat, x, s->ax);
        if (s->b < 0)
            s->b = s->a;
        o->newhi = pg_hi(R, x->d[s->ax]) + pg_hi(R, R->shape[s->b].d[s->ax]);
        o->d[s->ax] = nd;
        o->exact = x->exact && R->shape[s->b].exact;
        return true;
    case PG_PAD: {
        static const double vals[] = {0, 1.5, -2};
        s->i0 = pg_next(g, 3);
        s->i1 = pg_next(g, 3);
        s->f = vals[pg_next(g, 3)];
        o->newhi += s->i0 + s->i1;
        o->d[s->ax] = nd;
        return r > 0;
    }
    case PG_CUMSUM:
        o->exact = false;
        return r > 0;
    case PG_INDEX:
        s->sub %= 8;
        s->i0 = (int64_t)pg_next(g, 7) - 3;
        if (!r)
            return false;
        if (pg_next(g, 2)) {
            s->b = s->a;
            s->ax2 = s->ax;
        } else {
            s->b = pg_pick_where(g, R, pg_ok_any, x, 0);
            if (s->b < 0)
                return false;
            s->ax2 = (int)pg_next(g, (uint32_t)R->shape[s->b].rank);
        }
        o->d[s->ax] = R->shape[s->b].d[s->ax2];
        if (!pg_is_dyn(o->d[s->ax])) {
            /* arange_of a static axis is a plain arange: it does not read
             * (so does not need) its source */
            s->i1 = o->d[s->ax].st;
            s->b = -1;
        }
        return true;
    case PG_SELECT: {
        static const int64_t at[] = {0, 1, -1, 2};
        if (!r)
            return false;
        s->i0 = at[pg_next(g, 4)];
        o->rank--;
        memmove(o->d + s->ax, o->d + s->ax + 1, (size_t)(o->rank - s->ax) * sizeof *o->d);
        return true;
    }
    case PG_CHUNK:
    case PG_SPLITN: /* piece i1 of i0 chunks, or of sizes {i0, -1} (sub 0) or {-1, i0} */
        s->sub %= 2;
        s->i0 = s->op == PG_CHUNK ? 2 + pg_next(g, 2) : 1 + pg_next(g, 3);
        s->i1 = pg_next(g, s->op == PG_CHUNK ? (uint32_t)s->i0 : 2);
        o->d[s->ax] = nd;
        return r > 0;
    case PG_TILE:
        s->i0 = pg_next(g, 3);
        o->newhi *= s->i0;
        o->d[s->ax] = nd;
        return r > 0;
    default: return false;
    }
}

/* pg_draw_op, and the bound of the result's magnitude. */
static inline bool pg_draw_step(pg_rng *g, pg_recipe *R, pg_step *s, pg_shape *o)
{
    if (!pg_draw_op(g, R, s, o))
        return false;
    double m = R->shape[s->a].mag, mb = s->b >= 0 ? R->shape[s->b].mag : 0, k = 1;
    if (s->op == PG_LINEAR || s->op == PG_GRAM) {
        const pg_shape *x = &R->shape[s->a];
        k = (double)x->d[x->rank - 1].st;
    }
    static const double unary[] = {0, 2.72, 1, 0, 0};
    switch (s->op) {
    case PG_UNARY: o->mag = unary[s->sub] ? unary[s->sub] : s->sub == 4 ? sqrt(m) : m; break;
    case PG_BINARY: o->mag = s->sub == 1 ? m * mb : s->sub == 3 ? fmax(m, mb) : m + mb; break;
    case PG_WHERE: o->mag = fmax(m, R->shape[s->c].mag); break;
    case PG_REDUCE: o->mag = s->sub == 0 ? 64 * m : s->sub == 3 ? m * m : m; break;
    case PG_ROWOP: o->mag = s->sub == 0 ? 1 : s->sub == 1 ? 2 * m + 4 : 25; break;
    case PG_LINEAR: o->mag = m * k + 1; break;
    case PG_GRAM: o->mag = m * m * k; break;
    case PG_CAT: o->mag = fmax(m, mb); break;
    case PG_PAD: o->mag = fmax(m, 2); break;
    case PG_CUMSUM: o->mag = 64 * m; break;
    default: o->mag = m; break; /* views */
    }
    return true;
}

/* Checks the tracker's shape o against what tracing gave t and resolves
 * its PG_NEW dims (a fresh id, or the static size); false, with a message,
 * when they disagree. */
static inline bool pg_resolve(pg_recipe *R, pg_shape *o, rlx_tensor *t, pg_msg *m)
{
    int64_t sh[RLX_MAX_RANK];
    int r = rlx_shape(t, sh, RLX_MAX_RANK);
    bool ok = r == o->rank;
    for (int i = 0; ok && i < r; i++) {
        if (o->d[i].id == PG_NEW) {
            o->d[i] = sh[i] < 0 ? (pg_dim){-1, R->nextid++} : (pg_dim){sh[i], 0};
            if (sh[i] < 0 && o->d[i].id < PG_MAXID)
                R->hi[o->d[i].id] = o->newhi;
        }
        else
            ok = o->d[i].st < 0 ? sh[i] < 0 : sh[i] == o->d[i].st;
    }
    if (!ok) {
        pg_say(m, "the tracker expected ");
        pg_say_shape(m, R, o);
        pg_say(m, ", tracing gave rank %d:", r);
        for (int i = 0; i < r; i++)
            pg_say(m, " %lld", (long long)sh[i]);
        pg_say(m, "\n");
    }
    return ok;
}

static inline void pg_mark_live(pg_recipe *R, int v)
{
    if (v < 0 || R->live[v])
        return;
    R->live[v] = true;
    if (v >= R->nin) {
        pg_mark_live(R, R->step[v].a);
        pg_mark_live(R, R->step[v].b);
        pg_mark_live(R, R->step[v].c);
    }
}

static inline const char *pg_in_name(int i)
{
    static const char *const names[PG_MAXIN] = {"x0", "x1", "x2"};
    return names[i];
}

/* Draws a recipe and traces it over rlx_input leaves into val[]; false,
 * with a message, when tracing disagrees with the tracker. */
static inline bool pg_generate(pg_rng *g, pg_recipe *R, rlx_tensor **val, pg_msg *m)
{
    memset(R, 0, sizeof *R);
    R->dt = pg_next(g, 2) ? RLX_F64 : RLX_F32;
    R->nin = 1 + (int)pg_next(g, PG_MAXIN);
    int anon = PG_ID_ANON, ndyn = 0;
    for (int i = 0; i < R->nin; i++) {
        pg_shape *s = &R->in[i];
        s->rank = 1 + (int)pg_next(g, PG_MAXR);
        s->exact = true;
        s->mag = 2;
        for (int d = 0; d < s->rank; d++) {
            uint32_t k = pg_next(g, 10);
            if (k < 5)
                s->d[d] = (pg_dim){1 + pg_next(g, 5), 0};
            else if (k < 7)
                s->d[d] = (pg_dim){-1, PG_ID_B};
            else if (k < 9)
                s->d[d] = (pg_dim){-1, PG_ID_S};
            else
                s->d[d] = (pg_dim){-1, anon++};
            ndyn += s->d[d].st < 0;
        }
    }
    if (!ndyn)
        R->in[0].d[0] = (pg_dim){-1, PG_ID_B};
    if (pg_next(g, 4) == 0 && R->in[0].rank >= 2) { /* [B, S, ...]: a transformer's activations */
        R->in[0].d[0] = (pg_dim){-1, PG_ID_B};
        R->in[0].d[1] = (pg_dim){-1, PG_ID_S};
        for (int d = 2; d < R->in[0].rank; d++)
            R->in[0].d[d] = (pg_dim){2 + d, 0};
    }
    R->nanon = anon - PG_ID_ANON;
    R->nextid = anon;
    for (int id = 1; id < anon; id++)
        R->hi[id] = id == PG_ID_BS ? 81 : 9;
    for (int i = 0; i < R->nin; i++) {
        int64_t sh[RLX_MAX_RANK];
        for (int d = 0; d < R->in[i].rank; d++) {
            pg_dim x = R->in[i].d[d];
            sh[d] = x.st >= 0 ? x.st : x.id == PG_ID_B ? -2 : x.id == PG_ID_S ? -3 : -1;
        }
        val[i] = rlx_input(pg_in_name(i), R->dt, R->in[i].rank, sh);
        R->shape[i] = R->in[i];
        if (!val[i]) {
            pg_say(m, "rlx_input x%d: %s\n", i, rlx_last_error());
            return false;
        }
    }
    R->nv = R->nin;
    int nsteps = 3 + (int)pg_next(g, 12);
    for (int k = 0; k < nsteps * 3 && R->nv < PG_MAXV && R->nv < R->nin + nsteps; k++) {
        pg_step s;
        pg_shape o;
        if (!pg_draw_step(g, R, &s, &o))
            continue;
        rlx_tensor *t = pg_apply(R, &s, val, NULL);
        if (!t) {
            rlx_clear_error(); /* tracing refused: not part of the recipe */
            continue;
        }
        R->step[R->nv] = s;
        if (!pg_resolve(R, &o, t, m)) {
            R->shape[R->nv] = o;
            R->nv++;
            pg_say(m, "at v%d (%s) ", R->nv - 1, pg_op_names[s.op]);
            return false;
        }
        double elems = 1;
        for (int d = 0; d < o.rank; d++)
            elems *= (double)pg_hi(R, o.d[d]);
        if (elems > PG_MAXELEMS)
            continue; /* too large for some binding: not part of the recipe */
        R->shape[R->nv] = o;
        val[R->nv++] = t;
    }
    /* outputs: the last value and up to two others (inputs excluded) */
    R->nout = 0;
    if (R->nv > R->nin) {
        R->out[R->nout++] = R->nv - 1;
        int extra = (int)pg_next(g, PG_MAXOUT);
        for (int e = 0; e < extra; e++) {
            int v = R->nin + (int)pg_next(g, (uint32_t)(R->nv - R->nin));
            bool dup = false;
            for (int o = 0; o < R->nout; o++)
                dup |= R->out[o] == v;
            if (!dup)
                R->out[R->nout++] = v;
        }
    }
    for (int o = 0; o < R->nout; o++)
        pg_mark_live(R, R->out[o]);
    R->grad = R->nout > 0 && pg_next(g, 2);
    R->loss_tanh = R->nout > 0 && R->shape[R->out[0]].mag > 64;
    return true;
}

/* The outputs over the recipe's values (and the loss's gradients w.r.t.
 * leaves when R->grad); their count, or -1 when an op refuses. */
static inline int pg_outputs(const pg_recipe *R, rlx_tensor *const *val, rlx_tensor *const *leaves,
                             rlx_tensor **outs)
{
    int n = 0;
    for (int o = 0; o < R->nout; o++)
        if (!(outs[n++] = val[R->out[o]]))
            return -1;
    if (R->grad) {
        rlx_tensor *o0 = outs[0], *loss = rlx_sum_all(rlx_mul(o0, R->loss_tanh ? rlx_tanh(o0) : rlx_sin(o0)));
        if (rlx_grad(loss, leaves, R->nin, outs + n) != RLX_OK)
            return -1;
        n += R->nin;
    }
    return n;
}

/* -------------------------------------------------------- the check */

typedef struct {
    long programs, bindings, both_ok, both_err, steps, live_steps, grads;
    long prepared, reused; /* specializations planned, and made from a kept plan */
    long ops[PG_NOPS];
} pg_stats;

/* A binding: a size for B, S and each anonymous dim. */
typedef struct {
    int64_t size[PG_MAXVAR];
} pg_bind;

static inline int64_t pg_bound(const pg_recipe *R, const pg_bind *b, pg_dim d)
{
    (void)R;
    if (d.st >= 0)
        return d.st;
    return d.id == PG_ID_B ? b->size[0] : d.id == PG_ID_S ? b->size[1] : b->size[2 + d.id - PG_ID_ANON];
}

static inline void pg_say_bind(pg_msg *m, const pg_recipe *R, const pg_bind *b)
{
    pg_say(m, "B=%lld S=%lld", (long long)b->size[0], (long long)b->size[1]);
    for (int a = 0; a < R->nanon; a++)
        pg_say(m, " a%d=%lld", a, (long long)b->size[2 + a]);
}

static inline int64_t pg_draw_size(pg_rng *g)
{
    uint32_t k = pg_next(g, 8);
    return k == 0 ? 0 : k == 1 ? 1 : 2 + pg_next(g, 8);
}

/* The binding sequence: repeats, runs of one size class (a new size >= 2
 * where the last was >= 2), and fresh draws. */
static inline void pg_draw_bindings(pg_rng *g, const pg_recipe *R, pg_bind *b, int n)
{
    int nvar = 2 + R->nanon;
    for (int i = 0; i < n; i++) {
        uint32_t k = i ? pg_next(g, 8) : 7;
        if (k < 2) {
            b[i] = b[pg_next(g, (uint32_t)i)];
        } else if (k < 5) {
            b[i] = b[i - 1];
            for (int v = 0; v < nvar; v++)
                if (b[i].size[v] >= 2)
                    b[i].size[v] = 2 + pg_next(g, 8);
        } else {
            for (int v = 0; v < nvar; v++)
                b[i].size[v] = pg_draw_size(g);
        }
    }
}


/* rlx_read_f64 of t into a malloc'ed array; NULL when it fails. */
static inline double *pg_read(rlx_tensor *t, int64_t *n)
{
    *n = rlx_numel(t);
    double *v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *v);
    if (v && rlx_read_f64(t, v, (size_t)*n) != RLX_OK) {
        free(v);
        v = NULL;
    }
    return v;
}

/* got vs want: same shape and dtype; values within rtol * (|want| +
 * scale), scale the largest finite magnitude of the binding's reference
 * outputs (at least 1: cancellation in a sum loses digits relative to its
 * terms, not to its result); NaN where the reference has NaN; infinities
 * equal. */
static inline bool pg_compare(rlx_tensor *got, rlx_tensor *want, double rtol, double scale, int o, pg_msg *m)
{
    int64_t gs[RLX_MAX_RANK], ws[RLX_MAX_RANK];
    int gr = rlx_shape(got, gs, RLX_MAX_RANK), wr = rlx_shape(want, ws, RLX_MAX_RANK);
    if (gr != wr || (gr > 0 && memcmp(gs, ws, (size_t)gr * sizeof *gs)) || rlx_dtype_of(got) != rlx_dtype_of(want)) {
        pg_say(m, "output %d: shape or dtype differ: program rank %d [", o, gr);
        for (int i = 0; i < gr; i++)
            pg_say(m, "%s%lld", i ? "," : "", (long long)gs[i]);
        pg_say(m, "] %s, reference rank %d [", rlx_dtype_name(rlx_dtype_of(got)), wr);
        for (int i = 0; i < wr; i++)
            pg_say(m, "%s%lld", i ? "," : "", (long long)ws[i]);
        pg_say(m, "] %s\n", rlx_dtype_name(rlx_dtype_of(want)));
        return false;
    }
    int64_t n, nw;
    double *a = pg_read(got, &n), *b = pg_read(want, &nw);
    bool ok = a && b && n == nw;
    if (!ok)
        pg_say(m, "output %d: reading failed: %s\n", o, rlx_last_error());
    for (int64_t i = 0; ok && i < n; i++) {
        double x = a[i], y = b[i];
        if (isnan(x) || isnan(y))
            ok = isnan(x) && isnan(y);
        else if (isinf(x) || isinf(y))
            ok = x == y;
        else
            ok = fabs(x - y) <= rtol * (fabs(y) + scale);
        if (!ok)
            pg_say(m, "output %d: element %lld is %.17g in the program, %.17g in the reference (rtol %g, scale %g)\n",
                   o, (long long)i, x, y, rtol, scale);
    }
    free(a);
    free(b);
    return ok;
}

static inline double pg_max_abs(rlx_tensor *t)
{
    int64_t n;
    double *v = pg_read(t, &n), mx = 0;
    for (int64_t i = 0; v && i < n; i++)
        if (isfinite(v[i]) && fabs(v[i]) > mx)
            mx = fabs(v[i]);
    free(v);
    return mx;
}

/* One binding: the program's run against the recipe replayed over the
 * same values on the reference backend. */
static inline bool pg_check_binding(const pg_recipe *R, rlx_program *p, int nouts, const bool *reads,
                                    const bool *need, const bool *calc, const bool *zeroed, const pg_bind *b,
                                    uint64_t seed,
                                    pg_stats *st, pg_msg *m)
{
    rlx_tensor *leaves[PG_MAXIN], *vals[PG_MAXIN], *val[PG_MAXV] = {0}, *got[PG_MAXOUT + PG_MAXIN] = {0},
               *want[PG_MAXOUT + PG_MAXIN] = {0};
    rlx_binding bind[PG_MAXIN];
    int nbind = 0;
    for (int i = 0; i < R->nin; i++) {
        int64_t sh[RLX_MAX_RANK];
        for (int d = 0; d < R->in[i].rank; d++)
            sh[d] = pg_bound(R, b, R->in[i].d[d]);
        /* values in [-2, 2): two constants of the same data, one bound,
         * one the replay's leaf (no node is shared with the program) */
        vals[i] = rlx_mul_s(pg_const(R->dt, R->in[i].rank, sh, seed * 31 + (uint64_t)i), 2);
        leaves[i] = rlx_mul_s(pg_const(R->dt, R->in[i].rank, sh, seed * 31 + (uint64_t)i), 2);
        if (!vals[i] || !leaves[i] || rlx_realize(vals[i]) != RLX_OK || rlx_realize(leaves[i]) != RLX_OK) {
            pg_say(m, "making input x%d: %s\n", i, rlx_last_error());
            return false;
        }
        if (reads[i]) /* binding another is an error */
            bind[nbind++] = (rlx_binding){pg_in_name(i), vals[i]};
    }
    rlx_clear_error();
    rlx_status ps = rlx_program_run(p, bind, nbind, got);
    char perr[512];
    snprintf(perr, sizeof perr, "%s", ps == RLX_OK ? "" : rlx_last_error());
    rlx_clear_error();

    rlx_set_option("backend", "ref");
    int64_t syms[2] = {b->size[0], b->size[1]};
    bool rok = true;
    for (int i = 0; i < R->nin; i++)
        val[i] = leaves[i];
    for (int v = R->nin; v < R->nv && rok; v++) {
        int64_t sh[RLX_MAX_RANK];
        for (int d = 0; d < R->shape[v].rank; d++)
            sh[d] = R->shape[v].d[d].st;
        if (zeroed[v] && need[v]) /* (pg_check) */
            rok = (val[v] = rlx_zeros(R->dt, R->shape[v].rank, sh)) != NULL;
        else if (need[v])
            rok = (val[v] = pg_apply(R, &R->step[v], val, syms)) != NULL;
    }
    int nw = rok ? pg_outputs(R, val, leaves, want) : -1;
    /* every value the replay made is realized, as eager code computes
     * each: a gather's index out of range is found when realized, and
     * the static graph drops a piece of a cat bound empty (with the
     * gather under it) where the program keeps a dynamic one */
    rlx_tensor *all[PG_MAXV + PG_MAXOUT + PG_MAXIN];
    int nall = 0;
    for (int v = R->nin; v < R->nv && nw == nouts; v++)
        if (calc[v] && !zeroed[v])
            all[nall++] = val[v];
    for (int o = 0; o < nw; o++)
        all[nall++] = want[o];
    rok = nw == nouts && rlx_realize_many(all, nall) == RLX_OK;
    char rerr[512];
    snprintf(rerr, sizeof rerr, "%s", rok ? "" : rlx_last_error());
    rlx_clear_error();
    bool ok = true;
    if (rok != (ps == RLX_OK)) {
        pg_say(m, "the program %s, the reference %s\n  program: %s\n  reference: %s\n",
               ps == RLX_OK ? "ran" : "failed", rok ? "ran" : "failed", perr, rerr);
        ok = false;
    } else if (rok) {
        double scale = 1, rtol = R->dt == RLX_F32 ? 3e-4 : 1e-9;
        for (int o = 0; o < nouts; o++)
            scale = fmax(scale, pg_max_abs(want[o]));
        for (int o = 0; o < nouts && ok; o++)
            ok = pg_compare(got[o], want[o], rtol, scale, o, m);
        st->both_ok++;
    } else {
        st->both_err++;
    }
    rlx_set_option("backend", "jit");
    return ok;
}

/* Draws one recipe and checks it over a sequence of bindings; false, with
 * the recipe, the bindings so far and the difference in m, on a failure. */
static inline bool pg_check(pg_rng *g, pg_stats *st, pg_msg *m)
{
    pg_recipe R;
    rlx_tensor *val[PG_MAXV] = {0}, *outs[PG_MAXOUT + PG_MAXIN] = {0};
    bool ok = true;
    rlx_scope_begin();
    rlx_set_option("backend", "jit");
    if (!pg_generate(g, &R, val, m)) {
        pg_dump(m, &R);
        rlx_scope_end();
        return false;
    }
    st->programs++;
    int nouts = pg_outputs(&R, val, val, outs);
    if (getenv("RLX_PG_DUMP")) { /* the recipe before it runs (one that hangs prints nothing else) */
        char dump[8192];
        pg_msg dm = {dump, sizeof dump, 0};
        pg_dump(&dm, &R);
        fprintf(stderr, "%s", dump);
    }
    if (nouts <= 0) {
        /* no step traced (or the gradient refused): nothing to run */
        rlx_clear_error();
        rlx_scope_end();
        return true;
    }
    for (int v = R.nin; v < R.nv; v++) {
        st->steps++;
        st->live_steps += R.live[v];
        st->ops[R.step[v].op] += R.live[v];
    }
    st->grads += R.grad;
    /* the inputs the program reads: those its graph reaches (not always
     * the recipe's live ones: tracing drops an empty static piece of a
     * cat, and a gradient of a dynamic input it does not reach reads its
     * shape) */
    bool reads[PG_MAXIN] = {false}, traced[PG_MAXV] = {false};
    ir_node **order = NULL;
    long count = ir_postorder((ir_node *const *)outs, nouts, NULL, NULL, &order);
    for (long k = 0; k < count; k++)
        for (int v = 0; v < R.nv; v++)
            traced[v] |= order[k] == (ir_node *)val[v];
    for (int i = 0; i < R.nin; i++)
        reads[i] = traced[i];
    ir_free(order);
    /* A value of static shape and no elements the traced graph dropped
     * (an empty piece of a cat) is replayed as such zeros, and what only
     * it needs is not replayed: the program has nothing of them. The
     * checks of the ops that made it are gone there: a library issue,
     * reported (a narrow that does not fit the bound size, under such a
     * piece, is no error). */
    bool zeroed[PG_MAXV] = {false}, need[PG_MAXV] = {false};
    for (int v = R.nin; v < R.nv; v++) {
        bool fixed = true;
        int64_t n = 1;
        for (int d = 0; d < R.shape[v].rank; d++) {
            fixed &= R.shape[v].d[d].st >= 0;
            n *= R.shape[v].d[d].st;
        }
        zeroed[v] = !traced[v] && fixed && n == 0;
    }
    /* (only a cat's pieces: elsewhere a value may be missing from the
     * graph because a later op folded it, as a reshape of a reshape) */
    bool piece[PG_MAXV] = {false};
    for (int v = R.nin; v < R.nv; v++)
        if (R.step[v].op == PG_CAT)
            piece[R.step[v].a] = piece[R.step[v].b] = true;
    for (int v = R.nin; v < R.nv; v++)
        zeroed[v] = zeroed[v] && piece[v];
    /* calc: the values whose values (not only shapes: arange_of reads
     * none of its source's) an output needs, which the replay realizes */
    bool calc[PG_MAXV] = {false};
    for (int o = 0; o < R.nout; o++)
        need[R.out[o]] = calc[R.out[o]] = true;
    for (int v = R.nv - 1; v >= R.nin; v--)
        if (need[v] && !zeroed[v]) {
            const pg_step *sv = &R.step[v];
            need[sv->a] = true;
            calc[sv->a] |= calc[v];
            if (sv->b >= 0) {
                need[sv->b] = true;
                calc[sv->b] |= calc[v] && sv->op != PG_INDEX;
            }
            if (sv->c >= 0) {
                need[sv->c] = true;
                calc[sv->c] |= calc[v];
            }
        }
    rlx_program *p = rlx_compile(outs, nouts);
    if (!p) {
        pg_say(m, "rlx_compile: %s\n", rlx_last_error());
        pg_dump(m, &R);
        rlx_scope_end();
        return false;
    }
    uint32_t specs = pg_next(g, 6);
    if (specs < 2)
        rlx_set_option("program_specs", specs ? "2" : "1");
    pg_bind b[12];
    int nb = 6 + (int)pg_next(g, 7);
    pg_draw_bindings(g, &R, b, nb);
    uint64_t seed = pg_next(g, 1u << 30);
    for (int i = 0; i < nb && ok; i++) {
        rlx_scope_begin();
        st->bindings++;
        ok = pg_check_binding(&R, p, nouts, reads, need, calc, zeroed, &b[i], seed + (uint64_t)i, st, m);
        rlx_scope_end();
        if (!ok) {
            pg_say(m, "at binding %d of %d (program_specs %s):", i, nb, specs == 0 ? "1" : specs == 1 ? "2" : "8");
            for (int k = 0; k <= i; k++) {
                pg_say(m, "\n  %d: ", k);
                pg_say_bind(m, &R, &b[k]);
            }
            pg_say(m, "\n");
            pg_dump(m, &R);
        }
    }
    int kept = 0;
    int64_t prepared = 0, reused = 0;
    if (rlx_program_specs(p, &kept, &prepared) != RLX_OK || rlx_program_reuses(p, &reused) != RLX_OK ||
        (specs < 2 && kept > (int)specs + 1) || reused > prepared) {
        pg_say(m, "program_specs %s: %d kept, %lld prepared, %lld reused\n", specs == 0 ? "1" : specs == 1 ? "2" : "8",
               kept, (long long)prepared, (long long)reused);
        pg_dump(m, &R);
        ok = false;
    }
    st->prepared += prepared;
    st->reused += reused;
    rlx_set_option("program_specs", "0");
    rlx_program_free(p);
    rlx_clear_error();
    rlx_scope_end();
    return ok;
}

#endif
