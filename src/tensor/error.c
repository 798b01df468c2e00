/*
 * error.c — the thread-local sticky error and argument checks at the edge.
 *
 * ts_error is the single place a failure is recorded. The message lives in
 * a thread-local buffer, valid until the next librlx call on the thread.
 */
#include <stdio.h>
#include <string.h>

#include "tensor/ts.h"

#define TS_MSG_CAP 512

static _Thread_local rlx_status last_status;
static _Thread_local char last_msg[TS_MSG_CAP];

void ts_error(rlx_status st, const char *fn, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(last_msg, sizeof last_msg, "%s: ", ts_fn(fn));
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof last_msg)
        vsnprintf(last_msg + n, sizeof last_msg - (size_t)n, fmt, ap);
    va_end(ap);
    last_status = st;
}

bool ts_null(const char *fn, const char *arg, const rlx_tensor *t)
{
    if (t)
        return false;
    if (last_status == RLX_OK)
        ts_error(RLX_E_ARG, fn, "argument '%s' is NULL", arg);
    return true;
}

int ts_axis(const char *fn, int axis, int rank)
{
    int r = rank ? rank : 0;
    if (axis < -r || axis >= r || (rank == 0)) {
        ts_error(RLX_E_ARG, fn, "axis %d out of range for rank %d", axis, rank);
        return -1;
    }
    return axis < 0 ? axis + rank : axis;
}

ir_node *ts_node_axis(const char *fn, rlx_tensor *x, int axis, int *ax)
{
    if (ts_null(fn, "x", x))
        return NULL;
    *ax = ts_axis(fn, axis, ts_node(x)->rank);
    return *ax < 0 ? NULL : ts_node(x);
}

bool ts_check_dtype(const char *fn, int dt)
{
    if (ir_dtype_valid(dt))
        return true;
    ts_error(RLX_E_DTYPE, fn, "unknown dtype %d", dt);
    return false;
}

bool ts_check_shape(const char *fn, rlx_dtype dt, int rank, const int64_t *shape, bool dynamic_ok)
{
    if (rank < 0 || rank > RLX_MAX_RANK) {
        ts_error(RLX_E_SHAPE, fn, "rank %d outside 0..%d", rank, RLX_MAX_RANK);
        return false;
    }
    if (rank > 0 && !shape) {
        ts_error(RLX_E_ARG, fn, "shape is NULL for rank %d", rank);
        return false;
    }
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0 && !(dynamic_ok && shape[i] == -1)) {
            ts_error(RLX_E_SHAPE, fn, "negative dim %lld at axis %d of %s", (long long)shape[i], i,
                     ts_dims_str(rank, shape));
            return false;
        }
    }
    if (!ir_shape_bytes_ok(dt, rank, shape)) {
        ts_error(RLX_E_SHAPE, fn, "shape %s of %s overflows the addressable size", ts_dims_str(rank, shape),
                 rlx_dtype_name(dt));
        return false;
    }
    return true;
}

const char *ts_dims_str(int rank, const int64_t *shape)
{
    static _Thread_local char ring[4][160];
    static _Thread_local unsigned next;
    char *buf = ring[next++ % 4];
    return ir_shape_str(buf, sizeof ring[0], rank, shape);
}

const char *ts_shape_str(const ir_node *n) { return ts_dims_str(n->rank, n->shape); }

rlx_status rlx_last_status(void) { return last_status; }
const char *rlx_last_error(void) { return last_msg; }

void rlx_clear_error(void)
{
    last_status = RLX_OK;
    last_msg[0] = 0;
}

const char *rlx_version(void) { return RLX_VERSION_STRING; }

const char *rlx_dtype_name(rlx_dtype dt)
{
    if (!ir_dtype_valid((int)dt))
        ts_error(RLX_E_ARG, "rlx_dtype_name", "unknown dtype %d", (int)dt);
    return ir_dtype_name(dt);
}
