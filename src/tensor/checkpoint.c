/*
 * checkpoint.c — the pieces every checkpoint format shares (checkpoint.h):
 * the dtype table, mapping files, tensors over mapped bytes, the loaded-file
 * object (rlx_checkpoint_*) and the atomic writer of saved files.
 */
#include "tensor/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/rt.h"

/* ------------------------------------------------------------- dtypes */

static const ck_dtype dtypes[] = {
    {RLX_BOOL, "BOOL", 'b', 1},
    {RLX_U8, "U8", 'u', 1},
    {RLX_I8, "I8", 'i', 1},
    {RLX_I16, "I16", 'i', 2},
    {-1, "U16", 'u', 2},
    {RLX_I32, "I32", 'i', 4},
    {RLX_U32, "U32", 'u', 4},
    {RLX_I64, "I64", 'i', 8},
    {-1, "U64", 'u', 8},
    {RLX_F16, "F16", 'f', 2},
    {RLX_BF16, "BF16", 0, 2}, /* NumPy has no bfloat16: no .npy descr */
    {RLX_F32, "F32", 'f', 4},
    {RLX_F64, "F64", 'f', 8},
    {RLX_C64, "C64", 'c', 8}, /* interleaved f32 (re, im), NumPy's '<c8' */
    {RLX_C128, "C128", 'c', 16}, /* interleaved f64 (re, im), NumPy's '<c16' */
    {-1, "F8_E4M3", 0, 1},
    {-1, "F8_E5M2", 0, 1},
};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])

const ck_dtype *ck_dtype_of(rlx_dtype dt)
{
    for (size_t i = 0; i < NDTYPES; i++)
        if (dtypes[i].dtype == (int)dt)
            return &dtypes[i];
    return NULL;
}

const ck_dtype *ck_dtype_by_st(const char *name, size_t len)
{
    for (size_t i = 0; i < NDTYPES; i++)
        if (strlen(dtypes[i].st_name) == len && !memcmp(dtypes[i].st_name, name, len))
            return &dtypes[i];
    return NULL;
}

const ck_dtype *ck_dtype_by_np(char kind, int size)
{
    for (size_t i = 0; i < NDTYPES; i++)
        if (dtypes[i].np_kind == kind && dtypes[i].size == size)
            return &dtypes[i];
    return NULL;
}

void ck_io(const char *fn, const char *path, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ts_error(RLX_E_IO, fn, "%s: %s", path, msg);
}

/* ------------------------------------------------------------ mapping */

ck_map *ck_map_open(const char *fn, const char *path)
{
    if (!path || !*path) {
        ts_error(RLX_E_ARG, fn, "path is NULL or empty");
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ck_io(fn, path, "cannot open: %s", strerror(errno));
        return NULL;
    }
    struct stat sb;
    ck_map *m = NULL;
    if (fstat(fd, &sb) != 0) {
        ck_io(fn, path, "cannot stat: %s", strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        ck_io(fn, path, "not a regular file");
        goto out;
    }
    if ((uint64_t)sb.st_size > (uint64_t)IR_MAX_BYTES) {
        ck_io(fn, path, "file of %lld bytes is larger than the address space", (long long)sb.st_size);
        goto out;
    }
    if (!(m = ir_alloc(sizeof *m))) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        goto out;
    }
    atomic_init(&m->refs, 1);
    m->len = (size_t)sb.st_size;
    m->base = NULL;
    if (m->len) {
        void *b = mmap(NULL, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (b == MAP_FAILED) {
            ck_io(fn, path, "cannot map %zu bytes: %s", m->len, strerror(errno));
            ir_free(m);
            m = NULL;
            goto out;
        }
        m->base = b;
    }
out:
    close(fd);
    return m;
}

void ck_map_release(ck_map *m)
{
    if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (m->len)
        munmap((void *)(uintptr_t)m->base, m->len);
    ir_free(m);
}

static void release_mapped(void *data, void *ctx)
{
    (void)data;
    ck_map_release(ctx);
}

/* ------------------------------------------------------------ tensors */

bool ck_check_shape(const char *fn, const char *path, const char *what, const ck_dtype *d, int rank,
                    const int64_t *shape)
{
    if (rank < 0 || rank > RLX_MAX_RANK) {
        ck_io(fn, path, "tensor '%s': rank %d outside 0..%d", what, rank, RLX_MAX_RANK);
        return false;
    }
    for (int i = 0; i < rank; i++)
        if (shape[i] < 0) {
            ck_io(fn, path, "tensor '%s': negative dim %lld", what, (long long)shape[i]);
            return false;
        }
    if (!ir_shape_bytes_ok((rlx_dtype)d->dtype, rank, shape)) {
        ck_io(fn, path, "tensor '%s': shape %s overflows the addressable size", what, ts_dims_str(rank, shape));
        return false;
    }
    return true;
}

static bool bools_canonical(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] > 1)
            return false;
    return true;
}

