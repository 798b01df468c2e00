/*
 * collective.c — rlx_mpi_allreduce and rlx_mpi_broadcast.
 *
 * The inputs of a call form flat arrays (one per accumulation type for the
 * reduction, one of bytes for the broadcast), moved in buckets of at most
 * ctx->bucket_bytes; the results are zero-copy tensors over one buffer
 * per array (rlx_from_blob with a shared count; the last result released
 * parks the buffer in the context's pool of spares).
 *
 * The reduction is deterministic by construction: per bucket, segment k
 * of every rank reaches rank k, which folds the ranks' values left to
 * right in rank order, and every rank collects every segment's sums. Two
 * transports, the same fold, so the same bits: messages (MPI_Isend/Irecv;
 * the volume per rank of a ring, 2 (P-1)/P of the data, and an order that
 * depends on nothing but the rank numbers), or, when every rank shares
 * one node, an MPI-3 shared window the ranks store into and load from
 * between fences (no message, no MPI copy).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi_int.h"

/* ---------------------------------------------------- shared buffers */

struct mp_pool {
    atomic_long refs;                 /* the context + every buffer in use (not the spares) */
    _Atomic(void *) spare[MP_SPARES]; /* mp_shared *, idle */
};

typedef struct {
    atomic_long refs;
    size_t cap;    /* payload bytes allocated */
    mp_pool *pool; /* shared */
} mp_shared; /* followed by the payload, at MP_HEAD bytes */
enum { MP_HEAD = 64 };
_Static_assert(sizeof(mp_shared) <= MP_HEAD, "the header fits before the payload");

static unsigned char *shared_data(mp_shared *s) { return (unsigned char *)s + MP_HEAD; }

mp_pool *mp_pool_new(void)
{
    mp_pool *p = malloc(sizeof *p);
    if (p) {
        atomic_init(&p->refs, 1);
        for (int i = 0; i < MP_SPARES; i++)
            atomic_init(&p->spare[i], NULL);
    }
    return p;
}

void mp_pool_release(mp_pool *p)
{
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    for (int i = 0; i < MP_SPARES; i++)
        free(atomic_load(&p->spare[i]));
    free(p);
}

/* A buffer of at least `bytes` with one reference: a spare of the pool
 * that fits (not more than twice as large plus 1 MiB, so a small call
 * does not pin a large buffer), else a new one. */
static mp_shared *shared_new(mp_pool *pool, size_t bytes)
{
    for (int i = 0; i < MP_SPARES; i++) {
        mp_shared *s = atomic_load(&pool->spare[i]);
        if (s && s->cap >= bytes && s->cap <= 2 * bytes + ((size_t)1 << 20) &&
            atomic_compare_exchange_strong(&pool->spare[i], &(void *){s}, NULL)) {
            atomic_store(&s->refs, 1);
            atomic_fetch_add(&pool->refs, 1); /* live again (the context's reference keeps pool alive here) */
            return s;
        }
    }
    size_t cap = (bytes + 63) & ~(size_t)63;
    mp_shared *s = aligned_alloc(64, MP_HEAD + cap);
    if (s) {
        atomic_init(&s->refs, 1);
        s->cap = cap;
        s->pool = pool;
        atomic_fetch_add(&pool->refs, 1);
    }
    return s;
}

/* The deleter: the last reference parks the buffer in a free spare slot
 * (any thread may run it), or frees it; either way it then drops its
 * reference to the pool, so the last one (context or buffer) frees the
 * pool and its spares. Parked before the drop: whoever frees the pool
 * sees it. */
static void shared_release(void *p)
{
    mp_shared *s = p;
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    mp_pool *pool = s->pool;
    bool parked = false;
    for (int i = 0; i < MP_SPARES && !parked; i++)
        parked = atomic_compare_exchange_strong(&pool->spare[i], &(void *){NULL}, s);
    if (!parked)
        free(s);
    mp_pool_release(pool);
}

