/*
 * w10_plan.c — rlx-w10-plan: what the JIT's schedule of the W10 training
 * step holds (a white-box tool: it links the static library and calls the
 * scheduler, passes/schedule.c, on the step's graph over realized inputs,
 * as rlx_compile does over its placeholder buffers).
 *
 *   rlx-w10-plan [a|b] [--list]
 *
 * Prints the number of LOOP (fused JIT), REF (library or reference-
 * evaluator) and VIEW kernels, the REF kernels grouped by op with their
 * output shapes, and with --list every kernel in execution order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_model.h"
#include "passes/passes.h"
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

int main(int argc, char **argv)
{
    gpt_config cfg = {.vocab = 96, .width = 128, .layers = 2, .heads = 4, .seq = 64, .batch = 16, .dtype = RLX_F32};
    int list = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "b") == 0)
            cfg = (gpt_config){.vocab = 256, .width = 256, .layers = 4, .heads = 8, .seq = 128, .batch = 8,
                               .dtype = RLX_F32};
        else if (strcmp(argv[i], "--list") == 0)
            list = 1;
        else if (strcmp(argv[i], "a") != 0) {
            fprintf(stderr, "usage: %s [a|b] [--list]\n", argv[0]);
            return 64;
        }
    }
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
