/*
 * program.c — compiled programs: a traced graph with named inputs, run
 * again on new bindings.
 *
 * With the JIT backend (at compile time) the graph is instantiated over
 * placeholder leaves, one per input, and prepared as a JIT plan by the
 * realize pipeline (runtime/exec/pipeline.c, without simplify and plan
 * cache): schedule, memory plan and compiled kernels. A run (through the
 * pipeline too) checks the bindings, points the placeholders at the bound payloads, runs
 * the kernels and wraps the results as fresh tensors: no retracing, no
 * rescheduling. With the reference backend a run re-instantiates the graph
 * over the bound values (hash-consing makes that cheap: it rebuilds node
 * identities, it does not re-run user code) and realizes it.
 *
 * Dynamic (-1) dims: the plan is specialized to the dims a run binds and
 * kept, the program_specs (option, default 8) most recently used per
 * program (a new binding evicts
 * the least recently used but the one it is planned from; a run holds a reference to its spec, so an
 * eviction never frees a spec in use).
 *
 * When a new binding reuses a plan, and when it re-plans: the new spec's
 * graph is instantiated in any case (its nodes carry the bound sizes that
 * REF kernels, views and outputs read). Its plan is made from a kept
 * spec's (plan_like, tried most recently used first) when every dynamic
 * dim of the key is in that spec's size class (size_class: 0, 1, more;
 * what changes the scheduler's decisions: empty loops, unit dims dropped
 * from loop nests and index maps, broadcasts, generic kernels' fixed
 * strides) under the same knobs, and sched_rebuild finds the instantiated
 * graph node for node of the kept plan's structure (sizes derived from
 * the bound ones, such as n - 1, can still make another graph). Then the
 * kept fusion decisions stand, kernels whose nodes keep their sizes are
 * copied with their compiled code, the others are lowered again and
 * looked up (size-generic: found, not compiled), and the memory plan and
 * the run's tables are made anew (offsets, in-place writes, epilogues
 * and donors depend on sizes). Otherwise the binding is planned afresh.
 * Decisions the scheduler takes by comparing sizes (recomputation
 * budgets) keep the kept plan's choice within a class: never a wrong
 * value, at worst another speed. Instantiation re-derives each
 * node's shape from its sources; what tracing could not know is resolved
 * there (see instantiate). A spec's graph is its own: nodes that read an
 * input are made private (detached, never hash-consed), so building and
 * freeing a spec takes no global lock; nodes that read none are the
 * traced ones. Dims carry symbols (rlx_input): every dim of one
 * symbol must be bound to one size.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "runtime/exec/pipeline.h"
#include "tensor/control.h"
#include "tensor/ts.h"

/* ARENA_KEEP idle arenas (runs in flight at once beyond that take one
 * each and give it back to the buffer pool). */
enum { ARENA_KEEP = 4 };

/* The outputs instantiated over slots[j] (a placeholder for input j with
 * the dims in key), and their plan. */
typedef struct {
    atomic_long refs; /* the program's list holds one, each run using it one */
    uint64_t used;    /* the program's clock at its last use (under lock) */
    int nout;
    long nslots;
    int64_t *key; /* every input's dims, in input order */
    unsigned long epoch; /* the knobs it was planned under */
    rt_jit_plan *plan;
    ir_node **slots; /* owns */
    ir_node **roots; /* owns */
} program_spec;

struct rlx_program {
    int nout;
    ir_node **outputs; /* owns */
    long ninputs;
    ir_node **inputs; /* borrows: kept alive through outputs */
    long keylen;      /* sum of the inputs' ranks */
    int64_t *sym;     /* per key position: a named symbol (<= -2), 0 otherwise */
    long count;       /* the traced graph in postorder, and each node's place */
    ir_node **order;  /* (made once: every instantiation walks them, read-only) */
    ir_map pos;
    long *src_at;     /* order[i]'s sources are order[src_idx[src_at[i] .. src_at[i+1])] */
    long *src_idx;    /* (owns both: one block; instantiate reads no map) */
    bool jit;         /* compiled with the JIT backend: runs use specs */
    pthread_mutex_t lock; /* guards specs, nspecs, clock, prepared, arenas, narenas */
    int nspecs;
    uint64_t clock, prepared, reused; /* reused: specs made from a kept one's plan (plan_like) */
    int capspecs;
    program_spec **specs; /* owns the array and one reference each */
    int narenas;
    ir_storage *arenas[ARENA_KEEP]; /* owns: idle arenas, shared by every spec (arena_take) */
};

static void spec_free(program_spec *s)
{
    if (!s)
        return;
    rt_jit_plan_free(s->plan);
    for (int i = 0; s->roots && i < s->nout; i++)
        ir_release(s->roots[i]);
    for (long j = 0; s->slots && j < s->nslots; j++)
        ir_release(s->slots[j]);
    ir_free(s->slots);
    ir_free(s->roots);
    ir_free(s->key);
    ir_free(s);
}

static void spec_unref(program_spec *s)
{
    if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        spec_free(s);
}

static void program_free(rlx_program *p)
{
    if (!p)
        return;
    for (int k = 0; k < p->nspecs; k++)
        spec_unref(p->specs[k]);
    ir_free(p->specs);
    for (int k = 0; k < p->narenas; k++)
        ir_storage_release(p->arenas[k]);
    for (int i = 0; p->outputs && i < p->nout; i++)
        ir_release(p->outputs[i]);
    pthread_mutex_destroy(&p->lock);
    ir_free(p->outputs);
    ir_free(p->inputs);
    ir_free(p->sym);
    ir_free(p->order);
    ir_free(p->src_at);
    ir_map_free(&p->pos);
    ir_free(p);
}

void rlx_program_free(rlx_program *p) { program_free(p); }

static bool instantiate(const char *fn, const rlx_program *p, bool private_nodes, ir_node **made);

/* Builds spec s of p for the input dims in key (keylen values), from the
 * plan of the first of like[0..nlike) whose graph has its structure
 * (plan_like), else afresh. */
static bool prepare(const char *fn, rlx_program *p, const int64_t *key, const program_spec *const *like, int nlike,
                    program_spec *s)
{
    s->nout = p->nout;
    s->nslots = p->ninputs;
    /* the placeholders' payload: never read, a run reads the bindings */
    static char nothing[64];
    ir_node **made = NULL;
    ir_map *pos = &p->pos;
    ir_storage *st = NULL;
    bool ok = false;
    long count = p->count;
    s->slots = ir_calloc((size_t)(p->ninputs ? p->ninputs : 1), sizeof *s->slots);
    s->roots = ir_calloc((size_t)p->nout, sizeof *s->roots);
    s->key = ir_alloc((size_t)(p->keylen ? p->keylen : 1) * sizeof *s->key);
    if (count < 0 || !s->slots || !s->roots || !s->key ||
        !(made = ir_calloc((size_t)(count ? count : 1), sizeof *made)) || !(st = ir_storage_new(nothing, 0, NULL, NULL)))
        goto oom;
    if (p->keylen)
        memcpy(s->key, key, (size_t)p->keylen * sizeof *key);
    for (long j = 0, k = 0; j < p->ninputs; k += p->inputs[j]->rank, j++) {
        const ir_node *in = p->inputs[j];
        if (!(s->slots[j] = ir_make_buffer(st, 0, in->dtype, in->rank, key + k)))
            goto oom;
        made[ir_map_get(pos, in)] = ir_retain(s->slots[j]);
    }
    /* the spec's graph is its own: its nodes are made private (not
     * hash-consed), so making and freeing them takes no global lock */
    if (!instantiate(fn, p, true, made))
        goto out;
    for (int i = 0; i < p->nout; i++)
        s->roots[i] = ir_retain(made[ir_map_get(pos, p->outputs[i])]);
    /* the pipeline builds the plan (no simplify, no plan cache) and hands it back */
    knob_opts o;
    ts_options_take(&o);
    o.simplify = o.plan_cache = false;
    rt_pipeline c;
    memset(&c, 0, sizeof c);
    c.rt.opts = &o;
    c.keep = &s->plan;
    const rt_jit_plan *plan_small[8], **plans = nlike <= 8 ? plan_small : ir_alloc((size_t)nlike * sizeof *plans);
    if (!plans) {
        ts_options_drop(&o);
        goto oom;
    }
    for (int k = 0; k < nlike; k++)
        plans[k] = like[k]->plan;
    c.like = plans;
    c.nlike = nlike;
    s->epoch = knob_state_epoch(o.knobs);
    c.slots = s->slots;
    c.nslots = (int)p->ninputs;
    for (long j = 0; j < p->ninputs; j++) /* dynamic dims: kernels that serve every binding */
        c.generic |= ir_node_numel(p->inputs[j]) < 0;
    rlx_status rs = rt_pipeline_realize(&c, s->roots, p->nout);
    ts_options_drop(&o);
    if (plans != plan_small)
        ir_free(plans);
    ts_stats_add_jit(c.stats.kernels_compiled, c.stats.cache_hits, c.stats.cache_misses, c.stats.compile_seconds);
    if (rs != RLX_OK) {
        ts_error(rs, fn, "%s", c.rt.msg);
        goto out;
    }
    ok = true;
    goto out;
oom:
    ts_error(RLX_E_NOMEM, fn, "out of memory");
out:
    for (long i = 0; made && i < count; i++)
        ir_release(made[i]);
    ir_free(made);
    ir_storage_release(st);
    return ok;
}