/* A tensor of dt reading s's payload at off (zero-copy), holding s. */
static rlx_tensor *shared_tensor(mp_shared *s, size_t off, rlx_dtype dt, int rank, const int64_t *shape)
{
    atomic_fetch_add(&s->refs, 1);
    rlx_tensor *t = rlx_from_blob(dt, rank, shape, shared_data(s) + off, shared_release, s);
    if (!t)
        atomic_fetch_sub(&s->refs, 1); /* on failure the deleter is not called */
    return t;
}

/* ----------------------------------------------------------- dtypes */

/* Accumulation types: the wrapping integer kinds add as unsigned of their
 * width (the same bits for signed and unsigned dtypes). */
typedef enum { K_F32, K_F64, K_I8, K_I16, K_I32, K_I64, K_COUNT } mp_kind;
static const size_t kind_size[K_COUNT] = {4, 8, 1, 2, 4, 8};

static int dtype_size(rlx_dtype dt)
{
    switch (dt) {
    case RLX_BOOL: case RLX_I8: case RLX_U8: return 1;
    case RLX_F16: case RLX_BF16: case RLX_I16: return 2;
    case RLX_I32: case RLX_U32: case RLX_F32: return 4;
    case RLX_I64: case RLX_F64: case RLX_C64: return 8;
    case RLX_C128: return 16;
    }
    return 0;
}

/* The accumulation kind of dt under op, -1 when refused. */
static int kind_of(rlx_dtype dt, rlx_mpi_op op)
{
    switch (dt) {
    case RLX_F32: case RLX_F16: case RLX_BF16: case RLX_C64: return K_F32;
    case RLX_F64: case RLX_C128: return K_F64;
    case RLX_BOOL: return -1;
    case RLX_I8: case RLX_U8: return op == RLX_MPI_SUM ? K_I8 : -1;
    case RLX_I16: return op == RLX_MPI_SUM ? K_I16 : -1;
    case RLX_I32: case RLX_U32: return op == RLX_MPI_SUM ? K_I32 : -1;
    case RLX_I64: return op == RLX_MPI_SUM ? K_I64 : -1;
    }
    return -1;
}

/* Elements of t in its kind: c64 (c128) counts as two f32 (f64) parts. */
static int64_t kind_elems(rlx_tensor *t)
{
    rlx_dtype dt = rlx_dtype_of(t);
    return rlx_numel(t) * (dt == RLX_C64 || dt == RLX_C128 ? 2 : 1);
}

/* ------------------------------------------------------- the inputs */

/* The inputs of one kind, in call order: their payloads end to end are
 * the flat buffer a reduction works on. */
typedef struct {
    int n;
    const unsigned char **ptr; /* borrows: realized payloads */
    size_t *bytes;
} mp_parts;

/* Copies bytes [off, off + len) of the parts' concatenation to dst. */
static void parts_copy(const mp_parts *p, size_t off, size_t len, unsigned char *dst)
{
    size_t at = 0; /* where part i starts */
    for (int i = 0; i < p->n && len; at += p->bytes[i], i++) {
        if (off >= at + p->bytes[i])
            continue;
        size_t from = off - at, take = p->bytes[i] - from < len ? p->bytes[i] - from : len;
        memcpy(dst, p->ptr[i] + from, take);
        dst += take;
        off += take;
        len -= take;
    }
}

/* ------------------------------------------------------- the folding */

/* dst[j] = (...(s_0[j] + s_1[j]) + ...) + s_{P-1}[j], then / P for the
 * mean. dst may be one of the s_q: each j reads every source before it
 * writes (the shared-memory path folds in place). */
#define FOLD(T, MEAN_OK)                                                      \
    static void fold_##T(void *dst_, const void *const *src, size_t m, int P, int mean) \
    {                                                                         \
        T *dst = dst_;                                                        \
        const T *s0 = src[0];                                                 \
        for (size_t j = 0; j < m; j++) {                                      \
            T acc = s0[j];                                                    \
            for (int q = 1; q < P; q++)                                       \
                acc = (T)(acc + ((const T *)src[q])[j]);                      \
            dst[j] = MEAN_OK && mean ? (T)(acc / (T)P) : acc;                 \
        }                                                                     \
    }
