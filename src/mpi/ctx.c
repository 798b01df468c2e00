/*
 * ctx.c — librlx_mpi's context (a duplicated communicator that returns
 * errors), its error record, the barrier, and the agreement that opens
 * every collective (mp_agree): one MPI_Allgather of a fixed record per
 * rank, so that any rank's bad input or a layout that differs across ranks
 * fails the call on every rank before any data moves.
 */
#define _POSIX_C_SOURCE 200809L /* strnlen */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi_int.h"

static _Thread_local rlx_status last_status;
static _Thread_local char last_msg[512];

rlx_status rlx_mpi_last_status(void) { return last_status; }
const char *rlx_mpi_last_error(void) { return last_msg; }
void rlx_mpi_clear_error(void)
{
    last_status = RLX_OK;
    last_msg[0] = 0;
}

void mp_error(rlx_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    last_status = st;
}

rlx_status mp_rlx_error(const char *fn, const char *what)
{
    rlx_status st = rlx_last_status();
    if (st == RLX_OK)
        st = RLX_E_INTERNAL; /* a librlx call failed without recording why */
    mp_error(st, "%s: %s: %s", fn, what, rlx_last_error());
    return st;
}

rlx_status mp_mpi_error(const rlx_mpi_ctx *ctx, const char *fn, const char *call, int err)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", err);
    mp_error(RLX_E_IO, "%s: rank %d: %s failed: %s", fn, ctx ? ctx->rank : -1, call, text);
    return RLX_E_IO;
}

const char *mp_layout_str(char *buf, size_t cap, int dtype, int rank, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, cap, "%s [", rlx_dtype_name((rlx_dtype)dtype));
    for (int i = 0; i < rank && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, i ? ",%lld" : "%lld", (long long)shape[i]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
    return buf;
}

/* ---------------------------------------------------------- the context */

rlx_mpi_ctx *rlx_mpi_new(MPI_Comm comm)
{
    static const char fn[] = "rlx_mpi_new";
    int init = 0, fin = 0, inter = 0, err;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin) {
        mp_error(RLX_E_ARG, "%s: MPI is %s", fn, fin ? "finalized" : "not initialized (call MPI_Init first)");
        return NULL;
    }
    if (comm == MPI_COMM_NULL) {
        mp_error(RLX_E_ARG, "%s: comm is MPI_COMM_NULL", fn);
        return NULL;
    }
    if ((err = MPI_Comm_test_inter(comm, &inter)) != MPI_SUCCESS) {
        mp_mpi_error(NULL, fn, "MPI_Comm_test_inter", err);
        return NULL;
    }
    if (inter) {
        mp_error(RLX_E_ARG, "%s: comm is an intercommunicator (an intracommunicator is needed)", fn);
        return NULL;
    }
    rlx_mpi_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        mp_error(RLX_E_NOMEM, "%s: out of memory", fn);
        return NULL;
    }
    /* The duplicate isolates our messages and error handler from the caller's. */
    if ((err = MPI_Comm_dup(comm, &ctx->comm)) != MPI_SUCCESS) {
        free(ctx);
        mp_mpi_error(NULL, fn, "MPI_Comm_dup", err);
        return NULL;
    }
    MPI_Comm_set_errhandler(ctx->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(ctx->comm, &ctx->rank);
    MPI_Comm_size(ctx->comm, &ctx->size);
    ctx->bucket_bytes = RLX_MPI_DEFAULT_BUCKET_BYTES;
    MPI_Comm node; /* the ranks sharing memory with this one */
    int node_size = 0;
    if (MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &node_size);
        MPI_Comm_free(&node);
    }
    /* All on one node or not: the same answer on every rank. */
    ctx->shm = ctx->shm_possible = node_size == ctx->size;
    ctx->peer = calloc((size_t)ctx->size, sizeof *ctx->peer);
    if (!(ctx->pool = mp_pool_new()) || !ctx->peer) {
        mp_pool_release(ctx->pool);
        free(ctx->peer);
        MPI_Comm_free(&ctx->comm);
        free(ctx);
        mp_error(RLX_E_NOMEM, "%s: out of memory", fn);
        return NULL;
    }
    return ctx;
}

void rlx_mpi_free(rlx_mpi_ctx *ctx)
{
    if (!ctx)
        return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && ctx->win_bytes) {
        MPI_Win_unlock_all(ctx->win);
        MPI_Win_free(&ctx->win);
    }
    if (!fin) /* after MPI_Finalize the communicator is gone with MPI */
        MPI_Comm_free(&ctx->comm);
    mp_pool_release(ctx->pool);
    free(ctx->peer);
    free(ctx->scratch);
    free(ctx);
}

