/*
 * control.c — threads, options and counters.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen_llvm/cg.h"
#include "runtime/knobs.h"
#include "runtime/rt.h"
#include "tensor/control.h"
#include "tensor/ts.h"

static atomic_int num_threads; /* 0: not set, use the default */
static atomic_int backend_jit = -1; /* -1: not set, read RLX_BACKEND */

/* The JIT unless RLX_BACKEND=ref (the reference evaluator, the oracle). */
bool ts_backend_is_jit(void)
{
    int b = atomic_load(&backend_jit);
    if (b < 0) {
        const char *env = getenv("RLX_BACKEND");
        b = !env || strcmp(env, "ref") != 0;
    }
    return b;
}
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static rlx_stats_t stats;

static int default_threads(void)
{
    const char *env = getenv("RLX_NUM_THREADS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == 0 && v > 0 && v <= 1024)
            return (int)v;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n > 1024 ? 1024 : n) : 1;
}

void rlx_set_num_threads(int n) { atomic_store(&num_threads, n > 0 ? (n > 1024 ? 1024 : n) : 0); }

static int default_count;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void default_init(void) { default_count = default_threads(); }

int rlx_get_num_threads(void)
{
    int n = atomic_load(&num_threads);
    if (n > 0)
        return n;
    pthread_once(&default_once, default_init); /* sysconf reads sysfs: once, not per realize */
    return default_count;
}

static bool parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

rlx_status rlx_set_option(const char *key, const char *value)
{
    const char *fn = "rlx_set_option";
    if (!key || !value) {
        ts_error(RLX_E_ARG, fn, "key or value is NULL");
        return RLX_E_ARG;
    }
    long v;
    if (strcmp(key, "num_threads") == 0) {
        if (!parse_int(value, 0, 1024, &v)) {
            ts_error(RLX_E_ARG, fn, "num_threads must be an integer in 0..1024, got '%s'", value);
            return RLX_E_ARG;
        }
        rlx_set_num_threads((int)v);
        return RLX_OK;
    }
    if (strcmp(key, "backend") == 0) {
        if (strcmp(value, "ref") != 0 && strcmp(value, "jit") != 0) {
            ts_error(RLX_E_ARG, fn, "backend '%s' is not available (known: ref, jit)", value);
            return RLX_E_ARG;
        }
        atomic_store(&backend_jit, strcmp(value, "jit") == 0);
        return RLX_OK;
    }
    if (strcmp(key, "cache_dir") == 0) { /* the disk kernel cache; "" turns it off */
        if (cg_disk_set_dir(value) != RLX_OK) {
            ts_error(RLX_E_ARG, fn, "cache_dir is too long (%zu bytes)", strlen(value));
            return RLX_E_ARG;
        }
        return RLX_OK;
    }
    /* every other key is a tuning knob (runtime/knobs.c) or the tuning file */
    char msg[512];
    rlx_status st;
    if (strcmp(key, "tuning_file") == 0) {
        st = knobs_load(value, msg, sizeof msg);
    } else if (knob_find(key) >= 0) {
        st = knob_set(key, value, msg, sizeof msg);
    } else {
        ts_error(RLX_E_ARG, fn, "unknown option '%s' (known: backend, num_threads, tuning_file and the knobs listed"
                 " in rlx.h)", key);
        return RLX_E_ARG;
    }
    if (st != RLX_OK)
        ts_error(st, fn, "%s", msg);
    return st;
}

rlx_status rlx_get_option(const char *key, char *buf, size_t cap)
{
    const char *fn = "rlx_get_option";
    if (!key || !buf || cap == 0) {
        ts_error(RLX_E_ARG, fn, "key or buf is NULL, or cap is 0");
        return RLX_E_ARG;
    }
    int n;
    if (strcmp(key, "num_threads") == 0)
        n = snprintf(buf, cap, "%d", rlx_get_num_threads());
    else if (strcmp(key, "backend") == 0)
        n = snprintf(buf, cap, "%s", ts_backend_is_jit() ? "jit" : "ref");
    else if (strcmp(key, "cache_dir") == 0) {
        char d[4096];
        cg_disk_get_dir(d, sizeof d);
        n = snprintf(buf, cap, "%s", d);
    } else if (strcmp(key, "tuning_status") == 0) {
        char s[512];
        knobs_status(s, sizeof s);
        n = snprintf(buf, cap, "%s", s);
    } else if (knob_find(key) >= 0) {
        char s[32];
        knob_format(key, s, sizeof s);
        n = snprintf(buf, cap, "%s", s);
    } else {
        buf[0] = 0;
        ts_error(RLX_E_ARG, fn, "unknown option '%s'", key);
        return RLX_E_ARG;
    }
    if (n < 0 || (size_t)n >= cap) {
        ts_error(RLX_E_ARG, fn, "value of '%s' needs %d bytes, cap is %zu", key, n + 1, cap);
        return RLX_E_ARG;
    }
    return RLX_OK;
}

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
    pthread_mutex_lock(&stats_lock);
    *out = stats;
    pthread_mutex_unlock(&stats_lock);
}

void rlx_stats_reset(void)
{
    pthread_mutex_lock(&stats_lock);
    memset(&stats, 0, sizeof stats);
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
