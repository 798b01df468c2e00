/*
 * checkpoint.h — what the file formats (safetensors.c, npy.c, npz.c) share:
 * the dtype table, the read-only file mapping, tensors over file bytes, the
 * checkpoint object, and the atomic writer.
 *
 * Loading maps a file once (PROT_READ, MAP_PRIVATE). A tensor whose bytes
 * are aligned for its dtype, little-endian, and (for bool) all 0 or 1 reads
 * the mapping in place through a storage of its own that holds one
 * reference to the mapping; anything else is copied (and byte-swapped or
 * normalized) into a fresh 64-byte aligned buffer. The mapping is unmapped
 * when its last reference goes: the loader's, or a tensor's.
 */
#ifndef RLX_CHECKPOINT_H
#define RLX_CHECKPOINT_H

#include <stdatomic.h>

#include "tensor/ts.h"

/* One row per element type a format can name. dtype is the rlx_dtype, or
 * -1 for a type librlx does not have yet: adding one is filling it in. */
typedef struct {
    int dtype;
    const char *st_name; /* safetensors "dtype" */
    char np_kind;        /* NumPy kind: 'b', 'i', 'u', 'f', 'c'; 0: none */
    int size;            /* bytes per element */
} ck_dtype;

const ck_dtype *ck_dtype_of(rlx_dtype dt);
const ck_dtype *ck_dtype_by_st(const char *name, size_t len); /* NULL if unknown */
const ck_dtype *ck_dtype_by_np(char kind, int size);

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
/* Records RLX_E_IO "fn: path: message". */
void ck_io(const char *fn, const char *path, const char *fmt, ...);

/* A whole file mapped read-only; len 0 for an empty file (base NULL). */
typedef struct {
    atomic_long refs;
    const unsigned char *base;
    size_t len;
} ck_map;

ck_map *ck_map_open(const char *fn, const char *path); /* NULL with an error */
void ck_map_release(ck_map *m);                         /* NULL is a no-op */

/* Checks a file's rank and dims (rank 0..8, dims >= 0, byte size within
 * int64); RLX_E_IO naming what is wrong and `what` (a tensor name). */
bool ck_check_shape(const char *fn, const char *path, const char *what, const ck_dtype *d, int rank,
                    const int64_t *shape);
/* A realized leaf of dt and shape over the bytes p: in place inside m when
 * m is given and the bytes allow it (see the top), else a copy; swap
 * means the bytes are big-endian. NULL with RLX_E_NOMEM. */
ir_node *ck_node(const char *fn, ck_map *m, const unsigned char *p, rlx_dtype dt, int rank, const int64_t *shape,
                 bool swap);

/* The loaded-file object: names and realized nodes (owns both). */
struct rlx_checkpoint {
    int n, cap;
    char **names;
    ir_node **nodes;
    int *sorted; /* indices ordered by name, for lookup */
};

rlx_checkpoint *ck_new(const char *fn);
/* Adds a copy of name[0..len) with node (taken). False with an error. */
bool ck_add(rlx_checkpoint *c, const char *fn, const char *name, size_t len, ir_node *node);
/* Sorts the names; a repeated one is RLX_E_IO naming it and the file. */
bool ck_finish(rlx_checkpoint *c, const char *fn, const char *path);

/* Saving. ck_payloads realizes tensors[0..n) and gives their contiguous
 * payloads, after checking n, names (non-NULL, non-empty, distinct: RLX_E_ARG)
 * and tensors; pay[i] stays valid while tensors[i] lives. */
bool ck_payloads(const char *fn, int n, const char *const *names, rlx_tensor *const *tensors,
                 const unsigned char **pay);
/* Writes to a temporary file beside path, renamed over path on commit. */
typedef struct {
    const char *fn, *path;
    char *tmp; /* owns */
    int fd;
    bool failed;
    uint64_t written;
} ck_writer;

bool ck_writer_open(ck_writer *w, const char *fn, const char *path);
bool ck_write(ck_writer *w, const void *p, size_t n);
rlx_status ck_writer_commit(ck_writer *w); /* fsync, close, rename; aborts on failure */
void ck_writer_abort(ck_writer *w);         /* closes and removes the temporary file */

/* npy.c, used by npz.c: the header of a .npy image at p[0..n). */
typedef struct {
    rlx_dtype dtype;
    int rank;
    int64_t shape[RLX_MAX_RANK];
    bool swap, fortran;
    size_t header, data; /* bytes of the header (with the magic) and of the data */
} ck_npy;

bool ck_npy_parse(const char *fn, const char *path, const char *what, const unsigned char *p, size_t n,
                  ck_npy *out);
/* The node of a parsed image whose data starts at p (fortran order becomes
 * a transposed view). */
ir_node *ck_npy_node(const char *fn, ck_map *m, const unsigned char *p, const ck_npy *h);
/* False with RLX_E_DTYPE "fn: what is DT, which has no .npy descr" for a
 * dtype NumPy lacks (bf16): the .npy and .npz savers refuse it. */
bool ck_npy_dtype_ok(const char *fn, const char *what, rlx_dtype dt);
/* Formats the .npy header of t's dtype and shape into buf (cap >= 256);
 * returns its length (a multiple of 64), 0 when it does not fit. */
size_t ck_npy_header(char *buf, size_t cap, rlx_dtype dt, int rank, const int64_t *shape);

/* npz.c: write every member with zip64 fields (tests reach the zip64
 * reader and writer with small files through it). */
extern bool ck_zip64_always;

#endif
