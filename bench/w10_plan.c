/*
 * w10_plan.c — rlx-w10-plan: what the JIT's schedule of the W10 training
 * step holds (a white-box tool: it links the static library and calls the
 * scheduler, passes/schedule.c, on the step's graph over realized inputs,
 * as rlx_compile does over its placeholder buffers).
 *
 *   rlx-w10-plan [a|b] [--list]
 *   rlx-w10-plan [a|b] --profile [--threads T (1)] [--steps S (10)] [--rounds R (5)] [--top K (25)]
 *                                [--ab-split | --ab-threads T]
 *
 * Prints the number of LOOP (fused JIT), REF (library or reference-
 * evaluator) and VIEW kernels, the REF kernels grouped by op with their
 * output shapes, and with --list every kernel in execution order.
 *
 * --profile runs the compiled step (gpt_compile_step, as rlx-bench-w10
 * does) and times every kernel of its plan through the executor's
 * profiler hook (rt_jit_set_profiler): the calling thread's CPU time and
 * the wall time of each kernel, summed per step, by kind (GEMM, GEMM with
 * its epilogue, each library op, JIT kernels as elementwise / reduction /
 * row kernels, large or small), and the step's time outside any kernel
 * (executor: binding, publishing, releases; gpt_step's bookkeeping). Per
 * kernel the figure is its best round (rounds of S steps, each round's
 * per-step mean, less the cost of the hook's clock reads measured
 * beforehand), so a loaded machine's preemptions mostly drop out. At
 * one thread the CPU column is the work; at two it misses the workers'.
 * --ab-split alternates rounds with the GEMM block rule before the current
 * one (kernels/blas.c, rt_blas_set_wide_split 0) and prints its figures
 * beside (B); --ab-threads T alternates with rounds at T threads (wall
 * figures then compare the two counts; the B side's CPU column misses the
 * workers').
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpt_model.h"
#include "passes/passes.h"
#include "runtime/exec/jit_exec.h"
#include "runtime/rt.h"
#include "tensor/ts.h"

static const char *shape_str(const ir_node *n, char *buf, size_t cap)
{
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < n->rank && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, d ? ",%lld" : "%lld", (long long)n->shape[d]);
    if (at < cap)
        snprintf(buf + at, cap - at, "]");
    return buf;
}

/* ------------------------------------------------------------ profile */

enum { PROF_MAX = 4096, NB = 4 };

typedef struct {
    const rt_jit_plan *plan; /* the step's (the one plan with more kernels than any other run) */
    double wall[PROF_MAX], cpu[PROF_MAX]; /* this round's sums */
    double bwall[PROF_MAX], bcpu[PROF_MAX]; /* best round's per-step mean */
    unsigned char epi[PROF_MAX];
    long n;
} prof_data;

static void prof_hook(void *arg, const rt_jit_plan *p, long i, bool with_next, int64_t wall_ns, int64_t cpu_ns)
{
    prof_data *q = arg;
    long nk = rt_jit_plan_schedule(p)->count;
    if (nk > PROF_MAX || (q->plan && q->plan != p && nk <= q->n))
        return; /* another realization's plan (the loss read) */
    if (q->plan != p) {
        q->plan = p;
        q->n = nk;
        memset(q->wall, 0, sizeof q->wall);
        memset(q->cpu, 0, sizeof q->cpu);
    }
    q->wall[i] += 1e-6 * (double)wall_ns;
    q->cpu[i] += 1e-6 * (double)cpu_ns;
    q->epi[i] = with_next;
}

