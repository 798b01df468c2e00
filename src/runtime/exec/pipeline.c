/*
 * pipeline.c — rt_pipeline_realize, the one driver of a realization (see
 * pipeline.h). It reads as the list of stages; each stage is a pass or an
 * executor step that takes the realization's context (rt_ctx: options,
 * first failure) and returns its status. The options select stages:
 * compiled programs neither simplify nor use the plan cache, and build
 * their plan once (keep) to run it later (plan). With opts->verify the
 * graph verifier runs after simplify and the schedule verifier after
 * scheduling; RLX_DEBUG >= 4 dumps the graph and the schedule.
 *
 * The state of one realization lives on the stack (arrays of small graphs
 * included): a plan-cache hit allocates nothing here.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/exec/pipeline.h"

enum { DUMP_LEVEL = 4 };

typedef struct {
    ir_node *const *roots;   /* the caller's */
    ir_node *const *g;       /* what the plan realizes: roots or simp */
    int n;
    ir_node *simp_small[16], **simp; /* owns references: the simplified roots */
    bool simplified;
    bool keyed;
    rt_plan_entry *e;        /* owns a reference */
    rt_jit_plan *built;      /* owns until the cache or the caller takes it */
    const rt_jit_plan *plan; /* the plan to run */
    ir_node *const *proots, *const *slots; /* what a plan is built over */
    int nslots;
    ir_node *bind_small[16], **binds;
    double const_small[16], *consts;
    rt_view view_small[8], *views;
    int nviews;              /* views holding references */
    rt_plan_key key;         /* last: not cleared (rt_plan_key_build fills it) */
} realization;

static rlx_status simplify(rt_pipeline *c, realization *r);
static rlx_status cache_lookup(rt_pipeline *c, realization *r);
static rlx_status schedule(rt_pipeline *c, realization *r);
static rlx_status cache_adopt(rt_pipeline *c, realization *r);
static rlx_status run(rt_pipeline *c, realization *r);
static rlx_status publish(rt_pipeline *c, realization *r);
static void realization_free(realization *r);

rlx_status rt_pipeline_realize(rt_pipeline *c, ir_node *const *roots, int nroots)
{
    rt_ctx *ctx = &c->rt;
    if (c->ref) /* the reference backend: the oracle runs the graph as built */
        return rt_ref_realize(roots, nroots, ctx);
    realization r;
    memset(&r, 0, offsetof(realization, key));
    r.roots = r.g = roots;
    r.n = nroots;
    r.binds = r.bind_small, r.consts = r.const_small, r.views = r.view_small;
    /* simplify: an equivalent, smaller graph (realizations; checked by
     * ir_verify when verifying) */
    if (simplify(c, &r) != RLX_OK)
        goto out;
    /* plan cache: a structure seen before runs its plan on the new leaves
     * and constants; seen twice, its plan is built over a template */
    if (cache_lookup(c, &r) != RLX_OK)
        goto out;
    if (!r.plan) {
        /* schedule: kernels and their loop nests (checked by sched_verify) */
        if (schedule(c, &r) != RLX_OK)
            goto out;
        /* memory plan: one arena, lifetimes, in-place writes */
        if (rt_jit_plan_layout(ctx, r.built, r.slots, r.nslots) != RLX_OK)
            goto out;
        /* compile: every LOOP kernel up front, the missing ones in parallel */
        ctx->generic = c->generic;
        if (rt_jit_plan_compile(ctx, r.built, &c->stats) != RLX_OK || cache_adopt(c, &r) != RLX_OK)
            goto out;
    }
    if (c->keep) { /* a compiled program keeps its plan for its runs */
        *c->keep = r.built;
        r.built = NULL;
        goto out;
    }
    /* run: the kernels in order, intermediates in the arena */
    if (run(c, &r) != RLX_OK)
        goto out;
    /* publish: the values onto the realized graph's roots, then onto the
     * user's (or handed back to a program) */
    publish(c, &r);
out:
    realization_free(&r);
    return ctx->status;
}

/* ---------------------------------------------------------------- stages */

static const knob_opts *opts_of(const rt_pipeline *c)
{
    static const knob_opts none = {.nthreads = 1};
    return c->rt.opts ? c->rt.opts : &none;
}

static rlx_status simplify(rt_pipeline *c, realization *r)
{
    const knob_opts *o = opts_of(c);
    if (!o->simplify || c->plan)
        return RLX_OK;
    r->simp = r->n <= 16 ? r->simp_small : ir_alloc((size_t)r->n * sizeof *r->simp);
    if (!r->simp)
        return rt_fail(&c->rt, RLX_E_NOMEM, "out of memory");
    if (simp_run(&c->rt, r->roots, r->n, c->fold, r->simp) != RLX_OK)
        return c->rt.status;
    r->simplified = true;
    r->g = r->simp;
    if (o->debug >= DUMP_LEVEL)
        sched_dump_graph(stderr, "simplify", r->g, r->n);
    return o->verify ? sched_verify_graph(&c->rt, "simplify", r->g, r->n) : RLX_OK;
}