int rlx_mpi_rank(const rlx_mpi_ctx *ctx)
{
    if (!ctx) {
        mp_error(RLX_E_ARG, "rlx_mpi_rank: ctx is NULL");
        return -1;
    }
    return ctx->rank;
}

int rlx_mpi_size(const rlx_mpi_ctx *ctx)
{
    if (!ctx) {
        mp_error(RLX_E_ARG, "rlx_mpi_size: ctx is NULL");
        return -1;
    }
    return ctx->size;
}

rlx_status rlx_mpi_set_bucket_bytes(rlx_mpi_ctx *ctx, size_t bytes)
{
    if (!ctx) {
        mp_error(RLX_E_ARG, "rlx_mpi_set_bucket_bytes: ctx is NULL");
        return RLX_E_ARG;
    }
    if (bytes < 16 || bytes > ((size_t)1 << 30)) {
        mp_error(RLX_E_ARG, "rlx_mpi_set_bucket_bytes: %zu bytes is outside 16 .. 2^30", bytes);
        return RLX_E_ARG;
    }
    ctx->bucket_bytes = bytes;
    return RLX_OK;
}

rlx_status rlx_mpi_set_shared_memory(rlx_mpi_ctx *ctx, bool on)
{
    if (!ctx) {
        mp_error(RLX_E_ARG, "rlx_mpi_set_shared_memory: ctx is NULL");
        return RLX_E_ARG;
    }
    ctx->shm = on && ctx->shm_possible;
    return RLX_OK;
}

bool rlx_mpi_shared_memory(const rlx_mpi_ctx *ctx)
{
    if (!ctx) {
        mp_error(RLX_E_ARG, "rlx_mpi_shared_memory: ctx is NULL");
        return false;
    }
    return ctx->shm;
}

rlx_status rlx_mpi_barrier(rlx_mpi_ctx *ctx)
{
    if (!ctx) {
        mp_error(RLX_E_ARG, "rlx_mpi_barrier: ctx is NULL");
        return RLX_E_ARG;
    }
    int err = MPI_Barrier(ctx->comm);
    return err == MPI_SUCCESS ? RLX_OK : mp_mpi_error(ctx, "rlx_mpi_barrier", "MPI_Barrier", err);
}

/* ---------------------------------------------------------- agreement */

/* One rank's record: fixed size, sent as bytes (every rank runs this same
 * build, so one layout). */
typedef struct {
    int32_t status, n, arg, desc_len, shm, pad;
    uint64_t hash, bucket;
    char msg[216];
} mp_record;
_Static_assert(sizeof(mp_record) == 256, "mp_record is sent as 256 bytes");

/* Layouts of n tensors: per tensor dtype, rank, dims. */
static int64_t *layouts(int n, rlx_tensor *const *in, int *len)
{
    int64_t *d = malloc(((size_t)n * (2 + RLX_MAX_RANK) + 1) * sizeof *d);
    int k = 0;
    for (int i = 0; d && i < n; i++) {
        d[k] = rlx_dtype_of(in[i]);
        d[k + 1] = rlx_shape(in[i], d + k + 2, RLX_MAX_RANK);
        k += 2 + (int)d[k + 1];
    }
    *len = k;
    return d;
}