FOLD(float, 1)
FOLD(double, 1)
FOLD(uint8_t, 0)
FOLD(uint16_t, 0)
FOLD(uint32_t, 0)
FOLD(uint64_t, 0)
typedef void (*fold_fn)(void *, const void *const *, size_t, int, int);
static const fold_fn folds[K_COUNT] = {fold_float, fold_double, fold_uint8_t, fold_uint16_t, fold_uint32_t,
                                       fold_uint64_t};

/* Bucket segments: q's is [SEG_LO(q), SEG_LO(q + 1)) of m elements. */
#define SEG_LO(q) (m * (size_t)(q) / (size_t)P)
#define SEG_LEN(q) (SEG_LO((q) + 1) - SEG_LO(q))

/* Reduces m elements of kind k at buf in place on every rank through
 * messages; slots is scratch of P * ceil(m / P) elements, src of P. */
static rlx_status reduce_bucket_p2p(rlx_mpi_ctx *ctx, const char *fn, mp_kind k, unsigned char *buf, size_t m,
                                    unsigned char *slots, const void **src, MPI_Request *req, int mean)
{
    const int P = ctx->size, r = ctx->rank;
    const size_t es = kind_size[k], seg_max = (m + (size_t)P - 1) / (size_t)P;
    int nreq = 0, err;
    const size_t mine = SEG_LEN(r);
    /* 1: segment q of every rank to rank q; this rank's own into slot r. */
    for (int q = 0; q < P && mine; q++)
        if (q != r && (err = MPI_Irecv(slots + (size_t)q * seg_max * es, (int)(mine * es), MPI_BYTE, q, 1,
                                       ctx->comm, &req[nreq++])) != MPI_SUCCESS)
            return mp_mpi_error(ctx, fn, "MPI_Irecv", err);
    for (int q = 0; q < P; q++)
        if (q != r && SEG_LEN(q) &&
            (err = MPI_Isend(buf + SEG_LO(q) * es, (int)(SEG_LEN(q) * es), MPI_BYTE, q, 1, ctx->comm,
                             &req[nreq++])) != MPI_SUCCESS)
            return mp_mpi_error(ctx, fn, "MPI_Isend", err);
    for (int q = 0; q < P; q++)
        src[q] = q == r ? buf + SEG_LO(r) * es : slots + (size_t)q * seg_max * es;
    if ((err = MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE)) != MPI_SUCCESS)
        return mp_mpi_error(ctx, fn, "MPI_Waitall", err);
    /* 2: the rank-order fold of this rank's segment (in place: see FOLD). */
    folds[k](buf + SEG_LO(r) * es, src, mine, P, mean);
    /* 3: every segment's sums to every rank. */
    nreq = 0;
    for (int q = 0; q < P; q++)
        if (q != r && SEG_LEN(q) &&
            (err = MPI_Irecv(buf + SEG_LO(q) * es, (int)(SEG_LEN(q) * es), MPI_BYTE, q, 2, ctx->comm,
                             &req[nreq++])) != MPI_SUCCESS)
            return mp_mpi_error(ctx, fn, "MPI_Irecv", err);
    for (int q = 0; q < P && mine; q++)
        if (q != r && (err = MPI_Isend(buf + SEG_LO(r) * es, (int)(mine * es), MPI_BYTE, q, 2, ctx->comm,
                                       &req[nreq++])) != MPI_SUCCESS)
            return mp_mpi_error(ctx, fn, "MPI_Isend", err);
    if ((err = MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE)) != MPI_SUCCESS)
        return mp_mpi_error(ctx, fn, "MPI_Waitall", err);
    return RLX_OK;
}

/* Every rank's stores to the window before, everyone's loads after. */
static rlx_status shm_fence(rlx_mpi_ctx *ctx, const char *fn)
{
    int err = MPI_Win_sync(ctx->win);
    if (err == MPI_SUCCESS)
        err = MPI_Barrier(ctx->comm);
    if (err == MPI_SUCCESS)
        err = MPI_Win_sync(ctx->win);
    return err == MPI_SUCCESS ? RLX_OK : mp_mpi_error(ctx, fn, "MPI_Win_sync/MPI_Barrier", err);
}