static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* The kind of kernel i (a row of the table). */
static const char *prof_kind(const sched_kernel *k, bool epi, char *buf, size_t cap)
{
    if (k->kind == SCHED_REF) {
        if (k->node->op == IR_OP_MATMUL)
            return epi ? "GEMM + epilogue" : "GEMM";
        snprintf(buf, cap, "library %s", ir_ops[k->node->op].name);
        return buf;
    }
    if (k->kind == SCHED_VIEW)
        return "view";
    const char *form = k->red_op != IR_OP_COUNT ? "reduction" : k->red_mask ? "row kernel" : "elementwise";
    int64_t elems = 1;
    for (int d = 0; d < k->rank; d++)
        elems *= k->shape[d];
    snprintf(buf, cap, "JIT %s, %s", form, elems >= 65536 ? ">= 64K iterations" : "< 64K iterations");
    return buf;
}

/* One side of the profile: per-kernel best-round figures of its rounds. */
typedef struct {
    prof_data q;
    double best_cpu, best_wall, best_kcpu, best_kwall;
} prof_side;

static void side_init(prof_side *d)
{
    for (long i = 0; i < PROF_MAX; i++)
        d->q.bwall[i] = d->q.bcpu[i] = INFINITY;
    d->best_cpu = d->best_wall = d->best_kcpu = d->best_kwall = INFINITY;
}

/* Per kind: CPU and wall ms per step of side d (sums of per-kernel bests). */
typedef struct {
    char names[32][64];
    double kc[2][32], kw[2][32], sum_c[2], sum_w[2];
    long cnt[32];
    int nkind;
} prof_kinds;

static void kinds_add(prof_kinds *t, int side, const prof_side *d)
{
    const sched_schedule *s = rt_jit_plan_schedule(d->q.plan);
    char buf[64];
    for (long i = 0; i < d->q.n; i++) {
        if (!isfinite(d->q.bcpu[i]))
            continue;
        const char *kn = prof_kind(&s->k[i], d->q.epi[i], buf, sizeof buf);
        int j = 0;
        while (j < t->nkind && strcmp(t->names[j], kn) != 0)
            j++;
        if (j == t->nkind) {
            if (t->nkind == 32)
                continue;
            snprintf(t->names[t->nkind++], sizeof t->names[0], "%s", kn);
        }
        t->kc[side][j] += d->q.bcpu[i];
        t->kw[side][j] += d->q.bwall[i];
        t->cnt[j] += side == 0;
        t->sum_c[side] += d->q.bcpu[i];
        t->sum_w[side] += d->q.bwall[i];
    }
}

/* ab 1: odd rounds run with the GEMM block rule before the current one
 * (rt_blas_set_wide_split 0); ab 2: at bthreads threads; reported beside
 * the even ones (B). */
