/*
 * options.c — every option and environment variable of librlx, in one
 * table (options[] below): rlx_set_option and rlx_get_option walk it, and
 * this file is the only one that reads the environment (once, lazily, on
 * the first call that needs a setting; RLX_BACKEND while the backend
 * option is unset, at each realization, and the cache directory variables
 * when the disk cache falls back to them).
 *
 * Below the tensor layer nothing reads a setting: a realization takes one
 * snapshot (ts_options_take: thread count, debug level, verification, and
 * a retained knob state, no copy of the tuning table) that the passes, the
 * code generator, the executor and the library kernels receive; the code
 * generator's start-up settings (debug level, LLVM options, pass pipeline,
 * the cache directory's default) are handed to it once (cg_configure).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen_llvm/cg.h"
#include "passes/knobs.h"
#include "tensor/control.h"
#include "tensor/ts.h"

typedef rlx_status (*opt_set_fn)(const char *fn, const char *key, const char *value);
typedef int (*opt_get_fn)(const char *key, char *buf, size_t cap); /* snprintf's count */

typedef struct {
    const char *key;  /* rlx_set_option key; NULL: environment only; "<knob>": every knob */
    const char *env;  /* its environment variable; NULL: none */
    const char *type; /* values taken */
    opt_set_fn set;   /* NULL: read-only */
    opt_get_fn get;   /* NULL: write-only */
    const char *doc;
} opt_row;

static struct {
    int debug;
    bool verify;
    char llvm_args[512];
    char passes[1024];
} E; /* the start-up environment (read once) */

static atomic_int num_threads;       /* 0: not set, use the default */
static atomic_int backend_jit = -1;  /* -1: not set, read RLX_BACKEND */
static int default_count;            /* RLX_NUM_THREADS, else the online CPUs */
static atomic_int compile_threads;   /* 0: not set, use the default */
static int default_compile;          /* RLX_COMPILE_THREADS, else the online CPUs */
static atomic_int program_specs;     /* 0: not set, use the default */
static int default_specs;            /* RLX_PROGRAM_SPECS, else TS_PROGRAM_SPECS */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

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

/* The cache directory the environment gives: RLX_CACHE_DIR (set empty:
 * off), else $XDG_CACHE_HOME/rlx, else ~/.cache/rlx; "" when none. */
static void env_cache_dir(char *out, size_t cap)
{
    const char *env;
    if ((env = getenv("RLX_CACHE_DIR")))
        snprintf(out, cap, "%s", env);
    else if ((env = getenv("XDG_CACHE_HOME")) && env[0] == '/')
        snprintf(out, cap, "%s/rlx", env);
    else if ((env = getenv("HOME")) && env[0])
        snprintf(out, cap, "%s/.cache/rlx", env);
    else if (cap)
        out[0] = 0;
}

static bool parse_bytes(const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-')
        return false;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v > (1ull << 62))
        return false;
    *out = v;
    return true;
}

/* RLX_KERNEL_CACHE_BYTES, RLX_CACHE_MAX_BYTES: a bad value keeps the
 * default (a notice under RLX_DEBUG) */
static void env_bytes(const char *name, void (*set)(size_t))
{
    const char *s = getenv(name);
    unsigned long long v;
    if (!s)
        return;
    if (parse_bytes(s, &v))
        set((size_t)v);
    else if (E.debug)
        fprintf(stderr, "rlx: ignoring %s=%s (bytes, an integer in 0..2^62)\n", name, s);
}

static int default_threads(const char *var)
{
    const char *env = getenv(var);
    long v;
    if (env && *env && parse_int(env, 1, 1024, &v))
        return (int)v;
    long n = sysconf(_SC_NPROCESSORS_ONLN); /* reads sysfs: once, not per realize */
    return n > 0 ? (int)(n > 1024 ? 1024 : n) : 1;
}

