/*
 * rlx_mpi.h — data-parallel collectives of librlx tensors over MPI
 * (librlx_mpi, an optional library built when CMake finds MPI; librlx
 * itself never links MPI).
 *
 * The usual data-parallel step: every rank holds the same parameters
 * (rlx_mpi_broadcast from one rank at the start), computes the gradients
 * of its shard of the batch, averages them with rlx_mpi_allreduce
 * (RLX_MPI_MEAN) and applies the same update. It embeds in an existing MPI
 * program: the caller initializes MPI (MPI_Init or MPI_Init_thread) and
 * passes a communicator.
 *
 * Ownership and errors follow rlx.h: results are new references (recorded
 * in the caller's open rlx scope, as any librlx result), arguments are
 * borrowed. A failing call returns a non-RLX_OK status and records a
 * thread-local error read with rlx_mpi_last_status / rlx_mpi_last_error
 * (librlx's own rlx_last_error is not changed by this library, except
 * by the librlx calls it makes); every out[i] is then NULL.
 *
 * Collectives: rlx_mpi_allreduce, rlx_mpi_broadcast and rlx_mpi_barrier
 * must be called by every rank of the context, in the same order, from
 * one thread per rank at a time (MPI_THREAD_SERIALIZED is enough). Before
 * moving any data the ranks agree on the call: each sends a short record
 * (its own status, the tensor count, the op or root, the bucket size, a
 * hash of every dtype and shape) to all (MPI_Allgather). So a bad
 * argument on one rank, or tensors that differ across ranks, make the
 * call fail on EVERY rank with the same kind of error, never a hang or
 * garbage:
 *   - a rank whose own arguments are bad (NULL tensor, n < 0, a dtype the
 *     op refuses, a root outside 0..size-1, a failed realization) returns
 *     its own error; the others return the same status with
 *     "rlx_mpi_allreduce: rank 1 failed: <its message>";
 *   - different counts, ops, roots, bucket sizes or shared-memory
 *     options: RLX_E_ARG naming both;
 *   - a tensor whose dtype differs: RLX_E_DTYPE, whose shape differs:
 *     RLX_E_SHAPE, e.g. "rlx_mpi_allreduce: tensor 3 differs across ranks:
 *     rank 0 has f32 [2,3], rank 1 has f32 [2,4]";
 *   - an MPI failure (the context's communicator has MPI_ERRORS_RETURN):
 *     RLX_E_IO naming the function, this rank and MPI's error string.
 * What MPI cannot report: a peer that never calls (hung, or in another
 * collective) blocks the others forever: run under a time limit (mpirun
 * --timeout SECONDS, or the batch system's). A rank that exits or dies
 * without MPI_Finalize makes OpenMPI's runtime (mpirun) kill the whole job
 * with a message naming the rank; no call returns. A NULL ctx cannot
 * communicate: it fails on the calling rank only (RLX_E_ARG).
 *
 * Buckets: the tensors of one call, in order, form one flat array per
 * accumulation type (below), reduced in buckets of at most
 * rlx_mpi_set_bucket_bytes bytes (default 25 MiB, PyTorch DDP's): many
 * small tensors fused into one bucket, a large one spread over several.
 * The results of one type share one buffer (zero-copy blobs). Memory
 * besides the results: the context keeps one bucket per rank (the shared
 * window, or message scratch), and up to 4 result buffers whose results
 * were all released, for reuse by later calls of about the same size (a
 * fresh buffer pays a page fault per page on first touch: 18 ms per MB on
 * the machine these were measured on, 10x the whole 100 MB allreduce);
 * they are freed with the context (or its last result).
 *
 * No overlap with the backward pass (DDP's bucket-by-bucket reduction
 * while gradients are still computed): rlx_program_run computes all
 * gradients in one call, and splitting it per bucket would lose the
 * shared work; more to the point, over shared memory (OpenMPI's vader:
 * the CPU copies every byte, and OpenMPI progresses messages only inside
 * MPI calls) there is no idle engine to overlap with when every core
 * computes. W6 over 2 ranks x 1 thread on 2 cores spends the allreduce's
 * time copying on the same cores (bench/bench_mpi.c prints its share).
 * Over a network with RDMA, overlap would pay; it is not built.
 */
#ifndef RLX_MPI_H
#define RLX_MPI_H

#include <mpi.h>

#include "rlx.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RLX_MPI_BUILDING_LIBRARY) && defined(__GNUC__)
#define RLX_MPI_API __attribute__((visibility("default")))
#else
#define RLX_MPI_API
#endif

typedef struct rlx_mpi_ctx rlx_mpi_ctx; /* opaque: a duplicated communicator and options */

typedef enum { RLX_MPI_SUM = 0, RLX_MPI_MEAN = 1 } rlx_mpi_op;

#define RLX_MPI_DEFAULT_BUCKET_BYTES ((size_t)25 << 20)

/* Status and message of the last error this library recorded on this
 * thread (RLX_OK and "" when none); rlx_mpi_clear_error forgets it. The
 * message is valid until the next rlx_mpi call on this thread. */
RLX_MPI_API rlx_status rlx_mpi_last_status(void);
RLX_MPI_API const char *rlx_mpi_last_error(void);
RLX_MPI_API void rlx_mpi_clear_error(void);

/* A context over a duplicate of comm (MPI_Comm_dup: collective over comm,
 * so every rank of comm calls it), with MPI_ERRORS_RETURN set on the
 * duplicate: the caller's communicator and its error handler are never
 * changed, and the library's messages never mix with the caller's. MPI
 * must be initialized. NULL on error: MPI not initialized or already
 * finalized, comm MPI_COMM_NULL or an intercommunicator (RLX_E_ARG), an
 * MPI failure (RLX_E_IO), no memory (RLX_E_NOMEM). */
