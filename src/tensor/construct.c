/* construct.c — leaves: copied and borrowed data, constants, iota, random. */
#include <math.h>
#include <string.h>

#include "runtime/rt.h"
#include "tensor/ts.h"

static rlx_tensor *wrap_storage(const char *fn, ir_storage *st, rlx_dtype dt, int rank, const int64_t *shape)
{
    if (!st) {
        ts_error(RLX_E_NOMEM, fn, "out of memory for %s of %s", ts_dims_str(rank, shape), rlx_dtype_name(dt));
        return NULL;
    }
    ir_node *n = ir_make_buffer(st, 0, dt, rank, shape);
    ir_storage_release(st);
    if (!n)
        ts_error(RLX_E_NOMEM, fn, "out of memory");
    return ts_wrap(n);
}

static bool check_leaf(const char *fn, rlx_dtype dt, int rank, const int64_t *shape)
{
    return ts_check_dtype(fn, (int)dt) && ts_check_shape(fn, dt, rank, shape, false);
}

/* A user payload: a valid type, and data unless the tensor is empty. */
static bool check_payload(const char *fn, rlx_dtype dt, int rank, const int64_t *shape, const void *data,
                          size_t *bytes)
{
    if (!check_leaf(fn, dt, rank, shape))
        return false;
    *bytes = (size_t)ir_numel(rank, shape) * ir_dtype_size(dt);
    if (!data && *bytes) {
        ts_error(RLX_E_ARG, fn, "data is NULL for %s of %s", ts_dims_str(rank, shape), rlx_dtype_name(dt));
        return false;
    }
    return true;
}

rlx_tensor *rlx_from_data(rlx_dtype dt, int rank, const int64_t *shape, const void *data)
{
    const char *fn = "rlx_from_data";
    size_t bytes;
    if (!check_payload(fn, dt, rank, shape, data, &bytes))
        return NULL;
    ir_storage *st = rt_storage_alloc(bytes, false);
    if (st && bytes)
        memcpy(st->data, data, bytes);
    return wrap_storage(fn, st, dt, rank, shape);
}

rlx_tensor *rlx_from_blob(rlx_dtype dt, int rank, const int64_t *shape, void *data, void (*deleter)(void *ctx),
                          void *ctx)
{
    const char *fn = "rlx_from_blob";
    size_t bytes;
    if (!check_payload(fn, dt, rank, shape, data, &bytes))
        return NULL;
    if (!ts_scope_reserve()) { /* candidate fix: ts_wrap failing would run the deleter */
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return NULL;
    }
    ir_storage *st = rt_storage_wrap(data, bytes, deleter, ctx);
    if (!st) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return NULL;
    }
    ir_node *n = ir_make_buffer(st, 0, dt, rank, shape);
    if (!n) {
        ir_free(st->ctx);   /* candidate fix: the deleter record leaked */
        st->free_fn = NULL; /* on failure the caller keeps data: do not run the deleter */
        ir_storage_release(st);
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return NULL;
    }
    ir_storage_release(st);
    return ts_wrap(n);
}

static rlx_tensor *full(const char *fn, rlx_dtype dt, int rank, const int64_t *shape, double value)
{
    if (!check_leaf(fn, dt, rank, shape))
        return NULL;
    return ts_wrap(ts_const_node(fn, dt, rank, shape, value)); /* value converted as CAST would */
}

rlx_tensor *rlx_full(rlx_dtype dt, int rank, const int64_t *shape, double value)
{
    return full("rlx_full", dt, rank, shape, value);
}
rlx_tensor *rlx_zeros(rlx_dtype dt, int rank, const int64_t *shape) { return full("rlx_zeros", dt, rank, shape, 0); }
rlx_tensor *rlx_ones(rlx_dtype dt, int rank, const int64_t *shape) { return full("rlx_ones", dt, rank, shape, 1); }
rlx_tensor *rlx_scalar(rlx_dtype dt, double value) { return full("rlx_scalar", dt, 0, NULL, value); }

