/*
 * program.c — compiled programs: a traced graph with named inputs, run
 * again on new bindings. Inputs must have static shapes for now; a dynamic
 * (-1) dim is refused at compile time with RLX_E_UNSUPPORTED.
 *
 * With the JIT backend (at compile time) the graph is instantiated once
 * over placeholder leaves, one per input, and prepared as a JIT plan
 * (runtime/jit_exec.c): schedule, memory plan and compiled kernels. A run
 * checks the bindings, points the placeholders at the bound payloads, runs
 * the kernels and wraps the results as fresh tensors: no retracing, no
 * rescheduling. With the reference backend a run re-instantiates the graph
 * over the bound values (hash-consing makes that cheap: it rebuilds node
 * identities, it does not re-run user code) and realizes it.
 */
#include <string.h>

#include "runtime/jit_exec.h"
#include "tensor/control.h"
#include "tensor/ts.h"

struct rlx_program {
    int nout;
    ir_node **outputs; /* owns */
    long ninputs;
    ir_node **inputs;  /* borrows: kept alive through outputs */
    /* JIT: the outputs instantiated over slots[j] (a placeholder for
     * inputs[j]), and their plan */
    rt_jit_plan *plan;
    ir_node **slots; /* owns */
    ir_node **roots; /* owns */
};

static void program_free(rlx_program *p)
{
    if (!p)
        return;
    rt_jit_plan_free(p->plan);
    for (int i = 0; i < p->nout; i++) {
        ir_release(p->outputs ? p->outputs[i] : NULL);
        ir_release(p->roots ? p->roots[i] : NULL);
    }
    for (long j = 0; p->slots && j < p->ninputs; j++)
        ir_release(p->slots[j]);
    ir_free(p->slots);
    ir_free(p->roots);
    ir_free(p->outputs);
    ir_free(p->inputs);
    ir_free(p);
}

void rlx_program_free(rlx_program *p) { program_free(p); }

static bool instantiate(const char *fn, ir_node **order, long count, ir_map *pos, ir_node **made);