/* The same reduction through the shared window: each rank stores its
 * bucket in its part, folds segment r reading every part in place, then
 * copies every segment's sums out. Three fences, no message. */
static rlx_status reduce_bucket_shm(rlx_mpi_ctx *ctx, const char *fn, mp_kind k, const mp_parts *in, size_t off,
                                    unsigned char *buf, size_t m, const void **src, int mean)
{
    const int P = ctx->size, r = ctx->rank;
    const size_t es = kind_size[k];
    rlx_status st;
    parts_copy(in, off * es, m * es, ctx->peer[r]); /* straight from the inputs: no packing pass */
    if ((st = shm_fence(ctx, fn)) != RLX_OK)
        return st;
    for (int q = 0; q < P; q++)
        src[q] = ctx->peer[q] + SEG_LO(r) * es;
    folds[k](ctx->peer[r] + SEG_LO(r) * es, src, SEG_LEN(r), P, mean);
    if ((st = shm_fence(ctx, fn)) != RLX_OK)
        return st;
    for (int q = 0; q < P; q++)
        memcpy(buf + SEG_LO(q) * es, ctx->peer[q] + SEG_LO(q) * es, SEG_LEN(q) * es);
    return shm_fence(ctx, fn); /* before the next bucket overwrites the window */
}
#undef SEG_LO
#undef SEG_LEN

/* A window of at least `bytes` per rank (collective; every rank decides
 * alike: same agreed calls, same history). Grows only. */
static rlx_status shm_window(rlx_mpi_ctx *ctx, const char *fn, size_t bytes)
{
    if (bytes <= ctx->win_bytes)
        return RLX_OK;
    if (ctx->win_bytes) {
        MPI_Win_unlock_all(ctx->win);
        MPI_Win_free(&ctx->win);
        ctx->win_bytes = 0;
    }
    unsigned char *base;
    int err = MPI_Win_allocate_shared((MPI_Aint)bytes, 1, MPI_INFO_NULL, ctx->comm, &base, &ctx->win);
    if (err != MPI_SUCCESS)
        return mp_mpi_error(ctx, fn, "MPI_Win_allocate_shared", err);
    for (int q = 0; q < ctx->size && err == MPI_SUCCESS; q++) {
        MPI_Aint size;
        int unit;
        err = MPI_Win_shared_query(ctx->win, q, &size, &unit, &ctx->peer[q]);
    }
    if (err == MPI_SUCCESS)
        err = MPI_Win_lock_all(MPI_MODE_NOCHECK, ctx->win);
    if (err != MPI_SUCCESS) {
        MPI_Win_free(&ctx->win);
        return mp_mpi_error(ctx, fn, "MPI_Win_shared_query/MPI_Win_lock_all", err);
    }
    ctx->win_bytes = bytes;
    return RLX_OK;
}

/* Reduces the `total` elements of kind k of the inputs, bucket by
 * bucket, into buf. */
static rlx_status reduce_flat(rlx_mpi_ctx *ctx, const char *fn, mp_kind k, const mp_parts *in, unsigned char *buf,
                              size_t total, int mean)
{
    const size_t es = kind_size[k], cap = ctx->bucket_bytes / es;
    const size_t m0 = total < cap ? total : cap;
    const size_t need = ctx->shm ? 0 : (size_t)ctx->size * ((m0 + (size_t)ctx->size - 1) / (size_t)ctx->size) * es;
    if (need > ctx->scratch_bytes) { /* kept: reused by the next calls, touched once */
        unsigned char *grown = realloc(ctx->scratch, need);
        if (grown) {
            ctx->scratch = grown;
            ctx->scratch_bytes = need;
        }
    }
    MPI_Request *req = malloc(2 * (size_t)ctx->size * sizeof *req);
    const void **src = malloc((size_t)ctx->size * sizeof *src);
    rlx_status st = RLX_OK;
    if (need > ctx->scratch_bytes || !req || !src) {
        mp_error(RLX_E_NOMEM, "%s: out of memory for a bucket of %zu bytes", fn, m0 * es);
        st = RLX_E_NOMEM;
    }
    if (st == RLX_OK && ctx->shm)
        st = shm_window(ctx, fn, m0 * es);
    else if (st == RLX_OK) /* messages are sent from, and reduced in, the packed buffer */
        parts_copy(in, 0, total * es, buf);
    for (size_t off = 0; st == RLX_OK && off < total; off += cap) {
        size_t m = total - off < cap ? total - off : cap;
        st = ctx->shm ? reduce_bucket_shm(ctx, fn, k, in, off, buf + off * es, m, src, mean)
                      : reduce_bucket_p2p(ctx, fn, k, buf + off * es, m, ctx->scratch, src, req, mean);
    }
    free(req);
    free(src);
    return st;
}

