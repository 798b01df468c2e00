/*
 * plan_cache.c — rt_jit_realize, with a cache of prepared plans (schedule,
 * memory plan and compiled kernels, runtime/exec/jit_exec.c) keyed by the
 * structure of the graph: a realization repeated on new data (a training
 * step, a small op in a loop) skips scheduling, memory planning and the
 * kernel lookups, which cost far more than running a small graph.
 *
 * The key (the signature) is the graph below the roots in post-order,
 * down to realized nodes: per node its op, dtype, shape, attributes and
 * the post-order positions of its sources, then the roots' positions and
 * the knob epoch (runtime/knobs.h). Payloads are not in it: a realized node
 * is a leaf known by its dtype and shape, a CONST by its dtype and shape
 * (a bool CONST by its value too), so new data or a new learning rate is
 * a hit. Signatures are compared word for word, never by hash alone.
 *
 * An entry owns a template: the graph copied as detached nodes (never
 * shared with a user's graph, outside the live count), realized nodes
 * replaced by placeholder buffers (the plan's slots, bound to the current
 * realized nodes at each run) and every CONST but bool ones given a
 * distinct tag value. Each entry of the built plan's constant array that
 * holds a tag is traced back to its CONST, and a run fills it from that
 * CONST's current value. Everything a plan does with a CONST goes through
 * that array (a CONST read by a reference kernel is materialized by a
 * loop kernel; no pass after simplify looks at a value).
 *
 * A structure is cached the second time it is seen, so a one-off graph
 * pays no copy. At most MAX_ENTRIES entries and MAX_NODES template nodes
 * are kept, the least recently used evicted; a graph over MAX_GRAPH nodes
 * is not cached. Entries are refcounted: a run keeps its entry alive while
 * another thread evicts it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "runtime/exec/jit_exec.h"
#include "runtime/knobs.h"

enum { MAX_ENTRIES = 64, MAX_NODES = 1 << 16, MAX_GRAPH = 4096, SEEN = 64, SMALL = 32 };
/* CONST tags: small integers, exact in every dtype but bool (which keeps
 * its value and is keyed by it: 0 and 1 are no tags) */
#define TAG_BASE 2.0
enum { MAX_TAGS = 1 << 22 };

enum { K_OP = 0, K_LEAF = 1, K_TAG = 2, K_CONST = 3 }; /* signature kinds */

typedef struct {
    atomic_long refs;
    uint64_t h, tick;
    uint64_t *sig;
    size_t nsig;
    rt_jit_plan *plan;
    long count;       /* template nodes */
    ir_node **tmpl;   /* owns: per post-order position */
    int nroots;
    ir_node **roots;  /* borrows tmpl */
    int nslots;
    long *slot_pos;   /* per slot: its position */
    ir_node **slots;  /* borrows tmpl */
    long nconsts;
    long *const_pos;  /* per constant-array entry: its CONST's position, -1 keeps the plan's */
    long nloops;
} entry;

static struct {
    pthread_mutex_t lock;
    entry *tab[MAX_ENTRIES];
    int count;
    long nodes;
    uint64_t tick;
    uint64_t seen[SEEN];
    int seen_next;
    rt_plan_cache_counts c;
} C = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void entry_release(entry *e)
{
    if (!e || atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) != 1)
        return;
    rt_jit_plan_free(e->plan); /* before the nodes it borrows */
    for (long i = 0; e->tmpl && i < e->count; i++)
        ir_release(e->tmpl[i]);
    ir_free(e->sig); /* and the tables in its block */
    ir_free(e->const_pos);
    ir_free(e);
}

/* ------------------------------------------------------------ signature */

typedef struct {
    ir_node **order;
    long count;
    ir_map pos;       /* only above SMALL nodes */
    unsigned char *kind;
    uint64_t *w;
    size_t n, cap;
    long ntags;
    uint64_t h;
    unsigned char kind_small[SMALL];
    uint64_t w_small[256];
} sig;

