/* visit.c — pointer sets and the iterative post-order walk over a graph. */
#include <string.h>

#include "ir/ir.h"

static size_t slot_of(const ir_node *n, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)n * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

static bool set_grow(ir_set *s, long **values)
{
    size_t cap = s->cap ? s->cap * 2 : 64;
    const ir_node **slots = ir_calloc(cap, sizeof *slots);
    long *vals = values ? ir_calloc(cap, sizeof *vals) : NULL;
    if (!slots || (values && !vals)) {
        ir_free(slots);
        ir_free(vals);
        return false;
    }
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->slots[i])
            continue;
        size_t j = slot_of(s->slots[i], cap);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = s->slots[i];
        if (vals)
            vals[j] = (*values)[i];
    }
    ir_free(s->slots);
    if (values) {
        ir_free(*values);
        *values = vals;
    }
    s->slots = slots;
    s->cap = cap;
    return true;
}

/* Slot of n, or -1 when absent. */
static long find(const ir_set *s, const ir_node *n)
{
    if (!s->cap)
        return -1;
    for (size_t j = slot_of(n, s->cap); s->slots[j]; j = (j + 1) & (s->cap - 1))
        if (s->slots[j] == n)
            return (long)j;
    return -1;
}

bool ir_set_has(const ir_set *s, const ir_node *n) { return find(s, n) >= 0; }

/* Inserts n (absent) and returns its slot, or -1 when out of memory. */
static long insert(ir_set *s, const ir_node *n, long **values)
{
    if ((s->count + 1) * 2 > s->cap && !set_grow(s, values))
        return -1;
    size_t j = slot_of(n, s->cap);
    while (s->slots[j])
        j = (j + 1) & (s->cap - 1);
    s->slots[j] = n;
    s->count++;
    return (long)j;
}

int ir_set_add(ir_set *s, const ir_node *n)
{
    if (find(s, n) >= 0)
        return 0;
    return insert(s, n, NULL) < 0 ? -1 : 1;
}

int ir_map_put(ir_map *m, const ir_node *n, long value)
{
    long j = find(&m->set, n);
    int added = j < 0;
    if (added && (j = insert(&m->set, n, &m->values)) < 0)
        return -1;
    if (!m->values && !(m->values = ir_calloc(m->set.cap, sizeof *m->values)))
        return -1;
    m->values[j] = value;
    return added;
}

long ir_map_get(const ir_map *m, const ir_node *n)
{
    long j = find(&m->set, n);
    return j < 0 ? -1 : m->values[j];
}

void ir_map_free(ir_map *m)
{
    ir_set_free(&m->set);
    ir_free(m->values);
    m->values = NULL;
}

void ir_set_free(ir_set *s)
{
    ir_free(s->slots);
    memset(s, 0, sizeof *s);
}

typedef struct {
    ir_node *node;
    int next_src;
} frame;

/* The walk's set of seen nodes: a small array searched in place until it
 * overflows, then the hash set (most realizations are a few nodes, and
 * each walk's allocations were most of its cost). */
enum { FEW = 16 };
typedef struct {
    const ir_node *few[FEW];
    int nfew;
    bool big;
    ir_set set;
} seen_set;

static int seen_add(seen_set *s, const ir_node *n)
{
    if (!s->big) {
        for (int i = 0; i < s->nfew; i++)
            if (s->few[i] == n)
                return 0;
        if (s->nfew < FEW) {
            s->few[s->nfew++] = n;
            return 1;
        }
        for (int i = 0; i < s->nfew; i++)
            if (ir_set_add(&s->set, s->few[i]) < 0)
                return -1;
        s->big = true;
    }
    return ir_set_add(&s->set, n);
}

long ir_postorder(ir_node *const *roots, int nroots, bool (*stop)(const ir_node *, void *), void *ctx,
                  ir_node ***out)
{
    seen_set seen;
    seen.nfew = 0;
    seen.big = false;
    memset(&seen.set, 0, sizeof seen.set);
    frame fstack[32], *stack = fstack;
    size_t depth = 0, stack_cap = sizeof fstack / sizeof *fstack, count = 0, out_cap = 0;
    ir_node **order = NULL;
    *out = NULL;
    for (int r = 0; r < nroots; r++) {
        int added = seen_add(&seen, roots[r]);
        if (added < 0)
            goto oom;
        if (!added)
            continue;
        depth = 0;
        stack[depth++] = (frame){roots[r], 0};
        while (depth) {
            frame *f = &stack[depth - 1];
            ir_node *n = f->node;
            bool leaf = stop && stop(n, ctx);
            if (!leaf && f->next_src < n->nsrc) {
                ir_node *s = n->src[f->next_src++];
                int a = seen_add(&seen, s);
                if (a < 0)
                    goto oom;
                if (a) {
                    if (depth == stack_cap) {
                        frame *ns = ir_alloc(stack_cap * 2 * sizeof *stack);
                        if (!ns)
                            goto oom;
                        memcpy(ns, stack, stack_cap * sizeof *stack);
                        if (stack != fstack)
                            ir_free(stack);
                        stack = ns;
                        stack_cap *= 2;
                    }
                    stack[depth++] = (frame){s, 0};
                }
                continue;
            }
            if (count == out_cap) {
                size_t cap = out_cap ? out_cap * 2 : 64;
                ir_node **no = ir_realloc(order, cap * sizeof *order);
                if (!no)
                    goto oom;
                order = no;
                out_cap = cap;
            }
            order[count++] = n;
            depth--;
        }
    }
    if (stack != fstack)
        ir_free(stack);
    ir_set_free(&seen.set);
    *out = order;
    return (long)count;
oom:
    if (stack != fstack)
        ir_free(stack);
    ir_free(order);
    ir_set_free(&seen.set);
    return -1;
}
