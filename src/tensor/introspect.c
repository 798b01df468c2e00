/* introspect.c — dtype, shape and storage questions about a handle. */
#include <string.h>

#include "tensor/ts.h"

rlx_dtype rlx_dtype_of(rlx_tensor *t)
{
    return ts_null("rlx_dtype_of", "t", t) ? (rlx_dtype)-1 : ts_node(t)->dtype;
}

int rlx_rank(rlx_tensor *t) { return ts_null("rlx_rank", "t", t) ? -1 : ts_node(t)->rank; }

int64_t rlx_dim(rlx_tensor *t, int axis)
{
    if (ts_null("rlx_dim", "t", t))
        return -1;
    int ax = ts_axis("rlx_dim", axis, ts_node(t)->rank);
    return ax < 0 ? -1 : ts_node(t)->shape[ax];
}

int rlx_shape(rlx_tensor *t, int64_t *out, int cap)
{
    if (ts_null("rlx_shape", "t", t))
        return -1;
    if (cap < 0 || (cap > 0 && !out)) {
        ts_error(RLX_E_ARG, "rlx_shape", "out is NULL or cap %d is negative", cap);
        return -1;
    }
    ir_node *n = ts_node(t);
    int k = n->rank < cap ? n->rank : cap;
    if (k > 0)
        memcpy(out, n->shape, (size_t)k * sizeof *out);
    return n->rank;
}

int64_t rlx_numel(rlx_tensor *t) { return ts_null("rlx_numel", "t", t) ? -1 : ir_node_numel(ts_node(t)); }

bool rlx_is_realized(rlx_tensor *t)
{
    return !ts_null("rlx_is_realized", "t", t) && ir_node_storage(ts_node(t)) != NULL;
}

static bool stop_at_realized(const ir_node *n, void *ctx)
{
    (void)ctx;
    return ir_node_storage(n) != NULL;
}

/* The storages t reads: those of the realized nodes where a walk from t
 * stops. Returns the count or -1 (error recorded) when out of memory. */
static long storages_read(const char *fn, rlx_tensor *t, ir_storage ***out)
{
    ir_node *root = ts_node(t), **order;
    long n = ir_postorder(&root, 1, stop_at_realized, NULL, &order);
    if (n < 0) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return -1;
    }
    long k = 0;
    ir_storage **sts = (ir_storage **)order; /* reuse the array in place */
    for (long i = 0; i < n; i++) {
        ir_storage *st = ir_node_storage(order[i]);
        bool dup = false;
        for (long j = 0; j < k && st && !dup; j++)
            dup = sts[j] == st;
        if (st && !dup)
            sts[k++] = st;
    }
    *out = sts;
    return k;
}

bool rlx_shares_storage(rlx_tensor *a, rlx_tensor *b)
{
    if (ts_null("rlx_shares_storage", "a", a) || ts_null("rlx_shares_storage", "b", b))
        return false;
    ir_storage **sa, **sb;
    long na = storages_read("rlx_shares_storage", a, &sa);
    if (na < 0)
        return false;
    long nb = storages_read("rlx_shares_storage", b, &sb);
    bool shared = false;
    for (long i = 0; i < na && !shared; i++)
        for (long j = 0; j < nb && !shared; j++)
            shared = sa[i] == sb[j];
    ir_free(sa);
    if (nb >= 0)
        ir_free(sb);
    return shared;
}

size_t rlx_storage_bytes(rlx_tensor *t)
{
    if (ts_null("rlx_storage_bytes", "t", t))
        return 0;
    ir_storage **sts;
    long n = storages_read("rlx_storage_bytes", t, &sts);
    size_t bytes = 0;
    for (long i = 0; i < n; i++)
        bytes += sts[i]->bytes;
    if (n >= 0)
        ir_free(sts);
    return bytes;
}
