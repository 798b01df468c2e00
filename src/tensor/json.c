/*
 * json.c — the strict JSON reader of json.h, for the safetensors header.
 *
 * Values live in an arena owned by the json_doc (one free for the whole
 * tree). Each nesting level is one recursive call, refused past max_depth
 * before it recurses, so hostile nesting cannot exhaust the stack. Every
 * read checks the end pointer first: the input need not be NUL-terminated.
 */
#include "tensor/json.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

typedef struct block {
    struct block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} block;

struct json_doc {
    block *blocks; /* owns the chain */
};

typedef struct {
    const char *start, *p, *end;
    int depth, max_depth;
    json_doc *doc;
    char *err;
    size_t errcap;
    bool failed, nomem;
} parser;

#define JSON_BLOCK (64 * 1024)

static void *arena_alloc(parser *ps, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    block *b = ps->doc->blocks;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > JSON_BLOCK ? size : JSON_BLOCK;
        b = ir_alloc(sizeof *b + cap);
        if (!b) {
            ps->nomem = true;
            return NULL;
        }
        b->next = ps->doc->blocks;
        b->used = 0;
        b->cap = cap;
        ps->doc->blocks = b;
    }
    void *r = b->data + b->used;
    b->used += size;
    return r;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void *fail(parser *ps, const char *fmt, ...)
{
    if (ps->failed)
        return NULL;
    ps->failed = true;
    int k = snprintf(ps->err, ps->errcap, "header byte %zu: ", (size_t)(ps->p - ps->start));
    va_list ap;
    va_start(ap, fmt);
    if (k > 0 && (size_t)k < ps->errcap)
        vsnprintf(ps->err + k, ps->errcap - (size_t)k, fmt, ap);
    va_end(ap);
    return NULL;
}

static void *oom(parser *ps)
{
    ps->nomem = true;
    return fail(ps, "out of memory");
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static const char *describe(parser *ps)
{
    static _Thread_local char buf[32];
    if (ps->p >= ps->end)
        return "the end of the header";
    unsigned char c = (unsigned char)*ps->p;
    if (c >= 0x21 && c < 0x7f)
        snprintf(buf, sizeof buf, "'%c'", c);
    else
        snprintf(buf, sizeof buf, "byte 0x%02x", c);
    return buf;
}

static bool parse_value(parser *ps, json_value *out);

/* ------------------------------------------------------------- strings */

/* Length of a valid UTF-8 sequence starting at s (at most n bytes), 0 if invalid. */
static int utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    int len;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80; /* overlong */
        hi = c == 0xed ? 0x9f : 0xbf; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else
        return 0;
    if ((size_t)len > n || s[1] < lo || s[1] > hi)
        return 0;
    for (int i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

bool json_utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        int k = utf8_len(u + i, n - i);
        if (!k)
            return false;
        i += (size_t)k;
    }
    return true;
}

static int hex4(const char *s, const char *end)
{
    if (end - s < 4)
        return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static char *put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80)
        *o++ = (char)cp;
    else if (cp < 0x800) {
        *o++ = (char)(0xc0 | (cp >> 6));
        *o++ = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xe0 | (cp >> 12));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *o++ = (char)(0x80 | (cp & 0x3f));
    } else {
        *o++ = (char)(0xf0 | (cp >> 18));
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *o++ = (char)(0x80 | (cp & 0x3f));
    }
    return o;
}

/* A \uXXXX escape (with its low surrogate when it is a high one) at ps->p,
 * which points after the 'u'. */
static bool unicode_escape(parser *ps, char **o)
{
    int hi = hex4(ps->p, ps->end);
    if (hi < 0)
        return fail(ps, "\\u needs four hex digits"), false;
    ps->p += 4;
    unsigned cp = (unsigned)hi;
    if (hi >= 0xdc00 && hi <= 0xdfff)
        return fail(ps, "lone low surrogate \\u%04x", hi), false;
    if (hi >= 0xd800 && hi <= 0xdbff) {
        int lo = ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u' ? hex4(ps->p + 2, ps->end) : -1;
        if (lo < 0xdc00 || lo > 0xdfff)
            return fail(ps, "high surrogate \\u%04x without its low half", hi), false;
        ps->p += 6;
        cp = 0x10000 + (((unsigned)hi - 0xd800) << 10) + ((unsigned)lo - 0xdc00);
    }
    if (cp == 0)
        return fail(ps, "\\u0000 (NUL) in a string"), false;
    *o = put_utf8(*o, cp);
    return true;
}