/* The size class of a bound dim where scheduling decisions change: 0
 * (empty loops), 1 (a dim that drops out of loops and index maps, a
 * broadcast) or more. */
static int size_class(int64_t v) { return v < 2 ? (int)v : 2; }

/* The kept specs whose plan a binding of key may be made from (most
 * recently used first, into like; returns their count): every dynamic dim
 * in the same size class, the same knobs. */
static int plan_like(const rlx_program *p, const int64_t *key, unsigned long epoch, const program_spec **like)
{
    int n = 0;
    for (int k = 0; k < p->nspecs; k++) {
        const program_spec *s = p->specs[k];
        bool same = s->epoch == epoch && s->plan;
        for (long j = 0; j < p->keylen && same; j++)
            same = size_class(s->key[j]) == size_class(key[j]);
        if (!same)
            continue;
        int at = n++;
        while (at > 0 && like[at - 1]->used < s->used) {
            like[at] = like[at - 1];
            at--;
        }
        like[at] = s;
    }
    return n;
}

/* The spec of p for key, retained (spec_unref when done): found, or
 * built (from a kept spec's plan when plan_like finds one) and added, the
 * least recently used ones other than that plan's evicted first (down
 * to program_specs - 1, even if the build then fails); NULL on error
 * (recorded). Specs are
 * built under the lock: concurrent runs of one new binding build it
 * once. */
static program_spec *spec_for(const char *fn, rlx_program *p, const int64_t *key)
{
    size_t bytes = (size_t)p->keylen * sizeof *key;
    pthread_mutex_lock(&p->lock);
    program_spec *s = NULL;
    for (int k = 0; k < p->nspecs && !s; k++)
        if (bytes == 0 || memcmp(p->specs[k]->key, key, bytes) == 0)
            s = p->specs[k];
    if (!s) {
        int keep = ts_program_specs();
        program_spec *made = ir_calloc(1, sizeof *made);
        const program_spec *like_small[8];
        const program_spec **like = p->nspecs <= 8 ? like_small : ir_alloc((size_t)p->nspecs * sizeof *like);
        int nlike = 0;
        if (made && like && p->capspecs < keep) { /* room for keep */
            program_spec **grown = ir_realloc(p->specs, (size_t)keep * sizeof *grown);
            if (grown) {
                p->specs = grown;
                p->capspecs = keep;
            }
        }
        if (!like || p->capspecs < keep) { /* (more than keep: program_specs was lowered) */
            spec_free(made);
            made = NULL;
        }
        if (made) {
            knob_state *ks = knob_snapshot();
            nlike = plan_like(p, key, knob_state_epoch(ks), like);
            knob_release(ks);
        }
        while (made && p->nspecs >= keep) {
            /* room first: the least recently used spec (not the plan to
             * be reused) is freed before the new one is made, whose
             * allocations (the same structure's) then take its memory;
             * freed after, it left the heap to grow into fresh pages, and
             * their faults were most of re-planning a W10 step */
            int at = -1;
            for (int k = 0; k < p->nspecs; k++)
                if ((nlike == 0 || p->specs[k] != like[0]) && (at < 0 || p->specs[k]->used < p->specs[at]->used))
                    at = k;
            if (at < 0)
                break; /* keep 1, and the one kept is the plan to reuse: evicted once made from */
            program_spec *evicted = p->specs[at];
            p->specs[at] = p->specs[--p->nspecs];
            for (int k = 0; k < nlike; k++)
                if (like[k] == evicted) {
                    memmove(like + k, like + k + 1, (size_t)(nlike - k - 1) * sizeof *like);
                    nlike--;
                    break;
                }
            spec_unref(evicted); /* (freed now unless a run holds it) */
        }
        if (!made) {
            ts_error(RLX_E_NOMEM, fn, "out of memory");
        } else if (!prepare(fn, p, key, like, nlike, made)) {
            spec_free(made);
        } else {
            atomic_init(&made->refs, 1);
            p->prepared++;
            p->reused += rt_jit_plan_like(made->plan);
            if (p->nspecs >= keep)
                spec_unref(p->specs[--p->nspecs]); /* the plan just made from */
            p->specs[p->nspecs++] = s = made;
        }
        if (like != like_small)
            ir_free(like);
    }
    if (s) {
        s->used = ++p->clock;
        atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&p->lock);
    return s;
}

rlx_status rlx_program_specs(rlx_program *p, int *kept, int64_t *prepared)
{
    if (!p) {
        ts_error(RLX_E_ARG, "rlx_program_specs", "program is NULL");
        return RLX_E_ARG;
    }
    pthread_mutex_lock(&p->lock);
    if (kept)
        *kept = p->nspecs;
    if (prepared)
        *prepared = (int64_t)p->prepared;
    pthread_mutex_unlock(&p->lock);
    return RLX_OK;
}

rlx_status rlx_program_reuses(rlx_program *p, int64_t *reused)
{
    if (!p) {
        ts_error(RLX_E_ARG, "rlx_program_reuses", "program is NULL");
        return RLX_E_ARG;
    }
    pthread_mutex_lock(&p->lock);
    if (reused)
        *reused = (int64_t)p->reused;
    pthread_mutex_unlock(&p->lock);
    return RLX_OK;
}

/* Every symbol a reshape names (rlx_reshape) is carried by an input: one
 * that none binds has no size. */
static bool check_reshape_symbols(const char *fn, const rlx_program *p)
{
    for (long i = 0; i < p->count; i++) {
        const ir_node *nd = p->order[i];
        for (int d = 0; ts_reshape_names_symbol(nd) && d < nd->rank; d++) {
            int64_t s = nd->attr.shape.dims[d];
            long k = 0;
            while (s <= -2 && k < p->keylen && p->sym[k] != s)
                k++;
            if (s <= -2 && k == p->keylen) {
                ts_error(RLX_E_SHAPE, fn, "a reshape of %s to %s names symbol %lld, which no input of the program "
                         "carries (nothing binds it)", ts_shape_str(nd->src[0]),
                         ts_dims_str(nd->attr.shape.rank, nd->attr.shape.dims), (long long)s);
                return false;
            }
        }
    }
    return true;
}

