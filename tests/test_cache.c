/*
 * test_cache.c — the JIT's persistent kernel cache (codegen_llvm/cg_disk.c)
 * and the parallel compile of a schedule (cg_kernels_prepare).
 *
 * A "fresh process" is simulated by fresh_process: cg_cache_reset_for_tests
 * drops the in-memory kernel cache (and starts a new LLJIT) and the plan
 * cache of realizations (runtime/plan_cache.c) is cleared, so the next
 * lookup of a kernel goes to the disk. Every realization is checked against values
 * computed here in double precision; a warm (loaded) run must also give
 * bit-identical results to the cold (compiled) one.
 */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen_llvm/cg.h"
#include "codegen_llvm/cg_disk.h"
#include "passes/passes.h"
#include "runtime/exec/jit_exec.h"

static char base[64]; /* this run's scratch directory */

static void fresh_process(void)
{
    rt_plan_cache_clear();
    cg_cache_reset_for_tests();
}

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb, (void)type, (void)ftw;
    return remove(path);
}

static void cleanup(void) { nftw(base, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

static void scratch(void)
{
    if (base[0])
        return;
    snprintf(base, sizeof base, "/tmp/rlx-test-cache-XXXXXX");
    CHECK(mkdtemp(base) != NULL);
    atexit(cleanup);
}

/* A new cache directory under the scratch directory, two levels deep (the
 * cache creates both). */
static const char *new_dir(const char *name)
{
    static char p[4][256];
    static int r;
    scratch();
    char *d = p[r++ % 4];
    snprintf(d, 256, "%s/%s/cache", base, name);
    CHECK_EQ_INT(rlx_set_option("cache_dir", d), RLX_OK);
    return d;
}

static cg_disk_counts counts(void)
{
    cg_disk_counts c;
    cg_disk_counters(&c);
    return c;
}

static rlx_stats_t stats_now(void)
{
    rlx_stats_t s;
    rlx_stats(&s);
    return s;
}

/* The .rlxk files in dir: their count, and the path of the last one. */
static int cache_files(const char *dir, char *path, size_t cap)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".rlxk") == 0) {
            n++;
            if (path)
                snprintf(path, cap, "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
    return n;
}

/* Every directory entry (temporary files included). */
static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    fclose(f);
    return b;
}

static void write_file(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK_EQ_INT((int)fwrite(b, 1, n, f), (int)n);
    fclose(f);
}

/* ------------------------------------------------------------ workload */

enum { N = 1024 };

/* W2 of the bench: tanh(square(exp((relu(x*1.5 + 0.5) - 0.25) * x) + x) - 1);
 * scale makes other kernels of the same structure's values differ. */
static rlx_tensor *w2(const float *v, int64_t n)
{
    rlx_tensor *x = tf32(1, &n, v);
    rlx_tensor *t = rlx_relu(rlx_add_s(rlx_mul_s(x, 1.5), 0.5));
    t = rlx_exp(rlx_mul(rlx_sub_s(t, 0.25), x));
    return rlx_tanh(rlx_sub_s(rlx_add(rlx_mul(t, t), x), 1));
}

static double w2_ref(double x)
{
    double t = fmax(x * 1.5 + 0.5, 0);
    t = exp((t - 0.25) * x);
    return tanh(t * t + x - 1);
}

static float data[N];

static void fill(void)
{
    for (int i = 0; i < N; i++)
        data[i] = (float)(-2.0 + 4.0 * i / N);
}

/* Realizes W2 over n elements, checks it, and copies the result to out. */
static void run_w2(int64_t n, float *out)
{
    fill();
    rlx_tensor *y = w2(data, n);
    CHECK_EQ_INT(rlx_realize(y), RLX_OK);
    double *e = malloc((size_t)n * sizeof *e);
    for (int64_t i = 0; i < n; i++)
        e[i] = w2_ref(data[i]);
    EXPECT_V("w2", y, RLX_F32, 1, &n, e, 2e-5, 2e-6);
    free(e);
    if (out && rlx_data(y))
        memcpy(out, rlx_data(y), (size_t)n * sizeof *out);
}

/* The JIT with specialized kernels only: these tests make distinct
 * kernels from distinct sizes (size-generic ones: test_generic.c). */
static void jit_on(void)
{
    CHECK_EQ_INT(rlx_set_option("backend", "jit"), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("generic_kernels", "0"), RLX_OK);
}

/* --------------------------------------------------------------- tests */

