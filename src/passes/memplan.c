/*
 * memplan.c — where the intermediates of one schedule live.
 *
 * Liveness over the kernel order: a value is born at its kernel and dies
 * at the last kernel that reads it (through any chain of views). Every
 * intermediate LOOP output (not a root, not under a root published as a
 * view, not empty) gets a byte offset in one 64-byte-aligned arena. Slots
 * are placed largest first, each at the best-fitting gap between the slots
 * already placed whose lifetimes overlap its own, so values that are never
 * alive together share bytes.
 *
 * In place: an elementwise LOOP kernel may write over an input
 * intermediate that dies at it, when both have the same byte size and
 * element size and every load of that input reads exactly the element the
 * kernel stores (the same affine index): element i is read before element
 * i is written, in the same iteration, and never read again.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

enum { ALIGN = 64, LARGEST_FIRST_MAX = 4096 };

static long producer(const ir_map *prod, const ir_node *n) { return ir_map_get(prod, n); }

/* The value under a chain of views that no kernel materializes. */
static const ir_node *bottom(const ir_map *prod, const ir_node *n)
{
    while (!ir_node_storage(n) && producer(prod, n) < 0 && ir_ops[n->op].cls == IR_CLS_MOVEMENT)
        n = n->src[0];
    return n;
}

static void use(const ir_map *prod, sched_memplan *m, const ir_node *n, long at)
{
    long p = producer(prod, bottom(prod, n));
    if (p >= 0 && m->last[p] < at)
        m->last[p] = at;
}

static bool same_index(const sched_kernel *k, const sched_affine *a)
{
    if (a->off != k->out.off)
        return false;
    for (int d = 0; d < k->rank; d++)
        if (a->stride[d] != k->out.stride[d])
            return false;
    return true;
}


bool sched_reads_in_place(const sched_kernel *k, const ir_node *v)
{
    for (int i = 0; i < k->ninstr; i++) {
        const sched_instr *in = &k->instr[i];
        if (in->kind == SCHED_I_LOAD && k->args[in->arg] == v && !same_index(k, &in->idx))
            return false;
    }
    return true;
}

/* Every load of p's value in kernel k reads the element k stores. */
static bool loads_in_place(const ir_map *prod, const sched_kernel *k, long p)
{
    for (int a = 1; a < k->nargs; a++)
        if (producer(prod, k->args[a]) == p && !sched_reads_in_place(k, k->args[a]))
            return false;
    return true;
}

typedef struct {
    long id; /* the group's first kernel */
    long start, end;
    size_t size;
    int64_t off;
} slot;

typedef struct {
    int64_t off, end;
} span;

static int by_size(const void *a, const void *b)
{
    const slot *x = a, *y = b;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return (x->start > y->start) - (x->start < y->start);
}

