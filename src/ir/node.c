/*
 * node.c — creation, hash-consing and release of graph nodes and storages.
 *
 * The cons table (an ir_table) maps a node's identity (op, attrs, type,
 * source pointers) to the one live node with it. It holds no reference: a node whose count
 * reached zero is skipped by lookups and unlinks itself before it is freed.
 * One mutex guards the table; counts are atomic so handles may be retained
 * and released from any thread.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/table.h"

/* ------------------------------------------------------------ allocation */

static atomic_long alloc_countdown = -1;

void ir_alloc_fail_after(long n) { atomic_store(&alloc_countdown, n); }

static bool alloc_should_fail(void)
{
    long c = atomic_load(&alloc_countdown);
    while (c >= 0) {
        if (atomic_compare_exchange_weak(&alloc_countdown, &c, c - 1))
            return c == 0;
    }
    return false;
}

bool ir_alloc_injected_failure(void) { return alloc_should_fail(); }
void *ir_alloc(size_t bytes) { return alloc_should_fail() ? NULL : malloc(bytes ? bytes : 1); }
void *ir_calloc(size_t n, size_t size) { return alloc_should_fail() ? NULL : calloc(n ? n : 1, size ? size : 1); }
void *ir_realloc(void *p, size_t bytes) { return alloc_should_fail() ? NULL : realloc(p, bytes ? bytes : 1); }
void ir_free(void *p) { free(p); }

/* --------------------------------------------------------------- storage */

ir_storage *ir_storage_new(void *data, size_t bytes, void (*free_fn)(void *, void *), void *ctx)
{
    ir_storage *st = ir_alloc(sizeof *st);
    if (!st)
        return NULL;
    atomic_init(&st->refs, 1);
    st->data = data;
    st->bytes = bytes;
    st->free_fn = free_fn;
    st->ctx = ctx;
    return st;
}

void ir_storage_retain(ir_storage *st) { atomic_fetch_add_explicit(&st->refs, 1, memory_order_relaxed); }

