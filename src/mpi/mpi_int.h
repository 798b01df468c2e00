/*
 * mpi_int.h — librlx_mpi's internals: the context, the error record and
 * the agreement every collective starts with. librlx_mpi sits on librlx's
 * public API only (rlx.h); it is a separate library, prefix mp_.
 */
#ifndef RLX_MPI_INT_H
#define RLX_MPI_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rlx_mpi.h"

/* Result buffers released by their last tensor wait here for the next
 * call (a fresh buffer costs a page fault per page on first touch; a
 * training loop releases one step's gradients before the next step's
 * allreduce). Shared by the context and every buffer it handed out, so a
 * buffer may outlive the context; freed with its last reference. */
enum { MP_SPARES = 4 };
typedef struct mp_pool mp_pool;

struct rlx_mpi_ctx {
    MPI_Comm comm;       /* owns: the duplicate, MPI_ERRORS_RETURN */
    int rank, size;
    size_t bucket_bytes; /* largest bucket; the same on every rank (agreed) */
    mp_pool *pool;       /* shared: spare result buffers */
    unsigned char *scratch; /* owns: a bucket's incoming segments, grown on demand */
    size_t scratch_bytes;
    bool shm_possible;      /* every rank on one node (MPI_Comm_split_type) */
    bool shm;               /* the option: buckets through a shared window */
    MPI_Win win;            /* owns when win_bytes: one bucket per rank, locked (lock_all) */
    size_t win_bytes;
    unsigned char **peer;   /* owns the array: each rank's part of win, as mapped here */
};

mp_pool *mp_pool_new(void);
void mp_pool_release(mp_pool *pool);

/* Records status and the formatted message (which names the function). */
void mp_error(rlx_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Records librlx's last error under fn's name; returns its status. */
rlx_status mp_rlx_error(const char *fn, const char *what);
/* Turns an MPI error code into RLX_E_IO naming fn, the rank and MPI's text. */
rlx_status mp_mpi_error(const rlx_mpi_ctx *ctx, const char *fn, const char *call, int err);
/* "f32 [2,3]" into buf. */
const char *mp_layout_str(char *buf, size_t cap, int dtype, int rank, const int64_t *shape);

/* What every rank brings to a collective: its own status so far (with the
 * message recorded when not OK), the count, the op or root, and the n
 * tensors' layouts (dtype, rank, shape of each; ignored when st is not
 * OK). Returns RLX_OK on every rank, or the same error class on every
 * rank (recorded): one rank's own failure, different counts / args /
 * bucket sizes, or the first tensor whose layout differs. */
rlx_status mp_agree(rlx_mpi_ctx *ctx, const char *fn, rlx_status st, int n, int arg, const char *arg_name,
                    rlx_tensor *const *in);

#endif