static bool stop_realized(const ir_node *n, void *ctx)
{
    (void)ctx;
    return ir_node_storage(n) != NULL;
}

static long pos_of(const sig *s, const ir_node *n, long below)
{
    if (s->count > SMALL)
        return ir_map_get(&s->pos, n);
    for (long j = below - 1; j >= 0; j--) /* sources are usually just before */
        if (s->order[j] == n)
            return j;
    return -1;
}

static bool put(sig *s, uint64_t v)
{
    if (s->n == s->cap) {
        size_t cap = s->cap * 2;
        uint64_t *w = ir_alloc(cap * sizeof *w);
        if (!w)
            return false;
        memcpy(w, s->w, s->n * sizeof *w);
        if (s->w != s->w_small)
            ir_free(s->w);
        s->w = w;
        s->cap = cap;
    }
    s->w[s->n++] = v;
    return true;
}

static void sig_free(sig *s)
{
    ir_free(s->order);
    ir_map_free(&s->pos);
    if (s->kind != s->kind_small)
        ir_free(s->kind);
    if (s->w != s->w_small)
        ir_free(s->w);
}

/* The signature of roots; false when the graph is not cached (too large,
 * an unbound input, out of memory). */
static bool sig_build(sig *s, ir_node *const *roots, int nroots)
{
    memset(s, 0, offsetof(sig, kind_small));
    s->w = s->w_small;
    s->cap = sizeof s->w_small / sizeof *s->w_small;
    s->count = ir_postorder(roots, nroots, stop_realized, NULL, &s->order);
    if (s->count < 0 || s->count > MAX_GRAPH)
        return false;
    s->kind = s->count <= SMALL ? s->kind_small : ir_alloc((size_t)s->count);
    if (!s->kind)
        return false;
    if (s->count > SMALL)
        for (long i = 0; i < s->count; i++)
            if (ir_map_put(&s->pos, s->order[i], i) < 0)
                return false;
    bool ok = put(s, knob_epoch()) && put(s, (uint64_t)s->count);
    for (long i = 0; i < s->count && ok; i++) {
        const ir_node *n = s->order[i];
        int k = K_OP;
        if (ir_node_storage(n))
            k = K_LEAF; /* whatever computed it: the scheduler sees a realized value */
        else if (n->op == IR_OP_CONST)
            k = n->dtype == RLX_BOOL ? K_CONST : K_TAG;
        else if (n->op == IR_OP_INPUT)
            return false; /* unbound: the realization reports it */
        s->kind[i] = (unsigned char)k;
        s->ntags += k == K_TAG;
        /* attribute words up to the last nonzero one (attrs are zero-filled) */
        uint64_t aw[sizeof(ir_attrs) / 8];
        int na = 0;
        if (k == K_OP || k == K_CONST) {
            memcpy(aw, &n->attr, sizeof aw);
            for (na = (int)(sizeof aw / 8); na > 0 && !aw[na - 1]; na--)
                ;
        }
        ok = put(s, (uint64_t)(k == K_OP || k == K_CONST ? n->op : 0) | (uint64_t)n->dtype << 8 |
                        (uint64_t)n->rank << 16 | (uint64_t)k << 24 | (uint64_t)na << 32) &&
             put(s, k == K_OP ? (uint64_t)n->nsrc : 0);
        for (int d = 0; d < n->rank && ok; d++)
            ok = put(s, (uint64_t)n->shape[d]);
        for (int a = 0; a < na && ok; a++)
            ok = put(s, aw[a]);
        for (int j = 0; k == K_OP && j < n->nsrc && ok; j++) {
            long p = pos_of(s, n->src[j], i);
            ok = p >= 0 && put(s, (uint64_t)p);
        }
    }
    ok = ok && s->ntags < MAX_TAGS && put(s, (uint64_t)nroots);
    for (int r = 0; r < nroots && ok; r++)
        ok = put(s, (uint64_t)pos_of(s, roots[r], s->count));
    if (!ok)
        return false;
    uint64_t h = 0x6a09e667f3bcc909ull;
    for (size_t i = 0; i < s->n; i++) {
        h = (h ^ s->w[i]) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 32;
    }
    s->h = h;
    return true;
}

