/*
 * npz.c — NumPy's .npz archives: rlx_save_npz / rlx_load_npz.
 *
 * An .npz is a zip file of NAME.npy members. Reading takes the central
 * directory (zip64 records included) and accepts STORED members (np.savez:
 * parsed in place in the mapping, zero-copy when aligned) and DEFLATE ones
 * (np.savez_compressed: inflated with zlib into a buffer, then copied into
 * the tensor). Every member's CRC-32 is checked. Multi-disk archives,
 * encryption and other methods are RLX_E_IO. Writing stores members
 * uncompressed (STORED) with zip64 fields where a size or offset needs
 * them, so np.load reads the result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "tensor/checkpoint.h"
#include "tensor/json.h"

bool ck_zip64_always;

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u
#define MAX32 0xffffffffu

static uint64_t rd(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

typedef struct {
    const char *fn, *path;
    ck_map *m;
} zip;

typedef struct {
    uint64_t comp, size, local;
    uint32_t crc;
    int method, flags;
    const unsigned char *name;
    size_t name_len;
} member;

/* [off, off+n) lies inside the file. */
static bool inside(const zip *z, uint64_t off, uint64_t n) { return off <= z->m->len && n <= z->m->len - off; }

/* The central directory: where it starts and how many entries it has. */
static bool find_directory(const zip *z, uint64_t *cd, uint64_t *cd_size, uint64_t *count)
{
    const unsigned char *b = z->m->base;
    size_t len = z->m->len;
    if (len < 22) {
        ck_io(z->fn, z->path, "file of %zu bytes is too short for a zip archive", len);
        return false;
    }
    size_t at = len - 22, stop = len - 22 > 65535 ? len - 22 - 65535 : 0;
    for (;; at--) {
        if (rd(b + at, 4) == SIG_EOCD && at + 22 + rd(b + at + 20, 2) == len)
            break;
        if (at == stop) {
            ck_io(z->fn, z->path, "no end of central directory record: not a zip archive");
            return false;
        }
    }
    if (rd(b + at + 4, 2) || rd(b + at + 6, 2)) {
        ck_io(z->fn, z->path, "multi-disk zip archives are not supported");
        return false;
    }
    *count = rd(b + at + 10, 2);
    *cd_size = rd(b + at + 12, 4);
    *cd = rd(b + at + 16, 4);
    if (*count == 0xffff || *cd_size == MAX32 || *cd == MAX32) {
        if (at < 20 || rd(b + at - 20, 4) != SIG_LOC64) {
            ck_io(z->fn, z->path, "zip64 end of central directory locator missing");
            return false;
        }
        uint64_t r = rd(b + at - 20 + 8, 8);
        if (!inside(z, r, 56) || rd(b + r, 4) != SIG_EOCD64 || rd(b + r + 16, 4) || rd(b + r + 20, 4)) {
            ck_io(z->fn, z->path, "zip64 end of central directory record missing or multi-disk");
            return false;
        }
        *count = rd(b + r + 32, 8);
        *cd_size = rd(b + r + 40, 8);
        *cd = rd(b + r + 48, 8);
    }
    if (!inside(z, *cd, *cd_size) || *count > *cd_size / 46) {
        ck_io(z->fn, z->path, "central directory (%llu entries, %llu bytes at %llu) outside the file",
              (unsigned long long)*count, (unsigned long long)*cd_size, (unsigned long long)*cd);
        return false;
    }
    return true;
}

/* Reads the zip64 extra field of a central entry into the fields at MAX32. */
static bool zip64_extra(const zip *z, const unsigned char *x, size_t n, member *e, bool need_local)
{
    uint64_t *want[3] = {e->size == MAX32 ? &e->size : NULL, e->comp == MAX32 ? &e->comp : NULL,
                         need_local ? &e->local : NULL};
    while (n >= 4) {
        uint64_t id = rd(x, 2), sz = rd(x + 2, 2);
        if (sz > n - 4)
            break;
        if (id == 1) {
            const unsigned char *q = x + 4;
            for (int i = 0; i < 3; i++) {
                if (!want[i])
                    continue;
                if ((size_t)(q - x - 4) + 8 > sz)
                    break;
                *want[i] = rd(q, 8);
                want[i] = NULL;
                q += 8;
            }
        }
        x += 4 + sz;
        n -= 4 + (size_t)sz;
    }
    if (want[0] || want[1] || want[2]) {
        ck_io(z->fn, z->path, "member '%.*s': zip64 sizes missing", (int)e->name_len, (const char *)e->name);
        return false;
    }
    return true;
}