rlx_program *rlx_compile(rlx_tensor *const *outputs, int n)
{
    const char *fn = "rlx_compile";
    if (!outputs || n < 1) {
        ts_error(RLX_E_ARG, fn, "need at least one output (n = %d, outputs %s)", n, outputs ? "set" : "NULL");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (ts_null(fn, "outputs[i]", outputs[i]))
            return NULL;
    rlx_program *p = ir_calloc(1, sizeof *p);
    ir_node **order = NULL;
    if (!p)
        goto oom;
    pthread_mutex_init(&p->lock, NULL);
    if (!(p->outputs = ir_calloc((size_t)n, sizeof *p->outputs)))
        goto oom;
    p->nout = n;
    for (int i = 0; i < n; i++)
        p->outputs[i] = ir_retain(ts_node(outputs[i]));
    long count = ir_postorder(p->outputs, n, NULL, NULL, &order);
    if (count < 0 || !(p->inputs = ir_alloc((size_t)(count ? count : 1) * sizeof *p->inputs)))
        goto oom;
    bool dynamic = false;
    for (long i = 0; i < count; i++) {
        ir_node *nd = order[i];
        if (nd->op != IR_OP_INPUT)
            continue;
        for (long j = 0; j < p->ninputs; j++) {
            if (strcmp(p->inputs[j]->attr.input.name, nd->attr.input.name) == 0) {
                ts_error(RLX_E_ARG, fn, "two inputs are named '%s' with different types", nd->attr.input.name);
                ir_free(order);
                program_free(p);
                return NULL;
            }
        }
        p->inputs[p->ninputs++] = nd;
        p->keylen += nd->rank;
        dynamic |= ir_node_numel(nd) < 0;
    }
    p->order = order; /* kept for instantiations */
    p->count = count;
    order = NULL;
    long nsrc = 0;
    for (long i = 0; i < count; i++) {
        if (ir_map_put(&p->pos, p->order[i], i) < 0)
            goto oom;
        nsrc += p->order[i]->nsrc;
    }
    if (!(p->src_at = ir_alloc((size_t)(count + 1 + nsrc) * sizeof *p->src_at)))
        goto oom;
    p->src_idx = p->src_at + count + 1;
    for (long i = 0, k = 0; i < count; i++) {
        p->src_at[i] = k;
        for (int s = 0; s < p->order[i]->nsrc; s++)
            p->src_idx[k++] = ir_map_get(&p->pos, p->order[i]->src[s]);
        p->src_at[i + 1] = k;
    }
    if (!(p->sym = ir_calloc((size_t)(p->keylen ? p->keylen : 1), sizeof *p->sym)))
        goto oom;
    for (long j = 0, k = 0; j < p->ninputs; k += p->inputs[j]->rank, j++)
        memcpy(p->sym + k, p->inputs[j]->attr.input.sym, (size_t)p->inputs[j]->rank * sizeof *p->sym);
    if (!check_reshape_symbols(fn, p)) {
        program_free(p);
        return NULL;
    }
    p->jit = ts_backend_is_jit();
    if (p->jit && !dynamic) {
        /* static shapes: the one spec is made now, so a run only runs */
        int64_t *key = ir_alloc((size_t)(p->keylen ? p->keylen : 1) * sizeof *key);
        if (!key)
            goto oom;
        for (long j = 0, k = 0; j < p->ninputs; k += p->inputs[j]->rank, j++)
            memcpy(key + k, p->inputs[j]->shape, (size_t)p->inputs[j]->rank * sizeof *key);
        program_spec *s = spec_for(fn, p, key);
        spec_unref(s);
        ir_free(key);
        if (!s) {
            program_free(p);
            return NULL;
        }
    }
    return p;
oom:
    ir_free(order);
    program_free(p);
    ts_error(RLX_E_NOMEM, fn, "out of memory");
    return NULL;
}

static bool has_dynamic_dim(int rank, const int64_t *shape)
{
    for (int d = 0; d < rank; d++)
        if (shape[d] < 0)
            return true;
    return false;
}

static bool same_shapes(int n, ir_node *const *src)
{
    for (int s = 1; s < n; s++)
        if (!ir_shape_eq(src[s]->rank, src[s]->shape, src[0]->rank, src[0]->shape))
            return false;
    return true;
}

/* The node of op over src, or NULL with the error recorded: a failure of
 * the shape rules here means the bound dims do not fit the traced graph. */
static ir_node *remake(const char *fn, bool private_nodes, const ir_node *nd, int nsrc, ir_node *const *src,
                      const ir_attrs *a)
{
    char err[200] = "";
    ir_node *r = NULL;
    if (private_nodes) { /* ir_make's checks, without the cons table */
        rlx_dtype dt = nd->dtype;
        int rank = nd->rank;
        int64_t shape[IR_MAX_RANK];
        if (ir_infer(nd->op, nsrc, src, a, &dt, &rank, shape, err, sizeof err)) {
            if (!ir_shape_bytes_ok(dt, rank, shape))
                snprintf(err, sizeof err, "the result overflows the addressable size");
            else if (!(r = ir_make_detached(nd->op, nsrc, src, a, dt, rank, shape, NULL)))
                snprintf(err, sizeof err, "out of memory");
        }
    } else {
        r = ir_make(nd->op, nsrc, src, a, nd->dtype, nd->rank, nd->shape, err, sizeof err);
    }
    if (!r) {
        ts_error(strstr(err, "out of memory") ? RLX_E_NOMEM : RLX_E_SHAPE, fn,
                 "the bound inputs do not fit '%s' (traced as %s): %s", ir_ops[nd->op].name,
                 ts_dims_str(nd->rank, nd->shape), err);
    }
    return r;
}

/* ts_reshape_rule's rules 1 and 2 for the dims src[0..rs) -> dims[0..rd). */
static int reshape_rule_of(int rs, const int64_t *src, int rd, const int64_t *dims, int64_t *known)
{
    int64_t ps[IR_MAX_RANK], pd[IR_MAX_RANK];
    int ns = 0, nd = 0, unknown = 0;
    for (int i = 0; i < rs; i++)
        if (src[i] != 1)
            ps[ns++] = src[i];
    *known = 1;
    for (int i = 0; i < rd; i++) {
        if (dims[i] != 1)
            pd[nd++] = dims[i];
        unknown += dims[i] < 0;
        *known *= dims[i] < 0 ? 1 : dims[i];
    }
    if (ns == nd && (ns == 0 || memcmp(ps, pd, (size_t)ns * sizeof *ps) == 0))
        return 1;
    return unknown == 1 && *known > 0 ? 2 : 0;
}

/* Rule 3 (ts_reshape_rule) for a reshape of src[0..rs) to dims[0..rd)
 * that carries lo leading and hi trailing dims: the middle's rule (1, 2,
 * or 4 when both middles are static with one count), 0 when it has none;
 * sig[i] gets what dynamic target dim i is made of: a mask of the
 * source's dynamic dims and the factor num/den. */
typedef struct {
    uint32_t mask;
    int64_t num, den;
} dim_sig;

static int ends_rule(int rs, const int64_t *src, int rd, const int64_t *dims, int lo, int hi, dim_sig *sig)
{
    int64_t known, stat = 1;
    uint32_t dyn = 0;
    for (int i = lo; i < rs - hi; i++) {
        dyn |= src[i] < 0 ? 1u << i : 0;
        stat *= src[i] < 0 ? 1 : src[i];
    }
    int rule = reshape_rule_of(rs - lo - hi, src + lo, rd - lo - hi, dims + lo, &known);
    if (rule == 0 && !dyn && known == stat)
        rule = 4;
    for (int i = 0; i < rd; i++)
        sig[i] = (dim_sig){0, 1, 1};
    for (int i = 0; i < lo; i++)
        sig[i].mask = src[i] < 0 ? 1u << i : 0;
    for (int i = 0; i < hi; i++)
        sig[rd - 1 - i].mask = src[rs - 1 - i] < 0 ? 1u << (rs - 1 - i) : 0;
    for (int i = lo, k = lo; rule == 1 && i < rd - hi; i++) {
        if (dims[i] == 1)
            continue;
        while (src[k] == 1)
            k++;
        sig[i].mask = src[k] < 0 ? 1u << k : 0;
        k++;
    }
    for (int i = lo; rule == 2 && i < rd - hi; i++)
        if (dims[i] < 0)
            sig[i] = (dim_sig){dyn, stat, known};
    for (int i = 0; i < rd; i++) /* every dynamic target dim is made of dynamic source dims */
        if (rule && dims[i] < 0 && !sig[i].mask)
            return 0;
    return rule;
}

/* The ends (*lo, *hi) rule 3 carries and the middle's rule, or 0: the
 * decompositions whose middle follows a rule must all make each dynamic
 * target dim of the same source dims (a traced -1 is anonymous: a
 * reshape [.., -1, 2, ..] -> [.., -1, ..] could keep the first -1 or merge
 * it with the 2, so it is refused). */
static int reshape_ends(const ir_node *traced, int rank, const int64_t *dims, int *lo, int *hi)
{
    int r = traced->rank, found = 0, ndyn = 0;
    dim_sig sig[IR_MAX_RANK], first[IR_MAX_RANK];
    for (int i = 0; i < r; i++)
        ndyn += traced->shape[i] < 0;
    for (int i = 0; i < rank; i++)
        ndyn -= dims[i] < 0;
    if (ndyn) /* a dynamic dim merged or split: not from the ends */
        return 0;
    int maxlo = 0;
    while (maxlo < rank && maxlo < r && dims[maxlo] == traced->shape[maxlo])
        maxlo++;
    for (int l = maxlo; l >= 0; l--) {
        int maxhi = 0;
        while (maxhi < rank - l && maxhi < r - l && dims[rank - 1 - maxhi] == traced->shape[r - 1 - maxhi])
            maxhi++;
        for (int h = maxhi; h >= 0; h--) {
            if (!(l || h))
                continue;
            int rule = ends_rule(r, traced->shape, rank, dims, l, h, sig);
            if (!rule)
                continue;
            if (!found) {
                found = rule, *lo = l, *hi = h;
                memcpy(first, sig, (size_t)rank * sizeof *sig);
                continue;
            }
            for (int i = 0; i < rank; i++)
                if (dims[i] < 0 && (sig[i].mask != first[i].mask || sig[i].num * first[i].den != first[i].num * sig[i].den))
                    return 0;
        }
    }
    return found;
}

int ts_reshape_rule(const ir_node *traced, int rank, const int64_t *dims, int64_t *known)
{
    int rule = reshape_rule_of(traced->rank, traced->shape, rank, dims, known), lo, hi;
    if (rule)
        return rule;
    return reshape_ends(traced, rank, dims, &lo, &hi) ? 3 : 0;
}

/* The bound size of symbol s: that of the first input dim carrying it
 * (check_symbols makes them agree); -1 when no input carries it. */
static int64_t symbol_size(const rlx_program *p, ir_node *const *made, int64_t s)
{
    for (long j = 0, k = 0; j < p->ninputs; k += p->inputs[j]->rank, j++)
        for (int d = 0; d < p->inputs[j]->rank; d++)
            if (p->sym[k + d] == s)
                return made[ir_map_get(&p->pos, p->inputs[j])]->shape[d];
    return -1;
}

/* The dims of a reshape naming symbols (rlx_reshape): each symbol's bound
 * size, and a -1 inferred from the count, which must be x's. */
static bool symbol_dims(const char *fn, const rlx_program *p, ir_node *const *made, const ir_node *x, ir_attrs *a)
{
    int64_t *dims = a->shape.dims, traced[IR_MAX_RANK], known = 1, n = ir_node_numel(x);
    int infer = -1, r = a->shape.rank;
    char named[200] = "";
    size_t len = 0;
    bool over = false;
    memcpy(traced, dims, sizeof traced);
    for (int i = 0; i < r; i++) {
        if (dims[i] <= -2) {
            int64_t s = dims[i];
            if ((dims[i] = symbol_size(p, made, s)) < 0) { /* (rlx_compile checked) */
                ts_error(RLX_E_INTERNAL, fn, "a reshape names symbol %lld, which no input carries", (long long)s);
                return false;
            }
            bool listed = false;
            for (int j = 0; j < i; j++)
                listed |= traced[j] == s;
            if (!listed && len < sizeof named)
                len += (size_t)snprintf(named + len, sizeof named - len, "%ssymbol %lld bound to %lld",
                                        len ? ", " : "", (long long)s, (long long)dims[i]);
        }
        if (dims[i] == -1)
            infer = i;
        else
            over |= __builtin_mul_overflow(known, dims[i], &known);
    }
    if (!over && infer >= 0 && known > 0 && n % known == 0) {
        dims[infer] = n / known;
        return true;
    }
    if (!over && infer < 0 && known == n)
        return true;
    char why[64];
    snprintf(why, sizeof why, over ? "overflows" : infer >= 0 ? "cannot infer its -1" : "has %lld", (long long)known);
    ts_error(RLX_E_SHAPE, fn, "a reshape of %s (%lld elements) to %s, %s: %s %s", ts_shape_str(x), (long long)n,
             ts_dims_str(r, traced), named, ts_dims_str(r, dims), why);
    return false;
}

/* The dims of a reshape traced with dynamic (-1) dims, given its source x
 * as bound, by ts_reshape_rule: dims that only move with their source (a
 * reshape that adds or drops 1s) are taken from it; otherwise one unknown
 * dim is inferred from the element count. A reshape of where(true, g,
 * reshape(y)) back to y's traced dims (vjp.c: a gradient going back
 * through a reshape) takes y's bound dims, however many are dynamic. */
static bool reshape_dims(const char *fn, const rlx_program *p, ir_node *const *made, long at, const ir_node *x,
                         ir_attrs *a)
{
    const ir_node *nd = p->order[at], *traced = nd->src[0];
    if (ts_reshape_names_symbol(nd))
        return symbol_dims(fn, p, made, x, a);
    int64_t known, n = ir_node_numel(x);
    int rule = ts_reshape_rule(traced, a->shape.rank, a->shape.dims, &known);
    /* (a reshape naming symbols may permute dynamic dims rule 1 would keep) */
    if (traced->op == IR_OP_WHERE && ts_const_true(traced->src[0]) && traced->src[2]->op == IR_OP_RESHAPE &&
        (rule == 0 || rule == 3 || ts_reshape_names_symbol(traced->src[2]))) {
        long w = p->src_idx[p->src_at[at]], r = p->src_idx[p->src_at[w] + 2], y = p->src_idx[p->src_at[r]];
        const ir_node *yb = made[y];
        if (ir_shape_eq(p->order[y]->rank, p->order[y]->shape, a->shape.rank, a->shape.dims) &&
            ir_node_numel(yb) == n) {
            memcpy(a->shape.dims, yb->shape, (size_t)yb->rank * sizeof *yb->shape);
            return true;
        }
    }
    if (rule == 1) {
        for (int i = 0, k = 0; i < a->shape.rank; i++) {
            if (a->shape.dims[i] == 1)
                continue;
            while (traced->shape[k] == 1)
                k++;
            a->shape.dims[i] = x->shape[k++];
        }
        return true;
    }
    if (rule == 2 && n % known == 0) {
        for (int i = 0; i < a->shape.rank; i++)
            if (a->shape.dims[i] < 0)
                a->shape.dims[i] = n / known;
        return true;
    }
    if (rule == 3) { /* the ends move with x, the middle by its rule (the count checked by remake) */
        int lo, hi, r = a->shape.rank, rs = x->rank;
        int64_t *dims = a->shape.dims, m = 1;
        int mid = reshape_ends(traced, r, dims, &lo, &hi);
        for (int i = lo; i < rs - hi; i++)
            m *= x->shape[i];
        if (mid == 2)
            reshape_rule_of(rs - lo - hi, traced->shape + lo, r - lo - hi, dims + lo, &known);
        for (int i = 0; i < lo; i++)
            dims[i] = x->shape[i];
        for (int i = 0; i < hi; i++)
            dims[r - 1 - i] = x->shape[rs - 1 - i];
        for (int i = lo, k = lo; mid == 1 && i < r - hi; i++) {
            if (dims[i] == 1)
                continue;
            while (traced->shape[k] == 1)
                k++;
            dims[i] = x->shape[k++];
        }
        for (int i = lo; mid == 2 && i < r - hi; i++)
            if (dims[i] < 0 && m % known == 0)
                dims[i] = m / known;
        if (mid != 2 || m % known == 0)
            return true;
    }
    if (rule) /* a rule that fits other sizes: this binding's do not divide */
        ts_error(RLX_E_SHAPE, fn, "a reshape traced to %s does not fit the bound %s", ts_dims_str(a->shape.rank, a->shape.dims),
                 ts_shape_str(x));
    else
        ts_error(RLX_E_UNSUPPORTED, fn, "a reshape traced to %s cannot be specialized for %s",
                 ts_dims_str(a->shape.rank, a->shape.dims), ts_shape_str(x));
    return false;
}

/* Replaces the TS_DYN_PIECE indices (ts.h) of axis d of the slice
 * order[i] by where the bound pieces of the cat it reads put them. */
static bool resolve_pieces(const char *fn, const rlx_program *p, ir_node *const *made, long i, int d, ir_attrs *a)
{
    int64_t *ix[2] = {&a->slice.start[d], NULL}, stop = 0;
    if (a->slice.len[d] <= -2)
        stop = ts_dyn_stop(a->slice.len[d]), ix[1] = &stop;
    if (*ix[0] < TS_DYN_PIECE && stop < TS_DYN_PIECE)
        return true;
    long c = p->src_idx[p->src_at[i]];
    if (p->order[c]->op == IR_OP_WHERE && ts_const_true(p->order[c]->src[0]))
        c = p->src_idx[p->src_at[c] + 2];
    const ir_node *cat = p->order[c];
    if (cat->op != IR_OP_CAT || cat->attr.ax.axis != d) {
        ts_error(RLX_E_INTERNAL, fn, "a slice of axis %d names the pieces of a cat it does not read", d);
        return false;
    }
    for (int e = 0; e < 2; e++) {
        if (!ix[e] || *ix[e] < TS_DYN_PIECE)
            continue;
        int64_t k = *ix[e] - TS_DYN_PIECE, at = 0;
        for (int64_t j = 0; j < k && j < cat->nsrc; j++)
            at += made[p->src_idx[p->src_at[c] + j]]->shape[d];
        *ix[e] = at;
    }
    if (ix[1])
        a->slice.len[d] = ts_dyn_len(stop);
    return true;
}

/* The error of slice nd of axis d, which does not fit its bound source
 * x: a piece of rlx_split (TS_DYN_REST) names the sizes' sum and, when
 * it splits an input, the input, the axis and its symbol. */
static void slice_error(const char *fn, const rlx_program *p, const ir_node *nd, int d, const ir_node *x)
{
    int64_t st = nd->attr.slice.start[d], c = st - TS_DYN_REST;
    if (st < TS_DYN_REST || st >= TS_DYN_CHUNK) {
        ts_error(RLX_E_SHAPE, fn, "a slice of axis %d (%lld elements from index %lld) does not fit %s", d,
                 (long long)nd->attr.slice.len[d], (long long)st, ts_shape_str(x));
        return;
    }
    char what[160];
    const ir_node *in = nd->src[0];
    snprintf(what, sizeof what, "axis %d of %s", d, ts_shape_str(x));
    for (long j = 0, k = 0; j < p->ninputs; k += p->inputs[j]->rank, j++)
        if (p->inputs[j] == in && p->sym[k + d] <= -2)
            snprintf(what, sizeof what, "axis %d of input '%s' (symbol %lld)", d, in->attr.input.name,
                     (long long)p->sym[k + d]);
        else if (p->inputs[j] == in)
            snprintf(what, sizeof what, "axis %d of input '%s' (dynamic)", d, in->attr.input.name);
    ts_error(RLX_E_SHAPE, fn,
             c & TS_DYN_EXACT ? "rlx_split's sizes sum to %lld, but %s is bound to %lld"
                              : "rlx_split's fixed sizes sum to %lld, more than %s, bound to %lld",
             (long long)(c >> 29 & ((1 << 28) - 1)), what, (long long)x->shape[d]);
}

/* Rebuilds the nodes of order[] with inputs replaced by their bindings;
 * made[i] gets the new node of order[i] (a new reference).
 *
 * A broadcast (expand) from 1 to a dynamic dim cannot know its target from
 * its source alone: it is left "loose" there (made[i] keeps 1 on those
 * dims, bit d of loose[i] set), unary ops over it stay loose, and the
 * elementwise op that meets it broadcasts its sources as bound. Dims that
 * tracing took as equal (not loose) must be bound equal: a size-1 binding
 * there is an error, never a broadcast. where(true, a, ref), how
 * full_like and the gradients follow a dynamic shape, becomes a plain
 * expand of a to ref's bound shape. Slices of dynamic axes resolve their
 * size-relative attrs (ts.h). */
static bool instantiate(const char *fn, const rlx_program *p, bool private_nodes, ir_node **made)
{
    ir_node **order = p->order;
    long count = p->count;
    ir_node *srcbuf[8], **src = srcbuf;
    bool ok = false;
    uint32_t *loose = ir_calloc((size_t)(count ? count : 1), sizeof *loose);
    if (!loose) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return false;
    }
    for (long i = 0; i < count; i++) {
        ir_node *nd = order[i];
        if (made[i])
            continue; /* an input, bound already */
        if (nd->op == IR_OP_CONST && has_dynamic_dim(nd->rank, nd->shape)) {
            /* a broadcast constant: 1 along the dynamic dims, loose */
            int64_t shape[IR_MAX_RANK];
            for (int d = 0; d < nd->rank; d++) {
                shape[d] = nd->shape[d] < 0 ? 1 : nd->shape[d];
                loose[i] |= nd->shape[d] < 0 ? 1u << d : 0;
            }
            if (!(made[i] = ts_const_node(fn, nd->dtype, nd->rank, shape, nd->attr.cst.value)))
                goto out;
            continue;
        }
        if (nd->nsrc == 0 || ir_node_storage(nd)) {
            made[i] = ir_retain(nd);
            continue;
        }
        if (nd->nsrc > 8 && !(src = ir_alloc((size_t)nd->nsrc * sizeof *src))) {
            ts_error(RLX_E_NOMEM, fn, "out of memory");
            goto out;
        }
        uint32_t any_loose = 0;
        const long *si = p->src_idx + p->src_at[i]; /* si[s]: the place of nd->src[s] */
        bool same = true;
        for (int s = 0; s < nd->nsrc; s++) {
            src[s] = made[si[s]];
            any_loose |= loose[si[s]];
            same &= src[s] == nd->src[s];
        }
        bool dyn = has_dynamic_dim(nd->rank, nd->shape);
        if (same && !any_loose && !dyn) { /* reads no input (a weight's transpose): the traced node itself */
            made[i] = ir_retain(nd);
            goto made;
        }
        ir_class cls = ir_ops[nd->op].cls;
        ir_attrs a = nd->attr;
        if (dyn && nd->op == IR_OP_EXPAND) {
            /* static targets and dims passed through are known; 1 -> -1 is loose */
            const ir_node *ts = nd->src[0];
            for (int d = 0; d < nd->rank; d++) {
                if (nd->shape[d] >= 0 || ts->shape[d] < 0) {
                    a.shape.dims[d] = nd->shape[d] >= 0 ? nd->shape[d] : src[0]->shape[d];
                    loose[i] |= any_loose & 1u << d;
                } else {
                    a.shape.dims[d] = 1;
                    loose[i] |= 1u << d;
                }
            }
            made[i] = ir_shape_eq(nd->rank, a.shape.dims, src[0]->rank, src[0]->shape)
                          ? ir_retain(src[0])
                          : remake(fn, private_nodes, nd, 1, src, &a);
        } else if (any_loose && cls == IR_CLS_UNARY) {
            made[i] = remake(fn, private_nodes, nd, 1, src, &a);
            loose[i] = any_loose;
        } else if (nd->op == IR_OP_WHERE && ts_const_true(src[0]) && !loose[si[2]]) {
            /* where(true, a, ref): a in ref's shape, ref itself unread; an
             * iota (rlx_arange_of) or rand (a dropout mask; rand_seeded's
             * with its seed as made) traced over a dynamic dim is made in
             * it: the same values as one traced so */
            const ir_node *x = nd->src[1];
            if ((x->op == IR_OP_IOTA || x->op == IR_OP_RAND) && has_dynamic_dim(x->rank, x->shape) &&
                x->rank == src[2]->rank) {
                made[i] = ts_leaf(fn, x->op, &x->attr, x->dtype, x->rank, src[2]->shape);
                goto made;
            }
            if (x->op == IR_OP_RAND_SEEDED && has_dynamic_dim(x->rank, x->shape) && x->rank == src[2]->rank) {
                ir_attrs ra = x->attr;
                memcpy(ra.rands.dims, src[2]->shape, (size_t)x->rank * sizeof *ra.rands.dims);
                ir_node *seed = made[ir_map_get(&p->pos, x->src[0])];
                made[i] = remake(fn, private_nodes, x, 1, &seed, &ra);
                goto made;
            }
            uint32_t m = loose[si[1]];
            bool fits = src[1]->rank == src[2]->rank;
            for (int d = 0; d < src[2]->rank && fits; d++)
                fits = src[1]->shape[d] == src[2]->shape[d] || (m >> d & 1);
            made[i] = fits ? ts_expand_node(fn, src[1], src[2]->rank, src[2]->shape) : NULL;
            if (!fits)
                ts_error(RLX_E_SHAPE, fn, "'where' (traced as %s) joins dims that tracing took as equal, bound to %s and %s",
                         ts_dims_str(nd->rank, nd->shape), ts_shape_str(src[1]), ts_shape_str(src[2]));
        } else if ((cls == IR_CLS_BINARY || cls == IR_CLS_TERNARY) && (any_loose || !same_shapes(nd->nsrc, src))) {
            int r = 0;
            int64_t shape[IR_MAX_RANK];
            bool fits = true;
            for (int s = 0; s < nd->nsrc && fits; s++)
                fits = ir_broadcast_shapes(r, shape, src[s]->rank, src[s]->shape, &r, shape);
            /* only loose dims may broadcast: the others tracing took as equal */
            uint32_t all = ~0u;
            for (int s = 0; s < nd->nsrc && fits; s++) {
                uint32_t m = loose[si[s]];
                all &= m;
                for (int d = 0; d < r && fits; d++)
                    fits = src[s]->shape[d] == shape[d] || (m >> d & 1);
            }
            if (!fits) {
                ts_error(RLX_E_SHAPE, fn,
                         "'%s' (traced as %s) joins dims that tracing took as equal, bound to %s and %s",
                         ir_ops[nd->op].name, ts_dims_str(nd->rank, nd->shape), ts_shape_str(src[0]),
                         ts_shape_str(src[1]));
                goto out;
            }
            ir_node *e[3] = {NULL, NULL, NULL};
            bool made_all = true;
            for (int s = 0; s < nd->nsrc; s++)
                made_all &= (e[s] = ts_expand_node(fn, src[s], r, shape)) != NULL;
            made[i] = made_all ? remake(fn, private_nodes, nd, nd->nsrc, e, &a) : NULL;
            for (int s = 0; s < nd->nsrc; s++)
                ir_release(e[s]);
            /* loose where every source is */
            loose[i] = all;
        } else if (any_loose && nd->op == IR_OP_PERMUTE) {
            /* the broadcast dims move with the permutation, still loose (a
             * gradient's transpose of a weight broadcast over a dynamic batch) */
            made[i] = remake(fn, private_nodes, nd, 1, src, &a);
            for (int d = 0; d < nd->rank; d++)
                loose[i] |= (any_loose >> a.perm.perm[d] & 1u) << d;
        } else if (any_loose && (nd->op == IR_OP_MATMUL || nd->op == IR_OP_SOLVE)) {
            /* batch dims broadcast as tracing did; the matrix dims stay
             * (a loose matrix dim, 1 in made, would give a wrong shape) */
            int rank = src[0]->rank, nb = rank - 2, r = 0;
            int64_t batch[IR_MAX_RANK];
            uint32_t mat = nb >= 0 ? 3u << nb : ~0u;
            if ((loose[si[0]] | loose[si[1]]) & mat) {
                ts_error(RLX_E_UNSUPPORTED, fn, "'%s' of a broadcast to a dynamic dim cannot be specialized",
                         ir_ops[nd->op].name);
                goto out;
            }
            bool fits = src[1]->rank == rank && nb >= 0 &&
                        ir_broadcast_shapes(nb, src[0]->shape, nb, src[1]->shape, &r, batch);
            if (!fits) {
                ts_error(RLX_E_SHAPE, fn, "the bound inputs do not broadcast at '%s': %s and %s", ir_ops[nd->op].name,
                         ts_shape_str(src[0]), ts_shape_str(src[1]));
                goto out;
            }
            ir_node *e[2] = {NULL, NULL};
            for (int s = 0; s < 2; s++) {
                memcpy(batch + nb, src[s]->shape + nb, 2 * sizeof *batch);
                e[s] = ts_expand_node(fn, src[s], rank, batch);
            }
            made[i] = e[0] && e[1] ? remake(fn, private_nodes, nd, 2, e, &a) : NULL;
            ir_release(e[0]);
            ir_release(e[1]);
        } else if (any_loose) {
            ts_error(RLX_E_UNSUPPORTED, fn, "'%s' of a broadcast to a dynamic dim cannot be specialized",
                     ir_ops[nd->op].name);
            goto out;
        } else {
            if (dyn && nd->op == IR_OP_RESHAPE && !reshape_dims(fn, p, made, i, src[0], &a))
                goto out;
            if (nd->op == IR_OP_ARGSORT && a.sort.k < 0) /* a whole line of a dynamic axis */
                a.sort.k = src[0]->shape[a.sort.axis];
            if ((nd->op == IR_OP_ARGMAX || nd->op == IR_OP_ARGMIN) && ir_node_numel(src[0]) == 0) {
                /* as rlx_argmax refuses an empty axis while tracing */
                for (int d = 0; d < src[0]->rank; d++)
                    if ((a.red.mask >> d & 1) && src[0]->shape[d] == 0) {
                        ts_error(RLX_E_SHAPE, fn, "'%s' over axis %d of %s, which is bound empty", ir_ops[nd->op].name,
                                 d, ts_shape_str(src[0]));
                        goto out;
                    }
            }
            if (nd->op == IR_OP_GATHER && src[0]->shape[a.ax.axis] == 0 && ir_node_numel(src[1]) > 0) {
                /* rlx_gather's rule, even where the result is empty (no
                 * index is read then, so the run would not notice) */
                ts_error(RLX_E_SHAPE, fn, "'gather' cannot index the empty axis %d of %s", a.ax.axis,
                         ts_shape_str(src[0]));
                goto out;
            }
            for (int d = 0; nd->op == IR_OP_SLICE && d < nd->rank; d++) {
                if (nd->src[0]->shape[d] < 0 && !resolve_pieces(fn, p, made, i, d, &a))
                    goto out;
                if (nd->src[0]->shape[d] < 0 &&
                    !ts_dyn_resolve(src[0]->shape[d], &a.slice.start[d], &a.slice.step[d], &a.slice.len[d])) {
                    slice_error(fn, p, nd, d, src[0]);
                    goto out;
                }
            }
            made[i] = remake(fn, private_nodes, nd, nd->nsrc, src, &a);
        }
    made:
        if (src != srcbuf) {
            ir_free(src);
            src = srcbuf;
        }
        if (!made[i])
            goto out;
        /* a traced static dim must come out the same: anything else means
         * tracing used a dim the bindings changed */
        for (int d = 0; d < nd->rank; d++) {
            if (nd->shape[d] >= 0 && !(loose[i] >> d & 1) &&
                (made[i]->rank != nd->rank || made[i]->shape[d] != nd->shape[d])) {
                ts_error(RLX_E_SHAPE, fn, "'%s' was traced as %s and the bound inputs make it %s", ir_ops[nd->op].name,
                         ts_dims_str(nd->rank, nd->shape), ts_shape_str(made[i]));
                goto out;
            }
        }
    }
    ok = true;
out:
    if (src != srcbuf)
        ir_free(src);
    ir_free(loose);
    return ok;
}