/* ---------------------------------------------------------------- table */

/* The entry of s (retained), or NULL; a miss seen before sets *build. */
static entry *lookup(const sig *s, bool *build)
{
    entry *e = NULL;
    *build = false;
    pthread_mutex_lock(&C.lock);
    for (int i = 0; i < C.count; i++) {
        entry *c = C.tab[i];
        if (c->h == s->h && c->nsig == s->n && memcmp(c->sig, s->w, s->n * sizeof *s->w) == 0) {
            e = c;
            atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
            e->tick = ++C.tick;
            C.c.hits++;
            break;
        }
    }
    if (!e) {
        C.c.misses++;
        for (int i = 0; i < SEEN && !*build; i++)
            *build = C.seen[i] == s->h;
        if (!*build) {
            C.seen[C.seen_next] = s->h;
            C.seen_next = (C.seen_next + 1) % SEEN;
        }
    }
    pthread_mutex_unlock(&C.lock);
    return e;
}

/* Removes tab[i] (the cache's reference); under the lock. */
static entry *drop_at(int i)
{
    entry *e = C.tab[i];
    C.tab[i] = C.tab[--C.count];
    C.nodes -= e->count;
    C.c.evicted++;
    return e;
}

/* Adds e (the cache takes a reference) unless an equal entry came first. */
static void insert(entry *e)
{
    entry *gone[MAX_ENTRIES + 1];
    int ngone = 0;
    pthread_mutex_lock(&C.lock);
    bool dup = false;
    for (int i = 0; i < C.count && !dup; i++)
        dup = C.tab[i]->h == e->h && C.tab[i]->nsig == e->nsig &&
              memcmp(C.tab[i]->sig, e->sig, e->nsig * sizeof *e->sig) == 0;
    if (!dup) {
        while (C.count > 0 && (C.count == MAX_ENTRIES || C.nodes + e->count > MAX_NODES)) {
            int lru = 0;
            for (int i = 1; i < C.count; i++)
                if (C.tab[i]->tick < C.tab[lru]->tick)
                    lru = i;
            gone[ngone++] = drop_at(lru);
        }
        atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
        e->tick = ++C.tick;
        C.tab[C.count++] = e;
        C.nodes += e->count;
        C.c.built++;
    }
    pthread_mutex_unlock(&C.lock);
    for (int i = 0; i < ngone; i++)
        entry_release(gone[i]); /* outside the lock: frees a plan */
}

void rt_plan_cache_clear(void)
{
    entry *gone[MAX_ENTRIES];
    pthread_mutex_lock(&C.lock);
    int n = C.count;
    for (int i = 0; i < n; i++)
        gone[i] = C.tab[i];
    C.count = 0;
    C.nodes = 0;
    memset(C.seen, 0, sizeof C.seen);
    pthread_mutex_unlock(&C.lock);
    for (int i = 0; i < n; i++)
        entry_release(gone[i]);
}

void rt_plan_cache_counts_get(rt_plan_cache_counts *out)
{
    pthread_mutex_lock(&C.lock);
    *out = C.c;
    out->entries = C.count;
    out->nodes = C.nodes;
    pthread_mutex_unlock(&C.lock);
}

/* ------------------------------------------------------------- template */

/* The entry of s: its template, slots and plan (built and compiled now,
 * stats counted). NULL with ctx's status set when the plan fails, NULL
 * with RLX_OK when out of memory for the entry itself (then the caller
 * realizes without it). */
