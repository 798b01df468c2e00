/*
 * soak.c — rlx-soak: a long run of random work, sampling resident memory
 * and the caches every second, to see that a long-lived process plateaus
 * (issue 18). Not in CI.
 *
 *   rlx-soak [seconds (1800)] [csv (soak.csv)] [seed] [inject (1)]
 *
 * Each round builds a random graph (elementwise chains, reductions,
 * reshapes, transposes, softmax, matmuls) over random shapes, at a random
 * thread count (rlx_set_num_threads 1..4), and either realizes it, or
 * compiles it into a program run a few times on new inputs and freed, or
 * differentiates it; one round in 16 injects an allocation failure
 * somewhere in the round (ir_alloc_fail_after, the tests' hook), after
 * which any status is accepted but the process must go on. Values are
 * checked against the reference backend on one round in 32 (every realized
 * round with RLX_SOAK_CHECK_ALL=1); a mismatch is printed with its ops,
 * and RLX_SOAK_DUMP=file.npy saves its input.
 *
 * The CSV has one row a second: seconds, resident MiB (/proc/self/statm),
 * kernel-cache bytes and evictions, plan-cache bytes, live nodes, rounds,
 * and glibc's malloc figures (mallinfo2, all arenas): MiB in use and MiB
 * held (in use + free chunks kept), so that growth of the resident set
 * splits into what malloc holds (in use: a leak or a cache; held but free:
 * fragmentation) and what it does not (JIT code and data, stacks); then
 * the resident set's anonymous and file MiB and the mapping count.
 * bench/soak_plot.py draws it. Set the kernel-cache budget with
 * RLX_KERNEL_CACHE_BYTES (the budget is printed and checked each second).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "ir/ir.h"
#include "rlx.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int pick(int n) { return (int)(next() % (uint64_t)n); }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* MiB malloc has handed out and MiB it holds from the system; -1 off glibc. */
static void malloc_mib(double *used, double *held)
{
#ifdef __GLIBC__
    struct mallinfo2 m = mallinfo2();
    *used = (double)(m.uordblks + m.hblkhd) / (1 << 20);
    *held = (double)(m.arena + m.hblkhd) / (1 << 20);
#else
    *used = *held = -1;
#endif
}

static double resident_mib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return (double)res * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

/* The resident set split as the kernel counts it (/proc/self/status):
 * anonymous pages (malloc, JIT code and data, stacks) and file pages (the
 * libraries), and the number of mappings (/proc/self/maps): JIT memory
 * and thread stacks are mappings of their own, malloc's arenas are few. */
static void resident_split(double *anon_mib, double *file_mib, long *maps)
{
    *anon_mib = *file_mib = -1;
    *maps = -1;
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        long kb;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "RssAnon: %ld", &kb) == 1)
                *anon_mib = kb / 1024.0;
            else if (sscanf(line, "RssFile: %ld", &kb) == 1)
                *file_mib = kb / 1024.0;
        }
        fclose(f);
    }
    f = fopen("/proc/self/maps", "r");
    if (f) {
        *maps = 0;
        int c;
        while ((c = getc(f)) != EOF)
            *maps += c == '\n';
        fclose(f);
    }
}

/* The ops random_graph chose last, one digit each, for a mismatch report. */
static char graph_ops[16];