static bool escape(parser *ps, char **o)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    if (ps->p >= ps->end)
        return fail(ps, "unterminated string"), false;
    char c = *ps->p++;
    if (c == 'u')
        return unicode_escape(ps, o);
    const char *f = memchr(from, c, sizeof from - 1);
    if (!f) {
        ps->p--;
        return fail(ps, "invalid escape \\%s", describe(ps)), false;
    }
    *(*o)++ = to[f - from];
    return true;
}

/* ps->p is at the opening quote. */
static const char *parse_string(parser *ps, size_t *len)
{
    const char *q = ps->p + 1;
    while (q < ps->end && *q != '"')
        q += *q == '\\' && q + 1 < ps->end ? 2 : 1;
    if (q >= ps->end)
        return fail(ps, "unterminated string");
    char *out = arena_alloc(ps, (size_t)(q - ps->p)); /* decoded never longer than raw */
    if (!out)
        return oom(ps);
    char *o = out;
    ps->p++;
    while (*ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p;
        if (c == '\\') {
            ps->p++;
            if (!escape(ps, &o))
                return NULL;
            continue;
        }
        if (c < 0x20)
            return fail(ps, "control %s in a string", describe(ps));
        int k = utf8_len((const unsigned char *)ps->p, (size_t)(ps->end - ps->p));
        if (!k)
            return fail(ps, "invalid UTF-8 in a string");
        memcpy(o, ps->p, (size_t)k);
        o += k;
        ps->p += k;
    }
    ps->p++;
    *o = 0;
    *len = (size_t)(o - out);
    return out;
}

/* ------------------------------------------------------- numbers, words */

static bool parse_int(parser *ps, json_value *out)
{
    bool neg = *ps->p == '-';
    if (neg)
        ps->p++;
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
        return fail(ps, "expected a digit, got %s", describe(ps)), false;
    if (*ps->p == '0' && ps->p + 1 < ps->end && ps->p[1] >= '0' && ps->p[1] <= '9')
        return fail(ps, "leading zero in a number"), false;
    uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        unsigned d = (unsigned)(*ps->p - '0');
        if (v > (lim - d) / 10)
            return fail(ps, "integer out of the int64 range"), false;
        v = v * 10 + d;
        ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == '.' || *ps->p == 'e' || *ps->p == 'E'))
        return fail(ps, "only integers are accepted, got a fraction or exponent"), false;
    out->kind = JSON_INT;
    out->num = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static bool parse_word(parser *ps, json_value *out)
{
    static const struct { const char *w; json_kind k; int v; } words[] = {
        {"true", JSON_BOOL, 1}, {"false", JSON_BOOL, 0}, {"null", JSON_NULL, 0}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t n = strlen(words[i].w);
        if ((size_t)(ps->end - ps->p) >= n && !memcmp(ps->p, words[i].w, n)) {
            ps->p += n;
            out->kind = words[i].k;
            out->num = words[i].v;
            return true;
        }
    }
    return fail(ps, "unexpected %s", describe(ps)), false;
}

/* ------------------------------------------------------ arrays, objects */

typedef struct {
    json_value *vals; /* owns (until copied into the arena) */
    const char **keys;
    size_t n, cap;
} items;

static bool items_push(parser *ps, items *it, const char *key, const json_value *v)
{
    if (it->n == it->cap) {
        size_t cap = it->cap ? it->cap * 2 : 8;
        json_value *nv = ir_realloc(it->vals, cap * sizeof *nv);
        if (nv)
            it->vals = nv;
        const char **nk = nv ? ir_realloc(it->keys, cap * sizeof *nk) : NULL;
        if (!nk)
            return oom(ps), false;
        it->keys = nk;
        it->cap = cap;
    }
    it->vals[it->n] = *v;
    it->keys[it->n] = key;
    it->n++;
    return true;
}