static entry *entry_build(const sig *s, ir_node *const *roots, int nroots, int nthreads, rt_ctx *ctx,
                          rt_jit_stats *stats)
{
    static char nothing[64]; /* the placeholders' payload: never read */
    long nslots = 0;
    for (long i = 0; i < s->count; i++)
        nslots += s->kind[i] == K_LEAF;
    entry *e = ir_calloc(1, sizeof *e);
    /* one block: the signature, then the tables */
    size_t words = s->n + (size_t)s->count + (size_t)nslots * 2 + (size_t)nroots + (size_t)s->ntags + 1;
    uint64_t *blk = e ? ir_alloc(words * sizeof *blk) : NULL;
    ir_storage *none = blk ? ir_storage_new(nothing, 0, NULL, NULL) : NULL;
    if (!none) {
        ir_free(blk);
        ir_free(e);
        return NULL;
    }
    atomic_init(&e->refs, 1);
    e->h = s->h;
    e->sig = blk;
    e->nsig = s->n;
    memcpy(e->sig, s->w, s->n * sizeof *s->w);
    e->tmpl = (ir_node **)(blk + s->n);
    e->slot_pos = (long *)(e->tmpl + s->count);
    e->slots = (ir_node **)(e->slot_pos + nslots);
    e->roots = (ir_node **)(e->slots + nslots);
    long *tag_pos = (long *)(e->roots + nroots);
    e->nroots = nroots;
    ir_node *srcbuf[8], **src = srcbuf;
    long ntags = 0;
    bool ok = true;
    for (long i = 0; i < s->count && ok; i++) {
        const ir_node *n = s->order[i];
        ir_node *m = NULL;
        if (s->kind[i] == K_LEAF) {
            m = ir_make_detached(IR_OP_BUFFER, 0, NULL, NULL, n->dtype, n->rank, n->shape, none);
            e->slot_pos[e->nslots] = i;
            e->slots[e->nslots++] = m;
        } else if (s->kind[i] == K_TAG) {
            ir_attrs a;
            memset(&a, 0, sizeof a);
            a.cst.value = TAG_BASE + (double)ntags;
            tag_pos[ntags++] = i;
            m = ir_make_detached(IR_OP_CONST, 0, NULL, &a, n->dtype, n->rank, n->shape, NULL);
        } else {
            if (n->nsrc > 8 && !(src = ir_alloc((size_t)n->nsrc * sizeof *src)))
                break;
            for (int j = 0; j < n->nsrc; j++)
                src[j] = e->tmpl[pos_of(s, n->src[j], i)];
            m = ir_make_detached(n->op, n->nsrc, src, &n->attr, n->dtype, n->rank, n->shape, NULL);
            if (src != srcbuf) {
                ir_free(src);
                src = srcbuf;
            }
        }
        e->tmpl[e->count] = m;
        e->count += m != NULL;
        ok = m != NULL;
    }
    ir_storage_release(none); /* the placeholders hold it */
    for (int r = 0; r < nroots && ok; r++)
        e->roots[r] = e->tmpl[pos_of(s, roots[r], s->count)];
    if (!ok) {
        entry_release(e);
        return NULL;
    }
    if (rt_jit_plan_build(e->roots, nroots, e->slots, e->nslots, nthreads, ctx, stats, &e->plan) != RLX_OK) {
        entry_release(e);
        return NULL;
    }
    e->nloops = rt_jit_plan_loops(e->plan);
    const double *pc = rt_jit_plan_consts(e->plan, &e->nconsts);
    e->const_pos = ir_alloc((size_t)(e->nconsts ? e->nconsts : 1) * sizeof *e->const_pos);
    if (!e->const_pos) {
        entry_release(e);
        return NULL;
    }
    for (long c = 0; c < e->nconsts; c++) {
        double t = pc[c] - TAG_BASE;
        bool tag = t >= 0 && t < (double)ntags && t == (double)(long)t;
        e->const_pos[c] = tag ? tag_pos[(long)t] : -1;
    }
    return e;
}

