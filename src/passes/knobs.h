/*
 * knobs.h — the table of tunable codegen/runtime choices (vector width,
 * unroll, reduction accumulators, parallel grain, GEMM epilogue block,
 * small-matmul threshold, fusion rules) and the tuning file.
 *
 * A knob's value for a kernel is, first found: the value set through
 * rlx_set_option or env RLX_<NAME> (upper-cased, read by the tensor
 * layer's option table, src/tensor/options.c); the tuning file's entry
 * for the kernel's class and size bucket; its entry for the class and any
 * size; its entry for any class; the built-in default. 0 means "the
 * built-in rule" for the codegen knobs (auto).
 *
 * Tuning file (text, written by rlx-bench --tune): the first line that is
 * not blank or a # comment is "rlx-tuning 1"; then one line per entry,
 *   <class> <bucket> <knob>=<value> [<knob>=<value> ...]
 * class: any ew ew_math reduce rows matmul; bucket: any tiny small medium
 * large (kernel loop elements < 2^12, < 2^16, < 2^22, more). Read once at
 * start-up (knobs_load_startup) from the path the option table resolves
 * (RLX_TUNING_FILE, else <cache dir>/tuning.txt). A malformed file is
 * ignored as a whole; why is kept for rlx_get_option("tuning_status") and
 * printed only at debug level 1 and above.
 *
 * Readers below the tensor layer never look at the current settings: a
 * realization takes a snapshot (knob_snapshot, an immutable refcounted
 * knob_state, no copy of the tuning table) into its options (knob_opts),
 * and the passes, code generator and executor read knob_value on it. Nothing
 * here reads the environment.
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
    KNOB_BF16_GEMM,      /* 0 auto (oneDNN if built with it), 1 widen blocks to f32 for sgemm */
    KNOB_F32_GEMM,       /* 0 auto (oneDNN on AVX-512 CPUs if built with it), 1 OpenBLAS, 2 oneDNN */
    KNOB_FUSE_ELEMENTWISE, /* 0: each elementwise op is its own kernel */
    KNOB_FUSE_REDUCE,    /* 0: a reduction does not absorb its elementwise producers */
    KNOB_FUSE_PHASES,    /* 0: a row reduction is not a phase of its reader */
    KNOB_GENERIC_KERNELS, /* size-generic kernels: 0 never, 1 auto, 2 always (codegen_llvm/cg.h) */
    KNOB_REDUCE_ACC_F64, /* 1: f32/f16/bf16 sums accumulate in f64, not in blocked f32 (cg_kernel.c) */
    KNOB_ATTENTION_BWD,  /* attention's gradient: 0 ops, 1 the ATTENTION_BWD kernel where it covers the case, 2 auto */
    KNOB_GEMV,           /* f32/f64 matmul rows of one: 0 auto (our kernel where it fits), 1 OpenBLAS's gemv */
    KNOB_HALF_GELU,      /* 1: gelu_tanh of f16/bf16 as x sigmoid(2y), 0: as 0.5 x (1 + tanh y) (cg_kernel.c) */
    KNOB_HALF_KERNELS,   /* f16/bf16 attention, bf16 conv2d: 0 own kernels, 1 widened (tensor/nn.c), 2 conv widens in its kernel, 3 (default) conv its own, attention widened */
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

/* The knob values and tuning entries at one moment: immutable, shared by
 * every snapshot of that moment. */
typedef struct knob_state knob_state;
/* The current state, retained (no allocation: a lock and a count). */
knob_state *knob_snapshot(void);
void knob_release(knob_state *ks); /* NULL is a no-op */
/* A knob's value under ks for a kernel of class cls and elems loop
 * elements (elems < 0: no kernel in view); ks NULL: the built-in default. */
long knob_value(const knob_state *ks, knob_id id, knob_class cls, int64_t elems);
/* The epoch ks was made in (see knob_epoch). */
unsigned long knob_state_epoch(const knob_state *ks);

/* The options one realization runs under, snapshotted once by the tensor
 * layer (src/tensor/options.c) and handed to every pass, the code generator,
 * the executor and the library kernels: nothing below the tensor layer
 * reads a global setting. */
typedef struct {
    int nthreads;             /* >= 1: threads of the pool, BLAS and library kernels */
    int compile_threads;      /* >= 1: threads that compile the kernels a plan is missing */
    int debug;                /* RLX_DEBUG level (0: quiet) */
    bool verify;              /* RLX_VERIFY=1 or a debug build: verifiers run after the passes */
    bool simplify;            /* the simplifier runs first (realizations; not compiled programs) */
    bool plan_cache;          /* plans are cached by structure (realizations; not compiled programs) */
    knob_state *knobs;        /* borrows the snapshot (immutable; its owner releases it) */
} knob_opts;

/* Current-state readers for tests and the bench (the library reads
 * snapshots): the effective value with no kernel in view (explicit, tuning
 * any/any, default), and for a kernel class and size. */
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
/* The start-up load of the tuning file at path (the option table resolves
 * it; NULL: none): a missing file is no file, a malformed one is ignored
 * with its reason kept for knobs_status (and printed when debug >= 1). */
void knobs_load_startup(const char *path, int debug);
/* Sets knob name from its environment variable env (start-up): an invalid
 * value is ignored (said on stderr when debug >= 1). */
void knob_set_from_env(const char *name, const char *env, const char *value, int debug);
/* "none", "loaded N entries from PATH" or "ignored PATH: why". */
void knobs_status(char *buf, size_t cap);

#endif