/* where(true, x, ref): x broadcast to ref's shape, for a ref with dynamic
 * dims, so that a compiled program specializes it with ref (instantiation
 * makes it a plain expand: ref is not read). */
ir_node *ts_expand_like(const char *fn, ir_node *x, ir_node *ref)
{
    if (ir_node_numel(ref) >= 0)
        return ts_expand_node(fn, x, ref->rank, ref->shape);
    ir_node *cref = NULL;
    if (ref->dtype != x->dtype) {
        ir_attrs a;
        memset(&a, 0, sizeof a);
        a.cast.dtype = x->dtype;
        if (!(ref = cref = ts_make(fn, IR_OP_CAST, 1, &ref, &a)))
            return NULL;
    }
    ir_node *t = ts_const_node(fn, RLX_BOOL, 0, NULL, 1);
    ir_node *e[3] = {t ? ts_expand_node(fn, t, ref->rank, ref->shape) : NULL, ts_expand_node(fn, x, ref->rank, ref->shape),
                     ref};
    ir_node *r = e[0] && e[1] ? ts_make(fn, IR_OP_WHERE, 3, e, NULL) : NULL;
    ir_release(t);
    ir_release(e[0]);
    ir_release(e[1]);
    ir_release(cref);
    return r;
}

static rlx_tensor *full_like_dynamic(const char *fn, ir_node *t, double value)
{
    ir_node *c = ts_const_node(fn, t->dtype, 0, NULL, value), *r = c ? ts_expand_like(fn, c, t) : NULL;
    ir_release(c);
    return r ? ts_wrap(r) : NULL;
}

rlx_tensor *rlx_full_like(rlx_tensor *t, double value)
{
    if (ts_null("rlx_full_like", "t", t))
        return NULL;
    ir_node *n = ts_node(t);
    if (ir_node_numel(n) < 0)
        return full_like_dynamic("rlx_full_like", n, value);
    return full("rlx_full_like", n->dtype, n->rank, n->shape, value);
}

rlx_tensor *rlx_zeros_like(rlx_tensor *t) { return ts_null("rlx_zeros_like", "t", t) ? NULL : rlx_full_like(t, 0); }
rlx_tensor *rlx_ones_like(rlx_tensor *t) { return ts_null("rlx_ones_like", "t", t) ? NULL : rlx_full_like(t, 1); }

static ir_node *iota_node(const char *fn, rlx_dtype dt, int rank, const int64_t *shape, int axis, double start,
                          double step)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.iota.start = start;
    a.iota.step = step;
    a.iota.axis = axis;
    return ts_leaf(fn, IR_OP_IOTA, &a, dt, rank, shape);
}

rlx_tensor *rlx_arange(rlx_dtype dt, double start, double stop, double step)
{
    const char *fn = "rlx_arange";
    if (!ts_check_dtype(fn, (int)dt))
        return NULL;
    if (dt == RLX_BOOL) {
        ts_error(RLX_E_DTYPE, fn, "bool is not a numeric range dtype");
        return NULL;
    }
    if (!isfinite(start) || !isfinite(stop) || !isfinite(step) || step == 0) {
        ts_error(RLX_E_ARG, fn, "start %g, stop %g, step %g: need finite values and step != 0", start, stop, step);
        return NULL;
    }
    double len = ceil((stop - start) / step);
    if (!(len > 0))
        len = 0;
    if (len > 9.0e15) {
        ts_error(RLX_E_SHAPE, fn, "range of %g elements is too long", len);
        return NULL;
    }
    int64_t n = (int64_t)len;
    if (!ts_check_shape(fn, dt, 1, &n, false))
        return NULL;
    return ts_wrap(iota_node(fn, dt, 1, &n, 0, start, step));
}

/* A [n] view of t's axis ax with n its size, the other axes cut to one
 * element (an empty static axis padded to one, a dynamic one summed, as it
 * may be bound to 0): the shape an arange of a dynamic axis follows (its
 * values are never read). */