/* One central directory entry at *at; advances *at. */
static bool central_entry(const zip *z, uint64_t *at, uint64_t end, member *e)
{
    const unsigned char *b = z->m->base;
    if (end - *at < 46 || rd(b + *at, 4) != SIG_CENTRAL) {
        ck_io(z->fn, z->path, "corrupt central directory entry at byte %llu", (unsigned long long)*at);
        return false;
    }
    const unsigned char *c = b + *at;
    uint64_t nl = rd(c + 28, 2), xl = rd(c + 30, 2), cl = rd(c + 32, 2);
    if (end - *at - 46 < nl + xl + cl) {
        ck_io(z->fn, z->path, "central directory entry at byte %llu runs past the directory", (unsigned long long)*at);
        return false;
    }
    e->flags = (int)rd(c + 8, 2);
    e->method = (int)rd(c + 10, 2);
    e->crc = (uint32_t)rd(c + 16, 4);
    e->comp = rd(c + 20, 4);
    e->size = rd(c + 24, 4);
    e->local = rd(c + 42, 4);
    e->name = c + 46;
    e->name_len = (size_t)nl;
    *at += 46 + nl + xl + cl;
    bool z64 = e->comp == MAX32 || e->size == MAX32 || e->local == MAX32;
    return !z64 || zip64_extra(z, c + 46 + nl, (size_t)xl, e, e->local == MAX32);
}

/* The member's data inside the mapping, after its local header. */
static const unsigned char *member_data(const zip *z, const member *e)
{
    const unsigned char *b = z->m->base;
    const char *why = NULL;
    if (!inside(z, e->local, 30) || rd(b + e->local, 4) != SIG_LOCAL)
        why = "local header missing";
    else {
        uint64_t nl = rd(b + e->local + 26, 2), xl = rd(b + e->local + 28, 2), data = e->local + 30 + nl + xl;
        if (nl != e->name_len || memcmp(b + e->local + 30, e->name, e->name_len))
            why = "local header names another member";
        else if (!inside(z, data, e->comp))
            why = "data runs past the end of the file";
        else
            return b + data;
    }
    ck_io(z->fn, z->path, "member '%.*s': %s", (int)e->name_len, (const char *)e->name, why);
    return NULL;
}

static uint32_t crc_of(const unsigned char *p, uint64_t n)
{
    return (uint32_t)crc32_z(crc32_z(0, Z_NULL, 0), p, (z_size_t)n);
}

/* Inflates a raw DEFLATE stream of exactly e->size bytes; NULL with an error. */
static unsigned char *inflate_member(const zip *z, const member *e, const unsigned char *src, const char *what)
{
    if (e->size > e->comp * 1032 + 1024) { /* DEFLATE cannot expand more than 1032:1 */
        ck_io(z->fn, z->path, "member '%s': %llu bytes cannot inflate to %llu", what,
              (unsigned long long)e->comp, (unsigned long long)e->size);
        return NULL;
    }
    unsigned char *out = ir_alloc(e->size ? (size_t)e->size : 1);
    if (!out) {
        ts_error(RLX_E_NOMEM, z->fn, "out of memory inflating member '%s' (%llu bytes)", what,
                 (unsigned long long)e->size);
        return NULL;
    }
    z_stream s;
    memset(&s, 0, sizeof s);
    int rc = inflateInit2(&s, -15);
    uint64_t in_left = e->comp, out_left = e->size;
    s.next_in = (unsigned char *)(uintptr_t)src;
    s.next_out = out;
    while (rc == Z_OK) {
        if (!s.avail_in) {
            s.avail_in = in_left > (1u << 30) ? 1u << 30 : (uInt)in_left;
            in_left -= s.avail_in;
        }
        if (!s.avail_out) {
            s.avail_out = out_left > (1u << 30) ? 1u << 30 : (uInt)out_left;
            out_left -= s.avail_out;
        }
        rc = inflate(&s, Z_NO_FLUSH); /* Z_BUF_ERROR: no progress, input or room exhausted */
    }
    uint64_t produced = (uint64_t)(s.next_out - out);
    inflateEnd(&s);
    if (rc != Z_STREAM_END || produced != e->size) {
        ck_io(z->fn, z->path, "member '%s': corrupt DEFLATE data (%s)", what,
              rc == Z_STREAM_END ? "wrong size" : rc == Z_DATA_ERROR ? "invalid stream" : "truncated or oversized");
        ir_free(out);
        return NULL;
    }
    return out;
}