static long find_input(const rlx_program *p, const char *name)
{
    for (long j = 0; j < p->ninputs; j++)
        if (strcmp(p->inputs[j]->attr.input.name, name) == 0)
            return j;
    return -1;
}

/* The memory plan is per spec (its offsets depend on the bound sizes), the
 * arena it indexes is the program's: a run takes an idle one (the
 * largest), grows it when its plan needs more (the old one goes back to
 * the buffer pool) and gives it back, so a program holds one arena per
 * run in flight at once, each the size of the largest plan it ran, not one
 * per spec; concurrent runs never share one. NULL when the plan needs none
 * or out of memory (the run then takes its own and reports the failure). */
static ir_storage *arena_take(rlx_program *p, size_t bytes)
{
    if (!bytes)
        return NULL;
    ir_storage *a = NULL;
    pthread_mutex_lock(&p->lock);
    int at = -1;
    for (int k = 0; k < p->narenas; k++)
        if (at < 0 || p->arenas[k]->bytes > p->arenas[at]->bytes)
            at = k;
    if (at >= 0) {
        a = p->arenas[at];
        p->arenas[at] = p->arenas[--p->narenas];
    }
    pthread_mutex_unlock(&p->lock);
    if (a && a->bytes >= bytes)
        return a;
    ir_storage_release(a); /* grown: the smaller one back to the pool */
    return bytes >= RT_BUFPOOL_MIN ? rt_bufpool_storage(bytes) : rt_storage_alloc(bytes, false);
}

