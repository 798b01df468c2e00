/*
 * safetensors.c — rlx_save_safetensors / rlx_load_safetensors.
 *
 * The format: an 8-byte little-endian header length N, N bytes of JSON
 * ({"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, ...,
 * optionally "__metadata__": {"key": "string"}}), then the data region.
 * Offsets are relative to the data region; the tensors must tile it exactly
 * (sorted by offset, no gap, no overlap, nothing after the last), as the
 * reference implementation requires. Every count and offset from the file
 * is checked against the mapping before any byte it names is touched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/checkpoint.h"
#include "tensor/json.h"

#define ST_MAX_HEADER (100u << 20) /* the reference implementation's limit */
#define ST_MAX_DEPTH 8             /* the format needs 3 */

typedef struct {
    const char *name;
    const ck_dtype *dt;
    int rank;
    int64_t shape[RLX_MAX_RANK];
    uint64_t begin, end;
} st_entry;

static uint64_t rd_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static bool check_metadata(const char *fn, const char *path, const json_value *v)
{
    if (v->kind != JSON_OBJECT) {
        ck_io(fn, path, "__metadata__ is not an object");
        return false;
    }
    for (size_t i = 0; i < v->len; i++)
        if (v->items[i].kind != JSON_STRING) {
            ck_io(fn, path, "__metadata__ value of '%s' is not a string", v->keys[i]);
            return false;
        }
    return true;
}

static bool read_dims(const char *fn, const char *path, const char *name, const json_value *v, st_entry *e)
{
    if (v->kind != JSON_ARRAY || v->len > RLX_MAX_RANK) {
        ck_io(fn, path, "tensor '%s': shape is %s", name,
              v->kind != JSON_ARRAY ? "not an array" : "of rank above 8");
        return false;
    }
    e->rank = (int)v->len;
    for (size_t i = 0; i < v->len; i++) {
        if (v->items[i].kind != JSON_INT) {
            ck_io(fn, path, "tensor '%s': shape holds a non-integer", name);
            return false;
        }
        e->shape[i] = v->items[i].num;
    }
    return ck_check_shape(fn, path, name, e->dt, e->rank, e->shape);
}

static bool read_offsets(const char *fn, const char *path, const char *name, const json_value *v, st_entry *e,
                         uint64_t region)
{
    if (v->kind != JSON_ARRAY || v->len != 2 || v->items[0].kind != JSON_INT || v->items[1].kind != JSON_INT) {
        ck_io(fn, path, "tensor '%s': data_offsets is not [begin, end]", name);
        return false;
    }
    int64_t b = v->items[0].num, en = v->items[1].num;
    if (b < 0 || en < b || (uint64_t)en > region) {
        ck_io(fn, path, "tensor '%s': data_offsets [%lld, %lld] outside the data region of %llu bytes", name,
              (long long)b, (long long)en, (unsigned long long)region);
        return false;
    }
    uint64_t need = (uint64_t)ir_numel(e->rank, e->shape) * (uint64_t)e->dt->size;
    if ((uint64_t)(en - b) != need) {
        ck_io(fn, path, "tensor '%s': data_offsets span %lld bytes, %s of %s needs %llu", name,
              (long long)(en - b), ts_dims_str(e->rank, e->shape), e->dt->st_name, (unsigned long long)need);
        return false;
    }
    e->begin = (uint64_t)b;
    e->end = (uint64_t)en;
    return true;
}

/* One "name": {"dtype", "shape", "data_offsets"} member, all three exactly once. */
static bool read_entry(const char *fn, const char *path, const char *name, const json_value *v, st_entry *e,
                       uint64_t region)
{
    static const char *const fields[3] = {"dtype", "shape", "data_offsets"};
    const json_value *f[3] = {NULL, NULL, NULL};
    if (v->kind != JSON_OBJECT) {
        ck_io(fn, path, "tensor '%s': entry is not an object", name);
        return false;
    }
    for (size_t i = 0; i < v->len; i++) {
        int k = 0;
        while (k < 3 && strcmp(v->keys[i], fields[k]))
            k++;
        if (k == 3 || f[k]) {
            ck_io(fn, path, "tensor '%s': %s field '%s'", name, k == 3 ? "unknown" : "duplicate", v->keys[i]);
            return false;
        }
        f[k] = &v->items[i];
    }
    for (int k = 0; k < 3; k++)
        if (!f[k]) {
            ck_io(fn, path, "tensor '%s': missing field '%s'", name, fields[k]);
            return false;
        }
    e->name = name;
    e->dt = f[0]->kind == JSON_STRING ? ck_dtype_by_st(f[0]->str, f[0]->len) : NULL;
    if (!e->dt) {
        ck_io(fn, path, "tensor '%s': unknown dtype %s", name, f[0]->kind == JSON_STRING ? f[0]->str : "(not a string)");
        return false;
    }
    if (e->dt->dtype < 0) {
        ts_error(RLX_E_UNSUPPORTED, fn, "%s: tensor '%s': dtype %s is not supported by librlx yet", path, name,
                 e->dt->st_name);
        return false;
    }
    return read_dims(fn, path, name, f[1], e) && read_offsets(fn, path, name, f[2], e, region);
}

