/*
 * test_pipeline.c — the realize pipeline's checks (runtime/exec/pipeline.c,
 * passes/verify.c): a corrupted schedule or graph fails its verifier with
 * RLX_E_INTERNAL naming the pass; realizations of every kind (fused loops,
 * row kernels, reference kernels, views, plan-cache hits, compiled
 * programs) pass with verification on (this process sets RLX_VERIFY=1
 * before the library reads its environment); ir_make's failures get their
 * status from the arguments; RLX_DEBUG=1 prints librlx's lines only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "passes/passes.h"

__attribute__((constructor)) static void verify_on(void) { setenv("RLX_VERIFY", "1", 1); }

static void check_fails(sched_ctx *c, rlx_status st, const char *want, const char *what)
{
    if (st != RLX_E_INTERNAL || c->status != RLX_E_INTERNAL || !strstr(c->msg, want))
        test_fail(__FILE__, __LINE__, "%s: status %d, message '%s' (want '%s')", what, (int)st, c->msg, want);
    memset(c, 0, sizeof *c);
}

/* matmul (a REF kernel) read by a fused loop with a constant */
static rlx_tensor *two_kernels(void)
{
    int64_t sx[2] = {4, 8}, sw[2] = {8, 3};
    rlx_tensor *x = trand(RLX_F32, 2, sx, -1, 1), *w = trand(RLX_F32, 2, sw, -1, 1);
    rlx_realize(x);
    rlx_realize(w);
    return rlx_tanh(rlx_add_s(rlx_mul(rlx_matmul(x, w), rlx_matmul(x, w)), 1.5));
}

TEST(sched_verify_catches_corruption)
{
    ir_node *root = (ir_node *)two_kernels();
    sched_ctx c = {0};
    sched_schedule s;
    CHECK_EQ_INT(sched_build(&c, &root, 1, &s), RLX_OK);
    CHECK_EQ_INT(sched_verify(&c, &s), RLX_OK);
    CHECK(s.count == 2 && s.k[0].kind == SCHED_REF && s.k[1].kind == SCHED_LOOP);
    sched_kernel *k = &s.k[1];
    int op = -1, load = -1, cst = -1;
    for (int j = 0; j < k->ninstr; j++) {
        if (k->instr[j].kind == SCHED_I_OP && op < 0)
            op = j;
        if (k->instr[j].kind == SCHED_I_LOAD && load < 0)
            load = j;
        if (k->instr[j].kind == SCHED_I_CONST && cst < 0)
            cst = j;
    }
    CHECK(op >= 0 && load >= 0 && cst >= 0);
    sched_instr keep = k->instr[op];
    k->instr[op].src[0] = op; /* not earlier */
    check_fails(&c, sched_verify(&c, &s), "instruction", "a source at itself");
    k->instr[op] = keep;
    keep = k->instr[load];
    k->instr[load].arg = k->nargs; /* past the args */
    check_fails(&c, sched_verify(&c, &s), "load of an arg out of range", "a load past the args");
    k->instr[load].arg = 0; /* the output */
    check_fails(&c, sched_verify(&c, &s), "load of an arg out of range", "a load of the output");
    k->instr[load] = keep;
    keep = k->instr[cst];
    k->instr[cst].arg = k->nconsts;
    check_fails(&c, sched_verify(&c, &s), "CONST slot out of range", "a CONST slot");
    k->instr[cst] = keep;
    sched_kernel t = s.k[0]; /* the loop before the matmul it reads */
    s.k[0] = s.k[1];
    s.k[1] = t;
    check_fails(&c, sched_verify(&c, &s), "reads a value computed later", "kernels out of order");
    s.k[1] = s.k[0];
    s.k[0] = t;
    CHECK_EQ_INT(sched_verify(&c, &s), RLX_OK); /* every corruption undone */
    sched_free(&s);
}

TEST(graph_verify_catches_bad_node)
{
    int64_t sx[2] = {4, 8}, wrong[2] = {8, 4};
    rlx_tensor *x = trand(RLX_F32, 2, sx, -1, 1);
    rlx_realize(x);
    ir_node *src = (ir_node *)x;
    ir_node *bad = ir_make_detached(IR_OP_EXP, 1, &src, NULL, RLX_F32, 2, wrong, NULL);
    CHECK(bad != NULL);
    sched_ctx c = {0};
    check_fails(&c, sched_verify_graph(&c, "simplify", &bad, 1), "verify after simplify", "a wrong stored shape");
    ir_release(bad);
    ir_node *good = (ir_node *)rlx_exp(x);
    CHECK_EQ_INT(sched_verify_graph(&c, "simplify", &good, 1), RLX_OK);
}

/* got realized on the JIT (verified) against the reference backend. */
static void jit_vs_ref(rlx_tensor *(*make)(double), double v, double tol)
{
    rlx_tensor *got = make(v), *want = make(v);
    CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
    CHECK_EQ_INT(rlx_realize(want), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("backend", "jit"), RLX_OK);
    CHECK_EQ_INT(rlx_realize(got), RLX_OK);
    EXPECT_SAME(got, want, tol);
}