TEST(cache_cold_then_warm)
{
    jit_on();
    const char *dir = new_dir("warm");
    fresh_process();
    static float cold[N], warm[N];
    cg_disk_counts c0 = counts();
    rlx_stats_t s0 = stats_now();
    run_w2(N, cold);
    rlx_stats_t s1 = stats_now();
    cg_disk_counts c1 = counts();
    CHECK_EQ_INT((int)(s1.kernels_compiled - s0.kernels_compiled), 1);
    CHECK_EQ_INT((int)(s1.cache_misses - s0.cache_misses), 1);
    CHECK_EQ_INT((int)(c1.stores - c0.stores), 1);
    CHECK_EQ_INT((int)(c1.loads - c0.loads), 0);
    char path[512];
    CHECK_EQ_INT(cache_files(dir, path, sizeof path), 1);
    CHECK_EQ_INT(dir_entries(dir), 1); /* no temporary file left */
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    CHECK(stat(dir, &sb) == 0 && (sb.st_mode & 0777) == 0700);
    char parent[300];
    snprintf(parent, sizeof parent, "%s/warm", base);
    CHECK(stat(parent, &sb) == 0 && (sb.st_mode & 0777) == 0700);

    /* the same kernel in a "new process": loaded, not compiled */
    fresh_process();
    run_w2(N, warm);
    rlx_stats_t s2 = stats_now();
    cg_disk_counts c2 = counts();
    CHECK_EQ_INT((int)(s2.kernels_compiled - s1.kernels_compiled), 0);
    CHECK_EQ_INT((int)(s2.cache_hits - s1.cache_hits), 1);
    CHECK_EQ_INT((int)(s2.cache_misses - s1.cache_misses), 0);
    CHECK_EQ_INT((int)(c2.loads - c1.loads), 1);
    CHECK_EQ_INT((int)(c2.stores - c1.stores), 0);
    CHECK(memcmp(cold, warm, sizeof cold) == 0);

    /* and now from memory: neither disk nor compiler */
    run_w2(N, warm);
    rlx_stats_t s3 = stats_now();
    CHECK_EQ_INT((int)(counts().loads - c2.loads), 0);
    CHECK_EQ_INT((int)(s3.kernels_compiled - s2.kernels_compiled), 0);
    CHECK(memcmp(cold, warm, sizeof cold) == 0);
    /* another shape is another kernel, another file */
    run_w2(N - 3, NULL);
    CHECK_EQ_INT(cache_files(dir, NULL, 0), 2);
}

/* Each way of damaging the file is a miss that recompiles and rewrites it
 * (the rewritten file equals the original: codegen is deterministic). */
TEST(cache_corrupt_files)
{
    jit_on();
    const char *dir = new_dir("corrupt");
    fresh_process();
    run_w2(N, NULL);
    char path[512];
    CHECK_EQ_INT(cache_files(dir, path, sizeof path), 1);
    size_t n = 0;
    uint8_t *good = read_file(path, &n);
    CHECK(good && n > CG_DISK_HEADER + 64);
    if (!good || n <= CG_DISK_HEADER + 64)
        return;
    uint8_t *bad = malloc(n + 16);
    uint64_t klen = 0;
    for (int i = 0; i < 8; i++)
        klen |= (uint64_t)good[16 + i] << (8 * i);
    CHECK(klen > 0 && klen < n - CG_DISK_HEADER);
    enum { FLIP_MAGIC, FLIP_VERSION, FLIP_LEN, FLIP_SUM, FLIP_KEY, FLIP_OBJ, FLIP_LAST, TRUNC, APPEND, WRONG_KEY,
           GARBAGE, NCASES };
    static const size_t cuts[] = {0, 1, 7, 39, 40, 41, 100, 0 /* half */, 0 /* one short */};
    for (int c = 0; c < NCASES; c++) {
        int nsub = c == TRUNC ? (int)(sizeof cuts / sizeof *cuts) : 1;
        for (int sub = 0; sub < nsub; sub++) {
            memcpy(bad, good, n);
            size_t len = n;
            switch (c) {
            case FLIP_MAGIC: bad[0] ^= 1; break;
            case FLIP_VERSION: bad[8] ^= 0x80; break;
            case FLIP_LEN: bad[24] ^= 4; break;
            case FLIP_SUM: bad[33] ^= 0x10; break;
            case FLIP_KEY: bad[CG_DISK_HEADER + klen - 3] ^= 0x01; break;
            case FLIP_OBJ: bad[CG_DISK_HEADER + klen + 100] ^= 0x40; break;
            case FLIP_LAST: bad[n - 1] ^= 0xff; break;
            case TRUNC: len = sub == 7 ? n / 2 : sub == 8 ? n - 1 : cuts[sub]; break;
            case APPEND: bad[n] = 0; len = n + 1; break;
            case WRONG_KEY: { /* a well-formed file, checksum right, for another key */
                uint8_t *k = malloc(klen);
                memcpy(k, good + CG_DISK_HEADER, klen);
                k[klen / 2] ^= 0x20;
                cg_disk_format(bad, k, klen, good + CG_DISK_HEADER + klen, n - CG_DISK_HEADER - klen);
                free(k);
                break;
            }
            case GARBAGE: for (size_t i = 0; i < n; i++) bad[i] = (uint8_t)(i * 131 + 7); break;
            }
            write_file(path, bad, len);
            fresh_process();
            cg_disk_counts c0 = counts();
            rlx_stats_t s0 = stats_now();
            run_w2(N, NULL);
            rlx_stats_t s1 = stats_now();
            cg_disk_counts c1 = counts();
            if (c1.loads != c0.loads || s1.kernels_compiled != s0.kernels_compiled + 1 ||
                c1.stores != c0.stores + 1)
                test_fail(__FILE__, __LINE__, "corruption %d.%d was loaded or not recompiled", c, sub);
            /* a missing file is not a rejected one; every other case is */
            CHECK_EQ_INT((int)(c1.rejects - c0.rejects), 1);
            size_t m = 0;
            uint8_t *again = read_file(path, &m);
            CHECK(again && m == n && memcmp(again, good, n) == 0);
            free(again);
        }
    }
    free(bad);
    free(good);
    /* a directory where the file should be: a miss, and the store fails */
    CHECK(unlink(path) == 0 && mkdir(path, 0700) == 0);
    fresh_process();
    cg_disk_counts c0 = counts();
    run_w2(N, NULL);
    CHECK_EQ_INT((int)(counts().store_failures - c0.store_failures), 1);
    CHECK_EQ_INT(dir_entries(dir), 1); /* the temporary file is gone */
    rmdir(path);
}

