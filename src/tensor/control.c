/*
 * control.c — counters and the host description (the options and the
 * environment: options.c).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "codegen_llvm/cg.h"
#include "runtime/exec/jit_exec.h"
#include "runtime/rt.h"
#include "tensor/control.h"
#include "tensor/ts.h"

static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static rlx_stats_t stats;
static uint64_t kernel_evictions0, plan_evictions0; /* at the last reset */

void ts_stats_add_run(uint64_t nodes_run, uint64_t peak_bytes)
{
    pthread_mutex_lock(&stats_lock);
    stats.kernels_run += nodes_run;
    if (peak_bytes > stats.peak_bytes)
        stats.peak_bytes = peak_bytes;
    pthread_mutex_unlock(&stats_lock);
}

void ts_stats_add_jit(uint64_t compiled, uint64_t hits, uint64_t misses, double seconds)
{
    pthread_mutex_lock(&stats_lock);
    stats.kernels_compiled += compiled;
    stats.cache_hits += hits;
    stats.cache_misses += misses;
    stats.compile_seconds += seconds;
    pthread_mutex_unlock(&stats_lock);
}

void ts_stats_note_arena(uint64_t bytes)
{
    if (!bytes)
        return; /* cannot raise the maximum: no lock on the small-graph path */
    pthread_mutex_lock(&stats_lock);
    if (bytes > stats.arena_bytes)
        stats.arena_bytes = bytes;
    pthread_mutex_unlock(&stats_lock);
}

void rlx_stats(rlx_stats_t *out)
{
    if (!out) {
        ts_error(RLX_E_ARG, "rlx_stats", "out is NULL");
        return;
    }
    cg_cache_counts kc;
    rt_plan_cache_counts pc;
    cg_cache_counts_get(&kc);
    rt_plan_cache_counts_get(&pc);
    size_t pbytes = rt_plan_cache_bytes();
    pthread_mutex_lock(&stats_lock);
    *out = stats;
    out->kernel_cache_bytes = kc.bytes;
    out->kernel_evictions = kc.evictions - kernel_evictions0;
    out->plan_cache_bytes = pbytes;
    out->plan_evictions = pc.evicted - plan_evictions0;
    pthread_mutex_unlock(&stats_lock);
}

void rlx_stats_reset(void)
{
    cg_cache_counts kc;
    rt_plan_cache_counts pc;
    cg_cache_counts_get(&kc);
    rt_plan_cache_counts_get(&pc);
    pthread_mutex_lock(&stats_lock);
    memset(&stats, 0, sizeof stats);
    kernel_evictions0 = kc.evictions;
    plan_evictions0 = pc.evicted;
    pthread_mutex_unlock(&stats_lock);
}

static char host_info[256];
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static void host_info_init(void)
{
    char blas[64];
    cg_host_describe(host_info, sizeof host_info);
    rt_blas_describe(blas, sizeof blas);
    size_t n = strlen(host_info);
    snprintf(host_info + n, sizeof host_info - n, ", %s", blas);
}

const char *rlx_host_info(void)
{
    pthread_once(&host_once, host_info_init);
    return host_info;
}