static void copy_elements(unsigned char *dst, const unsigned char *src, size_t bytes, rlx_dtype dt, bool swap)
{
    /* a big-endian complex swaps each part */
    size_t size = ir_dtype_is_complex(dt) ? ir_dtype_size(dt) / 2 : ir_dtype_size(dt);
    if (dt == RLX_BOOL) {
        for (size_t i = 0; i < bytes; i++)
            dst[i] = src[i] != 0; /* any nonzero byte is true, as NumPy reads it */
    } else if (swap) {
        for (size_t i = 0; i < bytes; i += size)
            for (size_t k = 0; k < size; k++)
                dst[i + k] = src[i + size - 1 - k];
    } else
        memcpy(dst, src, bytes);
}

ir_node *ck_node(const char *fn, ck_map *m, const unsigned char *p, rlx_dtype dt, int rank, const int64_t *shape,
                 bool swap)
{
    size_t size = ir_dtype_size(dt), bytes = (size_t)ir_numel(rank, shape) * size;
    bool in_place = m && bytes && !swap && (uintptr_t)p % size == 0 && (dt != RLX_BOOL || bools_canonical(p, bytes));
    ir_storage *st;
    if (in_place) {
        st = ir_storage_new((void *)(uintptr_t)p, bytes, release_mapped, m);
        if (st)
            atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
    } else {
        st = rt_storage_alloc(bytes, false);
        if (st && bytes)
            copy_elements(st->data, p, bytes, dt, swap);
    }
    ir_node *n = st ? ir_make_buffer(st, 0, dt, rank, shape) : NULL;
    ir_storage_release(st);
    if (!n)
        ts_error(RLX_E_NOMEM, fn, "out of memory for %s of %s", ts_dims_str(rank, shape), rlx_dtype_name(dt));
    return n;
}

/* ----------------------------------------------------- the checkpoint */

rlx_checkpoint *ck_new(const char *fn)
{
    rlx_checkpoint *c = ir_calloc(1, sizeof *c);
    if (!c)
        ts_error(RLX_E_NOMEM, fn, "out of memory");
    return c;
}

bool ck_add(rlx_checkpoint *c, const char *fn, const char *name, size_t len, ir_node *node)
{
    char *copy = ir_alloc(len + 1);
    if (copy && c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 16;
        char **nn = ir_realloc(c->names, (size_t)cap * sizeof *nn);
        if (nn)
            c->names = nn;
        ir_node **nd = nn ? ir_realloc(c->nodes, (size_t)cap * sizeof *nd) : NULL;
        if (nd) {
            c->nodes = nd;
            c->cap = cap;
        }
    }
    if (!copy || c->n == c->cap) {
        ir_free(copy);
        ir_release(node);
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return false;
    }
    memcpy(copy, name, len);
    copy[len] = 0;
    c->names[c->n] = copy;
    c->nodes[c->n] = node;
    c->n++;
    return true;
}

typedef struct {
    const char *name;
    int idx;
} named;

static int by_name(const void *a, const void *b)
{
    const named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* idx[0..n) = the indices of names ordered by name; false when out of memory. */
static bool sort_names(const char *const *names, int n, int *idx)
{
    named *v = ir_alloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v)
        return false;
    for (int i = 0; i < n; i++)
        v[i] = (named){names[i], i};
    qsort(v, (size_t)n, sizeof *v, by_name);
    for (int i = 0; i < n; i++)
        idx[i] = v[i].idx;
    ir_free(v);
    return true;
}

bool ck_finish(rlx_checkpoint *c, const char *fn, const char *path)
{
    c->sorted = ir_alloc((size_t)(c->n ? c->n : 1) * sizeof *c->sorted);
    if (!c->sorted || !sort_names((const char *const *)c->names, c->n, c->sorted)) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return false;
    }
    for (int i = 1; i < c->n; i++)
        if (!strcmp(c->names[c->sorted[i - 1]], c->names[c->sorted[i]])) {
            ck_io(fn, path, "duplicate tensor name '%s'", c->names[c->sorted[i]]);
            return false;
        }
    return true;
}

int rlx_checkpoint_count(const rlx_checkpoint *c)
{
    if (!c) {
        ts_error(RLX_E_ARG, "rlx_checkpoint_count", "checkpoint is NULL");
        return -1;
    }
    return c->n;
}

const char *rlx_checkpoint_name(const rlx_checkpoint *c, int i)
{
    const char *fn = "rlx_checkpoint_name";
    if (!c) {
        ts_error(RLX_E_ARG, fn, "checkpoint is NULL");
        return NULL;
    }
    if (i < 0 || i >= c->n) {
        ts_error(RLX_E_ARG, fn, "index %d outside 0..%d", i, c->n - 1);
        return NULL;
    }
    return c->names[i];
}