/* Realizes W2 over n with the cache at dir and checks that nothing was
 * stored or loaded and that no file appeared. */
static void no_cache_run(const char *dir, int64_t n)
{
    fresh_process();
    cg_disk_counts c0 = counts();
    rlx_clear_error();
    run_w2(n, NULL);
    cg_disk_counts c1 = counts();
    CHECK_EQ_INT((int)(c1.stores - c0.stores), 0);
    CHECK_EQ_INT((int)(c1.loads - c0.loads), 0);
    CHECK_EQ_INT((int)rlx_last_status(), RLX_OK);
    if (dir)
        CHECK_EQ_INT(cache_files(dir, NULL, 0), 0);
}

TEST(cache_unusable_dirs)
{
    jit_on();
    scratch();
    char file[300], p[400];
    snprintf(file, sizeof file, "%s/a-file", base);
    write_file(file, (const uint8_t *)"x", 1);
    /* under a regular file (even root cannot create that) */
    snprintf(p, sizeof p, "%s/sub", file);
    CHECK_EQ_INT(rlx_set_option("cache_dir", p), RLX_OK);
    no_cache_run(NULL, 37);
    /* the path is the file itself */
    CHECK_EQ_INT(rlx_set_option("cache_dir", file), RLX_OK);
    no_cache_run(NULL, 38);
    /* in /proc */
    CHECK_EQ_INT(rlx_set_option("cache_dir", "/proc/self/rlx-cache"), RLX_OK);
    no_cache_run(NULL, 39);
    /* a directory others may write to is not trusted */
    snprintf(p, sizeof p, "%s/shared", base);
    CHECK(mkdir(p, 0700) == 0 && chmod(p, 0777) == 0);
    CHECK_EQ_INT(rlx_set_option("cache_dir", p), RLX_OK);
    no_cache_run(p, 40);
    /* "" turns the cache off */
    const char *dir = new_dir("off");
    run_w2(41, NULL);
    CHECK_EQ_INT(cache_files(dir, NULL, 0), 1);
    CHECK_EQ_INT(rlx_set_option("cache_dir", ""), RLX_OK);
    cg_disk_counts c0 = counts();
    no_cache_run(NULL, 41); /* would be a load */
    no_cache_run(NULL, 42); /* would be a store */
    CHECK_EQ_INT(cache_files(dir, NULL, 0), 1);
    CHECK_EQ_INT((int)(counts().rejects - c0.rejects), 0);
    /* the environment decides once the option is back to its default */
    setenv("RLX_CACHE_DIR", "", 1);
    CHECK_EQ_INT(cg_disk_set_dir(NULL), RLX_OK);
    no_cache_run(NULL, 43);
    snprintf(p, sizeof p, "%s/from-env", base);
    setenv("RLX_CACHE_DIR", p, 1);
    CHECK_EQ_INT(cg_disk_set_dir(NULL), RLX_OK);
    run_w2(44, NULL);
    CHECK_EQ_INT(cache_files(p, NULL, 0), 1);
    setenv("RLX_CACHE_DIR", "", 1);
    /* a path too long is a bad option */
    static char longp[5000];
    memset(longp, 'a', sizeof longp - 1);
    CHECK_ERR(rlx_set_option("cache_dir", longp), RLX_E_ARG, "rlx_set_option");
    CHECK_ERR(rlx_set_option("cache_dir", NULL), RLX_E_ARG, "rlx_set_option");
}

/* A file size limit below the object's size stands in for a full disk:
 * the store is skipped (without SIGXFSZ killing the process), the
 * realization is right, and no partial or temporary file is left. */
TEST(cache_full_disk)
{
    jit_on();
    const char *dir = new_dir("full");
    CHECK(cg_disk_enabled());
    struct rlimit old, lim;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 600;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    fresh_process();
    cg_disk_counts c0 = counts();
    run_w2(N, NULL);
    cg_disk_counts c1 = counts();
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, prev);
    CHECK_EQ_INT((int)(c1.store_failures - c0.store_failures), 1);
    CHECK_EQ_INT((int)(c1.stores - c0.stores), 0);
    CHECK_EQ_INT(dir_entries(dir), 0);
    /* with room again it is stored */
    fresh_process();
    run_w2(N, NULL);
    CHECK_EQ_INT(cache_files(dir, NULL, 0), 1);
}

/* ---------------------------------------------------- parallel prepare */

/* Several distinct kernels (elementwise, reductions, a softmax row kernel)
 * and one repeated, as roots of one schedule. */