void ir_storage_release(ir_storage *st)
{
    if (!st || atomic_fetch_sub_explicit(&st->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (st->free_fn)
        st->free_fn(st->data, st->ctx);
    ir_free(st);
}

ir_storage ir_storage_busy; /* candidate fix: claimed, offset being written */

void ir_node_set_storage(ir_node *n, ir_storage *st, size_t offset)
{
    ir_storage *none = NULL;
    /* claim first, then write the offset, then publish: a thread that loses
     * the claim never touches the winner's offset */
    if (!atomic_compare_exchange_strong_explicit(&n->storage, &none, &ir_storage_busy, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        ir_storage_release(st); /* another thread realized it first */
        return;
    }
    n->offset = offset;
    atomic_store_explicit(&n->storage, st, memory_order_release);
}

/* ------------------------------------------------------------ cons table */

/* An entry: the node's cons hash (as ir_table_hash keeps it) and the node. */
typedef struct {
    uint64_t h;
    ir_node *n;
} cons_ent;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static ir_table table; /* of cons_ent */
static atomic_long live_nodes, detached_nodes;

long ir_live_nodes(void) { return atomic_load(&live_nodes); }
long ir_detached_nodes(void) { return atomic_load(&detached_nodes); }

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Eight bytes a step: attributes are up to 200 zero-filled bytes and every
 * node made hashes them twice, so a byte at a time was most of ir_make. */
static uint64_t hash_words(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (; n >= 8; n -= 8, b += 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    return hash_bytes(h, b, n);
}

static uint64_t hash_attrs(uint64_t h, ir_op op, const ir_attrs *a)
{
    if (op == IR_OP_INPUT)
        return hash_bytes(h, a->input.name, strlen(a->input.name));
    return hash_words(h, a, sizeof *a);
}

static bool attrs_eq(ir_op op, const ir_attrs *a, const ir_attrs *b)
{
    if (op == IR_OP_INPUT)
        return strcmp(a->input.name, b->input.name) == 0 && memcmp(a->input.sym, b->input.sym, sizeof a->input.sym) == 0;
    return memcmp(a, b, sizeof *a) == 0;
}

static bool same_identity(const ir_node *n, ir_op op, int nsrc, ir_node *const *src, const ir_attrs *a,
                          rlx_dtype dt, int rank, const int64_t *shape)
{
    return n->op == op && n->nsrc == nsrc && n->dtype == dt && ir_shape_eq(n->rank, n->shape, rank, shape) &&
           (nsrc == 0 || memcmp(n->src, src, (size_t)nsrc * sizeof *src) == 0) && attrs_eq(op, &n->attr, a);
}

/* Retains n unless its count already reached zero (it is being freed). */
static bool try_retain(ir_node *n)
{
    long c = atomic_load_explicit(&n->refs, memory_order_relaxed);
    while (c > 0)
        if (atomic_compare_exchange_weak_explicit(&n->refs, &c, c + 1, memory_order_acq_rel, memory_order_relaxed))
            return true;
    return false;
}

static void table_unlink(ir_node *n)
{
    cons_ent *tab = table.slots;
    for (size_t i = ir_table_home(&table, n->cons_hash); tab[i].h; i = ir_table_next(&table, i)) {
        if (tab[i].n == n) {
            ir_table_remove(&table, sizeof *tab, i);
            return;
        }
    }
}

/* The live node with this identity, retained, or NULL. */
static ir_node *table_find(uint64_t h, ir_op op, int nsrc, ir_node *const *src, const ir_attrs *a, rlx_dtype dt,
                           int rank, const int64_t *shape)
{
    cons_ent *tab = table.slots;
    if (!table.cap)
        return NULL;
    for (size_t i = ir_table_home(&table, h); tab[i].h; i = ir_table_next(&table, i)) {
        ir_node *n = tab[i].n;
        if (tab[i].h == h && same_identity(n, op, nsrc, src, a, dt, rank, shape) && try_retain(n))
            return n;
    }
    return NULL;
}

/* Enters n; a table that cannot grow takes it while a slot is free, and
 * past that n is simply not shared (consed stays false). */
static void table_insert(ir_node *n)
{
    if (!ir_table_reserve(&table, sizeof(cons_ent), 4096) && !ir_table_has_room(&table))
        return;
    cons_ent *e = ir_table_claim(&table, sizeof *e, n->cons_hash);
    e->n = n;
    n->consed = true;
}

/* ----------------------------------------------------------------- nodes */

static ir_node *node_new(ir_op op, int nsrc, ir_node *const *src, const ir_attrs *a, rlx_dtype dt, int rank,
                         const int64_t *shape)
{
    /* the source array lives after the node: one allocation, and one
     * cache line fewer to miss when a graph is walked or freed */
    ir_node *n = ir_calloc(1, sizeof *n + (size_t)(nsrc > 0 ? nsrc : 0) * sizeof *n->src);
    if (!n)
        return NULL;
    n->src = nsrc > 0 ? (ir_node **)(void *)(n + 1) : NULL;
    if (a)
        n->attr = *a;
    if (op == IR_OP_INPUT) {
        size_t len = strlen(a->input.name) + 1;
        if (!(n->attr.input.name = ir_alloc(len))) {
            ir_free(n);
            return NULL;
        }
        memcpy(n->attr.input.name, a->input.name, len);
    }
    atomic_init(&n->refs, 1);
    atomic_init(&n->storage, NULL);
    n->op = op;
    n->dtype = dt;
    n->rank = rank;
    if (rank > 0)
        memcpy(n->shape, shape, (size_t)rank * sizeof *shape);
    n->nsrc = nsrc;
    for (int i = 0; i < nsrc; i++)
        n->src[i] = ir_retain(src[i]);
    return n; /* the caller counts it, live or detached */
}

ir_node *ir_make(ir_op op, int nsrc, ir_node *const *src, const ir_attrs *attr, rlx_dtype dt, int rank,
                 const int64_t *shape, char *err, size_t errcap)
{
    static const ir_attrs none;
    int64_t shp[IR_MAX_RANK] = {0};
    const ir_attrs *a = attr ? attr : &none;
    if ((unsigned)op >= IR_OP_COUNT || op == IR_OP_BUFFER) {
        if (errcap) snprintf(err, errcap, "ir_make: op %d", (int)op);
        return NULL;
    }
    if (ir_ops[op].cls == IR_CLS_LEAF) {
        if (rank < 0 || rank > IR_MAX_RANK || (op == IR_OP_INPUT && !a->input.name)) {
            if (errcap) snprintf(err, errcap, "ir_make: leaf type");
            return NULL;
        }
        if (rank > 0)
            memcpy(shp, shape, (size_t)rank * sizeof *shape);
    } else if (!ir_infer(op, nsrc, src, a, &dt, &rank, shp, err, errcap)) {
        return NULL;
    }
    if (!ir_shape_bytes_ok(dt, rank, shp)) {
        if (errcap) {
            char b[160];
            snprintf(err, errcap, "result %s of %s overflows the addressable size", ir_shape_str(b, sizeof b, rank, shp), ir_dtype_name(dt));
        }
        return NULL;
    }
    uint64_t h = mix(mix(0xc0ffeeu, (uint64_t)op), (uint64_t)dt);
    h = hash_words(h, shp, (size_t)rank * sizeof *shp);
    h = hash_attrs(h, op, a);
    for (int i = 0; i < nsrc; i++)
        h = mix(h, (uint64_t)(uintptr_t)src[i]);
    h = ir_table_hash(h);

    pthread_mutex_lock(&table_lock);
    ir_node *n = table_find(h, op, nsrc, src, a, dt, rank, shp);
    if (n) {
        pthread_mutex_unlock(&table_lock);
        return n;
    }
    n = node_new(op, nsrc, src, a, dt, rank, shp);
    if (n) {
        atomic_fetch_add(&live_nodes, 1);
        n->cons_hash = h;
        table_insert(n);
    } else if (errcap) {
        snprintf(err, errcap, "out of memory");
    }
    pthread_mutex_unlock(&table_lock);
    return n;
}

ir_node *ir_make_buffer(ir_storage *st, size_t offset, rlx_dtype dt, int rank, const int64_t *shape)
{
    ir_node *n = node_new(IR_OP_BUFFER, 0, NULL, NULL, dt, rank, shape);
    if (!n)
        return NULL;
    atomic_fetch_add(&live_nodes, 1);
    ir_storage_retain(st);
    n->offset = offset;
    atomic_store_explicit(&n->storage, st, memory_order_release);
    return n;
}

ir_node *ir_make_detached(ir_op op, int nsrc, ir_node *const *src, const ir_attrs *attr, rlx_dtype dt, int rank,
                          const int64_t *shape, ir_storage *st)
{
    static const ir_attrs none;
    ir_node *n = node_new(op, nsrc, src, attr ? attr : &none, dt, rank, shape);
    if (!n)
        return NULL;
    n->detached = true;
    atomic_fetch_add(&detached_nodes, 1);
    if (st) {
        ir_storage_retain(st);
        atomic_store_explicit(&n->storage, st, memory_order_release);
    }
    return n;
}

ir_node *ir_retain(ir_node *n)
{
    if (n)
        atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
    return n;
}

/* Drops a count; returns true when it was the last and n is unlinked. */
static bool drop(ir_node *n)
{
    if (atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) != 1)
        return false;
    if (n->consed) {
        pthread_mutex_lock(&table_lock);
        table_unlink(n);
        pthread_mutex_unlock(&table_lock);
    }
    return true;
}

void ir_release(ir_node *n)
{
    if (!n || !drop(n))
        return;
    /* Dead nodes are chained through dead_next, so a long chain is freed
     * in a loop and not by recursion. */
    n->dead_next = NULL;
    while (n) {
        ir_node *next = n->dead_next;
        for (int i = 0; i < n->nsrc; i++) {
            ir_node *s = n->src[i];
            if (drop(s)) {
                s->dead_next = next;
                next = s;
            }
        }
        ir_storage_release(atomic_load(&n->storage));
        if (n->op == IR_OP_INPUT)
            ir_free(n->attr.input.name);
        atomic_fetch_sub(n->detached ? &detached_nodes : &live_nodes, 1);
        ir_free(n);
        n = next;
    }
}