static void arena_give(rlx_program *p, ir_storage *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&p->lock);
    /* (a run publishes nothing in the arena; a reference held elsewhere
     * would keep it from being reused) */
    if (p->narenas < ARENA_KEEP && atomic_load_explicit(&a->refs, memory_order_acquire) == 1) {
        p->arenas[p->narenas++] = a;
        a = NULL;
    }
    pthread_mutex_unlock(&p->lock);
    ir_storage_release(a);
}

rlx_status rlx_program_arenas(rlx_program *p, int *count, int64_t *bytes)
{
    if (!p) {
        ts_error(RLX_E_ARG, "rlx_program_arenas", "program is NULL");
        return RLX_E_ARG;
    }
    size_t b = 0;
    pthread_mutex_lock(&p->lock);
    for (int k = 0; k < p->narenas; k++)
        b += p->arenas[k]->bytes;
    if (count)
        *count = p->narenas;
    pthread_mutex_unlock(&p->lock);
    if (bytes)
        *bytes = (int64_t)b;
    return RLX_OK;
}

/* A run of spec s: binds[j] is the value bound to input j. */
/* Whether a donating run may write over input j's buffer: the run holds
 * the only reference to its binding (bound to no other input), a private
 * node (never hash-consed: no other thread can find it meanwhile) whose
 * buffer is librlx's own memory and shared with no other node. */
