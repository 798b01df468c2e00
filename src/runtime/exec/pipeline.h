/*
 * pipeline.h — the one realize pipeline (pipeline.c): the only place that
 * sequences the stages of a realization
 *
 *   simplify -> plan cache -> schedule -> memory plan -> compile -> run -> publish
 *
 * (with the verifiers and dumps the options ask for between them). Plain
 * realizations, realize_many, plan-cache hits and compiled programs all go
 * through rt_pipeline_realize; fields of the context select the stages a
 * caller does not need.
 */
#ifndef RLX_PIPELINE_H
#define RLX_PIPELINE_H

#include "runtime/exec/jit_exec.h"

typedef struct {
    rt_ctx rt;             /* rt.opts: the options (simplify, plan_cache, threads, knobs, verify, debug);
                            * the first failure; the run's counters */
    rt_jit_stats stats;    /* compile and cache counters (rlx_stats) */
    bool ref;              /* the reference backend: the oracle is the one stage */
    simp_fold_fn fold;     /* the simplifier's scalar semantics (with opts->simplify) */
    /* compiled programs (src/tensor/program.c) keep their plan: */
    rt_jit_plan **keep;    /* non-NULL: the plan is built over slots and handed back in *keep, not run */
    const rt_jit_plan *const *like; /* with keep: plans of graphs that may have the same structure
                                     * to schedule from (rt_jit_plan_new's like) */
    int nlike;
    ir_node *const *slots; /* its placeholder leaves */
    int nslots;
    const rt_jit_plan *plan; /* non-NULL: run this plan (nothing is built) on binds */
    ir_node *const *binds;
    const unsigned char *donate; /* non-NULL: per bind, the run may write an output over its buffer */
    rt_view *views;        /* non-NULL: roots' values handed back (a reference each), not published */
    ir_storage *arena;     /* non-NULL: the run's intermediates go there (borrowed; a program's pool) */
    bool generic;          /* its kernels are size-generic (a program with dynamic dims: one
                            * compile serves every binding), unless knob generic_kernels is 0 */
} rt_pipeline;

/* Realizes every root (realized roots are skipped; a root that is a view
 * of a materialized value shares its storage), or builds the plan or
 * runs the plan the context names. Failures in c->rt. */
rlx_status rt_pipeline_realize(rt_pipeline *c, ir_node *const *roots, int nroots);

#endif