static rlx_tensor *g_rows(double v)
{
    int64_t s[2] = {16, 33};
    return rlx_softmax(rlx_add_s(rlx_rand(RLX_F32, 2, s, 3), v), 1);
}

static rlx_tensor *g_linear(double v)
{
    int64_t sa[2] = {9, 17}, sb[2] = {17, 5};
    rlx_tensor *a = rlx_rand(RLX_F32, 2, sa, 4), *b = rlx_rand(RLX_F32, 2, sb, 5);
    return rlx_relu(rlx_add_s(rlx_matmul(a, b), v));
}

static rlx_tensor *g_view(double v)
{
    int64_t s[3] = {3, 4, 5};
    int perm[3] = {2, 0, 1}, ax[1] = {1};
    rlx_tensor *x = rlx_exp(rlx_add_s(rlx_rand(RLX_F64, 3, s, 6), v));
    return rlx_transpose(rlx_add(x, rlx_sum(x, ax, 1, true)), 3, perm);
}

TEST(realizations_verified)
{
    for (int r = 0; r < 4; r++) { /* rounds 2 and 3 are plan-cache hits with new constants */
        jit_vs_ref(g_rows, 0.5 * r, 1e-6);
        jit_vs_ref(g_linear, -0.25 * r, 1e-5);
        jit_vs_ref(g_view, 0.125 * r, 1e-12);
    }
    /* a compiled program: built once by the pipeline, run twice */
    int64_t s[2] = {4, 6};
    rlx_tensor *in = rlx_input("x", RLX_F32, 2, s);
    rlx_tensor *out = rlx_tanh(rlx_mul(in, rlx_add_s(in, 2)));
    rlx_program *p = rlx_compile(&out, 1);
    CHECK(p != NULL);
    for (int r = 0; r < 2; r++) {
        rlx_tensor *x = rlx_rand(RLX_F32, 2, s, (uint64_t)(10 + r)), *y = NULL;
        rlx_binding b = {"x", x};
        CHECK_EQ_INT(rlx_program_run(p, &b, 1, &y), RLX_OK);
        rlx_tensor *want = rlx_tanh(rlx_mul(x, rlx_add_s(x, 2)));
        CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
        EXPECT_SAME(y, want, 1e-6);
        CHECK_EQ_INT(rlx_set_option("backend", "jit"), RLX_OK);
    }
    rlx_program_free(p);
}

TEST(make_failure_status)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40}, ok[1] = {3};
    CHECK_EQ_INT(ir_make_failure(IR_OP_BUFFER, 0, NULL, &a, RLX_F32, 1, ok), RLX_E_INTERNAL);
    CHECK_EQ_INT(ir_make_failure(IR_OP_CONST, 0, NULL, &a, RLX_F32, -1, ok), RLX_E_INTERNAL);
    CHECK_EQ_INT(ir_make_failure(IR_OP_CONST, 0, NULL, &a, RLX_F64, 2, huge), RLX_E_SHAPE);
    CHECK_EQ_INT(ir_make_failure(IR_OP_CONST, 0, NULL, &a, RLX_F64, 1, ok), RLX_E_NOMEM);
    int64_t sx[1] = {3}, sy[1] = {4};
    ir_node *src[2] = {(ir_node *)rlx_zeros(RLX_F32, 1, sx), (ir_node *)rlx_zeros(RLX_F32, 1, sy)};
    CHECK_EQ_INT(ir_make_failure(IR_OP_ADD, 2, src, NULL, RLX_F32, 0, NULL), RLX_E_INTERNAL); /* a broken rule */
}

static int debug_child(void)
{
    int64_t s[1] = {1000};
    rlx_tensor *y = rlx_tanh(rlx_add_s(rlx_rand(RLX_F32, 1, s, 1), 0.5));
    return rlx_realize(y) == RLX_OK ? 0 : 1;
}

/* RLX_DEBUG=1 prints librlx's own lines; LLVM's remarks wait for level 2. */
TEST(debug_level_one_is_librlx_only)
{
    char self[4096], cmd[4300], line[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    if (n <= 0)
        return;
    self[n] = 0;
    snprintf(cmd, sizeof cmd, "RLX_DEBUG=1 RLX_CACHE_DIR= '%s' --debug-child 2>&1", self);
    FILE *f = popen(cmd, "r");
    CHECK(f != NULL);
    if (!f)
        return;
    int ours = 0, llvm = 0;
    while (fgets(line, sizeof line, f)) {
        ours += strncmp(line, "rlx: compiled ", 14) == 0;
        llvm += strncmp(line, "rlx: llvm:", 10) == 0;
    }
    CHECK_EQ_INT(pclose(f), 0);
    CHECK(ours >= 1);
    CHECK_EQ_INT(llvm, 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--debug-child") == 0)
        return debug_child();
    static const test_case cases[] = {
        T(sched_verify_catches_corruption), T(graph_verify_catches_bad_node), T(realizations_verified),
        T(make_failure_status), T(debug_level_one_is_librlx_only),
    };
    return test_main(argc, argv, cases, (int)(sizeof cases / sizeof *cases));
}