static int profile(const gpt_config *cfg, int threads, int steps, int rounds, int top, int ab, int bthreads)
{
    gpt_layout lay;
    gpt_state st;
    if (gpt_layout_make(cfg, &lay) != RLX_OK)
        return 1;
    rlx_set_num_threads(threads);
    rlx_program *prog = gpt_compile_step(&lay);
    if (!prog || gpt_state_init(&st, &lay, 1) != RLX_OK) {
        fprintf(stderr, "compile: %s\n", rlx_last_error());
        return 1;
    }
    const int64_t n = (int64_t)cfg->batch * cfg->seq;
    int32_t *tv = malloc((size_t)n * sizeof *tv), *yv = malloc((size_t)n * sizeof *yv);
    rlx_tensor *tok[NB], *tgt[NB];
    for (int b = 0; b < NB; b++) {
        gpt_make_batch(cfg, (uint64_t)(100 + b), tv, yv);
        tok[b] = rlx_from_data(RLX_I32, 1, &n, tv);
        tgt[b] = rlx_from_data(RLX_I32, 1, &n, yv);
    }
    free(tv);
    free(yv);
    for (int s = 0; s < 3; s++)
        if (gpt_step(prog, &st, tok[s % NB], tgt[s % NB], NULL) != RLX_OK)
            return 1;
    /* the hook's own cost inside each interval: a clock read of each kind
     * (the thread CPU clock is a system call here), subtracted per kernel */
    double empty = INFINITY;
    for (int r = 0; r < 2000; r++) {
        double c0 = thread_cpu_ms();
        (void)wall_ms();
        empty = fmin(empty, thread_cpu_ms() - c0);
    }
    static prof_side side[2];
    side_init(&side[0]);
    side_init(&side[1]);
    for (int r = 0; r < (ab ? 2 * rounds : rounds); r++) {
        prof_side *d = &side[ab ? r & 1 : 0];
        prof_data *q = &d->q;
        rt_blas_set_wide_split(ab == 1 && (r & 1) ? 0 : -1);
        rlx_set_num_threads(ab == 2 && (r & 1) ? bthreads : threads);
        rt_jit_set_profiler(prof_hook, q);
        memset(q->wall, 0, sizeof q->wall);
        memset(q->cpu, 0, sizeof q->cpu);
        double c0 = thread_cpu_ms(), w0 = wall_ms();
        for (int s = 0; s < steps; s++)
            if (gpt_step(prog, &st, tok[s % NB], tgt[s % NB], NULL) != RLX_OK) {
                fprintf(stderr, "step: %s\n", rlx_last_error());
                return 1;
            }
        double c = (thread_cpu_ms() - c0) / steps, w = (wall_ms() - w0) / steps, kc = 0, kw = 0;
        rt_jit_set_profiler(NULL, NULL);
        for (long i = 0; i < q->n; i++) {
            q->cpu[i] = fmax(q->cpu[i] - steps * empty, 0);
            q->wall[i] = fmax(q->wall[i] - steps * empty, 0);
            q->bcpu[i] = fmin(q->bcpu[i], q->cpu[i] / steps);
            q->bwall[i] = fmin(q->bwall[i], q->wall[i] / steps);
            kc += q->cpu[i] / steps;
            kw += q->wall[i] / steps;
        }
        if (c < d->best_cpu) { /* the round with the least CPU time: its split into kernels and the rest */
            d->best_cpu = c;
            d->best_kcpu = kc;
        }
        if (w < d->best_wall) {
            d->best_wall = w;
            d->best_kwall = kw;
        }
    }
    rt_blas_set_wide_split(-1);
    rlx_set_num_threads(threads);
    /* the step without the hook: what its clock reads add to "outside" */
    double bare = INFINITY;
    for (int r = 0; r < rounds; r++) {
        double c0 = thread_cpu_ms();
        for (int s = 0; s < steps; s++)
            if (gpt_step(prog, &st, tok[s % NB], tgt[s % NB], NULL) != RLX_OK)
                return 1;
        bare = fmin(bare, (thread_cpu_ms() - c0) / steps);
    }
    static prof_kinds t;
    kinds_add(&t, 0, &side[0]);
    if (ab)
        kinds_add(&t, 1, &side[1]);
    const prof_side *d = &side[0];
    printf("W10%c profile at %d thread(s), %d rounds x %d steps%s: step (best round) %.3f ms CPU of the calling "
           "thread, %.3f ms wall; kernels %.3f / %.3f of it; %ld kernels in the plan\n",
           cfg->width == 128 ? 'a' : 'b', threads, rounds, steps, ab ? " (each side)" : "", d->best_cpu,
           d->best_wall, d->best_kcpu, d->best_kwall, d->q.n);
    if (ab)
        printf("B side (%s): step %.3f ms CPU, %.3f ms wall; kernels %.3f / %.3f\n",
               ab == 1 ? "old GEMM block rule" : "--ab-threads", side[1].best_cpu, side[1].best_wall, side[1].best_kcpu, side[1].best_kwall);
    printf("%-40s %7s %10s %7s %10s %7s%s\n", "kind (per-kernel best rounds)", "kernels", "CPU ms", "share", "wall ms",
           "share", ab ? "  B CPU ms  B wall ms" : "");
    for (int j = 0; j < t.nkind; j++) {
        printf("%-40s %7ld %10.3f %6.1f%% %10.3f %6.1f%%", t.names[j], t.cnt[j], t.kc[0][j],
               100 * t.kc[0][j] / t.sum_c[0], t.kw[0][j], 100 * t.kw[0][j] / t.sum_w[0]);
        if (ab)
            printf(" %9.3f %10.3f", t.kc[1][j], t.kw[1][j]);
        printf("\n");
    }
    printf("%-40s %7s %10.3f %7s %10.3f%s", "sum of kernels", "", t.sum_c[0], "", t.sum_w[0], ab ? "        " : "");
    if (ab)
        printf(" %9.3f %10.3f", t.sum_c[1], t.sum_w[1]);
    printf("\n%-40s %7s %10.3f %7s %10.3f\n", "outside kernels (best round)", "", d->best_cpu - d->best_kcpu, "",
           d->best_wall - d->best_kwall);
    printf("step without the profiler: %.3f ms CPU (best round; the hook's clock reads cost the difference; "
           "%.2f us per kernel taken off each kernel's figures)\n",
           bare, 1e3 * empty);
    /* the costliest kernels */
    const sched_schedule *s = rt_jit_plan_schedule(d->q.plan);
    printf("top %d kernels by CPU ms per step:\n", top);
    static unsigned char done[PROF_MAX];
    char buf[64], sb[64];
    for (int k = 0; k < top; k++) {
        long b = -1;
        for (long i = 0; i < d->q.n; i++)
            if (!done[i] && isfinite(d->q.bcpu[i]) && (b < 0 || d->q.bcpu[i] > d->q.bcpu[b]))
                b = i;
        if (b < 0)
            break;
        done[b] = 1;
        const sched_kernel *kk = &s->k[b];
        printf("  %4ld %-36s %-10s %-18s %8.3f CPU %8.3f wall", b, prof_kind(kk, d->q.epi[b], buf, sizeof buf),
               ir_ops[(d->q.epi[b] ? &s->k[b + 1] : kk)->node->op].name, shape_str(kk->node, sb, sizeof sb),
               d->q.bcpu[b], d->q.bwall[b]);
        if (ab)
            printf("  B %8.3f CPU %8.3f wall", side[1].q.bcpu[b], side[1].q.bwall[b]);
        printf("\n");
    }
    for (int b = 0; b < NB; b++) {
        rlx_release(tok[b]);
        rlx_release(tgt[b]);
    }
    gpt_state_free(&st);
    rlx_program_free(prog);
    return 0;
}

