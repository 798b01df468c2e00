/*
 * liveness.c — orders the unrealized part of a graph and counts the uses of
 * each value, so an evaluator can free every intermediate right after its
 * last consumer. This is the liveness the memory planner builds on.
 */
#include "passes/passes.h"

static bool stop_at_realized(const ir_node *n, void *ctx)
{
    (void)ctx;
    return ir_node_storage(n) != NULL;
}

void sched_liveness_free(sched_liveness *lv)
{
    ir_free(lv->order);
    ir_free(lv->src_start);
    ir_free(lv->src_index);
    ir_free(lv->uses);
    ir_map_free(&lv->pos);
    *lv = (sched_liveness){0};
}

bool sched_liveness_build(ir_node *const *roots, int nroots, sched_liveness *lv)
{
    *lv = (sched_liveness){0};
    long n = ir_postorder(roots, nroots, stop_at_realized, NULL, &lv->order);
    if (n < 0)
        return false;
    lv->count = n;
    ir_map *pos = &lv->pos;
    long nsrc = 0;
    for (long i = 0; i < n; i++) {
        if (ir_map_put(pos, lv->order[i], i) < 0)
            goto oom;
        if (!stop_at_realized(lv->order[i], NULL))
            nsrc += lv->order[i]->nsrc;
    }
    lv->src_start = ir_alloc((size_t)(n + 1) * sizeof *lv->src_start);
    lv->src_index = ir_alloc((size_t)nsrc * sizeof *lv->src_index);
    lv->uses = ir_calloc((size_t)n, sizeof *lv->uses);
    if (!lv->src_start || !lv->src_index || !lv->uses)
        goto oom;
    long k = 0;
    for (long i = 0; i < n; i++) {
        ir_node *node = lv->order[i];
        lv->src_start[i] = k;
        if (stop_at_realized(node, NULL))
            continue;
        for (int s = 0; s < node->nsrc; s++) {
            long j = ir_map_get(pos, node->src[s]);
            lv->src_index[k++] = j;
            lv->uses[j]++;
        }
    }
    lv->src_start[n] = k;
    for (int r = 0; r < nroots; r++)
        lv->uses[ir_map_get(pos, roots[r])]++;
    return true;
oom:
    sched_liveness_free(lv);
    return false;
}