/* ------------------------------------------------------------------ run */

/* Runs e's plan on the realized leaves and constants of s and publishes
 * the roots. */
static rlx_status entry_run(const entry *e, const sig *s, ir_node *const *roots, int nroots, int nthreads,
                            rt_ctx *ctx, rt_jit_stats *stats)
{
    ir_node *bstack[16], **binds = e->nslots <= 16 ? bstack : ir_alloc((size_t)e->nslots * sizeof *binds);
    double cstack[16], *consts = e->nconsts <= 16 ? cstack : ir_alloc((size_t)e->nconsts * sizeof *consts);
    rt_view vstack[8], *v = nroots <= 8 ? vstack : ir_calloc((size_t)nroots, sizeof *v);
    if (!binds || !consts || !v) {
        rt_fail(ctx, RLX_E_NOMEM, "out of memory");
        goto out;
    }
    for (int j = 0; j < e->nslots; j++)
        binds[j] = s->order[e->slot_pos[j]];
    long npc;
    const double *pc = rt_jit_plan_consts(e->plan, &npc);
    for (long c = 0; c < e->nconsts; c++) {
        const ir_node *k = e->const_pos[c] >= 0 ? s->order[e->const_pos[c]] : NULL;
        consts[c] = k ? sched_const_value(k->attr.cst.value, k->dtype) : pc[c];
    }
    if (rt_jit_plan_run(e->plan, binds, consts, nthreads, ctx, stats, v) == RLX_OK)
        for (int r = 0; r < nroots && ctx->status == RLX_OK; r++)
            rt_publish(ctx, roots[r], &v[r]);
    for (int r = 0; r < nroots; r++)
        ir_storage_release(v[r].st);
out:
    if (binds != bstack)
        ir_free(binds);
    if (consts != cstack)
        ir_free(consts);
    if (v && v != vstack)
        ir_free(v);
    return ctx->status;
}

/* Without the cache: a plan built, run once and freed. */
static rlx_status realize_once(ir_node *const *roots, int nroots, int nthreads, rt_ctx *ctx, rt_jit_stats *stats)
{
    rt_jit_plan *p;
    if (rt_jit_plan_build(roots, nroots, NULL, 0, nthreads, ctx, stats, &p))
        return ctx->status;
    rt_view vstack[8], *v = nroots <= 8 ? vstack : ir_calloc((size_t)nroots, sizeof *v);
    if (!v) {
        rt_jit_plan_free(p);
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory");
    }
    if (rt_jit_plan_run(p, NULL, NULL, nthreads, ctx, stats, v) == RLX_OK)
        for (int r = 0; r < nroots && ctx->status == RLX_OK; r++)
            rt_publish(ctx, roots[r], &v[r]);
    for (int r = 0; r < nroots; r++)
        ir_storage_release(v[r].st);
    if (v != vstack)
        ir_free(v);
    rt_jit_plan_free(p);
    return ctx->status;
}

rlx_status rt_jit_realize(ir_node *const *roots, int nroots, int nthreads, rt_ctx *ctx, rt_jit_stats *stats)
{
    sig s;
    bool build = false;
    entry *e = NULL;
    if (sig_build(&s, roots, nroots)) {
        e = lookup(&s, &build);
        if (e) {
            stats->cache_hits += (uint64_t)e->nloops; /* each kernel found, as a plan build would count it */
        } else if (build) {
            e = entry_build(&s, roots, nroots, nthreads, ctx, stats);
            if (!e && ctx->status) {
                sig_free(&s);
                return ctx->status;
            }
            if (e)
                insert(e);
        }
    }
    rlx_status st = e ? entry_run(e, &s, roots, nroots, nthreads, ctx, stats)
                      : realize_once(roots, nroots, nthreads, ctx, stats);
    entry_release(e);
    sig_free(&s);
    return st;
}