static ir_node *member_node(const zip *z, const member *e, const char *what)
{
    const unsigned char *src = member_data(z, e);
    if (!src)
        return NULL;
    if (e->flags & 1) {
        ck_io(z->fn, z->path, "member '%s' is encrypted", what);
        return NULL;
    }
    if (e->method != 0 && e->method != 8) {
        ck_io(z->fn, z->path, "member '%s': compression method %d is not STORED or DEFLATE", what, e->method);
        return NULL;
    }
    if (e->method == 0 && e->comp != e->size) {
        ck_io(z->fn, z->path, "member '%s': stored sizes differ (%llu, %llu)", what, (unsigned long long)e->comp,
              (unsigned long long)e->size);
        return NULL;
    }
    unsigned char *buf = e->method == 8 ? inflate_member(z, e, src, what) : NULL;
    if (e->method == 8 && !buf)
        return NULL;
    const unsigned char *img = buf ? buf : src;
    ir_node *n = NULL;
    ck_npy h;
    if (crc_of(img, e->size) != e->crc)
        ck_io(z->fn, z->path, "member '%s': CRC-32 mismatch", what);
    else if (ck_npy_parse(z->fn, z->path, what, img, (size_t)e->size, &h))
        n = ck_npy_node(z->fn, buf ? NULL : z->m, img + h.header, &h); /* inflated bytes are copied */
    ir_free(buf);
    return n;
}

static bool add_member(const zip *z, rlx_checkpoint *c, const member *e)
{
    char what[160];
    snprintf(what, sizeof what, "%.*s", (int)(e->name_len < 150 ? e->name_len : 150), (const char *)e->name);
    if (e->name_len < 5 || memcmp(e->name + e->name_len - 4, ".npy", 4) || memchr(e->name, 0, e->name_len)) {
        ck_io(z->fn, z->path, "member '%s' is not a NAME.npy array", what);
        return false;
    }
    ir_node *n = member_node(z, e, what);
    return n && ck_add(c, z->fn, (const char *)e->name, e->name_len - 4, n);
}

rlx_checkpoint *rlx_load_npz(const char *path)
{
    const char *fn = "rlx_load_npz";
    zip z = {fn, path, ck_map_open(fn, path)};
    if (!z.m)
        return NULL;
    uint64_t cd, cd_size, count;
    rlx_checkpoint *c = NULL;
    if (!find_directory(&z, &cd, &cd_size, &count) || !(c = ck_new(fn)))
        goto out;
    uint64_t at = cd;
    for (uint64_t i = 0; i < count; i++) {
        member e;
        if (!central_entry(&z, &at, cd + cd_size, &e) || !add_member(&z, c, &e))
            goto fail;
    }
    if (ck_finish(c, fn, path))
        goto out;
fail:
    rlx_checkpoint_free(c);
    c = NULL;
out:
    ck_map_release(z.m);
    return c;
}

/* ------------------------------------------------------------- saving */

static unsigned char *wr(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        *p++ = (unsigned char)(v >> (8 * i));
    return p;
}

typedef struct {
    uint64_t offset, size;
    uint32_t crc;
    bool z64;
} written;

static bool has_high_bytes(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s >= 0x80)
            return true;
    return false;
}

/* The common part of the local (30 bytes) and central (46) headers from the version needed on. */
static unsigned char *common(unsigned char *p, const char *name, const written *m)
{
    p = wr(p, m->z64 ? 45 : 20, 2);
    p = wr(p, has_high_bytes(name) ? 0x800 : 0, 2); /* bit 11: the name is UTF-8 */
    p = wr(p, 0, 2);                                /* STORED */
    p = wr(p, 0, 2);                                /* 00:00:00 */
    p = wr(p, 0x21, 2);                             /* 1980-01-01 */
    p = wr(p, m->crc, 4);
    p = wr(p, m->z64 ? MAX32 : m->size, 4);
    return wr(p, m->z64 ? MAX32 : m->size, 4);
}

static bool write_member(ck_writer *w, const char *name, const char *head, size_t hl, const void *data,
                         size_t bytes, written *m)
{
    size_t nl = strlen(name) + 4;
    unsigned char loc[30 + 20], *p = loc;
    m->offset = w->written;
    m->size = hl + bytes;
    m->crc = (uint32_t)crc32_z(crc32_z(0, (const Bytef *)head, (z_size_t)hl), data, (z_size_t)bytes);
    m->z64 = ck_zip64_always || m->size >= MAX32 || m->offset >= MAX32;
    p = wr(p, SIG_LOCAL, 4);
    p = common(p, name, m);
    p = wr(p, nl, 2);
    p = wr(p, m->z64 ? 20 : 0, 2);
    bool ok = ck_write(w, loc, 30) && ck_write(w, name, nl - 4) && ck_write(w, ".npy", 4);
    if (m->z64) {
        p = wr(loc, 1, 2);
        p = wr(p, 16, 2);
        p = wr(p, m->size, 8);
        wr(p, m->size, 8);
        ok = ok && ck_write(w, loc, 20);
    }
    return ok && ck_write(w, head, hl) && ck_write(w, data, bytes);
}