static int build_roots(rlx_tensor **r)
{
    int64_t sh[2] = {8, 33};
    rlx_tensor *x = trand(RLX_F32, 2, sh, -1, 1), *y = trand(RLX_F32, 2, sh, -1, 1);
    int n = 0;
    r[n++] = rlx_tanh(rlx_add(rlx_mul(x, y), x));
    r[n++] = rlx_sum(rlx_exp(x), (int[]){1}, 1, false);
    r[n++] = rlx_softmax(y, -1);
    r[n++] = rlx_sqrt(rlx_abs(rlx_sub(x, y)));
    r[n++] = rlx_max(rlx_mul_s(y, 2.5), (int[]){0}, 1, true);
    r[n++] = rlx_sigmoid(rlx_cast(rlx_add_s(x, 1), RLX_F64));
    r[n++] = rlx_tanh(rlx_add(rlx_mul(y, x), y)); /* the structure of r[0] */
    return n;
}

static void prepare_round(int nthreads, bool from_disk)
{
    rlx_tensor *r[8];
    int nr = build_roots(r);
    ir_node *roots[8];
    for (int i = 0; i < nr; i++)
        roots[i] = (ir_node *)r[i];
    sched_schedule s;
    sched_ctx sc = {0};
    CHECK(sched_build(&sc, roots, nr, &s) == RLX_OK);
    cg_kernel *refs[64] = {0};
    CHECK(s.count <= 64);
    int loops = 0;
    for (long i = 0; i < s.count; i++)
        loops += s.k[i].kind == SCHED_LOOP;
    CHECK(loops >= 7);
    cg_stats st = {0};
    char msg[256];
    cg_disk_counts c0 = counts();
    CHECK_EQ_INT(cg_kernels_prepare(s.k, s.count, nthreads, NULL, refs, &st, msg, sizeof msg), RLX_OK);
    /* one lookup per LOOP kernel; the repeated one is a hit */
    CHECK_EQ_INT((int)(st.hits + st.misses), loops);
    CHECK_EQ_INT((int)st.hits, from_disk ? loops : 1);
    CHECK_EQ_INT((int)st.loaded, from_disk ? loops - 1 : 0);
    CHECK_EQ_INT((int)st.compiled, from_disk ? 0 : loops - 1);
    CHECK_EQ_INT((int)(counts().loads - c0.loads), from_disk ? loops - 1 : 0);
    for (long i = 0; i < s.count; i++) {
        CHECK((refs[i] != NULL) == (s.k[i].kind == SCHED_LOOP));
        CHECK((cg_kernel_func(refs[i]) != NULL) == (s.k[i].kind == SCHED_LOOP));
        if (s.k[i].kind != SCHED_LOOP)
            continue;
        /* the same functions as one lookup at a time, now from memory */
        cg_kernel *one = NULL;
        cg_stats s1 = {0};
        CHECK_EQ_INT(cg_kernel_get(&s.k[i], NULL, &one, &s1, msg, sizeof msg), RLX_OK);
        CHECK(one == refs[i] && s1.hits == 1 && s1.misses == 0);
        cg_kernel_release(one);
    }
    /* a second prepare finds everything in memory */
    cg_stats st2 = {0};
    cg_kernel *refs2[64] = {0};
    CHECK_EQ_INT(cg_kernels_prepare(s.k, s.count, nthreads, NULL, refs2, &st2, msg, sizeof msg), RLX_OK);
    CHECK_EQ_INT((int)st2.hits, loops);
    CHECK_EQ_INT((int)(st2.misses + st2.compiled + st2.loaded), 0);
    cg_kernels_release(refs, s.count);
    cg_kernels_release(refs2, s.count);
    sched_free(&s);
    /* the realization runs those functions: check its values */
    rlx_stats_t a = stats_now();
    CHECK_EQ_INT(rlx_realize_many(r, nr), RLX_OK);
    rlx_stats_t b = stats_now();
    CHECK_EQ_INT((int)(b.kernels_compiled - a.kernels_compiled), 0);
}

/* The JIT's values of the prepared kernels against the reference
 * evaluator's, on the same inputs. */
static void prepared_values(void)
{
    int64_t sh[2] = {8, 33};
    rlx_tensor *x = trand(RLX_F32, 2, sh, -1, 1), *y = trand(RLX_F32, 2, sh, -1, 1);
    rlx_tensor *got[3], *want[3];
    for (int pass = 0; pass < 2; pass++) {
        CHECK_EQ_INT(rlx_set_option("backend", pass ? "ref" : "jit"), RLX_OK);
        /* copies, so the two backends do not share (hash-consed) nodes */
        int64_t n = 8 * 33;
        float *xv = malloc((size_t)n * sizeof *xv), *yv = malloc((size_t)n * sizeof *yv);
        CHECK_EQ_INT(rlx_read_f32(x, xv, (size_t)n), RLX_OK);
        CHECK_EQ_INT(rlx_read_f32(y, yv, (size_t)n), RLX_OK);
        rlx_tensor *a = tf32(2, sh, xv), *b = tf32(2, sh, yv);
        rlx_tensor **o = pass ? want : got;
        o[0] = rlx_tanh(rlx_add(rlx_mul(a, b), a));
        o[1] = rlx_sum(rlx_exp(a), (int[]){1}, 1, false);
        o[2] = rlx_softmax(b, -1);
        CHECK_EQ_INT(rlx_realize_many(o, 3), RLX_OK);
        free(xv);
        free(yv);
    }
    for (int i = 0; i < 3; i++)
        EXPECT_SAME(got[i], want[i], 1e-5);
    CHECK_EQ_INT(rlx_set_option("backend", "jit"), RLX_OK);
}