/* ------------------------------------------------------- allreduce */

/* A collective's own arguments (out cleared first): ctx, n, in, out. */
static rlx_status check_call(const char *fn, const rlx_mpi_ctx *ctx, int n, rlx_tensor *const *in, rlx_tensor **out)
{
    for (int i = 0; out && i < n; i++)
        out[i] = NULL;
    if (!ctx) {
        mp_error(RLX_E_ARG, "%s: ctx is NULL", fn);
        return RLX_E_ARG;
    }
    if (n < 0) {
        mp_error(RLX_E_ARG, "%s: n is %d (must be >= 0)", fn, n);
        return RLX_E_ARG;
    }
    if (n > 0 && (!in || !out)) {
        mp_error(RLX_E_ARG, "%s: %s is NULL with n = %d", fn, in ? "out" : "in", n);
        return RLX_E_ARG;
    }
    for (int i = 0; i < n; i++)
        if (!in[i]) {
            mp_error(RLX_E_ARG, "%s: tensor %d is NULL", fn, i);
            return RLX_E_ARG;
        }
    return RLX_OK;
}

/* The results of kind k over the reduced buffer s; offsets in elements. */
static rlx_status allreduce_outputs(const char *fn, int n, rlx_tensor *const *in, int k, rlx_mpi_op op,
                                    mp_shared *s, rlx_tensor **out)
{
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        rlx_dtype dt = rlx_dtype_of(in[i]);
        if (kind_of(dt, op) != k)
            continue;
        int64_t shape[RLX_MAX_RANK];
        int rank = rlx_shape(in[i], shape, RLX_MAX_RANK);
        size_t m = (size_t)kind_elems(in[i]);
        if (m == 0)
            out[i] = rlx_zeros(dt, rank, shape);
        else if (dt == RLX_F16 || dt == RLX_BF16) /* summed in f32, rounded once */
            out[i] = rlx_cast(shared_tensor(s, off * kind_size[k], RLX_F32, rank, shape), dt);
        else
            out[i] = shared_tensor(s, off * kind_size[k], dt, rank, shape);
        if (!out[i])
            return mp_rlx_error(fn, "making a result");
        off += m;
    }
    return RLX_OK;
}

/* Reduces and hands out every kind in turn; src[i] is in[i] realized
 * (f16/bf16 widened to f32); ptrs/sizes are scratch for n parts. */