/* A random graph over x (shape r x c); every op keeps the shape. */
static rlx_tensor *random_graph(rlx_tensor *x, int64_t r, int64_t c)
{
    rlx_tensor *y = x;
    int nops = 1 + pick(12);
    for (int i = 0; i < nops; i++) {
        int op = pick(10);
        graph_ops[i] = (char)('0' + op);
        graph_ops[i + 1] = 0;
        switch (op) {
        case 0: y = rlx_add(y, x); break;
        case 1: y = rlx_mul_s(y, 0.5 + 0.01 * pick(100)); break;
        case 2: y = rlx_tanh(y); break;
        case 3: y = rlx_exp(rlx_minimum_s(y, 4)); break;
        case 4: y = rlx_softmax(y, -1); break;
        case 5: y = rlx_add(y, rlx_sum(y, (int[]){1}, 1, true)); break;
        case 6: y = rlx_mul(y, rlx_sum(y, (int[]){0}, 1, true)); break;
        case 7: /* a transpose there and back */
            y = rlx_transpose(rlx_add_s(rlx_transpose(y, 2, (int[]){1, 0}), 1), 2, (int[]){1, 0});
            break;
        case 8: y = rlx_reshape(rlx_tanh(rlx_reshape(y, 1, (int64_t[]){r * c})), 2, (int64_t[]){r, c}); break;
        default: /* r x c @ c x c */
            y = rlx_matmul(y, rlx_transpose(rlx_reshape(rlx_add_s(x, 0.25), 2, (int64_t[]){r, c}), 2,
                                            (int[]){1, 0}));
            y = rlx_matmul(y, x); /* r x r @ r x c */
            y = rlx_mul_s(y, 1.0 / (double)(r * c));
            break;
        }
    }
    return y;
}

typedef struct {
    unsigned long rounds, errors, injected, checked, mismatches, ill_conditioned;
} tally;

/* |v - want| within 1e-3 relative, or the same infinity, or NaN for NaN. */
static bool close_to(double v, double want)
{
    return v == want || (isnan(v) && isnan(want)) || fabs(v - want) <= 1e-3 * (1 + fabs(want));
}

/* The graph of mode 0 again, over a copy of x's values (a new leaf, so
 * nothing is shared with the JIT's graph), on the reference backend. When
 * the two f32 results differ, the same graph in f64 decides: the chains
 * (exp of row sums, softmax of large logits) can be ill-conditioned, so
 * f32 rounding alone moves both backends away from the exact value (a
 * softmax over logits near 7e4, where one f32 ulp is 0.008, moves its
 * outputs by up to 0.8%; which elements move depends on the order of the
 * sums, and generic and specialized kernels add in different orders). So
 * the JIT is wrong where it gives NaN or inf the f32 reference does not, or
 * where its largest error against f64 over the tensor is above 1e-3 and 4x
 * the f32 reference's largest; the rest count as ill-conditioned. */
