/*
 * realize.c — rlx_realize and the readers. Realization snapshots the
 * options (tensor/options.c), hands the nodes to the one pipeline
 * (runtime/exec/pipeline.c) and turns a failure into the caller's error.
 *
 * The JIT realizes a simplified copy of the graph (src/passes/simplify.c)
 * and publishes each simplified root's payload onto the original root,
 * which is what users hold. The reference backend (RLX_BACKEND=ref) runs
 * the graph as built: it is the oracle the JIT, and so the simplifier, is
 * checked against.
 */
#include <string.h>

#include "passes/passes.h"
#include "runtime/exec/pipeline.h"
#include "runtime/rt.h"
#include "tensor/control.h"
#include "tensor/ts.h"

bool ts_simp_fold(ir_op op, const ir_attrs *attr, rlx_dtype dtype, int nsrc, ir_node *const *src, double *value)
{
    /* One element through the reference evaluator: a rank-0 copy of the
     * node over one-element views of the constants. */
    ir_node fake, *srcs[3];
    ir_storage in_st[3];
    double in_buf[3];
    rt_view in[3], out;
    if (nsrc < 1 || nsrc > 3)
        return false;
    memset(&fake, 0, sizeof fake);
    memset(in_st, 0, sizeof in_st);
    memset(in, 0, sizeof in);
    for (int k = 0; k < nsrc; k++) {
        srcs[k] = src[k];
        rt_st_f(&in_buf[k], src[k]->dtype, 0, src[k]->attr.cst.value);
        in_st[k].data = &in_buf[k];
        in[k].st = &in_st[k];
    }
    fake.op = op;
    fake.dtype = dtype;
    fake.nsrc = nsrc;
    fake.src = srcs;
    fake.attr = *attr;
    rt_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    if (rt_eval_elementwise(&ctx, &fake, in, &out) != RLX_OK)
        return false; /* out of memory: the op just stays */
    bool ok = true;
    if (ir_dtype_is_complex(dtype)) { /* a CONST of c64 holds a real value */
        rt_cplx z = rt_ld_c(out.st->data, dtype, 0);
        *value = z.re;
        ok = z.im == 0;
    } else if (ir_dtype_is_float(dtype)) {
        *value = rt_ld_f(out.st->data, dtype, 0);
    } else {
        int64_t v = rt_ld_i(out.st->data, dtype, 0);
        double d = (double)v;
        ok = d >= -0x1p63 && d < 0x1p63 && (int64_t)d == v; /* a CONST holds a double */
        *value = d;
    }
    ir_storage_release(out.st);
    return ok;
}

rlx_status ts_realize_nodes(const char *fn, ir_node *const *nodes, int n)
{
    bool all = true;
    for (int i = 0; i < n && all; i++)
        all = ir_node_storage(nodes[i]) != NULL;
    if (all)
        return RLX_OK;
    knob_opts o;
    ts_options_take(&o);
    rt_pipeline c;
    memset(&c, 0, sizeof c);
    c.rt.opts = &o;
    c.ref = !ts_backend_is_jit(); /* RLX_BACKEND=ref: the oracle */
    c.fold = ts_simp_fold;
    rlx_status st = rt_pipeline_realize(&c, nodes, n);
    ts_options_drop(&o);
    if (!c.ref) {
        ts_stats_add_jit(c.stats.kernels_compiled, c.stats.cache_hits, c.stats.cache_misses, c.stats.compile_seconds);
        ts_stats_note_arena(c.stats.arena_bytes);
    }
    ts_stats_add_run(c.rt.nodes_run, c.rt.peak_bytes);
    if (st != RLX_OK)
        ts_error(st, fn, "%s", c.rt.msg);
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
    if (ir_dtype_is_complex(n->dtype)) {
        ts_error(RLX_E_DTYPE, fn, "%s has two parts: read its (re, im) %s pairs with rlx_read, or take "
                                  "rlx_real/rlx_imag first", ir_dtype_name(n->dtype),
                 ir_dtype_name(ir_complex_part(n->dtype)));
        return RLX_E_DTYPE;
    }
    if (count < numel || (numel && !dst)) {
        ts_error(RLX_E_ARG, fn, "dst holds %zu values, %s needs %zu", dst ? count : 0, ts_shape_str(n), numel);
        return RLX_E_ARG;
    }
    if (n->dtype == to) { /* (no conversion: a decode step's 32,000 logits in one copy) */
        if (numel)
            memcpy(dst, p, numel * ir_dtype_size(to));
        return RLX_OK;
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
    if (ir_dtype_is_complex(ts_node(t)->dtype)) {
        rlx_dtype dt = ts_node(t)->dtype;
        ts_error(RLX_E_DTYPE, fn, "a %s value has two parts: read its (re, im) %s pair with rlx_read",
                 ir_dtype_name(dt), ir_dtype_name(ir_complex_part(dt)));
        return RLX_E_DTYPE;
    }
    const char *p = payload(fn, t);
    if (!p)
        return rlx_last_status();
    *out = rt_ld_f(p, ts_node(t)->dtype, 0);
    return RLX_OK;
}