static int by_start(const void *a, const void *b)
{
    const slot *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static int by_off(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

/* The best-fitting offset for a slot of size bytes beside the n spans
 * taken (sorted here): the smallest gap that holds it, else the top. */
static int64_t best_fit(span *taken, long n, size_t size)
{
    qsort(taken, (size_t)n, sizeof *taken, by_off);
    int64_t cursor = 0, best = -1, best_gap = 0;
    for (long i = 0; i < n; i++) {
        int64_t gap = taken[i].off - cursor;
        if (gap >= (int64_t)size && (best < 0 || gap < best_gap)) {
            best = cursor;
            best_gap = gap;
        }
        if (taken[i].end > cursor)
            cursor = taken[i].end;
    }
    return best >= 0 ? best : cursor;
}

/* Places slots: largest first against every overlapping slot placed, or
 * (very long schedules) in birth order against the slots still alive, to
 * stay near linear time. */
static bool place(slot *sl, long ns, size_t *arena)
{
    *arena = 0;
    if (ns == 0)
        return true;
    span *taken = ir_alloc((size_t)ns * sizeof *taken);
    if (!taken)
        return false;
    bool largest_first = ns <= LARGEST_FIRST_MAX;
    qsort(sl, (size_t)ns, sizeof *sl, largest_first ? by_size : by_start);
    long first_alive = 0;
    for (long i = 0; i < ns; i++) {
        long nt = 0;
        if (largest_first) {
            for (long j = 0; j < i; j++)
                if (sl[j].start <= sl[i].end && sl[i].start <= sl[j].end)
                    taken[nt++] = (span){sl[j].off, sl[j].off + (int64_t)sl[j].size};
        } else {
            while (first_alive < i && sl[first_alive].end < sl[i].start)
                first_alive++; /* approximate window: ends are not sorted, the scan below checks */
            for (long j = first_alive; j < i; j++)
                if (sl[j].end >= sl[i].start)
                    taken[nt++] = (span){sl[j].off, sl[j].off + (int64_t)sl[j].size};
        }
        sl[i].off = best_fit(taken, nt, sl[i].size);
        if ((size_t)sl[i].off + sl[i].size > *arena)
            *arena = (size_t)sl[i].off + sl[i].size;
    }
    ir_free(taken);
    return true;
}

rlx_status sched_memplan_build(sched_ctx *c, const sched_schedule *s, ir_node *const *roots, int nroots,
                               sched_memplan *out)
{
    memset(out, 0, sizeof *out);
    long nk = s->count, n1 = nk ? nk : 1;
    out->count = nk;
    ir_map prod = {0};
    /* one block each for the results (owned through last) and the scratch:
     * realizations of small graphs are dominated by allocator calls */
    slot *sl = ir_alloc((size_t)n1 * (sizeof *sl + 2 * sizeof(long) + 1));
    long *group = sl ? (long *)(sl + n1) : NULL, *slot_of = group ? group + n1 : NULL;
    unsigned char *pinned = slot_of ? (unsigned char *)(slot_of + n1) : NULL;
    out->last = ir_alloc((size_t)n1 * (2 * sizeof(long) + sizeof(int64_t)));
    if (!sl || !out->last)
        goto oom;
    out->reuses = out->last + n1;
    out->offset = (int64_t *)(out->reuses + n1);
    for (long i = 0; i < nk; i++) {
        const sched_kernel *k = &s->k[i];
        out->last[i] = i;
        out->offset[i] = -1;
        out->reuses[i] = -1;
        group[i] = i;
        pinned[i] = k->kind != SCHED_LOOP || ir_node_bytes(k->node) == 0;
        if (k->kind != SCHED_VIEW && ir_map_put(&prod, k->node, i) < 0)
            goto oom;
    }
    /* roots outlive the run */
    for (int r = 0; r < nroots; r++) {
        long p = producer(&prod, roots[r]);
        if (p >= 0) {
            pinned[p] = 1;
            out->last[p] = nk;
        }
    }
    for (long i = 0; i < nk; i++) {
        const sched_kernel *k = &s->k[i];
        if (k->kind == SCHED_LOOP) {
            for (int a = 1; a < k->nargs; a++)
                use(&prod, out, k->args[a], i);
        } else if (k->kind == SCHED_REF) {
            for (int a = 0; a < k->node->nsrc; a++)
                use(&prod, out, k->node->src[a], i);
        } else { /* a root published as a view shares its value's storage */
            long p = producer(&prod, bottom(&prod, k->node));
            if (p >= 0) {
                pinned[p] = 1;
                out->last[p] = nk;
            }
        }
    }
    /* in place: k takes the slot of an input that dies at k */
    for (long i = 0; i < nk; i++) {
        const sched_kernel *k = &s->k[i];
        if (pinned[i] || k->red_op != IR_OP_COUNT || k->red_mask != 0)
            continue;
        size_t bytes = ir_node_bytes(k->node), es = ir_dtype_size(k->node->dtype);
        for (int a = 1; a < k->nargs; a++) {
            long p = producer(&prod, k->args[a]);
            if (p < 0 || pinned[p] || out->last[p] != i || ir_node_bytes(s->k[p].node) != bytes ||
                ir_dtype_size(s->k[p].node->dtype) != es || !loads_in_place(&prod, k, p))
                continue; /* (only k can take p: p dies at k) */
            group[i] = group[p];
            out->reuses[i] = p;
            break;
        }
    }
    long ns = 0;
    for (long i = 0; i < nk; i++) {
        if (pinned[i])
            continue;
        if (group[i] == i) {
            size_t b = (ir_node_bytes(s->k[i].node) + ALIGN - 1) & ~(size_t)(ALIGN - 1);
            slot_of[i] = ns;
            sl[ns++] = (slot){i, i, out->last[i], b, 0};
        } else {
            slot *g = &sl[slot_of[group[i]]];
            if (out->last[i] > g->end)
                g->end = out->last[i];
        }
    }
    if (!place(sl, ns, &out->arena_bytes))
        goto oom;
    for (long j = 0; j < ns; j++)
        slot_of[sl[j].id] = j; /* sorted by place */
    for (long i = 0; i < nk; i++)
        if (!pinned[i])
            out->offset[i] = sl[slot_of[group[i]]].off;
    ir_map_free(&prod);
    ir_free(sl);
    return RLX_OK;
oom:
    ir_map_free(&prod);
    ir_free(sl);
    sched_memplan_free(out);
    return sched_fail(c, RLX_E_NOMEM, "out of memory for the schedule");
}

void sched_memplan_free(sched_memplan *m)
{
    ir_free(m->last); /* holds reuses and offset too */
    memset(m, 0, sizeof *m);
}