static void check_against_ref(rlx_tensor *x, rlx_tensor *y, uint64_t seed, uint64_t graph_rng, int64_t r, int64_t c,
                             tally *t)
{
    size_t n = (size_t)(r * c);
    float *xv = malloc(n * sizeof *xv), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    double *d = malloc(n * sizeof *d);
    if (!xv || !a || !b || !d || rlx_read_f32(x, xv, n) != RLX_OK || rlx_read_f32(y, a, n) != RLX_OK)
        goto done;
    rlx_set_option("backend", "ref");
    uint64_t keep = rng;
    rng = graph_rng;
    rlx_tensor *y2 = random_graph(rlx_from_data(RLX_F32, 2, (int64_t[]){r, c}, xv), r, c);
    size_t bad = n;
    bool read = rlx_read_f32(y2, b, n) == RLX_OK;
    for (size_t i = 0; i < n && read && bad == n; i++)
        bad = close_to(a[i], b[i]) ? n : i;
    if (bad < n) {
        rng = graph_rng;
        rlx_tensor *y64 = random_graph(rlx_cast(rlx_from_data(RLX_F32, 2, (int64_t[]){r, c}, xv), RLX_F64), r, c);
        size_t wrong = n, worst = 0;
        double jit_err = 0, ref_err = 0; /* the largest |v - f64| / (1 + |f64|) of each backend */
        read = rlx_read_f64(y64, d, n) == RLX_OK;
        for (size_t i = 0; i < n && read; i++) {
            /* NaN or inf where the f32 reference differs and f64 does not agree */
            if (!isfinite(a[i]) && !close_to(a[i], b[i]) && !close_to(a[i], d[i]) && wrong == n)
                wrong = i;
            double ej = fabs(a[i] - d[i]) / (1 + fabs(d[i])), er = fabs(b[i] - d[i]) / (1 + fabs(d[i]));
            if (ej > jit_err)
                jit_err = ej, worst = i;
            ref_err = er > ref_err ? er : ref_err;
        }
        if (wrong == n && jit_err > 1e-3 && jit_err > 4 * ref_err)
            wrong = worst;
        if (wrong < n) {
            t->mismatches++;
            fprintf(stderr,
                    "rlx-soak: mismatch in round %lu: %lldx%lld, %d threads, ops %s (digits of random_graph's "
                    "switch), element %zu: jit %.9g, ref %.9g, ref in f64 %.9g\n",
                    t->rounds, (long long)r, (long long)c, rlx_get_num_threads(), graph_ops, wrong, a[wrong],
                    b[wrong], d[wrong]);
            const char *dump = getenv("RLX_SOAK_DUMP"); /* x as .npy, to replay the graph */
            if (dump) {
                rlx_save_npy(dump, rlx_from_data(RLX_F32, 2, (int64_t[]){r, c}, xv));
                rlx_set_option("backend", "jit");
                float *e = malloc(n * sizeof *e);
                rng = graph_rng;
                rlx_tensor *xa = rlx_rand(RLX_F32, 2, (int64_t[]){r, c}, seed), *ya = random_graph(xa, r, c);
                rng = graph_rng;
                rlx_tensor *xb = rlx_from_data(RLX_F32, 2, (int64_t[]){r, c}, xv), *yb = random_graph(xb, r, c);
                if (e && rlx_read_f32(ya, e, n) == RLX_OK)
                    fprintf(stderr, "  again, rand leaf: jit %.9g\n", e[wrong]);
                if (e && rlx_read_f32(yb, e, n) == RLX_OK)
                    fprintf(stderr, "  data leaf: jit %.9g\n", e[wrong]);
                if (e && rlx_read_f32(xa, e, n) == RLX_OK)
                    fprintf(stderr, "  x again: %s\n", memcmp(e, xv, n * sizeof *e) ? "differs" : "same");
                free(e);
            }
        } else {
            t->ill_conditioned++;
        }
    }
    rng = keep;
    t->checked += read;
    rlx_set_option("backend", "jit");
done:
    free(xv);
    free(a);
    free(b);
    free(d);
}

static bool inject_failures = true; /* argument 4: 0 runs without injected allocation failures */
static bool check_all; /* RLX_SOAK_CHECK_ALL=1: check every realized round, not one in 32 */