static bool donatable(const rlx_program *p, ir_node *const *binds, long j)
{
    const ir_node *n = binds[j];
    ir_storage *st = ir_node_storage(n);
    for (long o = 0; o < p->ninputs; o++)
        if (o != j && binds[o] == n)
            return false;
    return !n->consed && atomic_load(&n->refs) == 1 && st && atomic_load(&st->refs) == 1 && rt_storage_private(st) &&
           n->offset + ir_node_bytes(n) <= st->bytes;
}

static rlx_status run_plan(const char *fn, rlx_program *p, program_spec *s, ir_node **binds, bool donate,
                           rlx_tensor **outputs)
{
    for (long j = 0; j < p->ninputs; j++)
        if (!ir_node_storage(binds[j]) && ts_realize_nodes(fn, &binds[j], 1) != RLX_OK)
            return rlx_last_status();
    unsigned char dstack[64], *dn = NULL;
    if (donate && (dn = p->ninputs <= 64 ? dstack : ir_alloc((size_t)p->ninputs))) /* (none when out of memory) */
        for (long j = 0; j < p->ninputs; j++)
            dn[j] = donatable(p, binds, j);
    rt_view vstack[8], *v = p->nout <= 8 ? vstack : ir_alloc((size_t)p->nout * sizeof *v);
    if (!v) {
        if (dn != dstack)
            ir_free(dn);
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return RLX_E_NOMEM;
    }
    /* the pipeline runs the kept plan and hands the roots' views back */
    knob_opts o;
    ts_options_take(&o);
    o.simplify = o.plan_cache = false;
    rt_pipeline pl;
    memset(&pl, 0, sizeof pl);
    pl.rt.opts = &o;
    pl.plan = s->plan;
    pl.binds = binds;
    pl.donate = dn;
    pl.views = v;
    pl.arena = arena_take(p, rt_jit_plan_arena_bytes(s->plan));
    rlx_status st = rt_pipeline_realize(&pl, s->roots, p->nout);
    arena_give(p, pl.arena);
    ts_options_drop(&o);
    rt_ctx ctx = pl.rt; /* the materializations below add to its record */
    ts_stats_add_run(ctx.nodes_run, ctx.peak_bytes);
    ts_stats_note_arena(pl.stats.arena_bytes);
    for (int i = 0; i < p->nout && st == RLX_OK; i++) {
        /* a fresh tensor over the result (a root published as a view is
         * made contiguous, as realization does) */
        const ir_node *r = s->roots[i];
        if (!rt_view_is_contiguous(r, &v[i])) {
            rt_view c;
            st = rt_materialize(&ctx, r, &v[i], &c);
            ir_storage_release(v[i].st);
            v[i] = c;
            if (st != RLX_OK)
                break;
        }
        ir_node *nd = ir_make_buffer(v[i].st, (size_t)v[i].off * ir_dtype_size(r->dtype), r->dtype, r->rank, r->shape);
        if (!nd || !(outputs[i] = ts_wrap(nd))) {
            st = rt_fail(&ctx, RLX_E_NOMEM, "out of memory for output %d", i);
        }
    }
    for (int i = 0; i < p->nout; i++)
        ir_storage_release(v[i].st);
    if (v != vstack)
        ir_free(v);
    if (dn != dstack)
        ir_free(dn);
    if (st != RLX_OK)
        ts_error(st, fn, "%s", ctx.msg);
    return st;
}