static bool write_central(ck_writer *w, const char *name, const written *m)
{
    size_t nl = strlen(name) + 4;
    unsigned char c[46 + 28], *p = c;
    p = wr(p, SIG_CENTRAL, 4);
    p = wr(p, m->z64 ? 45 : 20, 2); /* made by: MS-DOS, 4.5 or 2.0 */
    p = common(p, name, m);
    p = wr(p, nl, 2);
    p = wr(p, m->z64 ? 28 : 0, 2);
    p = wr(p, 0, 2);                               /* comment */
    p = wr(p, 0, 2);                               /* disk */
    p = wr(p, 0, 2);                               /* internal attributes */
    p = wr(p, 0, 4);                               /* external attributes */
    p = wr(p, m->z64 ? MAX32 : m->offset, 4);
    bool ok = ck_write(w, c, 46) && ck_write(w, name, nl - 4) && ck_write(w, ".npy", 4);
    if (m->z64) {
        p = wr(c, 1, 2);
        p = wr(p, 24, 2);
        p = wr(p, m->size, 8);
        p = wr(p, m->size, 8);
        wr(p, m->offset, 8);
        ok = ok && ck_write(w, c, 28);
    }
    return ok;
}

static bool write_end(ck_writer *w, uint64_t n, uint64_t cd, uint64_t cd_size)
{
    unsigned char e[56 + 20 + 22], *p = e;
    bool z64 = ck_zip64_always || n >= 0xffff || cd >= MAX32 || cd_size >= MAX32;
    if (z64) {
        uint64_t rec = w->written;
        p = wr(p, SIG_EOCD64, 4);
        p = wr(p, 44, 8);
        p = wr(p, 45, 2);
        p = wr(p, 45, 2);
        p = wr(p, 0, 8); /* disks */
        p = wr(p, n, 8);
        p = wr(p, n, 8);
        p = wr(p, cd_size, 8);
        p = wr(p, cd, 8);
        p = wr(p, SIG_LOC64, 4);
        p = wr(p, 0, 4);
        p = wr(p, rec, 8);
        p = wr(p, 1, 4);
    }
    p = wr(p, SIG_EOCD, 4);
    p = wr(p, 0, 4);
    p = wr(p, z64 ? 0xffff : n, 2);
    p = wr(p, z64 ? 0xffff : n, 2);
    p = wr(p, z64 ? MAX32 : cd_size, 4);
    p = wr(p, z64 ? MAX32 : cd, 4);
    p = wr(p, 0, 2);
    return ck_write(w, e, (size_t)(p - e));
}

static bool check_npz_members(const char *fn, int n, const char *const *names, rlx_tensor *const *tensors)
{
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (len > 60000 || !json_utf8_valid(names[i], len)) {
            ts_error(RLX_E_ARG, fn, "names[%d] is %s", i, len > 60000 ? "longer than 60000 bytes" : "not valid UTF-8");
            return false;
        }
        char what[48];
        snprintf(what, sizeof what, "tensors[%d]", i);
        if (!ck_npy_dtype_ok(fn, what, ts_node(tensors[i])->dtype))
            return false;
    }
    return true;
}

rlx_status rlx_save_npz(const char *path, int n, const char *const *names, rlx_tensor *const *tensors)
{
    const char *fn = "rlx_save_npz";
    const unsigned char **pay = ir_alloc((size_t)(n > 0 ? n : 1) * sizeof *pay);
    written *m = ir_alloc((size_t)(n > 0 ? n : 1) * sizeof *m);
    ck_writer w;
    rlx_status st = RLX_E_NOMEM;
    if (!pay || !m) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        goto out;
    }
    if (!ck_payloads(fn, n, names, tensors, pay) || !check_npz_members(fn, n, names, tensors) || !ck_writer_open(&w, fn, path)) {
        st = rlx_last_status();
        goto out;
    }
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        ir_node *t = ts_node(tensors[i]);
        char head[512];
        size_t hl = ck_npy_header(head, sizeof head, t->dtype, t->rank, t->shape);
        ok = hl && write_member(&w, names[i], head, hl, pay[i], ir_node_bytes(t), &m[i]);
    }
    uint64_t cd = w.written;
    for (int i = 0; i < n && ok; i++)
        ok = write_central(&w, names[i], &m[i]);
    ok = ok && write_end(&w, (uint64_t)n, cd, w.written - cd);
    w.failed = w.failed || !ok;
    st = ck_writer_commit(&w);
out:
    ir_free(pay);
    ir_free(m);
    return st;
}