static uint64_t fnv1a(const int64_t *d, int len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *p = (const unsigned char *)d;
    for (size_t i = 0; i < (size_t)len * sizeof *d; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* The first tensor whose layout on some rank differs from rank 0's. */
static rlx_status layout_mismatch(rlx_mpi_ctx *ctx, const char *fn, const mp_record *rec, const int64_t *mine,
                                  int len)
{
    int P = ctx->size, err;
    int *counts = malloc((size_t)P * sizeof *counts), *displs = malloc((size_t)P * sizeof *displs);
    int64_t total = 0;
    for (int r = 0; counts && displs && r < P; r++) {
        counts[r] = rec[r].desc_len;
        displs[r] = (int)total;
        total += rec[r].desc_len;
    }
    int64_t *all = malloc((size_t)(total + 1) * sizeof *all);
    /* Out of memory here leaves the other ranks in the Allgatherv: an
     * allocation failure is the one local error not agreed on. */
    if (!counts || !displs || !all || total > INT32_MAX) {
        free(counts), free(displs), free(all);
        mp_error(RLX_E_NOMEM, "%s: out of memory comparing the tensors' layouts", fn);
        return RLX_E_NOMEM;
    }
    err = MPI_Allgatherv(mine, len, MPI_INT64_T, all, counts, displs, MPI_INT64_T, ctx->comm);
    rlx_status st = RLX_E_INTERNAL;
    if (err != MPI_SUCCESS) {
        st = mp_mpi_error(ctx, fn, "MPI_Allgatherv", err);
        goto out;
    }
    const int64_t *d0 = all;
    for (int r = 1; r < P; r++) {
        const int64_t *a = d0, *b = all + displs[r];
        for (int i = 0; i < rec[0].n; i++) {
            int ra = (int)a[1], rb = (int)b[1];
            if (a[0] != b[0] || ra != rb || memcmp(a + 2, b + 2, (size_t)ra * sizeof *a) != 0) {
                char sa[160], sb[160];
                st = a[0] != b[0] ? RLX_E_DTYPE : RLX_E_SHAPE;
                mp_error(st, "%s: tensor %d differs across ranks: rank 0 has %s, rank %d has %s", fn, i,
                         mp_layout_str(sa, sizeof sa, (int)a[0], ra, a + 2), r,
                         mp_layout_str(sb, sizeof sb, (int)b[0], rb, b + 2));
                goto out;
            }
            a += 2 + ra;
            b += 2 + rb;
        }
    }
    mp_error(st, "%s: the layouts' hashes differ but the layouts do not", fn);
out:
    free(counts), free(displs), free(all);
    return st;
}

rlx_status mp_agree(rlx_mpi_ctx *ctx, const char *fn, rlx_status st, int n, int arg, const char *arg_name,
                    rlx_tensor *const *in)
{
    int P = ctx->size, len = 0, err;
    int64_t *mine = NULL;
    if (st == RLX_OK) {
        mine = layouts(n, in, &len);
        if (!mine) {
            mp_error(RLX_E_NOMEM, "%s: out of memory", fn);
            st = RLX_E_NOMEM;
            len = 0;
        }
    }
    mp_record me = {.status = (int32_t)st, .n = n, .arg = arg, .desc_len = st == RLX_OK ? len : 0,
                    .hash = st == RLX_OK ? fnv1a(mine, len) : 0, .bucket = ctx->bucket_bytes,
                    .shm = ctx->shm};
    if (st != RLX_OK) /* the record is zeroed: a truncated message stays terminated */
        memcpy(me.msg, last_msg, strnlen(last_msg, sizeof me.msg - 1));
    mp_record *rec = malloc((size_t)P * sizeof *rec);
    if (!rec) { /* cannot take part: the others would wait; nothing better to do */
        free(mine);
        mp_error(RLX_E_NOMEM, "%s: out of memory", fn);
        return RLX_E_NOMEM;
    }
    err = MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, rec, (int)sizeof me, MPI_BYTE, ctx->comm);
    if (err != MPI_SUCCESS) {
        st = mp_mpi_error(ctx, fn, "MPI_Allgather", err);
        goto out;
    }
    for (int r = 0; r < P; r++) {
        if (rec[r].status == RLX_OK)
            continue;
        if (st == RLX_OK) { /* this rank's own message is kept when it failed itself */
            st = (rlx_status)rec[r].status;
            mp_error(st, "%s: rank %d failed: %.*s", fn, r, (int)sizeof rec[r].msg - 1, rec[r].msg);
        }
        goto out;
    }
    for (int r = 1; r < P; r++) {
        if (rec[r].n != rec[0].n) {
            st = RLX_E_ARG;
            mp_error(st, "%s: ranks pass different tensor counts: rank 0 has %d, rank %d has %d", fn, rec[0].n, r,
                     rec[r].n);
            goto out;
        }
        if (rec[r].arg != rec[0].arg) {
            st = RLX_E_ARG;
            mp_error(st, "%s: ranks pass different %ss: rank 0 has %d, rank %d has %d", fn, arg_name, rec[0].arg, r,
                     rec[r].arg);
            goto out;
        }
        if (rec[r].shm != rec[0].shm) {
            st = RLX_E_ARG;
            mp_error(st, "%s: ranks set different shared-memory options: rank 0 %s, rank %d %s", fn,
                     rec[0].shm ? "on" : "off", r, rec[r].shm ? "on" : "off");
            goto out;
        }
        if (rec[r].bucket != rec[0].bucket) {
            st = RLX_E_ARG;
            mp_error(st, "%s: ranks set different bucket sizes: rank 0 has %llu bytes, rank %d has %llu", fn,
                     (unsigned long long)rec[0].bucket, r, (unsigned long long)rec[r].bucket);
            goto out;
        }
    }
    for (int r = 1; r < P; r++)
        if (rec[r].hash != rec[0].hash || rec[r].desc_len != rec[0].desc_len) {
            st = layout_mismatch(ctx, fn, rec, mine, len);
            goto out;
        }
out:
    free(rec);
    free(mine);
    return st;
}