/* A run without a plan: the graph instantiated over the bound values and
 * realized with whatever backend is selected. */
static rlx_status run_instantiated(const char *fn, rlx_program *p, ir_node **binds, rlx_tensor **outputs)
{
    ir_node **made = NULL, *roots[64], **r = roots;
    rlx_status st = RLX_OK;
    long count = p->count;
    if (!(made = ir_calloc((size_t)(count ? count : 1), sizeof *made)))
        goto oom;
    for (long j = 0; j < p->ninputs; j++)
        made[ir_map_get(&p->pos, p->inputs[j])] = ir_retain(binds[j]);
    if (!instantiate(fn, p, false, made)) {
        st = rlx_last_status();
        goto out;
    }
    if (p->nout > 64 && !(r = ir_alloc((size_t)p->nout * sizeof *r)))
        goto oom;
    for (int i = 0; i < p->nout; i++)
        r[i] = made[ir_map_get(&p->pos, p->outputs[i])];
    st = ts_realize_nodes(fn, r, p->nout);
    for (int i = 0; i < p->nout && st == RLX_OK; i++)
        outputs[i] = ts_wrap(ir_retain(r[i]));
    goto out;
oom:
    ts_error(RLX_E_NOMEM, fn, "out of memory");
    st = RLX_E_NOMEM;
out:
    if (r != roots)
        ir_free(r);
    for (long i = 0; made && i < count; i++)
        ir_release(made[i]);
    ir_free(made);
    return st;
}

