/* cg.h — the code generator's interface to the rest of librlx. Only
 * src/codegen_llvm includes llvm-c; callers see plain C types. */
#ifndef RLX_CG_H
#define RLX_CG_H

#include <stddef.h>
#include <stdint.h>

#include "passes/passes.h"

/* The code generator's start-up settings, handed down once by the option
 * table (src/tensor/options.c) before the first compile; strings are
 * copied. The code generator reads no environment variable. */
typedef struct {
    int debug;             /* RLX_DEBUG level: 1 a line per kernel, 2 its IR and LLVM's remarks, 3 its assembly */
    const char *llvm_args; /* RLX_LLVM_ARGS: LLVM command-line options, space separated ("" none) */
    const char *passes;    /* RLX_JIT_PASSES: the optimizer pipeline ("" the built-in one) */
    /* the disk cache's directory when no option sets one ("" off) */
    void (*default_dir)(char *out, size_t cap);
} cg_config;
void cg_configure(const cg_config *c);

/* Writes "LLVM 19.1.7, x86_64-pc-linux-gnu, cpu znver5, avx512f" to buf. */
int cg_host_describe(char *buf, size_t cap);

/* A compiled LOOP kernel: buffers[0] is the output, buffers[i] args[i],
 * buffers[nargs] the kernel's parameters (an int64_t array of
 * sched_kernel_params, read by size-generic kernels); consts[s] the value
 * of CONST slot s (sched_kernel_consts); runs loop dim 0 over [begin, end). */
typedef void (*cg_kernel_fn)(void *const *buffers, const double *consts, int64_t begin, int64_t end);

/* Counters of one realization, added to by cg_kernel_get and
 * cg_kernels_prepare: each LOOP kernel looked up is one hit (in memory or,
 * counted in loaded too, from the disk cache) or one miss (compiled, when
 * that succeeds). seconds: compiling and loading. */
typedef struct {
    uint64_t compiled, hits, misses, loaded;
    double seconds;
} cg_stats;

/* A kernel of the in-memory cache, held by a reference: its code stays
 * mapped until the last reference is released. The cache keeps kernels
 * nobody holds within a byte budget, evicting the least recently used
 * (their JIT memory is returned); a held kernel is never evicted. */
typedef struct cg_kernel cg_kernel;
cg_kernel_fn cg_kernel_func(const cg_kernel *k);
bool cg_kernel_is_generic(const cg_kernel *k); /* NULL: false */
void cg_kernel_release(cg_kernel *k); /* NULL is a no-op */
void cg_kernel_retain(cg_kernel *k);  /* another reference to a kernel held (NULL is a no-op) */

/* The kernel of k, from the in-memory cache (keyed by the kernel's
 * structure, never its payloads) or compiled now, with a reference for
 * the caller (*out; NULL on failure). Thread-safe. Failures: RLX_E_JIT
 * with LLVM's message in msg, RLX_E_NOMEM. knobs: the snapshot the
 * kernel's width and interleave come from (NULL: the defaults). */
rlx_status cg_kernel_get(const sched_kernel *k, const knob_state *knobs, cg_kernel **out, cg_stats *st, char *msg,
                         size_t cap);

/* Compiles (or loads from the disk cache) every LOOP kernel of ks[0..n)
 * that is not in the in-memory cache, on up to nthreads threads, and sets
 * refs[i] to a reference on the kernel of each LOOP kernel (NULL for the
 * others), as n calls of cg_kernel_get would. On error every refs[i] is
 * NULL and msg holds the first failure's message. */
rlx_status cg_kernels_prepare(const sched_kernel *ks, long n, int nthreads, const knob_state *knobs, cg_kernel **refs,
                              cg_stats *st, char *msg, size_t cap);
/* The same, choosing each kernel's variant by generic: 0 specialized
 * (numbers compiled in), 2 size-generic (sched_kernel_key), 1 auto: the
 * specialized kernel the first time a structure is seen, the generic one
 * once the same structure comes with other numbers (and whichever of the
 * two is in memory already); -1 the knob generic_kernels of knobs.
 * cg_kernels_prepare and cg_kernel_get use the knob. */
rlx_status cg_kernels_prepare_as(const sched_kernel *ks, long n, int nthreads, const knob_state *knobs, int generic,
                                 cg_kernel **refs, cg_stats *st, char *msg, size_t cap);
/* Releases refs[0..n) (NULLs allowed) and sets them NULL. */
void cg_kernels_release(cg_kernel **refs, long n);

/* The budget, in bytes, of the kernels the cache holds (option
 * kernel_cache_bytes); lowering it evicts at once. */
void cg_cache_set_budget(size_t bytes);
typedef struct {
    uint64_t bytes, budget; /* held now, in use or idle (estimated: kernel_bytes in cg_jit.c) */
    uint64_t entries;
    uint64_t evictions; /* since the process started */
} cg_cache_counts;
void cg_cache_counts_get(cg_cache_counts *out);

/* The disk cache's directory (cg_disk.c): NULL returns to the default
 * (cg_config.default_dir: RLX_CACHE_DIR, else $XDG_CACHE_HOME/rlx, else
 * ~/.cache/rlx), "" turns it off. RLX_E_ARG when the path is too long. */
rlx_status cg_disk_set_dir(const char *path);
/* The directory configured (set, or the default; "" when off),
 * whether or not it turned out usable. */
void cg_disk_get_dir(char *out, size_t cap);
/* The size cap of the directory (option cache_max_bytes): past it the
 * least recently used files are removed. */
void cg_disk_set_max_bytes(size_t bytes);
size_t cg_disk_max_bytes(void);
/* The build identity every stored key starts with (cg_disk.c); a test may
 * set another (NULL restores the build's) to play a different build. */
void cg_disk_identity(char *out, size_t cap);
void cg_disk_set_identity_for_tests(const char *id);

/* Test hooks: the disk cache's counters since the start of the process;
 * dropping the in-memory cache (the next lookups go to disk or compile;
 * kernels still referenced stay valid until released). */
typedef struct {
    uint64_t loads, rejects, stores, store_failures;
    uint64_t evictions, scans; /* files removed by the size cap; directory scans */
} cg_disk_counts;
void cg_disk_counters(cg_disk_counts *out);
void cg_cache_reset_for_tests(void);

/* Test hook: 1 makes the next compiled module fail verification, 2 makes
 * the next symbol lookup fail (both must come back as RLX_E_JIT), 3
 * compiles the next kernel's f16 conversions without F16C's instructions. */
void cg_test_inject(int what);

#endif