static void round_once(tally *t)
{
    int64_t r = 1 + pick(48), c = 1 + pick(48);
    rlx_set_num_threads(1 + pick(4));
    bool inject = inject_failures && pick(16) == 0;
    unsigned long errors_before = t->errors;
    if (inject) {
        ir_alloc_fail_after(pick(400));
        t->injected++;
    }
    rlx_scope_begin();
    int mode = pick(3);
    uint64_t seed = next();
    if (mode == 0) { /* realize */
        rlx_tensor *x = rlx_rand(RLX_F32, 2, (int64_t[]){r, c}, seed);
        uint64_t graph_rng = rng;
        rlx_tensor *y = random_graph(x, r, c);
        if (rlx_realize(y) != RLX_OK)
            t->errors++;
        else if (!inject && (pick(32) == 0 || check_all))
            check_against_ref(x, y, seed, graph_rng, r, c, t);
    } else if (mode == 1) { /* a program, run a few times, freed */
        rlx_tensor *in = rlx_input("x", RLX_F32, 2, (int64_t[]){r, c});
        rlx_tensor *y = random_graph(in, r, c);
        rlx_program *p = rlx_compile(&y, 1);
        if (!p) {
            t->errors++;
        } else {
            for (int k = 0, runs = 1 + pick(4); k < runs; k++) {
                rlx_binding b = {"x", rlx_rand(RLX_F32, 2, (int64_t[]){r, c}, seed + (uint64_t)k)};
                rlx_tensor *out = NULL;
                if (rlx_program_run(p, &b, 1, &out) != RLX_OK)
                    t->errors++;
            }
            rlx_program_free(p);
        }
    } else { /* a gradient */
        rlx_tensor *x = rlx_rand(RLX_F32, 2, (int64_t[]){r, c}, seed);
        rlx_tensor *loss = rlx_sum(random_graph(x, r, c), (int[]){0, 1}, 2, false);
        rlx_tensor *g = NULL;
        if (rlx_grad(loss, &x, 1, &g) != RLX_OK || rlx_realize(g) != RLX_OK)
            t->errors++;
    }
    if (!inject && t->errors != errors_before) /* no failure was injected: say what failed */
        fprintf(stderr, "rlx-soak: round %lu (mode %d, %lldx%lld): %s\n", t->rounds, mode, (long long)r,
                (long long)c, rlx_last_error());
    rlx_scope_end();
    ir_alloc_fail_after(-1);
    rlx_clear_error();
    t->rounds++;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1800;
    const char *csv = argc > 2 ? argv[2] : "soak.csv";
    if (argc > 3)
        rng = strtoull(argv[3], NULL, 10) | 1;
    if (argc > 4)
        inject_failures = atoi(argv[4]) != 0;
    check_all = getenv("RLX_SOAK_CHECK_ALL") && atoi(getenv("RLX_SOAK_CHECK_ALL"));
    FILE *out = fopen(csv, "w");
    if (!out) {
        perror(csv);
        return 1;
    }
    char budget[64] = "?";
    rlx_get_option("kernel_cache_bytes", budget, sizeof budget);
    unsigned long long bud = strtoull(budget, NULL, 10);
    fprintf(out, "seconds,resident_mib,kernel_cache_bytes,kernel_evictions,plan_cache_bytes,live_nodes,rounds,malloc_used_mib,malloc_held_mib,rss_anon_mib,rss_file_mib,mappings\n");
    printf("rlx-soak: %.0f s, kernel cache budget %s bytes, %s\n", seconds, budget, rlx_host_info());
    tally t = {0};
    double t0 = now(), next_sample = 0;
    unsigned long long max_kc = 0, over = 0;
    while (now() - t0 < seconds) {
        round_once(&t);
        double el = now() - t0;
        if (el >= next_sample) {
            rlx_stats_t s;
            rlx_stats(&s);
            if (s.kernel_cache_bytes > max_kc)
                max_kc = s.kernel_cache_bytes;
            over += s.kernel_cache_bytes > bud;
            double used, held;
            malloc_mib(&used, &held);
            double anon, file;
            long maps;
            resident_split(&anon, &file, &maps);
            fprintf(out, "%.1f,%.2f,%llu,%llu,%llu,%ld,%lu,%.2f,%.2f,%.2f,%.2f,%ld\n", el, resident_mib(),
                    (unsigned long long)s.kernel_cache_bytes, (unsigned long long)s.kernel_evictions,
                    (unsigned long long)s.plan_cache_bytes, ir_live_nodes(), t.rounds, used, held, anon, file, maps);
            fflush(out);
            next_sample += 1.0;
        }
    }
    fclose(out);
    printf("rounds %lu, errors %lu (injected failures %lu), checked against ref %lu (mismatches %lu, "
           "ill-conditioned %lu); kernel cache "
           "max %llu bytes, samples over budget %llu; resident %.1f MiB\n",
           t.rounds, t.errors, t.injected, t.checked, t.mismatches, t.ill_conditioned, max_kc, over, resident_mib());
    return t.mismatches ? 1 : 0;
}
