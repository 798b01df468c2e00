/*
 * plan_cache.c — a cache of prepared plans (schedule, memory plan and
 * compiled kernels, runtime/exec/jit_exec.c) keyed by the structure of the
 * graph: a realization repeated on new data (a training step, a small op
 * in a loop) skips scheduling, memory planning and the kernel lookups,
 * which cost far more than running a small graph. The pipeline
 * (pipeline.c) looks up, builds and runs entries; this file keeps them.
 *
 * The key (the signature) is the graph below the roots in post-order,
 * down to realized nodes: per node its op, dtype, shape, attributes and
 * the post-order positions of its sources, then the roots' positions and
 * the knob epoch (passes/knobs.h). Payloads are not in it: a realized node
 * is a leaf known by its dtype and shape, a CONST by its dtype and shape
 * (a bool CONST by its value too), so new data or a new learning rate is
 * a hit. Signatures are compared word for word, never by hash alone.
 *
 * An entry owns a template: the graph copied as detached nodes (never
 * shared with a user's graph, outside the live count), realized nodes
 * replaced by placeholder buffers (the plan's slots, bound to the current
 * realized nodes at each run) and CONSTs copied (detached, so two CONSTs
 * of one value stay two nodes). The built plan says, for each entry of its
 * constant array, the CONST node it was read from (rt_jit_plan_consts);
 * the entry maps that node to its template position, and a run fills the
 * entry from the CONST at that position of the current graph. Everything a
 * plan does with a CONST goes through that array (a CONST read by a
 * reference kernel is materialized by a loop kernel; no pass after
 * simplify looks at a value).
 *
 * A structure is cached the second time it is seen, so a one-off graph
 * pays no copy. At most MAX_ENTRIES entries, MAX_NODES template nodes and
 * MAX_BYTES bytes (entry_bytes: an estimate of what an entry holds) are
 * kept, the least recently used evicted; a graph over MAX_GRAPH nodes is
 * not cached. An entry's plan holds references on its kernels
 * (codegen_llvm/cg.h), so the kernel cache never evicts a cached plan's
 * code: these bounds also bound the kernels pinned here. Entries are refcounted: a run keeps its entry alive while
 * another thread evicts it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "runtime/exec/jit_exec.h"

enum { MAX_ENTRIES = 64, MAX_NODES = 1 << 16, MAX_GRAPH = 4096, SEEN = 64, SMALL = 32 };
/* 32 MiB: MAX_NODES nodes cost ~25 MiB by entry_bytes, so the byte bound
 * bites where entries are heavy for their node count (wide signatures,
 * many constants) and keeps the whole cache at a known size. */
#define MAX_BYTES ((size_t)32 << 20)
/* per template node, besides the node: its share of the plan (a schedule
 * kernel, its args and the plan's tables are a few hundred bytes) */
enum { PLAN_BYTES_PER_NODE = 256 };

/* signature kinds: an op, a realized leaf, a CONST keyed by dtype and
 * shape, a bool CONST keyed by its value too */
enum { K_OP = 0, K_LEAF = 1, K_CONST = 2, K_BOOL = 3 };

typedef rt_plan_key sig;

struct rt_plan_entry {
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
    size_t bytes;     /* entry_bytes, once adopted */
};
typedef rt_plan_entry entry;

static struct {
    pthread_mutex_t lock;
    entry *tab[MAX_ENTRIES];
    int count;
    long nodes;
    size_t bytes;
    uint64_t tick;
    uint64_t seen[SEEN];
    int seen_next;
    rt_plan_cache_counts c;
} C = {.lock = PTHREAD_MUTEX_INITIALIZER};

void rt_plan_entry_release(entry *e)
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

_Static_assert(sizeof ((sig *)0)->kind_small == SMALL, "rt_plan_key.kind_small holds SMALL kinds");

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

void rt_plan_key_free(sig *s)
{
    ir_free(s->order);
    ir_map_free(&s->pos);
    if (s->kind != s->kind_small)
        ir_free(s->kind);
    if (s->w != s->w_small)
        ir_free(s->w);
}

