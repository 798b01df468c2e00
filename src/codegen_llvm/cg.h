/* cg.h — the code generator's interface to the rest of librlx. Only
 * src/codegen_llvm includes llvm-c; callers see plain C types. */
#ifndef RLX_CG_H
#define RLX_CG_H

#include <stddef.h>
#include <stdint.h>

#include "passes/passes.h"

/* Writes "LLVM 19.1.7, x86_64-pc-linux-gnu, cpu znver5, avx512f" to buf. */
int cg_host_describe(char *buf, size_t cap);

/* A compiled LOOP kernel: buffers[0] is the output, buffers[i] args[i];
 * consts[s] the value of CONST slot s (sched_kernel_consts); runs loop
 * dim 0 over [begin, end). */
typedef void (*cg_kernel_fn)(void *const *buffers, const double *consts, int64_t begin, int64_t end);

/* Counters of one realization, added to by cg_kernel_get. */
typedef struct {
    uint64_t compiled, hits, misses;
    double seconds;
} cg_stats;

/* The compiled function of k, from the in-memory cache (keyed by the
 * kernel's structure, never its payloads) or compiled now. Thread-safe.
 * Failures: RLX_E_JIT with LLVM's message in msg, RLX_E_NOMEM. Compiled
 * code lives until the process ends. */
rlx_status cg_kernel_get(const sched_kernel *k, cg_kernel_fn *fn, cg_stats *st, char *msg, size_t cap);

/* Test hook: 1 makes the next compiled module fail verification, 2 makes
 * the next symbol lookup fail (both must come back as RLX_E_JIT). */
void cg_test_inject(int what);

#endif