static rlx_status allreduce_kinds(rlx_mpi_ctx *ctx, const char *fn, int n, rlx_tensor *const *in,
                                  rlx_tensor *const *src, rlx_mpi_op op, rlx_tensor **out,
                                  const unsigned char **ptrs, size_t *sizes)
{
    for (int k = 0; k < K_COUNT; k++) {
        size_t total = 0;
        bool any = false;
        for (int i = 0; i < n; i++)
            if (kind_of(rlx_dtype_of(in[i]), op) == k) {
                total += (size_t)kind_elems(in[i]);
                any = true;
            }
        if (!any)
            continue;
        mp_shared *s = shared_new(ctx->pool, total * kind_size[k]);
        if (!s) {
            mp_error(RLX_E_NOMEM, "%s: out of memory for %zu bytes", fn, total * kind_size[k]);
            return RLX_E_NOMEM; /* not agreed: the other ranks wait in the exchange */
        }
        mp_parts parts = {0, ptrs, sizes};
        for (int i = 0; i < n; i++)
            if (kind_of(rlx_dtype_of(in[i]), op) == k) {
                sizes[parts.n] = (size_t)kind_elems(in[i]) * kind_size[k];
                ptrs[parts.n] = sizes[parts.n] ? rlx_data(src[i]) : NULL;
                parts.n++;
            }
        rlx_status st = reduce_flat(ctx, fn, (mp_kind)k, &parts, shared_data(s), total, op == RLX_MPI_MEAN);
        if (st == RLX_OK)
            st = allreduce_outputs(fn, n, in, k, op, s, out);
        shared_release(s); /* the results hold it now */
        if (st != RLX_OK)
            return st;
    }
    return RLX_OK;
}

rlx_status rlx_mpi_allreduce(rlx_mpi_ctx *ctx, int n, rlx_tensor *const *in, rlx_mpi_op op, rlx_tensor **out)
{
    static const char fn[] = "rlx_mpi_allreduce";
    rlx_status st = check_call(fn, ctx, n, in, out);
    if (st == RLX_E_ARG && !ctx)
        return st; /* no communicator: this rank alone fails */
    if (st == RLX_OK && op != RLX_MPI_SUM && op != RLX_MPI_MEAN) {
        mp_error(st = RLX_E_ARG, "%s: op %d is not RLX_MPI_SUM or RLX_MPI_MEAN", fn, (int)op);
    }
    for (int i = 0; st == RLX_OK && i < n; i++) {
        rlx_dtype dt = rlx_dtype_of(in[i]);
        if (rlx_numel(in[i]) < 0)
            mp_error(st = RLX_E_SHAPE, "%s: tensor %d has a dynamic dim", fn, i);
        else if (kind_of(dt, op) < 0)
            mp_error(st = RLX_E_DTYPE, "%s: tensor %d is %s: %s takes f32, f64, f16, bf16, c64%s", fn, i,
                     rlx_dtype_name(dt), op == RLX_MPI_SUM ? "SUM" : "MEAN",
                     op == RLX_MPI_SUM ? " and the integers" : " (integers: SUM only)");
    }
    rlx_scope_begin(); /* temporaries die here; the results escape */
    rlx_tensor **src = st == RLX_OK && n ? calloc((size_t)n, sizeof *src) : NULL;
    const unsigned char **ptrs = st == RLX_OK && n ? malloc((size_t)n * sizeof *ptrs) : NULL;
    size_t *sizes = st == RLX_OK && n ? malloc((size_t)n * sizeof *sizes) : NULL;
    if (st == RLX_OK && n && (!src || !ptrs || !sizes))
        mp_error(st = RLX_E_NOMEM, "%s: out of memory", fn);
    for (int i = 0; st == RLX_OK && i < n; i++) {
        rlx_dtype dt = rlx_dtype_of(in[i]);
        src[i] = dt == RLX_F16 || dt == RLX_BF16 ? rlx_cast(in[i], RLX_F32) : in[i];
    }
    if (st == RLX_OK && n && rlx_realize_many(src, n) != RLX_OK)
        st = mp_rlx_error(fn, "realizing the inputs");
    st = mp_agree(ctx, fn, st, n, (int)op, "op", in);
    if (st == RLX_OK && n)
        st = allreduce_kinds(ctx, fn, n, in, src, op, out, ptrs, sizes);
    if (st == RLX_OK && n && rlx_realize_many(out, n) != RLX_OK)
        st = mp_rlx_error(fn, "realizing the results");
    for (int i = 0; st == RLX_OK && i < n; i++)
        rlx_escape(out[i]);
    rlx_scope_end();
    free(src);
    free(ptrs);
    free(sizes);
    for (int i = 0; st != RLX_OK && out && i < n; i++)
        out[i] = NULL; /* released with the scope */
    return st;
}