static rlx_status cache_lookup(rt_pipeline *c, realization *r)
{
    r->proots = r->g;
    r->slots = c->slots;
    r->nslots = c->nslots;
    if (c->plan) {
        r->plan = c->plan;
        return RLX_OK;
    }
    if (!opts_of(c)->plan_cache)
        return RLX_OK;
    bool build = false;
    r->keyed = true;
    if (!rt_plan_key_build(&r->key, r->g, r->n, knob_state_epoch(sched_knobs(&c->rt))))
        return RLX_OK;
    if ((r->e = rt_plan_cache_find(&r->key, &build))) {
        r->plan = rt_plan_entry_plan(r->e);
        c->stats.cache_hits += (uint64_t)rt_jit_plan_loops(r->plan); /* each kernel found, as a build counts it */
    } else if (build) { /* out of memory for the entry: built without it */
        r->e = rt_plan_entry_new(&r->key, r->g, r->n, &r->proots, &r->slots, &r->nslots);
    }
    return RLX_OK;
}

/* RLX_DEBUG=1: the kernels a plan runs outside the JIT, by op, each named
 * as a library kernel or the reference evaluator (which a fused plan
 * should not need). */
static void name_ref_kernels(const sched_schedule *s)
{
    for (long i = 0; i < s->count; i++) {
        const ir_node *n = s->k[i].node;
        if (s->k[i].kind != SCHED_REF)
            continue;
        fprintf(stderr, "rlx: ref kernel %s [", ir_ops[n->op].name);
        for (int d = 0; d < n->rank; d++)
            fprintf(stderr, d ? ",%lld" : "%lld", (long long)n->shape[d]);
        fprintf(stderr, "] %s (%s)\n", ir_dtype_name(n->dtype),
                ir_ops[n->op].emit == IR_EMIT_LIB ? "library kernel" : "reference evaluator");
    }
}

static rlx_status schedule(rt_pipeline *c, realization *r)
{
    const knob_opts *o = opts_of(c);
    if (rt_jit_plan_new(&c->rt, r->proots, r->n, c->like, c->nlike, c->keep != NULL, &r->built) != RLX_OK)
        return c->rt.status;
    const sched_schedule *s = rt_jit_plan_schedule(r->built);
    if (o->debug >= DUMP_LEVEL)
        sched_dump(stderr, s);
    else if (o->debug >= 1)
        name_ref_kernels(s);
    return o->verify ? sched_verify(&c->rt, s) : RLX_OK;
}

static rlx_status cache_adopt(rt_pipeline *c, realization *r)
{
    r->plan = r->built;
    if (!r->e)
        return RLX_OK;
    rt_jit_plan *p = r->built;
    r->built = NULL; /* the entry owns it from here */
    if (!rt_plan_entry_adopt(r->e, p))
        return rt_fail(&c->rt, RLX_E_NOMEM, "out of memory");
    return RLX_OK;
}

static rlx_status run(rt_pipeline *c, realization *r)
{
    ir_node *const *binds = c->binds;
    const double *consts = NULL;
    if (r->e) {
        int nb;
        long nc;
        rt_plan_entry_sizes(r->e, &nb, &nc);
        if ((nb > 16 && !(r->binds = ir_alloc((size_t)nb * sizeof *r->binds))) ||
            (nc > 16 && !(r->consts = ir_alloc((size_t)nc * sizeof *r->consts))))
            return rt_fail(&c->rt, RLX_E_NOMEM, "out of memory");
        rt_plan_entry_bind(r->e, &r->key, r->binds, r->consts);
        binds = r->binds;
        consts = r->consts;
    }
    if (c->views)
        r->views = c->views;
    else if (r->n > 8 && !(r->views = ir_calloc((size_t)r->n, sizeof *r->views)))
        return rt_fail(&c->rt, RLX_E_NOMEM, "out of memory");
    const unsigned char *donate = r->e ? NULL : c->donate; /* (a cached plan's binds are its own) */
    rlx_status st = rt_jit_plan_run(&c->rt, r->plan, binds, donate, consts, c->arena, &c->stats, r->views);
    r->nviews = c->views ? 0 : r->n; /* a program's views are its caller's */
    return st;
}

static rlx_status publish(rt_pipeline *c, realization *r)
{
    rt_ctx *ctx = &c->rt;
    if (c->views)
        return RLX_OK;
    for (int i = 0; i < r->n && ctx->status == RLX_OK; i++)
        rt_publish(ctx, (ir_node *)r->g[i], &r->views[i]);
    for (int i = 0; i < r->n && ctx->status == RLX_OK && r->simplified; i++) {
        ir_node *s = r->simp[i], *n = (ir_node *)r->roots[i];
        ir_storage *p = ir_node_storage(s);
        if (s == n || ir_node_storage(n))
            continue;
        if (!p)
            return rt_fail(ctx, RLX_E_INTERNAL, "simplified root %d of %s was not realized", i, ir_ops[n->op].name);
        ir_storage_retain(p);
        ir_node_set_storage(n, p, s->offset);
    }
    return ctx->status;
}

static void realization_free(realization *r)
{
    for (int i = 0; i < r->nviews; i++)
        ir_storage_release(r->views[i].st);
    if (r->views != r->view_small && r->nviews)
        ir_free(r->views);
    if (r->binds != r->bind_small)
        ir_free(r->binds);
    if (r->consts != r->const_small)
        ir_free(r->consts);
    rt_jit_plan_free(r->built);
    rt_plan_entry_release(r->e);
    if (r->keyed)
        rt_plan_key_free(&r->key);
    for (int i = 0; r->simplified && i < r->n; i++)
        ir_release(r->simp[i]);
    if (r->simp && r->simp != r->simp_small)
        ir_free(r->simp);
}
