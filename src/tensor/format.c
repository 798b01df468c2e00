/*
 * format.c — rlx_to_string: NumPy-like text of a realized tensor, e.g.
 *   tensor([[1, 2],
 *           [3, 4]], shape=[2, 2], dtype=i32)
 * Past 1000 elements each axis shows its first and last 3 entries.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt.h"
#include "tensor/ts.h"

#define SUMMARY_THRESHOLD 1000
#define SUMMARY_EDGE 3

typedef struct {
    char *buf;
    size_t len, cap;
    bool oom;
} strbuf;

static void put(strbuf *s, const char *fmt, ...)
{
    if (s->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(s->buf ? s->buf + s->len : NULL, s->cap - s->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            s->oom = true;
            return;
        }
        if ((size_t)n < s->cap - s->len) {
            s->len += (size_t)n;
            return;
        }
        size_t cap = (s->cap + (size_t)n + 1) * 2;
        char *b = ir_realloc(s->buf, cap);
        if (!b) {
            s->oom = true;
            return;
        }
        s->buf = b;
        s->cap = cap;
    }
}

/* Significant digits to print v of float dtype dt with: 15 and 7 for f64
 * and f32 (NumPy's defaults), the fewest that read back to the same value
 * for f16 and bf16. */
static int digits(double v, rlx_dtype dt)
{
    if (dt == RLX_F64 || dt == RLX_F32)
        return dt == RLX_F64 ? 15 : 7;
    char buf[32];
    for (int p = 1; p < 5; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, v);
        if (ir_cast_const(strtod(buf, NULL), dt) == v)
            return p;
    }
    return 5;
}

static void put_float(strbuf *s, double v, rlx_dtype dt)
{
    if (v != v)
        put(s, "nan");
    else if (v > -1e16 && v < 1e16 && v == (double)(int64_t)v)
        put(s, "%.0f.", v); /* NumPy writes integral floats as "2." */
    else
        put(s, "%.*g", digits(v, dt), v);
}

static void put_value(strbuf *s, const void *p, rlx_dtype dt, int64_t i)
{
    double v;
    switch (dt) {
    case RLX_C64:
    case RLX_C128: { /* NumPy's "1.+2.j", "0.5-1.5j" (parts printed as f32 or f64) */
        rt_cplx z = rt_ld_c(p, dt, i);
        put_float(s, z.re, ir_complex_part(dt));
        put(s, "%s", signbit(z.im) && z.im == z.im ? "-" : "+");
        put_float(s, fabs(z.im), ir_complex_part(dt));
        put(s, "j");
        return;
    }
    case RLX_BOOL: put(s, "%s", rt_ld_i(p, dt, i) ? "true" : "false"); return;
    case RLX_F32:
    case RLX_F64:
    case RLX_F16:
    case RLX_BF16:
        v = rt_ld_f(p, dt, i);
        put_float(s, v, dt);
        return;
    default: put(s, "%lld", (long long)rt_ld_i(p, dt, i)); return;
    }
}

typedef struct {
    const ir_node *n;
    const void *data;
    bool summarize;
    int indent;
} fmt_ctx;

static void put_axis(strbuf *s, const fmt_ctx *c, int axis, int64_t base)
{
    const ir_node *n = c->n;
    int64_t len = n->shape[axis], stride = 1;
    for (int d = axis + 1; d < n->rank; d++)
        stride *= n->shape[d];
    put(s, "[");
    for (int64_t i = 0; i < len; i++) {
        if (c->summarize && len > 2 * SUMMARY_EDGE && i == SUMMARY_EDGE) {
            put(s, axis == n->rank - 1 ? "..., " : "...,\n%*s", axis == n->rank - 1 ? 0 : c->indent + axis + 1, "");
            i = len - SUMMARY_EDGE;
        }
        if (axis == n->rank - 1)
            put_value(s, c->data, n->dtype, base + i);
        else
            put_axis(s, c, axis + 1, base + i * stride);
        if (i + 1 < len) {
            if (axis == n->rank - 1)
                put(s, ", ");
            else
                put(s, ",%.*s\n%*s", n->rank - axis - 2, "\n\n\n\n\n\n\n\n", c->indent + axis + 1, "");
        }
    }
    put(s, "]");
}

char *rlx_to_string(rlx_tensor *t)
{
    const char *fn = "rlx_to_string";
    if (ts_null(fn, "t", t))
        return NULL;
    ir_node *n = ts_node(t);
    if (ts_realize_nodes(fn, &n, 1) != RLX_OK)
        return NULL;
    strbuf s = {0};
    fmt_ctx c = {n, (const char *)ir_node_storage(n)->data + n->offset,
                 ir_node_numel(n) > SUMMARY_THRESHOLD || ir_node_numel(n) == 0, (int)strlen("tensor(")};
    put(&s, "tensor(");
    if (n->rank == 0)
        put_value(&s, c.data, n->dtype, 0);
    else
        put_axis(&s, &c, 0, 0);
    put(&s, ", shape=[");
    for (int i = 0; i < n->rank; i++)
        put(&s, i ? ", %lld" : "%lld", (long long)n->shape[i]);
    put(&s, "], dtype=%s)", rlx_dtype_name(n->dtype));
    if (s.oom) {
        ir_free(s.buf);
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return NULL;
    }
    return s.buf; /* ir_alloc is malloc: the caller frees with free() */
}