static rlx_tensor *axis_ref(rlx_tensor *t, int ax, int rank, const int64_t *shape)
{
    rlx_tensor *r = t;
    for (int d = 0; d < rank; d++)
        if (d != ax)
            r = shape[d] == 0  ? rlx_pad(r, d, 0, 1, 0)
                : shape[d] < 0 ? rlx_sum(r, &d, 1, true)
                               : rlx_narrow(r, d, 0, 1);
    if (ir_dtype_is_complex(rlx_dtype_of(t))) /* (the follower is cast to the range's dtype) */
        r = rlx_real(r);
    return rlx_reshape(r, 1, (const int64_t[]){-1});
}

rlx_tensor *rlx_arange_of(rlx_tensor *t, int axis, rlx_dtype dt)
{
    const char *fn = "rlx_arange_of";
    if (ts_null(fn, "t", t) || !ts_check_dtype(fn, (int)dt))
        return NULL;
    ir_node *n = ts_node(t);
    int ax = ts_axis(fn, axis, n->rank);
    if (ax < 0)
        return NULL;
    if (dt == RLX_BOOL || ir_dtype_is_complex(dt)) {
        ts_error(RLX_E_DTYPE, fn, "%s is not a numeric range dtype", rlx_dtype_name(dt));
        return NULL;
    }
    if (n->shape[ax] >= 0) /* a static axis: a plain range */
        return rlx_arange(dt, 0, (double)n->shape[ax], 1);
    /* A dynamic axis: an iota traced as [-1] beside a [-1] view of the
     * axis; where(true, iota, view) tells a program to make the iota in the
     * view's bound shape (program.c, instantiate). */
    if (!ts_open(fn))
        return NULL;
    int64_t dyn = -1;
    rlx_tensor *ref = axis_ref(t, ax, n->rank, n->shape);
    ir_node *iota = ref ? iota_node(fn, dt, 1, &dyn, 0, 0, 1) : NULL;
    ir_node *r = iota ? ts_expand_like(fn, iota, ts_node(ref)) : NULL;
    ir_release(iota);
    return ts_close(rlx_stop_gradient(ts_wrap(r)));
}

rlx_tensor *rlx_eye(rlx_dtype dt, int64_t n)
{
    const char *fn = "rlx_eye";
    int64_t shape[2] = {n, n};
    if (!check_leaf(fn, dt, 2, shape))
        return NULL;
    ir_node *rows = iota_node(fn, RLX_I64, 2, shape, 0, 0, 1);
    ir_node *cols = rows ? iota_node(fn, RLX_I64, 2, shape, 1, 0, 1) : NULL;
    ir_node *src[2] = {rows, cols};
    ir_node *eq = cols ? ts_make(fn, IR_OP_EQ, 2, src, NULL) : NULL;
    ir_node *out = eq ? ts_cast_node(fn, eq, dt) : NULL;
    ir_release(rows);
    ir_release(cols);
    ir_release(eq);
    return ts_wrap(out);
}

static rlx_tensor *random_leaf(const char *fn, rlx_dtype dt, int rank, const int64_t *shape, uint64_t seed,
                               int normal)
{
    if (!check_leaf(fn, dt, rank, shape))
        return NULL;
    if (!ir_dtype_is_float(dt)) {
        ts_error(RLX_E_DTYPE, fn, "random values need a float dtype (f32, f64, f16, bf16), got %s", rlx_dtype_name(dt));
        return NULL;
    }
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.rand.seed = seed;
    a.rand.normal = normal;
    return ts_wrap(ts_leaf(fn, IR_OP_RAND, &a, dt, rank, shape));
}

/* The seed as a RAND_SEEDED source: an i32/i64 scalar, rank 0 or [1]
 * (the shape a one-element input or a slice of a seed vector has). */