TEST(cache_parallel_prepare)
{
    jit_on();
    CHECK_EQ_INT(rlx_set_option("cache_dir", ""), RLX_OK);
    fresh_process();
    prepare_round(4, false); /* compiled on 4 threads, no disk */
    new_dir("parallel");
    fresh_process();
    prepare_round(3, false); /* compiled and stored */
    fresh_process();
    prepare_round(4, true); /* all loaded */
    fresh_process();
    prepare_round(1, true); /* one thread */
    prepared_values();
    /* nothing to do, and nonsense counts */
    cg_stats st = {0};
    char msg[64];
    CHECK_EQ_INT(cg_kernels_prepare(NULL, 0, 4, NULL, NULL, &st, msg, sizeof msg), RLX_OK);
    CHECK_EQ_INT((int)(st.hits + st.misses), 0);
}

/* An injected verifier failure bypasses the disk (so the fault is seen)
 * and caches nothing; the next realization compiles again. */
TEST(cache_failures_not_stored)
{
    jit_on();
    const char *dir = new_dir("fail");
    fresh_process();
    cg_test_inject(1);
    fill();
    int64_t n = 50;
    rlx_tensor *y = w2(data, n);
    CHECK_ERR(rlx_realize(y), RLX_E_JIT, "rlx_realize");
    CHECK_EQ_INT(cache_files(dir, NULL, 0), 0);
    cg_test_inject(2);
    y = w2(data, n);
    rlx_clear_error();
    CHECK_EQ_INT(rlx_realize(y), RLX_E_JIT);
    CHECK(strstr(rlx_last_error(), "rlx_no_such_kernel") != NULL);
    rlx_clear_error();
    CHECK_EQ_INT(cache_files(dir, NULL, 0), 0);
    run_w2(n, NULL);
    CHECK_EQ_INT(cache_files(dir, NULL, 0), 1);
}

/* ------------------------------------------- build identity, size cap */

/* A cache written by another build (another identity) is never loaded:
 * each file is found by its name, rejected by its key, and replaced. */
TEST(cache_foreign_build_is_a_miss)
{
    jit_on();
    const char *dir = new_dir("identity");
    enum { SIZES = 6 };
    cg_disk_set_identity_for_tests("another build of librlx");
    fresh_process();
    for (int i = 0; i < SIZES; i++)
        run_w2(100 + i, NULL);
    int files = cache_files(dir, NULL, 0);
    CHECK(files >= SIZES / 2);
    cg_disk_set_identity_for_tests(NULL); /* this build again */
    fresh_process();
    cg_disk_counts c0 = counts();
    rlx_stats_t s0 = stats_now();
    for (int i = 0; i < SIZES; i++)
        run_w2(100 + i, NULL);
    cg_disk_counts c1 = counts();
    rlx_stats_t s1 = stats_now();
    CHECK_EQ_INT((int)(c1.loads - c0.loads), 0);
    CHECK_EQ_INT((int)(c1.rejects - c0.rejects), files);
    CHECK_EQ_INT((int)(s1.kernels_compiled - s0.kernels_compiled), files);
    CHECK_EQ_INT(cache_files(dir, NULL, 0), files); /* replaced, not added */
    /* and now this build's files load */
    fresh_process();
    for (int i = 0; i < SIZES; i++)
        run_w2(100 + i, NULL);
    CHECK_EQ_INT((int)(counts().loads - c1.loads), files);
    /* a corrupt object (a flipped byte in the code) is a miss too */
    char path[512];
    cache_files(dir, path, sizeof path);
    size_t n;
    uint8_t *b = read_file(path, &n);
    CHECK(b && n > 64);
    if (b && n > 64) {
        b[n - 7] ^= 0x5a;
        write_file(path, b, n);
    }
    free(b);
    fresh_process();
    cg_disk_counts c2 = counts();
    for (int i = 0; i < SIZES; i++)
        run_w2(100 + i, NULL);
    CHECK_EQ_INT((int)(counts().rejects - c2.rejects), 1);
    CHECK_EQ_INT((int)(counts().loads - c2.loads), files - 1);
}

typedef struct {
    char name[256];
    struct timespec mtime;
} named_file;