/* ------------------------------------------------------- broadcast */

/* Byte offsets of each tensor in the packed buffer (8-aligned: every
 * result reads its dtype aligned); returns the total. */
static size_t byte_layout(int n, rlx_tensor *const *in, size_t *offs)
{
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        offs[i] = off;
        off += ((size_t)rlx_numel(in[i]) * (size_t)dtype_size(rlx_dtype_of(in[i])) + 7) & ~(size_t)7;
    }
    return off;
}

static rlx_status broadcast_data(rlx_mpi_ctx *ctx, const char *fn, int root, int n, rlx_tensor *const *in,
                                 rlx_tensor **out)
{
    size_t *offs = malloc((size_t)(n > 0 ? n : 1) * sizeof *offs);
    if (!offs) {
        mp_error(RLX_E_NOMEM, "%s: out of memory", fn);
        return RLX_E_NOMEM;
    }
    size_t total = byte_layout(n, in, offs);
    mp_shared *s = shared_new(ctx->pool, total);
    rlx_status st = RLX_OK;
    if (!s) {
        mp_error(st = RLX_E_NOMEM, "%s: out of memory for %zu bytes", fn, total);
        goto out;
    }
    if (ctx->rank == root)
        for (int i = 0; i < n; i++)
            if (rlx_numel(in[i]))
                memcpy(shared_data(s) + offs[i], rlx_data(in[i]),
                       (size_t)rlx_numel(in[i]) * (size_t)dtype_size(rlx_dtype_of(in[i])));
    for (size_t off = 0; off < total; off += ctx->bucket_bytes) {
        size_t m = total - off < ctx->bucket_bytes ? total - off : ctx->bucket_bytes;
        int err = MPI_Bcast(shared_data(s) + off, (int)m, MPI_BYTE, root, ctx->comm);
        if (err != MPI_SUCCESS) {
            st = mp_mpi_error(ctx, fn, "MPI_Bcast", err);
            goto out;
        }
    }
    for (int i = 0; i < n; i++) {
        int64_t shape[RLX_MAX_RANK];
        int rank = rlx_shape(in[i], shape, RLX_MAX_RANK);
        rlx_dtype dt = rlx_dtype_of(in[i]);
        out[i] = rlx_numel(in[i]) ? shared_tensor(s, offs[i], dt, rank, shape) : rlx_zeros(dt, rank, shape);
        if (!out[i]) {
            st = mp_rlx_error(fn, "making a result");
            goto out;
        }
    }
out:
    shared_release(s);
    free(offs);
    return st;
}

rlx_status rlx_mpi_broadcast(rlx_mpi_ctx *ctx, int root, int n, rlx_tensor *const *in, rlx_tensor **out)
{
    static const char fn[] = "rlx_mpi_broadcast";
    rlx_status st = check_call(fn, ctx, n, in, out);
    if (st == RLX_E_ARG && !ctx)
        return st; /* no communicator: this rank alone fails */
    if (st == RLX_OK && (root < 0 || root >= ctx->size))
        mp_error(st = RLX_E_ARG, "%s: root %d is outside 0..%d", fn, root, ctx->size - 1);
    for (int i = 0; st == RLX_OK && i < n; i++)
        if (rlx_numel(in[i]) < 0)
            mp_error(st = RLX_E_SHAPE, "%s: tensor %d has a dynamic dim", fn, i);
    rlx_scope_begin();
    /* Only the root's values travel; the others' tensors are layouts. */
    if (st == RLX_OK && ctx->rank == root && n && rlx_realize_many(in, n) != RLX_OK)
        st = mp_rlx_error(fn, "realizing the inputs");
    st = mp_agree(ctx, fn, st, n, root, "root", in);
    if (st == RLX_OK && n)
        st = broadcast_data(ctx, fn, root, n, in, out);
    for (int i = 0; st == RLX_OK && i < n; i++)
        rlx_escape(out[i]);
    rlx_scope_end();
    for (int i = 0; st != RLX_OK && out && i < n; i++)
        out[i] = NULL;
    return st;
}
