/*
 * npy.c — NumPy's .npy format: rlx_save_npy / rlx_load_npy, and the header
 * reader and writer npz.c uses for its members.
 *
 * An image is the magic "\x93NUMPY", a version (1.0: 2-byte header length;
 * 2.0 and 3.0 (UTF-8 header): 4-byte), then a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
 * spaces and a newline, then the data. The literal is read by a small
 * strict scanner that knows exactly these three keys; a structured or
 * object descr is refused. Big-endian data is byte-swapped into a copy;
 * Fortran order gives a transposed view of the data read as the reversed
 * shape (lazy, zero-copy).
 */
#include <stdio.h>
#include <string.h>

#include "tensor/checkpoint.h"

static const unsigned char MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

typedef struct {
    const char *p, *end;
    const char *fn, *path, *what;
} scan;

static bool bad(scan *s, const char *msg)
{
    ck_io(s->fn, s->path, "%s: malformed .npy header: %s", s->what, msg);
    return false;
}

static void ws(scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static bool lit(scan *s, char c)
{
    ws(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes into buf. */
static bool str(scan *s, char *buf, size_t cap)
{
    ws(s);
    if (s->p >= s->end || (*s->p != '\'' && *s->p != '"'))
        return bad(s, "expected a quoted string");
    char q = *s->p++;
    size_t n = 0;
    while (s->p < s->end && *s->p != q) {
        if (*s->p == '\\' || (unsigned char)*s->p < 0x20 || n + 1 >= cap)
            return bad(s, "unexpected string");
        buf[n++] = *s->p++;
    }
    if (s->p >= s->end)
        return bad(s, "unterminated string");
    s->p++;
    buf[n] = 0;
    return true;
}

static bool word(scan *s, bool *v)
{
    ws(s);
    size_t left = (size_t)(s->end - s->p);
    if (left >= 4 && !memcmp(s->p, "True", 4)) {
        s->p += 4;
        *v = true;
    } else if (left >= 5 && !memcmp(s->p, "False", 5)) {
        s->p += 5;
        *v = false;
    } else
        return bad(s, "fortran_order is not True or False");
    return true;
}

static bool dim(scan *s, int64_t *v)
{
    ws(s);
    if (s->p >= s->end || *s->p < '0' || *s->p > '9')
        return bad(s, "a dim is not a non-negative integer");
    uint64_t x = 0;
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
        x = x * 10 + (uint64_t)(*s->p++ - '0');
        if (x > (uint64_t)INT64_MAX)
            return bad(s, "a dim does not fit in int64");
    }
    *v = (int64_t)x;
    return true;
}

static bool shape(scan *s, ck_npy *h)
{
    if (!lit(s, '('))
        return bad(s, "shape is not a tuple");
    h->rank = 0;
    while (!lit(s, ')')) {
        if (h->rank == RLX_MAX_RANK)
            return bad(s, "shape has more than 8 dims");
        if (!dim(s, &h->shape[h->rank++]))
            return false;
        if (lit(s, ','))
            continue;
        if (!lit(s, ')'))
            return bad(s, "expected ',' or ')' in shape");
        break;
    }
    return true;
}

static bool descr(scan *s, const char *d, ck_npy *h)
{
    char order = d[0], kind = d[0] ? d[1] : 0;
    int size = 0;
    const char *q = d + (kind ? 2 : 0);
    if (!kind || !strchr("<>|=", order) || !*q)
        return bad(s, "descr is not a simple type such as '<f4'");
    for (; *q; q++) {
        if (*q < '0' || *q > '9' || size > 1000)
            return bad(s, "descr is not a simple type such as '<f4'");
        size = size * 10 + (*q - '0');
    }
    const ck_dtype *t = ck_dtype_by_np(kind, size);
    if (!t) {
        ck_io(s->fn, s->path, "%s: unsupported .npy descr '%s'", s->what, d);
        return false;
    }
    if (t->dtype < 0) {
        ts_error(RLX_E_UNSUPPORTED, s->fn, "%s: %s: dtype '%s' is not supported by librlx yet", s->path, s->what, d);
        return false;
    }
    h->dtype = (rlx_dtype)t->dtype;
    h->swap = order == '>' && size > 1;
    return true;
}

/* The dict: exactly 'descr', 'fortran_order' and 'shape', once each. */
static bool dict(scan *s, ck_npy *h)
{
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    bool seen[3] = {false, false, false};
    char key[32], d[32];
    if (!lit(s, '{'))
        return bad(s, "not a dict");
    while (!lit(s, '}')) {
        if (!str(s, key, sizeof key))
            return false;
        if (!lit(s, ':'))
            return bad(s, "expected ':' after a key");
        int k = 0;
        while (k < 3 && strcmp(key, keys[k]))
            k++;
        if (k == 3 || seen[k])
            return bad(s, k == 3 ? "unknown key" : "repeated key");
        seen[k] = true;
        bool ok = k == 0 ? str(s, d, sizeof d) && descr(s, d, h) : k == 1 ? word(s, &h->fortran) : shape(s, h);
        if (!ok)
            return false;
        if (!lit(s, ',')) {
            if (!lit(s, '}'))
                return bad(s, "expected ',' or '}'");
            break;
        }
    }
    if (!seen[0] || !seen[1] || !seen[2])
        return bad(s, "a key of descr, fortran_order, shape is missing");
    ws(s);
    return s->p == s->end ? true : bad(s, "bytes after the dict");
}

bool ck_npy_parse(const char *fn, const char *path, const char *what, const unsigned char *p, size_t n,
                  ck_npy *out)
{
    memset(out, 0, sizeof *out);
    if (n < 10 || memcmp(p, MAGIC, 6)) {
        ck_io(fn, path, "%s: %s", what, n < 10 ? "too short for a .npy image" : "no .npy magic");
        return false;
    }
    int major = p[6];
    if (major < 1 || major > 3) {
        ck_io(fn, path, "%s: .npy version %d.%d is not 1.0, 2.0 or 3.0", what, major, p[7]);
        return false;
    }
    size_t at = major == 1 ? 10 : 12;
    if (n < at) {
        ck_io(fn, path, "%s: too short for a .npy %d.0 header", what, major);
        return false;
    }
    uint64_t hl = major == 1 ? (uint64_t)(p[8] | p[9] << 8)
                             : (uint64_t)p[8] | (uint64_t)p[9] << 8 | (uint64_t)p[10] << 16 | (uint64_t)p[11] << 24;
    if (hl > n - at) {
        ck_io(fn, path, "%s: .npy header length runs past the end (%zu bytes)", what, n);
        return false;
    }
    scan s = {(const char *)p + at, (const char *)p + at + hl, fn, path, what};
    if (!dict(&s, out) || !ck_check_shape(fn, path, what, ck_dtype_of(out->dtype), out->rank, out->shape))
        return false;
    out->header = at + (size_t)hl;
    out->data = (size_t)ir_numel(out->rank, out->shape) * ir_dtype_size(out->dtype);
    if (out->data != n - out->header) {
        ck_io(fn, path, "%s: %s of %s needs %zu data bytes, the image holds %zu", what,
              ts_dims_str(out->rank, out->shape), rlx_dtype_name(out->dtype), out->data, n - out->header);
        return false;
    }
    return true;
}

ir_node *ck_npy_node(const char *fn, ck_map *m, const unsigned char *p, const ck_npy *h)
{
    if (!h->fortran || h->rank < 2)
        return ck_node(fn, m, p, h->dtype, h->rank, h->shape, h->swap);
    int64_t rev[RLX_MAX_RANK];
    for (int i = 0; i < h->rank; i++)
        rev[i] = h->shape[h->rank - 1 - i];
    ir_node *base = ck_node(fn, m, p, h->dtype, h->rank, rev, h->swap);
    if (!base || !ts_open(fn)) {
        ir_release(base);
        return NULL;
    }
    rlx_tensor *b = ts_wrap(base); /* the internal scope owns it now */
    rlx_tensor *v = b ? rlx_transpose(b, 0, NULL) : NULL;
    ir_node *r = v ? ir_retain(ts_node(v)) : NULL;
    ts_close(NULL);
    return r;
}

bool ck_npy_dtype_ok(const char *fn, const char *what, rlx_dtype dt)
{
    if (ck_dtype_of(dt)->np_kind)
        return true;
    ts_error(RLX_E_DTYPE, fn, "%s is %s, which has no NumPy .npy descr (NumPy has no such type): save it with "
             "rlx_save_safetensors, or cast it to f32 first", what, rlx_dtype_name(dt));
    return false;
}

size_t ck_npy_header(char *buf, size_t cap, rlx_dtype dt, int rank, const int64_t *shape)
{
    const ck_dtype *d = ck_dtype_of(dt);
    char dims[RLX_MAX_RANK * 21 + 4];
    size_t k = 0;
    dims[k++] = '(';
    for (int i = 0; i < rank; i++)
        k += (size_t)snprintf(dims + k, sizeof dims - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    k += (size_t)snprintf(dims + k, sizeof dims - k, "%s)", rank == 1 ? "," : "");
    int body = snprintf(buf + 10, cap > 10 ? cap - 10 : 0, "{'descr': '%c%c%d', 'fortran_order': False, 'shape': %s, }",
                        d->size == 1 ? '|' : '<', d->np_kind, d->size, dims);
    size_t total = ((size_t)body + 10 + 1 + 63) / 64 * 64; /* + '\n', padded to 64 */
    if (body < 0 || total > cap || total - 10 > 65535)
        return 0;
    memcpy(buf, MAGIC, 6);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)((total - 10) & 0xff);
    buf[9] = (char)((total - 10) >> 8);
    memset(buf + 10 + body, ' ', total - 10 - (size_t)body - 1);
    buf[total - 1] = '\n';
    return total;
}

rlx_tensor *rlx_load_npy(const char *path)
{
    const char *fn = "rlx_load_npy";
    ck_map *m = ck_map_open(fn, path);
    if (!m)
        return NULL;
    ck_npy h;
    ir_node *n = NULL;
    if (ck_npy_parse(fn, path, "array", m->base, m->len, &h))
        n = ck_npy_node(fn, m, m->base + h.header, &h);
    ck_map_release(m);
    return ts_wrap(n);
}

rlx_status rlx_save_npy(const char *path, rlx_tensor *t)
{
    const char *fn = "rlx_save_npy";
    const char *name = "t";
    const unsigned char *pay;
    if (ts_null(fn, "t", t) || !ck_npy_dtype_ok(fn, "t", ts_node(t)->dtype) || !ck_payloads(fn, 1, &name, &t, &pay))
        return rlx_last_status();
    ir_node *n = ts_node(t);
    char head[512];
    size_t hl = ck_npy_header(head, sizeof head, n->dtype, n->rank, n->shape);
    ck_writer w;
    if (!hl) {
        ts_error(RLX_E_INTERNAL, fn, "npy header of %s does not fit", ts_shape_str(n));
        return RLX_E_INTERNAL;
    }
    if (!ck_writer_open(&w, fn, path))
        return rlx_last_status();
    if (ck_write(&w, head, hl))
        ck_write(&w, pay, ir_node_bytes(n));
    return ck_writer_commit(&w);
}