/* Past cache_max_bytes the files least recently used go first. */
TEST(cache_size_cap_evicts_oldest)
{
    jit_on();
    const char *dir = new_dir("cap");
    fresh_process();
    enum { SIZES = 16 };
    for (int i = 0; i < SIZES; i++)
        run_w2(200 + i, NULL);
    /* give the files ages: the i-th found is i hours old */
    named_file f[64];
    int nf = 0;
    long long total = 0;
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    for (struct dirent *e; d && (e = readdir(d)) && nf < 64;) {
        size_t len = strlen(e->d_name);
        if (len <= 5 || strcmp(e->d_name + len - 5, ".rlxk") != 0)
            continue;
        snprintf(f[nf].name, sizeof f[nf].name, "%s/%s", dir, e->d_name);
        struct timespec t[2] = {{.tv_sec = time(NULL) - 3600L * (nf + 1)}, {.tv_sec = time(NULL) - 3600L * (nf + 1)}};
        CHECK(utimensat(AT_FDCWD, f[nf].name, t, 0) == 0);
        struct stat sb;
        CHECK(stat(f[nf].name, &sb) == 0);
        total += sb.st_size;
        f[nf++].mtime = t[0];
    }
    if (d)
        closedir(d);
    CHECK(nf >= SIZES / 2);
    /* a cap just under the total: the next store scans and evicts to 3/4 */
    char cap[32];
    snprintf(cap, sizeof cap, "%lld", total - 1);
    CHECK_EQ_INT(rlx_set_option("cache_max_bytes", cap), RLX_OK);
    char got[32];
    CHECK_EQ_INT(rlx_get_option("cache_max_bytes", got, sizeof got), RLX_OK);
    CHECK(strcmp(got, cap) == 0);
    cg_disk_counts c0 = counts();
    run_w2(300, NULL); /* a new kernel: stored, then the scan */
    cg_disk_counts c1 = counts();
    CHECK(c1.evictions > c0.evictions);
    /* every file left is younger than every file removed; the oldest went */
    struct timespec oldest_left = {.tv_sec = LLONG_MAX}, youngest_gone = {0};
    int gone = 0;
    for (int i = 0; i < nf; i++) {
        struct stat sb;
        if (stat(f[i].name, &sb) != 0) {
            gone++;
            if (f[i].mtime.tv_sec > youngest_gone.tv_sec)
                youngest_gone = f[i].mtime;
        } else if (sb.st_mtim.tv_sec < oldest_left.tv_sec) {
            oldest_left = sb.st_mtim;
        }
    }
    CHECK_EQ_INT(gone, (int)(c1.evictions - c0.evictions));
    CHECK(gone >= 1 && youngest_gone.tv_sec < oldest_left.tv_sec);
    CHECK(stat(f[nf - 1].name, &(struct stat){0}) != 0); /* the oldest */
    long long left = 0;
    d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[600];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (strstr(e->d_name, ".rlxk") && stat(p, &sb) == 0)
            left += sb.st_size;
    }
    if (d)
        closedir(d);
    CHECK(left <= (total - 1) / 4 * 3);
    /* a cap of 0 keeps nothing after the next store's scan */
    CHECK_EQ_INT(rlx_set_option("cache_max_bytes", "0"), RLX_OK);
    run_w2(301, NULL);
    CHECK_EQ_INT(cache_files(dir, NULL, 0), 0);
    CHECK_EQ_INT(rlx_set_option("cache_max_bytes", "268435456"), RLX_OK);
    CHECK_ERR(rlx_set_option("cache_max_bytes", "-1"), RLX_E_ARG, "rlx_set_option");
    CHECK_ERR(rlx_set_option("kernel_cache_bytes", "lots"), RLX_E_ARG, "rlx_set_option");
}

/* Two processes realizing the same and different kernels into one cache
 * directory at once (each process is this test binary, run as a child
 * by its environment): both correct, every file valid afterwards. */
static void child_sizes(int which, int64_t *sizes, int *n)
{
    *n = 0;
    for (int i = 0; i < 12; i++)
        sizes[(*n)++] = 400 + i; /* shared */
    for (int i = 0; i < 12; i++)
        sizes[(*n)++] = 500 + 20 * which + i; /* its own */
}

TEST(cache_child_worker)
{
    const char *w = getenv("RLX_TEST_CACHE_CHILD");
    if (!w)
        return; /* only in the children of cache_two_processes */
    jit_on();
    int64_t sizes[32];
    int n;
    child_sizes(atoi(w), sizes, &n);
    for (int round = 0; round < 3; round++) {
        fresh_process(); /* so that later rounds read what both wrote */
        for (int i = 0; i < n; i++)
            run_w2(sizes[i], NULL);
    }
}