static bool items_finish(parser *ps, items *it, json_value *out, bool object)
{
    out->len = it->n;
    out->items = it->n ? arena_alloc(ps, it->n * sizeof *out->items) : NULL;
    out->keys = object && it->n ? arena_alloc(ps, it->n * sizeof *out->keys) : NULL;
    bool ok = !it->n || (out->items && (!object || out->keys));
    if (ok && it->n) {
        memcpy(out->items, it->vals, it->n * sizeof *out->items);
        if (object)
            memcpy(out->keys, it->keys, it->n * sizeof *out->keys);
    }
    ir_free(it->vals);
    ir_free(it->keys);
    return ok ? true : (oom(ps), false);
}

/* One member (object) or element (array) after skipping whitespace. */
static bool parse_member(parser *ps, items *it, bool object)
{
    const char *key = NULL;
    if (object) {
        size_t klen;
        if (ps->p >= ps->end || *ps->p != '"')
            return fail(ps, "expected a string key, got %s", describe(ps)), false;
        if (!(key = parse_string(ps, &klen)))
            return false;
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':')
            return fail(ps, "expected ':' after an object key, got %s", describe(ps)), false;
        ps->p++;
    }
    json_value v;
    memset(&v, 0, sizeof v);
    return parse_value(ps, &v) && items_push(ps, it, key, &v);
}

static bool parse_container(parser *ps, json_value *out, bool object)
{
    char close = object ? '}' : ']';
    if (++ps->depth > ps->max_depth)
        return fail(ps, "nesting deeper than %d levels", ps->max_depth), false;
    ps->p++;
    out->kind = object ? JSON_OBJECT : JSON_ARRAY;
    items it = {NULL, NULL, 0, 0};
    skip_ws(ps);
    bool ok = true;
    if (ps->p < ps->end && *ps->p == close)
        ps->p++;
    else {
        for (;;) {
            skip_ws(ps);
            if (!(ok = parse_member(ps, &it, object)))
                break;
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                continue;
            }
            if (ps->p < ps->end && *ps->p == close) {
                ps->p++;
                break;
            }
            ok = fail(ps, "expected ',' or '%c', got %s", close, describe(ps)) != NULL;
            break;
        }
    }
    if (!ok) {
        ir_free(it.vals);
        ir_free(it.keys);
        return false;
    }
    ps->depth--;
    return items_finish(ps, &it, out, object);
}

static bool parse_value(parser *ps, json_value *out)
{
    skip_ws(ps);
    if (ps->p >= ps->end)
        return fail(ps, "expected a value, got the end of the header"), false;
    switch (*ps->p) {
    case '{':
        return parse_container(ps, out, true);
    case '[':
        return parse_container(ps, out, false);
    case '"':
        out->kind = JSON_STRING;
        return (out->str = parse_string(ps, &out->len)) != NULL;
    case '-':
    case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8': case '9':
        return parse_int(ps, out);
    default:
        return parse_word(ps, out);
    }
}

json_value *json_parse(const char *text, size_t n, int max_depth, json_doc **doc, char *err, size_t errcap,
                       int *nomem)
{
    *doc = NULL;
    *nomem = 0;
    json_doc *d = ir_calloc(1, sizeof *d);
    json_value *root = NULL;
    parser ps = {text, text, text + n, 0, max_depth, d, err, errcap, false, false};
    if (!d) {
        *nomem = 1;
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    root = arena_alloc(&ps, sizeof *root);
    if (!root) {
        oom(&ps);
        goto out;
    }
    memset(root, 0, sizeof *root);
    if (!parse_value(&ps, root))
        goto out;
    skip_ws(&ps);
    if (ps.p != ps.end)
        fail(&ps, "unexpected %s after the value", describe(&ps));
out:
    if (ps.failed || ps.nomem) {
        *nomem = ps.nomem;
        json_free(d);
        return NULL;
    }
    *doc = d;
    return root;
}

void json_free(json_doc *doc)
{
    if (!doc)
        return;
    for (block *b = doc->blocks, *next; b; b = next) {
        next = b->next;
        ir_free(b);
    }
    ir_free(doc);
}

const json_value *json_get(const json_value *obj, const char *key)
{
    if (!obj || obj->kind != JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->len; i++)
        if (!strcmp(obj->keys[i], key))
            return &obj->items[i];
    return NULL;
}
