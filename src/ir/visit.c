/* visit.c — pointer sets and maps (ir_tables) and the iterative post-order
 * walk over a graph. */
#include <string.h>

#include "ir/ir.h"
#include "ir/scratch.h"

/* The node's address is its hash word (never 0); a map entry adds the
 * value. */
typedef struct {
    uint64_t h;
} set_ent;
typedef struct {
    uint64_t h;
    long value;
} map_ent;

static uint64_t key_of(const ir_node *n) { return (uint64_t)(uintptr_t)n; }

/* Slot of key k, or -1 when absent. */
static long find(const ir_table *t, size_t esize, uint64_t k)
{
    if (!t->cap)
        return -1;
    for (size_t i = ir_table_home(t, k);; i = ir_table_next(t, i)) {
        uint64_t h = ir_table_hash_at(t, esize, i);
        if (h == k)
            return (long)i;
        if (!h)
            return -1;
    }
}

bool ir_set_has(const ir_set *s, const ir_node *n) { return find(&s->t, sizeof(set_ent), key_of(n)) >= 0; }

int ir_set_add(ir_set *s, const ir_node *n)
{
    if (find(&s->t, sizeof(set_ent), key_of(n)) >= 0)
        return 0;
    if (!ir_table_reserve(&s->t, sizeof(set_ent), 64))
        return -1;
    ir_table_claim(&s->t, sizeof(set_ent), key_of(n));
    return 1;
}

void ir_set_free(ir_set *s) { ir_table_free(&s->t); }

int ir_map_put(ir_map *m, const ir_node *n, long value)
{
    long j = find(&m->t, sizeof(map_ent), key_of(n));
    if (j >= 0) {
        ((map_ent *)m->t.slots)[j].value = value;
        return 0;
    }
    if (!ir_table_reserve(&m->t, sizeof(map_ent), 64))
        return -1;
    map_ent *e = ir_table_claim(&m->t, sizeof(map_ent), key_of(n));
    e->value = value;
    return 1;
}

long ir_map_get(const ir_map *m, const ir_node *n)
{
    long j = find(&m->t, sizeof(map_ent), key_of(n));
    return j < 0 ? -1 : ((const map_ent *)m->t.slots)[j].value;
}

void ir_map_free(ir_map *m) { ir_table_free(&m->t); }

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
    ir_scratch stack_mem = IR_SCRATCH(fstack);
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
                        frame *ns = ir_scratch_get(&stack_mem, stack_cap * 2 * sizeof *stack);
                        if (!ns)
                            goto oom;
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
    ir_scratch_free(&stack_mem);
    ir_set_free(&seen.set);
    *out = order;
    return (long)count;
oom:
    ir_scratch_free(&stack_mem);
    ir_free(order);
    ir_set_free(&seen.set);
    return -1;
}