/* Checks binding b against input in: its dtype, and its dims where in's
 * are static. */
static rlx_status check_binding(const char *fn, const char *name, const ir_node *in, const ir_node *v)
{
    if (v->dtype != in->dtype) {
        ts_error(RLX_E_DTYPE, fn, "input '%s' is %s, bound to %s", name, rlx_dtype_name(in->dtype),
                 rlx_dtype_name(v->dtype));
        return RLX_E_DTYPE;
    }
    bool fits = v->rank == in->rank;
    for (int d = 0; d < in->rank && fits; d++)
        fits = in->shape[d] < 0 || in->shape[d] == v->shape[d];
    if (!fits) {
        ts_error(RLX_E_SHAPE, fn, "input '%s' is %s (-1: any size), bound to %s", name,
                 ts_dims_str(in->rank, in->shape), ts_shape_str(v));
        return RLX_E_SHAPE;
    }
    return RLX_OK;
}

/* The input and axis of key position k. */
static const char *key_place(const rlx_program *p, long k, int *axis)
{
    long j = 0;
    while (k >= p->inputs[j]->rank)
        k -= p->inputs[j++]->rank;
    *axis = (int)k;
    return p->inputs[j]->attr.input.name;
}

/* Every dim of one symbol is bound to one size. */
static rlx_status check_symbols(const char *fn, const rlx_program *p, const int64_t *key)
{
    for (long k = 0; k < p->keylen; k++) {
        if (p->sym[k] > -2)
            continue;
        for (long f = 0; f < k; f++) {
            if (p->sym[f] != p->sym[k])
                continue;
            if (key[f] != key[k]) {
                int af, ak;
                const char *nf = key_place(p, f, &af), *nk = key_place(p, k, &ak);
                ts_error(RLX_E_SHAPE, fn,
                         "symbol %lld is bound to %lld by input '%s' (axis %d) and to %lld by input '%s' (axis %d)",
                         (long long)p->sym[k], (long long)key[f], nf, af, (long long)key[k], nk, ak);
                return RLX_E_SHAPE;
            }
            break;
        }
    }
    return RLX_OK;
}

static rlx_status program_run(const char *fn, rlx_program *p, const rlx_binding *inputs, int nin, bool donate,
                              rlx_tensor **outputs)
{
    if (!p || !outputs || nin < 0 || (nin > 0 && !inputs)) {
        ts_error(RLX_E_ARG, fn, "program, outputs or inputs missing (nin = %d)", nin);
        return RLX_E_ARG;
    }
    for (int i = 0; i < p->nout; i++)
        outputs[i] = NULL;
    ir_node *bstack[8], **binds = p->ninputs <= 8 ? bstack : ir_alloc((size_t)p->ninputs * sizeof *binds);
    int64_t kstack[32], *key = p->keylen <= 32 ? kstack : ir_alloc((size_t)p->keylen * sizeof *key);
    rlx_status st = RLX_OK;
    if (!binds || !key) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        st = RLX_E_NOMEM;
        goto out;
    }
    memset(binds, 0, (size_t)p->ninputs * sizeof *binds);
    for (int b = 0; b < nin && st == RLX_OK; b++) {
        long j = inputs[b].name ? find_input(p, inputs[b].name) : -1;
        if (j < 0) {
            ts_error(RLX_E_ARG, fn, "binding %d names no input of the program ('%s')", b,
                     inputs[b].name ? inputs[b].name : "(null)");
            st = RLX_E_ARG;
        } else if (ts_null(fn, "binding value", inputs[b].value)) {
            st = rlx_last_status();
        } else {
            st = check_binding(fn, inputs[b].name, p->inputs[j], ts_node(inputs[b].value));
            binds[j] = ts_node(inputs[b].value);
        }
    }
    for (long j = 0; j < p->ninputs && st == RLX_OK; j++) {
        if (!binds[j]) {
            ts_error(RLX_E_ARG, fn, "input '%s' is not bound", p->inputs[j]->attr.input.name);
            st = RLX_E_ARG;
        }
    }
    if (st != RLX_OK)
        goto out;
    for (long j = 0, k = 0; j < p->ninputs; k += binds[j]->rank, j++)
        memcpy(key + k, binds[j]->shape, (size_t)binds[j]->rank * sizeof *key);
    if ((st = check_symbols(fn, p, key)) != RLX_OK)
        goto out;
    if (p->jit) {
        program_spec *s = spec_for(fn, p, key);
        if (!s) {
            st = rlx_last_status();
            goto out;
        }
        st = run_plan(fn, p, s, binds, donate, outputs);
        spec_unref(s);
    } else {
        st = run_instantiated(fn, p, binds, outputs);
    }
out:
    if (binds && binds != bstack)
        ir_free(binds);
    if (key && key != kstack)
        ir_free(key);
    return st;
}

rlx_status rlx_program_run(rlx_program *p, const rlx_binding *inputs, int nin, rlx_tensor **outputs)
{
    return program_run("rlx_program_run", p, inputs, nin, false, outputs);
}

rlx_status rlx_program_run_donate(rlx_program *p, const rlx_binding *inputs, int nin, rlx_tensor **outputs)
{
    const char *fn = "rlx_program_run_donate";
    if (nin < 0 || (nin > 0 && !inputs)) {
        ts_error(RLX_E_ARG, fn, "inputs missing (nin = %d)", nin);
        return RLX_E_ARG;
    }
    /* a tensor bound to k inputs must come with k references: releasing
     * more than the caller holds would free it under another owner */
    for (int b = 0; b < nin; b++) {
        const ir_node *n = inputs[b].value ? ts_node(inputs[b].value) : NULL;
        long k = 0;
        for (int o = 0; n && o < nin; o++)
            k += inputs[o].value && ts_node(inputs[o].value) == n;
        if (n && atomic_load(&n->refs) < k) {
            ts_error(RLX_E_ARG, fn, "binding %d ('%s') passes a tensor bound to %ld inputs with %ld reference(s); "
                     "a donating run takes one per binding (rlx_retain)", b, inputs[b].name ? inputs[b].name : "(null)",
                     k, (long)atomic_load(&n->refs));
            for (int i = 0; p && outputs && i < p->nout; i++)
                outputs[i] = NULL;
            return RLX_E_ARG;
        }
    }
    rlx_status st = program_run(fn, p, inputs, nin, true, outputs);
    for (int b = 0; b < nin; b++)
        rlx_release(inputs[b].value);
    return st;
}