TEST(cache_two_processes)
{
    jit_on();
    const char *dir = new_dir("two");
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(len > 0);
    if (len <= 0)
        return;
    self[len] = 0;
    pid_t pid[2];
    for (int c = 0; c < 2; c++) {
        pid[c] = fork();
        CHECK(pid[c] >= 0);
        if (pid[c] == 0) {
            char which[8];
            snprintf(which, sizeof which, "%d", c);
            setenv("RLX_TEST_CACHE_CHILD", which, 1);
            setenv("RLX_CACHE_DIR", dir, 1);
            execl(self, self, "cache_child_worker", (char *)NULL);
            _exit(127);
        }
    }
    for (int c = 0; c < 2; c++) {
        int status = 0;
        CHECK(waitpid(pid[c], &status, 0) == pid[c]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    /* consistent: every kernel of both loads here, none rejected, no
     * temporary file left */
    int files = cache_files(dir, NULL, 0);
    CHECK_EQ_INT(dir_entries(dir), files);
    fresh_process();
    cg_disk_counts c0 = counts();
    rlx_stats_t s0 = stats_now();
    for (int c = 0; c < 2; c++) {
        int64_t sizes[32];
        int n;
        child_sizes(c, sizes, &n);
        for (int i = 0; i < n; i++)
            run_w2(sizes[i], NULL);
    }
    CHECK_EQ_INT((int)(counts().rejects - c0.rejects), 0);
    CHECK_EQ_INT((int)(counts().loads - c0.loads), files);
    CHECK_EQ_INT((int)(stats_now().kernels_compiled - s0.kernels_compiled), 0);
}

/* ------------------------------------------------- in-memory eviction */

static void set_budget(const char *b) { CHECK_EQ_INT(rlx_set_option("kernel_cache_bytes", b), RLX_OK); }

/* Under a 1-byte budget every kernel nobody holds is evicted as soon as
 * its plan goes, and values stay right over many distinct kernels. */
TEST(kernel_cache_tiny_budget)
{
    jit_on();
    CHECK_EQ_INT(rlx_set_option("cache_dir", ""), RLX_OK);
    fresh_process();
    char was[32];
    CHECK_EQ_INT(rlx_get_option("kernel_cache_bytes", was, sizeof was), RLX_OK);
    CHECK(strcmp(was, "67108864") == 0); /* the default */
    set_budget("1");
    rlx_stats_reset();
    for (int i = 0; i < 80; i++) {
        run_w2(600 + i % 40, NULL); /* the second 40 recompile: evicted meanwhile */
        rlx_stats_t s = stats_now();
        /* at most the kernels the plan cache's plans hold */
        cg_cache_counts kc;
        cg_cache_counts_get(&kc);
        CHECK(s.kernel_cache_bytes == kc.bytes);
    }
    rlx_stats_t s = stats_now();
    CHECK(s.kernel_evictions >= 40);
    CHECK(s.kernels_compiled >= 60);
    rt_plan_cache_clear(); /* the last holders */
    CHECK_EQ_INT((int)stats_now().kernel_cache_bytes, 0);
    /* a larger budget keeps them */
    set_budget("67108864");
    rlx_stats_reset();
    for (int i = 0; i < 2; i++)
        run_w2(700, NULL);
    rt_plan_cache_clear();
    CHECK(stats_now().kernel_cache_bytes > 0);
    CHECK_EQ_INT((int)stats_now().kernel_evictions, 0);
    CHECK_EQ_INT((int)stats_now().kernels_compiled, 1);
}

/* A kernel in use is never evicted: a program runs (its kernels held by
 * its plan) while other threads realize new kernels under a 1-byte budget,
 * evicting everything idle. */
enum { RACE_N = 777, RACE_RUNS = 40, RACE_NEW = 30 };
static atomic_int race_bad;
static float race_x[RACE_N];

static void *race_user(void *arg)
{
    rlx_program *p = arg;
    for (int r = 0; r < RACE_RUNS; r++) {
        rlx_binding b = {"x", rlx_from_data(RLX_F32, 1, (int64_t[]){RACE_N}, race_x)};
        rlx_tensor *out = NULL;
        static _Thread_local float got[RACE_N];
        if (rlx_program_run(p, &b, 1, &out) != RLX_OK || rlx_read_f32(out, got, RACE_N) != RLX_OK) {
            atomic_fetch_add(&race_bad, 1);
        } else {
            for (int i = 0; i < RACE_N; i++)
                if (!(fabs(got[i] - w2_ref(race_x[i])) <= 2e-5 + 2e-6 * fabs(w2_ref(race_x[i])))) {
                    atomic_fetch_add(&race_bad, 1);
                    break;
                }
        }
        rlx_release(out);
        rlx_release(b.value);
    }
    return NULL; /* (its nodes are the main thread's) */
}

static void *race_evictor(void *arg)
{
    int first = *(const int *)arg;
    for (int i = 0; i < RACE_NEW; i++) {
        rlx_scope_begin(); /* this thread's handles */
        int64_t n = first + i;
        static _Thread_local float v[1200], got[1200];
        for (int j = 0; j < n; j++)
            v[j] = (float)(-2.0 + 4.0 * j / (double)n);
        rlx_tensor *x = rlx_from_data(RLX_F32, 1, &n, v);
        rlx_tensor *t = rlx_relu(rlx_add_s(rlx_mul_s(x, 1.5), 0.5));
        t = rlx_exp(rlx_mul(rlx_sub_s(t, 0.25), x));
        rlx_tensor *y = rlx_tanh(rlx_sub_s(rlx_add(rlx_mul(t, t), x), 1));
        if (rlx_read_f32(y, got, (size_t)n) != RLX_OK) {
            atomic_fetch_add(&race_bad, 1);
        } else {
            for (int j = 0; j < n; j++)
                if (!(fabs(got[j] - w2_ref(v[j])) <= 2e-5 + 2e-6 * fabs(w2_ref(v[j])))) {
                    atomic_fetch_add(&race_bad, 1);
                    break;
                }
        }
        rlx_scope_end();
    }
    return NULL;
}

TEST(kernel_in_use_never_evicted)
{
    jit_on();
    CHECK_EQ_INT(rlx_set_option("cache_dir", ""), RLX_OK);
    fresh_process();
    set_budget("1");
    for (int i = 0; i < RACE_N; i++)
        race_x[i] = (float)(-2.0 + 4.0 * i / RACE_N);
    rlx_tensor *in = rlx_input("x", RLX_F32, 1, (int64_t[]){RACE_N});
    rlx_tensor *t = rlx_relu(rlx_add_s(rlx_mul_s(in, 1.5), 0.5));
    t = rlx_exp(rlx_mul(rlx_sub_s(t, 0.25), in));
    rlx_tensor *y = rlx_tanh(rlx_sub_s(rlx_add(rlx_mul(t, t), in), 1));
    rlx_program *p = rlx_compile(&y, 1);
    CHECK(p != NULL);
    if (!p)
        return;
    rlx_stats_reset();
    atomic_store(&race_bad, 0);
    pthread_t user[2], ev[2];
    int bases[2] = {800, 1000};
    for (int i = 0; i < 2; i++) {
        CHECK(pthread_create(&user[i], NULL, race_user, p) == 0);
        CHECK(pthread_create(&ev[i], NULL, race_evictor, &bases[i]) == 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(user[i], NULL);
        pthread_join(ev[i], NULL);
    }
    CHECK_EQ_INT(atomic_load(&race_bad), 0);
    CHECK(stats_now().kernel_evictions >= RACE_NEW); /* evictions did race the runs */
    rlx_program_free(p);
    rt_plan_cache_clear();
    CHECK_EQ_INT((int)stats_now().kernel_cache_bytes, 0); /* the program's kernels went with it */
    set_budget("67108864");
}

/* compile_threads: kernels compiled on 1 or 3 threads (several missing
 * at once) give the reference's values; bad values are refused. */
TEST(compile_threads_option)
{
    char buf[32];
    CHECK_EQ_INT(rlx_get_option("compile_threads", buf, sizeof buf), RLX_OK);
    CHECK(atoi(buf) >= 1); /* the default: the online CPUs */
    int64_t n;
    rlx_tensor *x = trand(RLX_F32, 2, (int64_t[]){37, 29}, -2, 2);
    double *xv = test_values(x, &n);
    float xf[37 * 29];
    for (int i = 0; i < 37 * 29; i++)
        xf[i] = (float)xv[i];
    free(xv);
    for (int r = 0; r < 2; r++) {
        CHECK_EQ_INT(rlx_set_option("compile_threads", r ? "3" : "1"), RLX_OK);
        CHECK_EQ_INT(rlx_get_option("compile_threads", buf, sizeof buf), RLX_OK);
        CHECK(strcmp(buf, r ? "3" : "1") == 0);
        rlx_tensor *out[2][3];
        EACH_BACKEND(jit)
        {
            /* other ops per round: kernels missing from the caches; the
             * reference over a copy of x (no node shared with the JIT's) */
            rlx_tensor *xb = jit ? x : tf32(2, (int64_t[]){37, 29}, xf);
            rlx_tensor *u = r ? rlx_sigmoid(rlx_mul_s(xb, 1.5)) : rlx_tanh(rlx_abs(xb));
            rlx_tensor *y = rlx_softmax(rlx_mul(u, r ? rlx_sin(xb) : rlx_cos(xb)), 1);
            rlx_tensor *z = rlx_sum(r ? rlx_exp(rlx_neg(y)) : rlx_sqrt(rlx_add_s(y, 3)), (int[]){0}, 1, false);
            rlx_tensor *t =
                r ? rlx_max(rlx_erf(xb), (int[]){1}, 1, false) : rlx_min(rlx_mul(xb, xb), (int[]){1}, 1, false);
            rlx_stats_t s0, s1;
            rlx_stats(&s0);
            CHECK_EQ_INT(rlx_realize_many((rlx_tensor *[]){y, z, t}, 3), RLX_OK);
            rlx_stats(&s1);
            if (jit)
                CHECK(s1.kernels_compiled - s0.kernels_compiled >= 2);
            out[jit][0] = y, out[jit][1] = z, out[jit][2] = t;
        }
        EXPECT_SAME(out[1][0], out[0][0], 1e-6);
        EXPECT_SAME(out[1][1], out[0][1], 1e-5);
        EXPECT_SAME(out[1][2], out[0][2], 1e-6);
    }
    CHECK_ERR(rlx_set_option("compile_threads", "-1"), RLX_E_ARG, "rlx_set_option");
    CHECK_ERR(rlx_set_option("compile_threads", "1025"), RLX_E_ARG, "rlx_set_option");
    CHECK_ERR(rlx_set_option("compile_threads", "two"), RLX_E_ARG, "rlx_set_option");
    CHECK_EQ_INT(rlx_set_option("compile_threads", "0"), RLX_OK);
}

TEST_MAIN(T(cache_cold_then_warm), T(cache_corrupt_files), T(cache_unusable_dirs), T(cache_full_disk),
          T(cache_parallel_prepare), T(cache_failures_not_stored), T(cache_foreign_build_is_a_miss),
          T(cache_size_cap_evicts_oldest), T(cache_child_worker), T(cache_two_processes), T(kernel_cache_tiny_budget),
          T(kernel_in_use_never_evicted), T(compile_threads_option))
