/*
 * json.h — a small strict JSON reader for file headers (safetensors).
 *
 * It reads what such headers need and rejects the rest: objects, arrays,
 * strings (escapes and \u with surrogate pairs, decoded to UTF-8; invalid
 * UTF-8, control characters and \u0000 rejected), integers that fit in
 * int64_t (no fraction or exponent), true, false and null. Nesting deeper
 * than max_depth is an error, and the parser recurses once per level, so
 * the stack it uses is bounded by max_depth. Duplicate object keys are
 * kept: the caller decides what they mean.
 */
#ifndef RLX_JSON_H
#define RLX_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_INT, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_kind;

typedef struct json_value json_value;
struct json_value {
    json_kind kind;
    int64_t num;       /* INT: the value; BOOL: 0 or 1 */
    const char *str;   /* STRING: NUL-terminated UTF-8 (no NUL inside) */
    size_t len;        /* STRING: bytes; ARRAY, OBJECT: number of items */
    json_value *items; /* ARRAY, OBJECT: len values, in document order */
    const char **keys; /* OBJECT: len keys, in document order */
};

typedef struct json_doc json_doc; /* owns every value and string of one parse */

/* Parses text[0..n) as one JSON value surrounded by optional whitespace.
 * Returns the root (owned by *doc) or NULL with a message in err such as
 * "byte 17: expected ':' after an object key"; *doc is NULL on failure
 * except when out of memory is the cause (*nomem set). */
json_value *json_parse(const char *text, size_t n, int max_depth, json_doc **doc, char *err, size_t errcap,
                       int *nomem);
void json_free(json_doc *doc); /* NULL is a no-op */
/* True when s[0..n) is valid UTF-8 (writers check names with it). */
bool json_utf8_valid(const char *s, size_t n);
/* The member named key of an OBJECT, the first one when repeated; NULL if none. */
const json_value *json_get(const json_value *obj, const char *key);

#endif