bool rt_plan_key_build(sig *s, ir_node *const *roots, int nroots, unsigned long epoch)
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
    bool ok = put(s, epoch) && put(s, (uint64_t)s->count);
    for (long i = 0; i < s->count && ok; i++) {
        const ir_node *n = s->order[i];
        int k = K_OP;
        if (ir_node_storage(n))
            k = K_LEAF; /* whatever computed it: the scheduler sees a realized value */
        else if (n->op == IR_OP_CONST)
            k = n->dtype == RLX_BOOL ? K_BOOL : K_CONST;
        else if (n->op == IR_OP_INPUT)
            return false; /* unbound: the realization reports it */
        s->kind[i] = (unsigned char)k;
        s->nconst += k == K_CONST || k == K_BOOL;
        /* attribute words up to the last nonzero one (attrs are zero-filled) */
        uint64_t aw[sizeof(ir_attrs) / 8];
        int na = 0;
        if (k == K_OP || k == K_BOOL) {
            memcpy(aw, &n->attr, sizeof aw);
            for (na = (int)(sizeof aw / 8); na > 0 && !aw[na - 1]; na--)
                ;
        }
        ok = put(s, (uint64_t)(k == K_OP || k == K_BOOL ? n->op : 0) | (uint64_t)n->dtype << 8 |
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
    ok = ok && put(s, (uint64_t)nroots);
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

entry *rt_plan_cache_find(const sig *s, bool *build)
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
    C.bytes -= e->bytes;
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
        while (C.count > 0 &&
               (C.count == MAX_ENTRIES || C.nodes + e->count > MAX_NODES || C.bytes + e->bytes > MAX_BYTES)) {
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
        C.bytes += e->bytes;
        C.c.built++;
    }
    pthread_mutex_unlock(&C.lock);
    for (int i = 0; i < ngone; i++)
        rt_plan_entry_release(gone[i]); /* outside the lock: frees a plan */
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
    C.bytes = 0;
    memset(C.seen, 0, sizeof C.seen);
    pthread_mutex_unlock(&C.lock);
    for (int i = 0; i < n; i++)
        rt_plan_entry_release(gone[i]);
}

void rt_plan_cache_counts_get(rt_plan_cache_counts *out)
{
    pthread_mutex_lock(&C.lock);
    *out = C.c;
    out->entries = C.count;
    out->nodes = C.nodes;
    pthread_mutex_unlock(&C.lock);
}

size_t rt_plan_cache_bytes(void)
{
    pthread_mutex_lock(&C.lock);
    size_t b = C.bytes;
    pthread_mutex_unlock(&C.lock);
    return b;
}

/* ------------------------------------------------------------- template */

entry *rt_plan_entry_new(const sig *s, ir_node *const *roots, int nroots, ir_node *const **troots,
                         ir_node *const **slots, int *nslots_out)
{
    static char nothing[64]; /* the placeholders' payload: never read */
    long nslots = 0;
    for (long i = 0; i < s->count; i++)
        nslots += s->kind[i] == K_LEAF;
    entry *e = ir_calloc(1, sizeof *e);
    /* one block: the signature, then the tables */
    size_t words = s->n + (size_t)s->count + (size_t)nslots * 2 + (size_t)nroots + 1;
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
    e->nroots = nroots;
    ir_node *srcbuf[8], **src = srcbuf;
    bool ok = true;
    for (long i = 0; i < s->count && ok; i++) {
        const ir_node *n = s->order[i];
        ir_node *m = NULL;
        if (s->kind[i] == K_LEAF) {
            m = ir_make_detached(IR_OP_BUFFER, 0, NULL, NULL, n->dtype, n->rank, n->shape, none);
            e->slot_pos[e->nslots] = i;
            e->slots[e->nslots++] = m;
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
        rt_plan_entry_release(e);
        return NULL;
    }
    *troots = e->roots;
    *slots = e->slots;
    *nslots_out = e->nslots;
    return e;
}

/* What e holds: the entry, its signature and tables, its template nodes
 * and, per node, its share of the plan. */
static size_t entry_bytes(const entry *e)
{
    size_t words = e->nsig + (size_t)e->count + (size_t)e->nslots * 2 + (size_t)e->nroots + 1;
    return sizeof *e + words * sizeof(uint64_t) + (size_t)e->nconsts * (sizeof(long) + sizeof(double)) +
           (size_t)e->count * (sizeof(ir_node) + PLAN_BYTES_PER_NODE);
}

bool rt_plan_entry_adopt(entry *e, rt_jit_plan *p)
{
    e->plan = p;
    e->nloops = rt_jit_plan_loops(p);
    const ir_node *const *from;
    rt_jit_plan_consts(p, &e->nconsts, &from);
    e->const_pos = ir_alloc((size_t)(e->nconsts ? e->nconsts : 1) * sizeof *e->const_pos);
    ir_map at = {0}; /* template CONST -> its position */
    bool ok = e->const_pos != NULL;
    for (long i = 0; ok && e->nconsts && i < e->count; i++)
        if (e->tmpl[i]->op == IR_OP_CONST)
            ok = ir_map_put(&at, e->tmpl[i], i) >= 0;
    for (long c = 0; ok && c < e->nconsts; c++)
        e->const_pos[c] = from[c] ? ir_map_get(&at, from[c]) : -1;
    ir_map_free(&at);
    e->bytes = entry_bytes(e);
    /* a CONST the reference evaluator computes (a REF kernel: a complex
     * constant) keeps the template's value, which binding cannot change:
     * such a plan serves this realization only (a later one with another
     * value re-plans) */
    const sched_schedule *sc = rt_jit_plan_schedule(p);
    bool rebindable = true;
    for (long i = 0; i < sc->count && rebindable; i++)
        rebindable = !(sc->k[i].kind == SCHED_REF && sc->k[i].node->op == IR_OP_CONST);
    if (ok && rebindable)
        insert(e);
    return ok;
}

const rt_jit_plan *rt_plan_entry_plan(const entry *e) { return e->plan; }

void rt_plan_entry_sizes(const entry *e, int *nslots, long *nconsts)
{
    *nslots = e->nslots;
    *nconsts = e->nconsts;
}

void rt_plan_entry_bind(const entry *e, const sig *s, ir_node **binds, double *consts)
{
    for (int j = 0; j < e->nslots; j++)
        binds[j] = s->order[e->slot_pos[j]];
    long npc;
    const double *pc = rt_jit_plan_consts(e->plan, &npc, NULL);
    for (long c = 0; c < e->nconsts; c++) {
        const ir_node *k = e->const_pos[c] >= 0 ? s->order[e->const_pos[c]] : NULL;
        consts[c] = k ? sched_const_value(k->attr.cst.value, k->dtype) : pc[c];
    }
}