static void env_init(void)
{
    const char *s = getenv("RLX_DEBUG");
    E.debug = s ? atoi(s) : 0;
    s = getenv("RLX_VERIFY");
#ifdef NDEBUG
    E.verify = s && *s && strcmp(s, "0") != 0;
#else
    E.verify = true; /* debug builds always verify */
#endif
    s = getenv("RLX_LLVM_ARGS");
    snprintf(E.llvm_args, sizeof E.llvm_args, "%s", s ? s : "");
    s = getenv("RLX_JIT_PASSES");
    snprintf(E.passes, sizeof E.passes, "%s", s ? s : "");
    default_count = default_threads("RLX_NUM_THREADS");
    default_compile = default_threads("RLX_COMPILE_THREADS");
    long v;
    s = getenv("RLX_PROGRAM_SPECS");
    default_specs = TS_PROGRAM_SPECS;
    if (s && parse_int(s, 1, TS_PROGRAM_SPECS_MAX, &v))
        default_specs = (int)v;
    else if (s && E.debug)
        fprintf(stderr, "rlx: ignoring RLX_PROGRAM_SPECS=%s (an integer in 1..%d)\n", s, TS_PROGRAM_SPECS_MAX);
    cg_configure(&(cg_config){E.debug, E.llvm_args, E.passes, env_cache_dir});
    env_bytes("RLX_KERNEL_CACHE_BYTES", cg_cache_set_budget);
    env_bytes("RLX_CACHE_MAX_BYTES", cg_disk_set_max_bytes);
    for (int i = 0; i < KNOB_COUNT; i++) { /* RLX_<KNOB> */
        char env[64] = "RLX_";
        size_t j = 4;
        for (const char *p = knob_table[i].name; *p && j + 1 < sizeof env; p++)
            env[j++] = (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
        env[j] = 0;
        knob_set_from_env(knob_table[i].name, env, getenv(env), E.debug);
    }
    char path[4096];
    const char *tf = getenv("RLX_TUNING_FILE");
    if (tf && *tf) {
        snprintf(path, sizeof path, "%s", tf);
    } else {
        env_cache_dir(path, sizeof path);
        size_t n = strlen(path);
        if (n == 0 || snprintf(path + n, sizeof path - n, "/tuning.txt") >= (int)(sizeof path - n))
            path[0] = 0;
    }
    knobs_load_startup(path, E.debug);
}

static void env_ensure(void) { pthread_once(&env_once, env_init); }

/* ------------------------------------------------------------- the rows */

void rlx_set_num_threads(int n) { atomic_store(&num_threads, n > 0 ? (n > 1024 ? 1024 : n) : 0); }

int rlx_get_num_threads(void)
{
    int n = atomic_load(&num_threads);
    if (n > 0)
        return n;
    env_ensure();
    return default_count;
}

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

/* Compiles are work the process waits for once, not its steady state:
 * they use every online CPU by default, whatever num_threads says (W10a's
 * cold first step: 380 ms of LLVM CPU time over 40 kernels). */
static int get_compile_count(void)
{
    int n = atomic_load(&compile_threads);
    if (n > 0)
        return n;
    env_ensure();
    return default_compile;
}

int ts_program_specs(void)
{
    int n = atomic_load(&program_specs);
    if (n > 0)
        return n;
    env_ensure();
    return default_specs;
}

/* program_specs: 0 (the default) .. TS_PROGRAM_SPECS_MAX */
static rlx_status set_specs(const char *fn, const char *key, const char *value)
{
    long v;
    if (!parse_int(value, 0, TS_PROGRAM_SPECS_MAX, &v)) {
        ts_error(RLX_E_ARG, fn, "%s must be an integer in 0..%d, got '%s'", key, TS_PROGRAM_SPECS_MAX, value);
        return RLX_E_ARG;
    }
    atomic_store(&program_specs, (int)v);
    return RLX_OK;
}

static int get_specs(const char *key, char *buf, size_t cap)
{
    (void)key;
    return snprintf(buf, cap, "%d", ts_program_specs());
}

/* num_threads and compile_threads: 0 (the default) .. 1024 */
static rlx_status set_threads(const char *fn, const char *key, const char *value)
{
    long v;
    if (!parse_int(value, 0, 1024, &v)) {
        ts_error(RLX_E_ARG, fn, "%s must be an integer in 0..1024, got '%s'", key, value);
        return RLX_E_ARG;
    }
    if (strcmp(key, "num_threads") == 0)
        rlx_set_num_threads((int)v);
    else
        atomic_store(&compile_threads, (int)v);
    return RLX_OK;
}

static int get_threads(const char *key, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%d", strcmp(key, "num_threads") == 0 ? rlx_get_num_threads() : get_compile_count());
}

static rlx_status set_backend(const char *fn, const char *key, const char *value)
{
    (void)key;
    if (strcmp(value, "ref") != 0 && strcmp(value, "jit") != 0) {
        ts_error(RLX_E_ARG, fn, "backend '%s' is not available (known: ref, jit)", value);
        return RLX_E_ARG;
    }
    atomic_store(&backend_jit, strcmp(value, "jit") == 0);
    return RLX_OK;
}

static int get_backend(const char *key, char *buf, size_t cap)
{
    (void)key;
    return snprintf(buf, cap, "%s", ts_backend_is_jit() ? "jit" : "ref");
}

static rlx_status set_cache_dir(const char *fn, const char *key, const char *value)
{
    (void)key;
    if (cg_disk_set_dir(value) != RLX_OK) {
        ts_error(RLX_E_ARG, fn, "cache_dir is too long (%zu bytes)", strlen(value));
        return RLX_E_ARG;
    }
    return RLX_OK;
}

static int get_cache_dir(const char *key, char *buf, size_t cap)
{
    char d[4096];
    (void)key;
    cg_disk_get_dir(d, sizeof d);
    return snprintf(buf, cap, "%s", d);
}

static rlx_status set_bytes(const char *fn, const char *key, const char *value)
{
    unsigned long long v;
    if (!parse_bytes(value, &v)) {
        ts_error(RLX_E_ARG, fn, "%s must be a byte count, an integer in 0..2^62, got '%s'", key, value);
        return RLX_E_ARG;
    }
    if (strcmp(key, "kernel_cache_bytes") == 0)
        cg_cache_set_budget((size_t)v);
    else
        cg_disk_set_max_bytes((size_t)v);
    return RLX_OK;
}

static int get_bytes(const char *key, char *buf, size_t cap)
{
    if (strcmp(key, "kernel_cache_bytes") == 0) {
        cg_cache_counts c;
        cg_cache_counts_get(&c);
        return snprintf(buf, cap, "%llu", (unsigned long long)c.budget);
    }
    return snprintf(buf, cap, "%llu", (unsigned long long)cg_disk_max_bytes());
}

static rlx_status set_knob(const char *fn, const char *key, const char *value)
{
    char msg[512];
    rlx_status st = strcmp(key, "tuning_file") == 0 ? knobs_load(value, msg, sizeof msg)
                                                     : knob_set(key, value, msg, sizeof msg);
    if (st != RLX_OK)
        ts_error(st, fn, "%s", msg);
    return st;
}

static int get_knob(const char *key, char *buf, size_t cap)
{
    char s[32];
    knob_format(key, s, sizeof s);
    return snprintf(buf, cap, "%s", s);
}

static int get_tuning_status(const char *key, char *buf, size_t cap)
{
    char s[512];
    (void)key;
    knobs_status(s, sizeof s);
    return snprintf(buf, cap, "%s", s);
}

static const opt_row options[] = {
    {"backend", "RLX_BACKEND", "jit | ref", set_backend, get_backend,
     "the realizing backend; the variable is read at each realization while the option is unset"},
    {"num_threads", "RLX_NUM_THREADS", "0..1024 (env 1..1024)", set_threads, get_threads,
     "threads of the pool, BLAS and library kernels; 0: the variable, else the online CPUs"},
    {"compile_threads", "RLX_COMPILE_THREADS", "0..1024 (env 1..1024)", set_threads, get_threads,
     "threads compiling the kernels a realization or program is missing; 0: the variable, else the online CPUs"},
    {"program_specs", "RLX_PROGRAM_SPECS", "0..4096 (env 1..4096)", set_specs, get_specs,
     "specializations each compiled program keeps (default 8): a binding of dynamic dims seen before and kept "
     "plans nothing; each costs the memory of its graph and plan (about 1 MB for the W10a GPT step); 0: the "
     "variable, else 8"},
    {"cache_dir", "RLX_CACHE_DIR", "path, \"\" off", set_cache_dir, get_cache_dir,
     "the disk kernel cache; unset: $XDG_CACHE_HOME/rlx (XDG_CACHE_HOME), else ~/.cache/rlx (HOME)"},
    {"kernel_cache_bytes", "RLX_KERNEL_CACHE_BYTES", "bytes, 0..2^62", set_bytes, get_bytes,
     "budget of the in-memory kernel cache (default 64 MiB): kernels no plan or program holds are evicted, "
     "least recently used first, and their JIT memory returned"},
    {"cache_max_bytes", "RLX_CACHE_MAX_BYTES", "bytes, 0..2^62", set_bytes, get_bytes,
     "size cap of the disk kernel cache (default 256 MiB): the files least recently used are removed"},
    {"tuning_file", "RLX_TUNING_FILE", "path, \"\" clears", set_knob, NULL,
     "loads a tuning file now; the variable names the one read at start-up (else <cache dir>/tuning.txt)"},
    {"tuning_status", NULL, "text", NULL, get_tuning_status, "what the last tuning file load did"},
    {"<knob>", "RLX_<KNOB>", "integer in the knob's range, \"default\"", set_knob, get_knob,
     "each row of knob_table (passes/knobs.c): codegen, runtime and fusion knobs"},
    {NULL, "RLX_DEBUG", "integer", NULL, NULL,
     "1: one line per kernel compiled or loaded and librlx's notices; 2: its LLVM IR, the JIT's start, "
     "LLVM's remarks; 3: its assembly; 4: the graph after simplify and the schedule (include/rlx.h)"},
    {NULL, "RLX_VERIFY", "0 | 1", NULL, NULL,
     "1: the graph and schedule verifiers run after the passes (always in debug builds)"},
    {NULL, "RLX_LLVM_ARGS", "LLVM options, space separated", NULL, NULL, "passed to LLVM once (debugging)"},
    {NULL, "RLX_JIT_PASSES", "an LLVM pass pipeline", NULL, NULL, "replaces the kernels' optimizer pipeline"},
};
enum { NOPTIONS = sizeof options / sizeof *options };

static const opt_row *find_row(const char *key)
{
    for (int i = 0; i < NOPTIONS; i++) {
        const char *k = options[i].key;
        if (k && (strcmp(k, key) == 0 || (strcmp(k, "<knob>") == 0 && knob_find(key) >= 0)))
            return &options[i];
    }
    return NULL;
}

rlx_status rlx_set_option(const char *key, const char *value)
{
    const char *fn = "rlx_set_option";
    if (!key || !value) {
        ts_error(RLX_E_ARG, fn, "key or value is NULL");
        return RLX_E_ARG;
    }
    env_ensure(); /* the environment's values first: a set value wins over them */
    const opt_row *r = find_row(key);
    if (!r || !r->set) {
        ts_error(RLX_E_ARG, fn, "unknown option '%s' (known: backend, num_threads, tuning_file and the knobs listed"
                 " in rlx.h)", key);
        return RLX_E_ARG;
    }
    return r->set(fn, key, value);
}

rlx_status rlx_get_option(const char *key, char *buf, size_t cap)
{
    const char *fn = "rlx_get_option";
    if (!key || !buf || cap == 0) {
        ts_error(RLX_E_ARG, fn, "key or buf is NULL, or cap is 0");
        return RLX_E_ARG;
    }
    env_ensure();
    const opt_row *r = find_row(key);
    if (!r || !r->get) {
        buf[0] = 0;
        ts_error(RLX_E_ARG, fn, "unknown option '%s'", key);
        return RLX_E_ARG;
    }
    int n = r->get(key, buf, cap);
    if (n < 0 || (size_t)n >= cap) {
        ts_error(RLX_E_ARG, fn, "value of '%s' needs %d bytes, cap is %zu", key, n + 1, cap);
        return RLX_E_ARG;
    }
    return RLX_OK;
}

/* ------------------------------------------------------------ snapshot */

void ts_options_take(knob_opts *o)
{
    env_ensure();
    o->nthreads = rlx_get_num_threads();
    o->compile_threads = get_compile_count();
    o->debug = E.debug;
    o->verify = E.verify;
    o->simplify = true;
    o->plan_cache = true;
    o->knobs = knob_snapshot();
}

void ts_options_drop(knob_opts *o)
{
    knob_release(o->knobs);
    o->knobs = NULL;
}
