/*
 * passes.h — analyses and rewrites over the graph, between the tensor layer
 * and the backends. They see nodes only: no LLVM, no executor.
 */
#ifndef RLX_PASSES_H
#define RLX_PASSES_H

#include "ir/ir.h"

/* The evaluation order of a realization and when each value dies.
 * order[i] is computed after all its sources; src_index[src_start[i] + k]
 * is the position of order[i]->src[k]; uses[i] counts the consumers of
 * order[i] within the order (roots get one extra, so they never die). */
typedef struct {
    ir_node **order;
    long count;
    long *src_start, *src_index;
    long *uses;
} sched_liveness;

/* Realized nodes end the walk (they are listed, without their sources).
 * Returns false when out of memory. */
bool sched_liveness_build(ir_node *const *roots, int nroots, sched_liveness *out);
void sched_liveness_free(sched_liveness *lv);

#endif
