/*
 * realize.c — rlx_realize and the readers. Realization hands the nodes to
 * the backend (today the reference evaluator; RLX_BACKEND=ref selects it
 * explicitly) and turns a runtime failure into the caller's error.
 */
#include <string.h>

#include "runtime/jit_exec.h"
#include "runtime/rt.h"
#include "tensor/control.h"
#include "tensor/ts.h"

rlx_status ts_realize_nodes(const char *fn, ir_node *const *nodes, int n)
{
    bool all = true;
    for (int i = 0; i < n && all; i++)
        all = ir_node_storage(nodes[i]) != NULL;
    if (all)
        return RLX_OK;
    rt_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    rlx_status st;
    if (ts_backend_is_jit()) { /* opt-in until the JIT covers every op */
        rt_jit_stats js = {0};
        st = rt_jit_realize(nodes, n, rlx_get_num_threads(), &ctx, &js);
        ts_stats_add_jit(js.kernels_compiled, js.cache_hits, js.cache_misses, js.compile_seconds);
    } else {
        st = rt_ref_realize(nodes, n, &ctx);
    }
    ts_stats_add_run(ctx.nodes_run, ctx.peak_bytes);
    if (st != RLX_OK)
        ts_error(st, fn, "%s", ctx.msg);
    return st;
}

rlx_status rlx_realize(rlx_tensor *t)
{
    if (ts_null("rlx_realize", "t", t))
        return rlx_last_status();
    ir_node *n = ts_node(t);
    return ts_realize_nodes("rlx_realize", &n, 1);
}

rlx_status rlx_realize_many(rlx_tensor *const *ts, int n)
{
    const char *fn = "rlx_realize_many";
    if (n < 0 || (n > 0 && !ts)) {
        ts_error(RLX_E_ARG, fn, "n is %d and ts is %s", n, ts ? "set" : "NULL");
        return RLX_E_ARG;
    }
    for (int i = 0; i < n; i++) {
        if (!ts[i]) {
            if (rlx_last_status() == RLX_OK)
                ts_error(RLX_E_ARG, fn, "ts[%d] is NULL", i);
            return rlx_last_status();
        }
    }
    return ts_realize_nodes(fn, (ir_node *const *)ts, n);
}

/* Realizes t and gives its contiguous payload; NULL with an error. */
static const char *payload(const char *fn, rlx_tensor *t)
{
    if (ts_null(fn, "t", t))
        return NULL;
    ir_node *n = ts_node(t);
    if (ts_realize_nodes(fn, &n, 1) != RLX_OK)
        return NULL;
    ir_storage *st = ir_node_storage(n);
    return (const char *)st->data + n->offset;
}

rlx_status rlx_read(rlx_tensor *t, void *dst, size_t dst_bytes)
{
    const char *fn = "rlx_read";
    const char *p = payload(fn, t);
    if (!p)
        return rlx_last_status();
    size_t need = ir_node_bytes(ts_node(t));
    if (dst_bytes < need || (need && !dst)) {
        ts_error(RLX_E_ARG, fn, "dst holds %zu bytes, %s of %s needs %zu", dst ? dst_bytes : 0,
                 ts_shape_str(ts_node(t)), rlx_dtype_name(ts_node(t)->dtype), need);
        return RLX_E_ARG;
    }
    if (need)
        memcpy(dst, p, need);
    return RLX_OK;
}

static rlx_status read_converted(const char *fn, rlx_tensor *t, void *dst, size_t count, rlx_dtype to)
{
    const char *p = payload(fn, t);
    if (!p)
        return rlx_last_status();
    ir_node *n = ts_node(t);
    size_t numel = (size_t)ir_node_numel(n);
    if (count < numel || (numel && !dst)) {
        ts_error(RLX_E_ARG, fn, "dst holds %zu values, %s needs %zu", dst ? count : 0, ts_shape_str(n), numel);
        return RLX_E_ARG;
    }
    for (size_t i = 0; i < numel; i++)
        rt_st_f(dst, to, (int64_t)i, rt_ld_f(p, n->dtype, (int64_t)i));
    return RLX_OK;
}

rlx_status rlx_read_f32(rlx_tensor *t, float *dst, size_t count)
{
    return read_converted("rlx_read_f32", t, dst, count, RLX_F32);
}

rlx_status rlx_read_f64(rlx_tensor *t, double *dst, size_t count)
{
    return read_converted("rlx_read_f64", t, dst, count, RLX_F64);
}

const void *rlx_data(rlx_tensor *t) { return payload("rlx_data", t); }

rlx_status rlx_item(rlx_tensor *t, double *out)
{
    const char *fn = "rlx_item";
    if (ts_null(fn, "t", t))
        return rlx_last_status();
    if (!out) {
        ts_error(RLX_E_ARG, fn, "out is NULL");
        return RLX_E_ARG;
    }
    if (ir_node_numel(ts_node(t)) != 1) {
        ts_error(RLX_E_SHAPE, fn, "tensor of shape %s has %lld elements, not 1", ts_shape_str(ts_node(t)),
                 (long long)ir_node_numel(ts_node(t)));
        return RLX_E_SHAPE;
    }
    const char *p = payload(fn, t);
    if (!p)
        return rlx_last_status();
    *out = rt_ld_f(p, ts_node(t)->dtype, 0);
    return RLX_OK;
}