RLX_MPI_API rlx_mpi_ctx *rlx_mpi_new(MPI_Comm comm);
/* Frees the duplicate communicator (MPI_Comm_free, collective: every rank
 * frees its context) and the context. NULL is a no-op. Tensors returned
 * earlier stay valid. */
RLX_MPI_API void rlx_mpi_free(rlx_mpi_ctx *ctx);
/* This rank and the number of ranks; -1 (RLX_E_ARG) for a NULL ctx. */
RLX_MPI_API int rlx_mpi_rank(const rlx_mpi_ctx *ctx);
RLX_MPI_API int rlx_mpi_size(const rlx_mpi_ctx *ctx);
/* Largest bucket in bytes, 16 .. 2^30 (else RLX_E_ARG); every rank must
 * set the same value (a call with different sizes fails with RLX_E_ARG on
 * every rank). Smaller buckets send more messages (tests use a few bytes
 * to cross bucket boundaries); the context keeps one bucket of scratch. */
RLX_MPI_API rlx_status rlx_mpi_set_bucket_bytes(rlx_mpi_ctx *ctx, size_t bytes);

/* Shared memory (on by default when every rank of ctx is on one node, as
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) tells; never otherwise):
 * rlx_mpi_allreduce moves its buckets through an MPI-3 shared window
 * (MPI_Win_allocate_shared, one bucket per rank, kept by the context)
 * instead of messages: each rank stores its bucket, folds its segment
 * reading the others' in place, and copies the sums out. Results are
 * bitwise the same either way (the same fold); off forces messages.
 * Every rank must set the same (else RLX_E_ARG on every rank at the next
 * call). rlx_mpi_shared_memory tells whether it is in use (false and
 * RLX_E_ARG for a NULL ctx). */
RLX_MPI_API rlx_status rlx_mpi_set_shared_memory(rlx_mpi_ctx *ctx, bool on);
RLX_MPI_API bool rlx_mpi_shared_memory(const rlx_mpi_ctx *ctx);

/* out[i] = the elementwise sum (RLX_MPI_SUM) or mean (RLX_MPI_MEAN) of
 * in[i] over every rank, i < n, each realized, with in[i]'s shape and
 * dtype (rank 0 and empty shapes too; any view: it is realized
 * contiguous first). Every rank gets bitwise the same results.
 *
 * Deterministic by construction (no MPI_Allreduce, whose algorithm and
 * order OpenMPI chooses by message size): each bucket is split into size
 * segments, segment k of every rank goes to rank k (a message, or a load
 * from the shared window), which adds the ranks' values in rank order,
 * then the sums go to every rank. So each element is
 *     s = (...((x_0 + x_1) + x_2) + ... ) + x_{size-1}
 * computed in the accumulation type, and the mean is s / size (one
 * correctly rounded division), whatever the bucket size, the message
 * timing or the run. Accumulation types: f32 for f32; f16 and bf16 are
 * widened exactly to f32, summed (and divided) there and rounded once to
 * their dtype (nearest even); c64 (c128) sums its real and imaginary f32
 * (f64) parts separately (exactly complex addition); f64 in f64. Integers (i8, u8,
 * i16, i32, u32, i64) SUM only, wrapping modulo 2^bits in their own dtype
 * as C unsigned arithmetic (NumPy's sum of that dtype); MEAN of an integer
 * and any bool are RLX_E_DTYPE.
 *
 * Error bound of a data-parallel gradient (f32: u = 2^-24; f64: 2^-53):
 * this function adds size values with size-1 roundings, so against the
 * exact sum of its inputs |s - exact| <= (size-1) u sum_r |x_r| (to first
 * order). A gradient averaged over size ranks, each of batch B/size,
 * against the gradient of one process with batch B: both are sums of the
 * same B per-sample terms t_j (and a scaling by 1/B), each sum in its own
 * order (the ranks' local sums, then this one; the one process's
 * blocked sums), and each t_j is computed through at most K roundings in
 * either process (K: the longest chain of sums in one term, e.g. K = in +
 * hidden + 16 for one hidden layer), so elementwise
 *     |g_ranks - g_one| <= 2 (B + K) u sum_j |t_j|   (first order).
 * tests/test_mpi.c checks this with the per-sample terms computed in f64.
 *
 * Errors: see the top of this file; op not SUM/MEAN, n < 0, in or a
 * tensor NULL, out NULL: RLX_E_ARG. */
RLX_MPI_API rlx_status rlx_mpi_allreduce(rlx_mpi_ctx *ctx, int n, rlx_tensor *const *in, rlx_mpi_op op,
                                         rlx_tensor **out);
/* out[i] = the values of in[i] on rank root, i < n, realized, on every rank
 * (root included: out[i] then holds in[i]'s values). Every rank passes
 * tensors of the same dtypes and shapes (a layout, as DDP's replicas);
 * only the root's are realized and read. Any dtype. Data moves as bytes
 * (MPI_Bcast of buckets), exact. Errors: see the top of this file; root
 * outside 0..size-1 RLX_E_ARG on every rank. */
RLX_MPI_API rlx_status rlx_mpi_broadcast(rlx_mpi_ctx *ctx, int root, int n, rlx_tensor *const *in,
                                         rlx_tensor **out);
/* Returns when every rank of ctx has called it (MPI_Barrier). */
RLX_MPI_API rlx_status rlx_mpi_barrier(rlx_mpi_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif /* RLX_MPI_H */