int main(int argc, char **argv)
{
    gpt_config cfg = {.vocab = 96, .width = 128, .layers = 2, .heads = 4, .seq = 64, .batch = 16, .dtype = RLX_F32};
    int list = 0, prof = 0, ab = 0, bthreads = 2, threads = 1, steps = 10, rounds = 5, top = 25;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "b") == 0)
            cfg = (gpt_config){.vocab = 256, .width = 256, .layers = 4, .heads = 8, .seq = 128, .batch = 8,
                               .dtype = RLX_F32};
        else if (strcmp(argv[i], "--list") == 0)
            list = 1;
        else if (strcmp(argv[i], "--profile") == 0)
            prof = 1;
        else if (strcmp(argv[i], "--ab-split") == 0)
            ab = 1;
        else if (i + 1 < argc && strcmp(argv[i], "--ab-threads") == 0) {
            ab = 2;
            bthreads = atoi(argv[++i]);
        }
        else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0)
            threads = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--top") == 0)
            top = atoi(argv[++i]);
        else if (strcmp(argv[i], "a") != 0) {
            fprintf(stderr, "usage: %s [a|b] [--list] [--profile [--threads T] [--steps S] [--rounds R] [--top K] [--ab-split | --ab-threads T]]\n",
                    argv[0]);
            return 64;
        }
    }
    if (prof)
        return profile(&cfg, threads < 1 ? 1 : threads, steps < 1 ? 1 : steps, rounds < 1 ? 1 : rounds, top, ab, bthreads < 1 ? 1 : bthreads);
    gpt_layout lay;
    gpt_state st;
    if (gpt_layout_make(&cfg, &lay) != RLX_OK || gpt_state_init(&st, &lay, 1) != RLX_OK)
        return 1;
    const int64_t n = (int64_t)cfg.batch * cfg.seq;
    int32_t *tv = calloc((size_t)n, sizeof *tv), *yv = calloc((size_t)n, sizeof *yv);
    gpt_make_batch(&cfg, 0, tv, yv);
    rlx_tensor *tok = rlx_from_data(RLX_I32, 1, &n, tv), *tgt = rlx_from_data(RLX_I32, 1, &n, yv);
    rlx_tensor *step = rlx_from_data(RLX_F32, 0, NULL, (float[]){1});
    /* realized m and v (rlx_zeros would be constant nodes, which a program's
     * placeholder buffers are not) */
    rlx_tensor *m[GPT_MAX_PARAMS], *v[GPT_MAX_PARAMS], *out[1 + 3 * GPT_MAX_PARAMS];
    for (int i = 0; i < lay.nparam; i++) {
        m[i] = rlx_contiguous(st.m[i]);
        v[i] = rlx_contiguous(st.v[i]);
        rlx_realize(m[i]);
        rlx_realize(v[i]);
    }
    if (gpt_step_graph(&lay, tok, tgt, step, st.p, m, v, out) != RLX_OK) {
        fprintf(stderr, "gpt_step_graph: %s\n", rlx_last_error());
        return 1;
    }
    int nout = 1 + 3 * lay.nparam;
    ir_node *roots[1 + 3 * GPT_MAX_PARAMS];
    for (int i = 0; i < nout; i++)
        roots[i] = ts_node(out[i]);
    /* the schedule a realization builds: of the simplified graph */
    ir_node *simp[1 + 3 * GPT_MAX_PARAMS];
    sched_schedule s;
    sched_ctx c = {0};
    if (simp_run(&c, roots, nout, ts_simp_fold, simp) != RLX_OK) {
        fprintf(stderr, "simp_run: %s\n", c.msg);
        return 1;
    }
    if (sched_build(&c, simp, nout, &s) != RLX_OK) {
        fprintf(stderr, "sched_build: %s\n", c.msg);
        return 1;
    }
    long kinds[3] = {0}, ref_by_op[IR_OP_COUNT] = {0};
    char buf[96];
    for (long k = 0; k < s.count; k++) {
        const sched_kernel *kk = &s.k[k];
        kinds[kk->kind]++;
        if (kk->kind == SCHED_REF)
            ref_by_op[kk->node->op]++;
        if (list)
            printf("%4ld %-4s %-18s %s %s\n", k, kk->kind == SCHED_LOOP ? "LOOP" : kk->kind == SCHED_REF ? "REF" : "VIEW",
                   ir_ops[kk->node->op].name, shape_str(kk->node, buf, sizeof buf), rlx_dtype_name(kk->node->dtype));
    }
    printf("W10%c plan: %ld kernels: %ld LOOP, %ld REF, %ld VIEW\n", cfg.width == 128 ? 'a' : 'b', s.count,
           kinds[SCHED_LOOP], kinds[SCHED_REF], kinds[SCHED_VIEW]);
    printf("REF kernels by op:");
    for (int o = 0; o < IR_OP_COUNT; o++)
        if (ref_by_op[o])
            printf(" %s %ld;", ir_ops[o].name, ref_by_op[o]);
    printf("\n");
    sched_free(&s);
    for (int i = 0; i < nout; i++)
        ir_release(simp[i]);
    for (int i = 0; i < nout; i++)
        rlx_release(out[i]);
    for (int i = 0; i < lay.nparam; i++) {
        rlx_release(m[i]);
        rlx_release(v[i]);
    }
    rlx_release(tok);
    rlx_release(tgt);
    rlx_release(step);
    gpt_state_free(&st);
    free(tv);
    free(yv);
    return 0;
}
