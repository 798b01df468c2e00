/*
 * knobs.h — the table of tunable codegen/runtime choices (vector width,
 * unroll, reduction accumulators, parallel grain, GEMM epilogue block,
 * small-matmul threshold, fusion rules) and the tuning file.
 *
 * A knob's value for a kernel is, first found: the value set through
 * rlx_set_option or env RLX_<NAME> (upper-cased); the tuning file's entry
 * for the kernel's class and size bucket; its entry for the class and any
 * size; its entry for any class; the built-in default. 0 means "the
 * built-in rule" for the codegen knobs (auto).
 *
 * Tuning file (text, written by rlx-bench --tune): the first line that is
 * not blank or a # comment is "rlx-tuning 1"; then one line per entry,
 *   <class> <bucket> <knob>=<value> [<knob>=<value> ...]
 * class: any ew ew_math reduce rows matmul; bucket: any tiny small medium
 * large (kernel loop elements < 2^12, < 2^16, < 2^22, more). Read once at
 * start-up from RLX_TUNING_FILE, else <cache dir>/tuning.txt (cache dir:
 * RLX_CACHE_DIR, else $XDG_CACHE_HOME/rlx, else ~/.cache/rlx; RLX_CACHE_DIR
 * set empty: no default file). A malformed file is ignored as a whole; why
 * is kept for rlx_get_option("tuning_status") and printed only under
 * RLX_DEBUG.
 */
#ifndef RLX_RUNTIME_KNOBS_H
#define RLX_RUNTIME_KNOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rlx.h"

typedef enum {
    KNOB_VECTOR_WIDTH,   /* lanes of the innermost loop; 0 auto */
    KNOB_UNROLL,         /* vectors per iteration of elementwise loops; 0 auto */
    KNOB_REDUCE_ACC,     /* vectors (partial sums) per iteration of reduction/row loops; 0 auto */
    KNOB_GRAIN,          /* loop iterations per parallel chunk */
    KNOB_GEMM_BLOCK,     /* rows per block of a fused GEMM epilogue; 0 auto */
    KNOB_SMALL_MATMUL,   /* m*n*k at or below which a matmul skips BLAS; 0 auto */
    KNOB_FUSE_ELEMENTWISE, /* 0: each elementwise op is its own kernel */
    KNOB_FUSE_REDUCE,    /* 0: a reduction does not absorb its elementwise producers */
    KNOB_FUSE_PHASES,    /* 0: a row reduction is not a phase of its reader */
    KNOB_COUNT
} knob_id;

typedef enum { KCLASS_ANY, KCLASS_EW, KCLASS_EW_MATH, KCLASS_REDUCE, KCLASS_ROWS, KCLASS_MATMUL, KCLASS_COUNT } knob_class;
enum { KBUCKET_ANY = -1, KBUCKET_COUNT = 4 };

typedef struct {
    const char *name;
    long def, lo, hi;
} knob_info;

extern const knob_info knob_table[KNOB_COUNT];
extern const char *const knob_class_names[KCLASS_COUNT];
extern const char *const knob_bucket_names[KBUCKET_COUNT];

typedef struct {
    int cls;    /* knob_class */
    int bucket; /* KBUCKET_ANY or 0..KBUCKET_COUNT-1 */
    int id;     /* knob_id */
    long value;
} knob_entry;

int knob_find(const char *name); /* knob_id or -1 */
int knob_bucket(int64_t elems);
/* The effective value with no kernel in view (explicit, tuning any/any, default). */
long knob_get(knob_id id);
long knob_for(knob_id id, knob_class cls, int64_t elems);

/* value "default" (or "") clears an explicit setting. */
rlx_status knob_set(const char *name, const char *value, char *msg, size_t cap);
/* Changes with every knob_set and tuning file load: what was planned or
 * compiled under an older epoch may not be what the knobs say now. */
unsigned long knob_epoch(void);
/* Writes the effective value; false if name is no knob. */
bool knob_format(const char *name, char *buf, size_t cap);

/* Parses a tuning file's text; *out is ir_alloc'ed (free it with ir_free). */
rlx_status knobs_parse(const char *text, size_t len, knob_entry **out, int *n, char *msg, size_t cap);
/* Loads path as the active entries (path "" clears them); on error the
 * active entries are unchanged. */
rlx_status knobs_load(const char *path, char *msg, size_t cap);
rlx_status knobs_save(const char *path, const knob_entry *e, int n, const char *comment, char *msg, size_t cap);
/* The default tuning file path; false when there is none. */
bool knobs_default_path(char *buf, size_t cap);
/* "none", "loaded N entries from PATH" or "ignored PATH: why". */
void knobs_status(char *buf, size_t cap);

#endif