static rlx_tensor *random_seeded(const char *fn, rlx_dtype dt, int rank, const int64_t *shape, rlx_tensor *seed,
                                 int normal, bool dynamic_ok)
{
    if (ts_null(fn, "seed", seed))
        return NULL;
    if (!ts_check_dtype(fn, (int)dt) || !ts_check_shape(fn, dt, rank, shape, dynamic_ok))
        return NULL;
    if (!ir_dtype_is_float(dt)) {
        ts_error(RLX_E_DTYPE, fn, "random values need a float dtype (f32, f64, f16, bf16), got %s", rlx_dtype_name(dt));
        return NULL;
    }
    ir_node *s = ts_node(seed);
    if (s->dtype != RLX_I32 && s->dtype != RLX_I64) {
        ts_error(RLX_E_DTYPE, fn, "seed must be i32 or i64, got %s", rlx_dtype_name(s->dtype));
        return NULL;
    }
    if (s->rank > 1 || (s->rank == 1 && s->shape[0] != 1)) {
        ts_error(RLX_E_SHAPE, fn, "seed must be a scalar (shape [] or [1]), got %s", ts_shape_str(s));
        return NULL;
    }
    ir_node *src = s->rank ? ts_reshape_node(fn, s, 0, NULL) : ir_retain(s);
    if (!src)
        return NULL;
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.rands.normal = normal;
    a.rands.dtype = dt;
    a.rands.rank = rank;
    for (int d = 0; d < rank; d++)
        a.rands.dims[d] = shape[d];
    ir_node *out = ts_make(fn, IR_OP_RAND_SEEDED, 1, &src, &a);
    ir_release(src);
    return ts_wrap(out);
}

rlx_tensor *ts_rand_seeded_traced(const char *fn, int rank, const int64_t *shape, rlx_tensor *seed)
{
    return random_seeded(fn, RLX_F32, rank, shape, seed, 0, true);
}

rlx_tensor *rlx_rand_seeded(rlx_dtype dt, int rank, const int64_t *shape, rlx_tensor *seed)
{
    return random_seeded("rlx_rand_seeded", dt, rank, shape, seed, 0, false);
}

rlx_tensor *rlx_randn_seeded(rlx_dtype dt, int rank, const int64_t *shape, rlx_tensor *seed)
{
    return random_seeded("rlx_randn_seeded", dt, rank, shape, seed, 1, false);
}

rlx_tensor *rlx_rand(rlx_dtype dt, int rank, const int64_t *shape, uint64_t seed)
{
    return random_leaf("rlx_rand", dt, rank, shape, seed, 0);
}

rlx_tensor *rlx_randn(rlx_dtype dt, int rank, const int64_t *shape, uint64_t seed)
{
    return random_leaf("rlx_randn", dt, rank, shape, seed, 1);
}

rlx_tensor *rlx_input(const char *name, rlx_dtype dt, int rank, const int64_t *shape)
{
    const char *fn = "rlx_input";
    if (!name || !*name) {
        ts_error(RLX_E_ARG, fn, "name is NULL or empty");
        return NULL;
    }
    if (!ts_check_dtype(fn, (int)dt))
        return NULL;
    /* a dim <= -2 names a symbol: the node's shape says -1 (dynamic), the
     * attrs keep which symbol, so that a run can check bindings agree */
    ir_attrs a;
    memset(&a, 0, sizeof a);
    int64_t dims[IR_MAX_RANK];
    for (int i = 0; shape && rank > 0 && rank <= IR_MAX_RANK && i < rank; i++) {
        dims[i] = shape[i] <= -2 ? -1 : shape[i];
        a.input.sym[i] = shape[i] <= -2 ? shape[i] : 0;
    }
    if (!ts_check_shape(fn, dt, rank, shape ? dims : NULL, true))
        return NULL;
    a.input.name = (char *)(uintptr_t)name; /* copied by ir_make */
    return ts_wrap(ts_leaf(fn, IR_OP_INPUT, &a, dt, rank, dims));
}