static int by_begin(const void *a, const void *b)
{
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* The tensors must tile [0, region) exactly. */
static bool check_tiling(const char *fn, const char *path, st_entry *e, size_t n, uint64_t region)
{
    const st_entry **order = ir_alloc((n ? n : 1) * sizeof *order);
    if (!order) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = &e[i];
    qsort(order, n, sizeof *order, by_begin);
    uint64_t at = 0;
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        const st_entry *t = order[i];
        if (t->begin < at)
            ck_io(fn, path, "tensor '%s' at [%llu, %llu) overlaps the tensor before it (ending at %llu)", t->name,
                  (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)at);
        else if (t->begin > at)
            ck_io(fn, path, "data bytes [%llu, %llu) belong to no tensor", (unsigned long long)at,
                  (unsigned long long)t->begin);
        ok = t->begin == at;
        at = t->end;
    }
    if (ok && at != region) {
        ck_io(fn, path, "data bytes [%llu, %llu) after the last tensor belong to no tensor", (unsigned long long)at,
              (unsigned long long)region);
        ok = false;
    }
    ir_free(order);
    return ok;
}

static rlx_checkpoint *load(const char *fn, const char *path, ck_map *m)
{
    if (m->len < 8) {
        ck_io(fn, path, "file of %zu bytes is shorter than the 8-byte header length", m->len);
        return NULL;
    }
    uint64_t hlen = rd_le64(m->base);
    if (hlen > m->len - 8) {
        ck_io(fn, path, "header length %llu runs past the end of the file (%zu bytes)", (unsigned long long)hlen,
              m->len);
        return NULL;
    }
    if (hlen > ST_MAX_HEADER) {
        ck_io(fn, path, "header length %llu is above the limit of %u bytes", (unsigned long long)hlen, ST_MAX_HEADER);
        return NULL;
    }
    char err[200];
    int nomem;
    json_doc *doc;
    const json_value *root = json_parse((const char *)m->base + 8, (size_t)hlen, ST_MAX_DEPTH, &doc, err, sizeof err,
                                        &nomem);
    if (!root) {
        if (nomem)
            ts_error(RLX_E_NOMEM, fn, "out of memory");
        else
            ck_io(fn, path, "malformed JSON header: %s", err);
        return NULL;
    }
    uint64_t region = m->len - 8 - hlen;
    const unsigned char *data = m->base + 8 + hlen;
    rlx_checkpoint *c = NULL;
    st_entry *e = NULL;
    size_t ne = 0;
    if (root->kind != JSON_OBJECT) {
        ck_io(fn, path, "header is not a JSON object");
        goto out;
    }
    if (!(e = ir_alloc((root->len ? root->len : 1) * sizeof *e)) || !(c = ck_new(fn))) {
        if (!e)
            ts_error(RLX_E_NOMEM, fn, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < root->len; i++) {
        bool ok = !strcmp(root->keys[i], "__metadata__")
                      ? check_metadata(fn, path, &root->items[i])
                      : read_entry(fn, path, root->keys[i], &root->items[i], &e[ne++], region);
        if (!ok)
            goto fail;
    }
    if (!check_tiling(fn, path, e, ne, region))
        goto fail;
    for (size_t i = 0; i < ne; i++) {
        ir_node *n = ck_node(fn, m, data + e[i].begin, (rlx_dtype)e[i].dt->dtype, e[i].rank, e[i].shape, false);
        if (!n || !ck_add(c, fn, e[i].name, strlen(e[i].name), n))
            goto fail;
    }
    if (ck_finish(c, fn, path))
        goto out;
fail:
    rlx_checkpoint_free(c);
    c = NULL;
out:
    ir_free(e);
    json_free(doc);
    return c;
}

rlx_checkpoint *rlx_load_safetensors(const char *path)
{
    const char *fn = "rlx_load_safetensors";
    ck_map *m = ck_map_open(fn, path);
    if (!m)
        return NULL;
    rlx_checkpoint *c = load(fn, path, m);
    ck_map_release(m); /* the tensors read in place hold their own references */
    return c;
}

/* ------------------------------------------------------------- saving */

typedef struct {
    char *p; /* owns */
    size_t n, cap;
    bool nomem;
} strbuf;

static void put(strbuf *b, const char *s, size_t n)
{
    if (b->nomem)
        return;
    if (b->cap - b->n < n + 1) {
        size_t cap = (b->cap + n + 1) * 2;
        char *q = ir_realloc(b->p, cap);
        if (!q) {
            b->nomem = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void putf(strbuf *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    put(b, tmp, (size_t)k);
}

static void put_json_string(strbuf *b, const char *s)
{
    put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            putf(b, "\\%c", c);
        else if (c < 0x20)
            putf(b, "\\u%04x", c);
        else
            put(b, s, 1);
    }
    put(b, "\"", 1);
}

/* Data order: 16-byte (c128) and 8-byte types first, then 4, 2, 1, so that
 * every tensor starts aligned for its parts (the data region starts at a
 * multiple of 8). */
static void data_order(rlx_tensor *const *tensors, int n, int *order)
{
    int k = 0;
    for (size_t size = 16; size >= 1; size /= 2)
        for (int i = 0; i < n; i++)
            if (ir_dtype_size(ts_node(tensors[i])->dtype) == size)
                order[k++] = i;
}

static bool header(strbuf *b, int n, const char *const *names, rlx_tensor *const *tensors, const int *order)
{
    uint64_t *begin = ir_alloc((size_t)(n ? n : 1) * sizeof *begin);
    if (!begin)
        return false;
    uint64_t at = 0;
    for (int k = 0; k < n; k++) {
        begin[order[k]] = at;
        at += ir_node_bytes(ts_node(tensors[order[k]]));
    }
    put(b, "{", 1);
    for (int i = 0; i < n; i++) {
        ir_node *t = ts_node(tensors[i]);
        put(b, i ? "," : "", i ? 1 : 0);
        put_json_string(b, names[i]);
        putf(b, ":{\"dtype\":\"%s\",\"shape\":[", ck_dtype_of(t->dtype)->st_name);
        for (int d = 0; d < t->rank; d++)
            putf(b, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        putf(b, "],\"data_offsets\":[%llu,", (unsigned long long)begin[i]);
        putf(b, "%llu]}", (unsigned long long)(begin[i] + ir_node_bytes(t)));
    }
    put(b, "}", 1);
    while (!b->nomem && (8 + b->n) % 8)
        put(b, " ", 1); /* trailing spaces are allowed; they align the data region */
    ir_free(begin);
    return !b->nomem;
}

static bool check_save_names(const char *fn, int n, const char *const *names)
{
    for (int i = 0; i < n; i++) {
        if (!strcmp(names[i], "__metadata__")) {
            ts_error(RLX_E_ARG, fn, "names[%d]: '__metadata__' is reserved by the format", i);
            return false;
        }
        if (!json_utf8_valid(names[i], strlen(names[i]))) {
            ts_error(RLX_E_ARG, fn, "names[%d] is not valid UTF-8", i);
            return false;
        }
    }
    return true;
}

rlx_status rlx_save_safetensors(const char *path, int n, const char *const *names, rlx_tensor *const *tensors)
{
    const char *fn = "rlx_save_safetensors";
    const unsigned char **pay = ir_alloc((size_t)(n > 0 ? n : 1) * sizeof *pay);
    int *order = ir_alloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    strbuf b = {NULL, 0, 0, false};
    ck_writer w;
    rlx_status st = RLX_E_NOMEM;
    if (!pay || !order) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        goto out;
    }
    if (!ck_payloads(fn, n, names, tensors, pay) || !check_save_names(fn, n, names)) {
        st = rlx_last_status();
        goto out;
    }
    data_order(tensors, n, order);
    if (!header(&b, n, names, tensors, order)) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        goto out;
    }
    if (!ck_writer_open(&w, fn, path)) {
        st = rlx_last_status();
        goto out;
    }
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)b.n >> (8 * i));
    bool ok = ck_write(&w, len, 8) && ck_write(&w, b.p, b.n);
    for (int k = 0; k < n && ok; k++)
        ok = ck_write(&w, pay[order[k]], ir_node_bytes(ts_node(tensors[order[k]])));
    st = ck_writer_commit(&w);
out:
    ir_free(pay);
    ir_free(order);
    ir_free(b.p);
    return st;
}