rlx_tensor *rlx_checkpoint_get(const rlx_checkpoint *c, const char *name)
{
    const char *fn = "rlx_checkpoint_get";
    if (!c || !name) {
        ts_error(RLX_E_ARG, fn, "%s is NULL", c ? "name" : "checkpoint");
        return NULL;
    }
    int lo = 0, hi = c->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, k = c->sorted[mid];
        int cmp = strcmp(name, c->names[k]);
        if (!cmp)
            return ts_wrap(ir_retain(c->nodes[k]));
        if (cmp < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    ts_error(RLX_E_ARG, fn, "no tensor named '%s' (of %d)", name, c->n);
    return NULL;
}

void rlx_checkpoint_free(rlx_checkpoint *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++) {
        ir_free(c->names[i]);
        ir_release(c->nodes[i]);
    }
    ir_free(c->names);
    ir_free(c->nodes);
    ir_free(c->sorted);
    ir_free(c);
}

/* -------------------------------------------------------------- saving */

static bool check_names(const char *fn, int n, const char *const *names)
{
    for (int i = 0; i < n; i++)
        if (!names[i] || !*names[i]) {
            ts_error(RLX_E_ARG, fn, "names[%d] is %s", i, names[i] ? "empty" : "NULL");
            return false;
        }
    int *idx = ir_alloc((size_t)(n ? n : 1) * sizeof *idx);
    if (!idx || !sort_names(names, n, idx)) {
        ir_free(idx);
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return false;
    }
    bool ok = true;
    for (int i = 1; i < n && ok; i++)
        if (!strcmp(names[idx[i - 1]], names[idx[i]])) {
            ts_error(RLX_E_ARG, fn, "duplicate name '%s'", names[idx[i]]);
            ok = false;
        }
    ir_free(idx);
    return ok;
}

bool ck_payloads(const char *fn, int n, const char *const *names, rlx_tensor *const *tensors,
                 const unsigned char **pay)
{
    if (n < 0 || (n > 0 && (!names || !tensors))) {
        ts_error(RLX_E_ARG, fn, n < 0 ? "n = %d is negative" : "names or tensors is NULL for n = %d", n);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (!tensors[i]) {
            ts_error(RLX_E_ARG, fn, "tensors[%d] is NULL", i);
            return false;
        }
    if (!check_names(fn, n, names) || !ts_open(fn))
        return false;
    bool ok = true;
    for (int i = 0; i < n && ok; i++) /* errors inside name fn (the open composite) */
        ok = (pay[i] = rlx_data(tensors[i])) != NULL;
    ts_close(NULL);
    return ok;
}

bool ck_writer_open(ck_writer *w, const char *fn, const char *path)
{
    static atomic_uint serial;
    memset(w, 0, sizeof *w);
    w->fn = fn;
    w->path = path;
    w->fd = -1;
    if (!path || !*path) {
        ts_error(RLX_E_ARG, fn, "path is NULL or empty");
        return false;
    }
    size_t cap = strlen(path) + 48;
    if (!(w->tmp = ir_alloc(cap))) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return false;
    }
    for (int attempt = 0; attempt < 16 && w->fd < 0; attempt++) {
        snprintf(w->tmp, cap, "%s.tmp-%ld-%u", path, (long)getpid(), atomic_fetch_add(&serial, 1));
        w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666); /* the umask applies */
        if (w->fd < 0 && errno != EEXIST)
            break;
    }
    if (w->fd < 0) {
        ck_io(fn, path, "cannot create %s: %s", w->tmp, strerror(errno));
        ir_free(w->tmp);
        w->tmp = NULL;
        return false;
    }
    return true;
}

bool ck_write(ck_writer *w, const void *p, size_t n)
{
    const char *c = p;
    while (n && !w->failed) {
        ssize_t k = write(w->fd, c, n > ((size_t)1 << 30) ? (size_t)1 << 30 : n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            ck_io(w->fn, w->path, "write failed: %s", k < 0 ? strerror(errno) : "no progress");
            w->failed = true;
            break;
        }
        c += k;
        n -= (size_t)k;
        w->written += (uint64_t)k;
    }
    return !w->failed;
}

void ck_writer_abort(ck_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    if (w->tmp)
        unlink(w->tmp);
    ir_free(w->tmp);
    w->fd = -1;
    w->tmp = NULL;
}

rlx_status ck_writer_commit(ck_writer *w)
{
    const char *what = NULL;
    if (w->failed)
        what = "";
    else if (fsync(w->fd) != 0)
        what = "fsync";
    else {
        int rc = close(w->fd);
        w->fd = -1;
        if (rc != 0)
            what = "close";
        else if (rename(w->tmp, w->path) != 0)
            what = "rename";
    }
    if (what) {
        if (*what)
            ck_io(w->fn, w->path, "%s failed: %s", what, strerror(errno));
        ck_writer_abort(w);
        return RLX_E_IO;
    }
    ir_free(w->tmp);
    w->tmp = NULL;
    return RLX_OK;
}