/* The JIT plan of p: its outputs instantiated over placeholders. */
static bool prepare(const char *fn, rlx_program *p)
{
    /* the placeholders' payload: never read, a run reads the bindings */
    static char nothing[64];
    ir_node **order = NULL, **made = NULL;
    ir_map pos = {0};
    ir_storage *st = NULL;
    bool ok = false;
    long count = ir_postorder(p->outputs, p->nout, NULL, NULL, &order);
    p->slots = ir_calloc((size_t)(p->ninputs ? p->ninputs : 1), sizeof *p->slots);
    p->roots = ir_calloc((size_t)p->nout, sizeof *p->roots);
    if (count < 0 || !p->slots || !p->roots || !(made = ir_calloc((size_t)(count ? count : 1), sizeof *made)) ||
        !(st = ir_storage_new(nothing, 0, NULL, NULL)))
        goto oom;
    for (long i = 0; i < count; i++)
        if (ir_map_put(&pos, order[i], i) < 0)
            goto oom;
    for (long j = 0; j < p->ninputs; j++) {
        const ir_node *in = p->inputs[j];
        if (!(p->slots[j] = ir_make_buffer(st, 0, in->dtype, in->rank, in->shape)))
            goto oom;
        made[ir_map_get(&pos, in)] = ir_retain(p->slots[j]);
    }
    if (!instantiate(fn, order, count, &pos, made))
        goto out;
    for (int i = 0; i < p->nout; i++)
        p->roots[i] = ir_retain(made[ir_map_get(&pos, p->outputs[i])]);
    rt_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    rt_jit_stats js = {0};
    rlx_status rs = rt_jit_plan_build(p->roots, p->nout, p->slots, (int)p->ninputs, rlx_get_num_threads(), &ctx, &js,
                                      &p->plan);
    ts_stats_add_jit(js.kernels_compiled, js.cache_hits, js.cache_misses, js.compile_seconds);
    if (rs != RLX_OK) {
        ts_error(rs, fn, "%s", ctx.msg);
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
    ir_free(order);
    ir_map_free(&pos);
    ir_storage_release(st);
    return ok;
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
    if (!p || !(p->outputs = ir_calloc((size_t)n, sizeof *p->outputs)))
        goto oom;
    p->nout = n;
    for (int i = 0; i < n; i++)
        p->outputs[i] = ir_retain(ts_node(outputs[i]));
    long count = ir_postorder(p->outputs, n, NULL, NULL, &order);
    if (count < 0 || !(p->inputs = ir_alloc((size_t)(count ? count : 1) * sizeof *p->inputs)))
        goto oom;
    for (long i = 0; i < count; i++) {
        ir_node *nd = order[i];
        if (nd->op != IR_OP_INPUT)
            continue;
        for (int d = 0; d < nd->rank; d++) {
            if (nd->shape[d] < 0) {
                ts_error(RLX_E_UNSUPPORTED, fn, "input '%s' has a dynamic dim; only static shapes compile for now",
                         nd->attr.input.name);
                ir_free(order);
                program_free(p);
                return NULL;
            }
        }
        for (long j = 0; j < p->ninputs; j++) {
            if (strcmp(p->inputs[j]->attr.input.name, nd->attr.input.name) == 0) {
                ts_error(RLX_E_ARG, fn, "two inputs are named '%s' with different types", nd->attr.input.name);
                ir_free(order);
                program_free(p);
                return NULL;
            }
        }
        p->inputs[p->ninputs++] = nd;
    }
    ir_free(order);
    if (ts_backend_is_jit() && !prepare(fn, p)) {
        program_free(p);
        return NULL;
    }
    return p;
oom:
    ir_free(order);
    program_free(p);
    ts_error(RLX_E_NOMEM, fn, "out of memory");
    return NULL;
}

/* Rebuilds the nodes of order[] with inputs replaced by their bindings;
 * made[i] gets the new node of order[i] (a new reference). */
static bool instantiate(const char *fn, ir_node **order, long count, ir_map *pos, ir_node **made)
{
    ir_node *srcbuf[8], **src = srcbuf;
    for (long i = 0; i < count; i++) {
        ir_node *nd = order[i];
        if (made[i])
            continue; /* an input, bound already */
        if (nd->nsrc == 0 || ir_node_storage(nd)) {
            made[i] = ir_retain(nd);
            continue;
        }
        if (nd->nsrc > 8 && !(src = ir_alloc((size_t)nd->nsrc * sizeof *src))) {
            ts_error(RLX_E_NOMEM, fn, "out of memory");
            return false;
        }
        for (int s = 0; s < nd->nsrc; s++)
            src[s] = made[ir_map_get(pos, nd->src[s])];
        made[i] = ts_make(fn, nd->op, nd->nsrc, src, &nd->attr);
        if (src != srcbuf) {
            ir_free(src);
            src = srcbuf;
        }
        if (!made[i])
            return false;
    }
    return true;
}

static long find_input(const rlx_program *p, const char *name)
{
    for (long j = 0; j < p->ninputs; j++)
        if (strcmp(p->inputs[j]->attr.input.name, name) == 0)
            return j;
    return -1;
}

/* A run of the JIT plan: binds[j] is the value bound to input j. */
static rlx_status run_plan(const char *fn, rlx_program *p, ir_node **binds, rlx_tensor **outputs)
{
    for (long j = 0; j < p->ninputs; j++)
        if (!ir_node_storage(binds[j]) && ts_realize_nodes(fn, &binds[j], 1) != RLX_OK)
            return rlx_last_status();
    rt_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    rt_jit_stats js = {0};
    rt_view vstack[8], *v = p->nout <= 8 ? vstack : ir_alloc((size_t)p->nout * sizeof *v);
    if (!v) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return RLX_E_NOMEM;
    }
    rlx_status st = rt_jit_plan_run(p->plan, binds, rlx_get_num_threads(), &ctx, &js, v);
    ts_stats_add_run(ctx.nodes_run, ctx.peak_bytes);
    ts_stats_note_arena(js.arena_bytes);
    for (int i = 0; i < p->nout && st == RLX_OK; i++) {
        /* a fresh tensor over the result (a root published as a view is
         * made contiguous, as realization does) */
        const ir_node *r = p->roots[i];
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
    if (st != RLX_OK)
        ts_error(st, fn, "%s", ctx.msg);
    return st;
}

rlx_status rlx_program_run(rlx_program *p, const rlx_binding *inputs, int nin, rlx_tensor **outputs)
{
    const char *fn = "rlx_program_run";
    if (!p || !outputs || nin < 0 || (nin > 0 && !inputs)) {
        ts_error(RLX_E_ARG, fn, "program, outputs or inputs missing (nin = %d)", nin);
        return RLX_E_ARG;
    }
    for (int i = 0; i < p->nout; i++)
        outputs[i] = NULL;
    for (int b = 0; b < nin; b++) {
        long j = inputs[b].name ? find_input(p, inputs[b].name) : -1;
        ir_node *in = j >= 0 ? p->inputs[j] : NULL;
        if (!in) {
            ts_error(RLX_E_ARG, fn, "binding %d names no input of the program ('%s')", b,
                     inputs[b].name ? inputs[b].name : "(null)");
            return RLX_E_ARG;
        }
        if (ts_null(fn, "binding value", inputs[b].value))
            return rlx_last_status();
        ir_node *v = ts_node(inputs[b].value);
        if (v->dtype != in->dtype) {
            ts_error(RLX_E_DTYPE, fn, "input '%s' is %s, bound to %s", inputs[b].name, rlx_dtype_name(in->dtype),
                     rlx_dtype_name(v->dtype));
            return RLX_E_DTYPE;
        }
        if (!ir_shape_eq(v->rank, v->shape, in->rank, in->shape)) {
            ts_error(RLX_E_SHAPE, fn, "input '%s' is %s, bound to %s", inputs[b].name, ts_shape_str(in),
                     ts_shape_str(v));
            return RLX_E_SHAPE;
        }
    }
    if (p->plan) {
        ir_node *bstack[8], **binds = p->ninputs <= 8 ? bstack : ir_alloc((size_t)p->ninputs * sizeof *binds);
        if (!binds) {
            ts_error(RLX_E_NOMEM, fn, "out of memory");
            return RLX_E_NOMEM;
        }
        memset(binds, 0, (size_t)p->ninputs * sizeof *binds);
        for (int b = 0; b < nin; b++)
            binds[find_input(p, inputs[b].name)] = ts_node(inputs[b].value);
        rlx_status st = RLX_OK;
        for (long j = 0; j < p->ninputs && st == RLX_OK; j++) {
            if (!binds[j]) {
                ts_error(RLX_E_ARG, fn, "input '%s' is not bound", p->inputs[j]->attr.input.name);
                st = RLX_E_ARG;
            }
        }
        if (st == RLX_OK)
            st = run_plan(fn, p, binds, outputs);
        if (binds != bstack)
            ir_free(binds);
        return st;
    }
    ir_node **order = NULL, **made = NULL;
    ir_map pos = {0};
    rlx_status st = RLX_OK;
    long count = ir_postorder(p->outputs, p->nout, NULL, NULL, &order);
    if (count < 0 || !(made = ir_calloc((size_t)(count ? count : 1), sizeof *made)))
        goto oom;
    for (long i = 0; i < count; i++)
        if (ir_map_put(&pos, order[i], i) < 0)
            goto oom;
    for (int b = 0; b < nin; b++) {
        long i = ir_map_get(&pos, p->inputs[find_input(p, inputs[b].name)]);
        ir_release(made[i]);
        made[i] = ir_retain(ts_node(inputs[b].value));
    }
    for (long j = 0; j < p->ninputs; j++) {
        if (!made[ir_map_get(&pos, p->inputs[j])]) {
            ts_error(RLX_E_ARG, fn, "input '%s' is not bound", p->inputs[j]->attr.input.name);
            st = RLX_E_ARG;
            goto out;
        }
    }
    if (!instantiate(fn, order, count, &pos, made)) {
        st = rlx_last_status();
        goto out;
    }
    ir_node *roots[64], **r = p->nout <= 64 ? roots : ir_alloc((size_t)p->nout * sizeof *r);
    if (!r)
        goto oom;
    for (int i = 0; i < p->nout; i++)
        r[i] = made[ir_map_get(&pos, p->outputs[i])];
    st = ts_realize_nodes(fn, r, p->nout);
    for (int i = 0; i < p->nout && st == RLX_OK; i++)
        outputs[i] = ts_wrap(ir_retain(r[i]));
    if (r != roots)
        ir_free(r);
    goto out;
oom:
    ts_error(RLX_E_NOMEM, fn, "out of memory");
    st = RLX_E_NOMEM;
out:
    for (long i = 0; made && i < count; i++)
        ir_release(made[i]);
    ir_free(made);
    ir_free(order);
    ir_map_free(&pos);
    return st;
}
