/* test_rowplan.c — the row-kernel plan (passes/rowplan.c) on its own, with
 * no code generated: the schedules of softmax, log_softmax, layer_norm,
 * rms_norm, logsumexp and a few more give the passes, per-row values,
 * stashes, guarded divisions and prefetching expected of them; the plan's
 * invariants hold for each; a hand-made kernel over the phase limit, a
 * malformed one and an allocation failure are errors, not corruption. */
#include <string.h>

#include "harness.h"
#include "passes/passes.h"

/* The schedule of root and its one phased kernel (NULL when none). */
static const sched_kernel *phased_of(rlx_tensor *root, sched_schedule *s)
{
    ir_node *r = (ir_node *)root;
    sched_ctx c = {0};
    if (sched_build(&c, &r, 1, s) != RLX_OK) {
        memset(s, 0, sizeof *s);
        test_fail(__FILE__, __LINE__, "sched_build: %s", c.msg);
        return NULL;
    }
    const sched_kernel *found = NULL;
    for (long j = 0; j < s->count; j++) {
        const sched_kernel *k = &s->k[j];
        for (int i = 0; k->kind == SCHED_LOOP && k->red_op == IR_OP_COUNT && i < k->ninstr; i++)
            if (k->instr[i].kind == SCHED_I_REDUCE)
                found = k;
    }
    return found;
}

/* The first OP instruction computing op (-1 when none). */
static int find_op(const sched_kernel *k, ir_op op)
{
    for (int i = 0; i < k->ninstr; i++)
        if (k->instr[i].kind == SCHED_I_OP && k->instr[i].op == op)
            return i;
    return -1;
}

/* The passes' kinds as letters: R(educe), S(tore), O(ne store), T(retry). */
static const char *kinds(const sched_rowplan *p)
{
    static char buf[SCHED_ROW_PASSES + 1];
    for (int P = 0; P < p->npass; P++)
        buf[P] = "RSOT"[p->pass[P].kind];
    buf[p->npass] = 0;
    return buf;
}

static bool evaluated(int act) { return act == SCHED_ROW_EVAL || act == SCHED_ROW_EVAL_STASH || act == SCHED_ROW_LOAD; }

/* What every plan of a phased kernel satisfies. */
static void check_invariants(const sched_kernel *k, const sched_rowplan *p)
{
    int n = k->ninstr, last = n - 1, nred = 0;
    CHECK_EQ_INT(p->ninstr, n);
    for (int i = 0; i < n; i++)
        nred += k->instr[i].kind == SCHED_I_REDUCE;
    CHECK_EQ_INT(p->nphases, nred);
    /* the phases first, in instruction order, then the store (and its retry) */
    for (int L = 0; L < p->nphases; L++) {
        const sched_rowpass *ps = &p->pass[L];
        CHECK(ps->kind == SCHED_ROW_REDUCE && ps->red == p->phase[L]);
        CHECK(L == 0 || p->phase[L] > p->phase[L - 1]);
        CHECK_EQ_INT(ps->root, k->instr[ps->red].src[0]);
        CHECK_EQ_INT(p->stage[ps->red], L + 1);
        CHECK(!p->per_elem[ps->red]);
    }
    CHECK(p->npass > p->nphases);
    const sched_rowpass *st = &p->pass[p->nphases];
    CHECK(st->kind == SCHED_ROW_STORE || st->kind == SCHED_ROW_STORE_ONE);
    CHECK_EQ_INT(st->root, last);
    CHECK_EQ_INT(p->npass, p->nphases + 1 + (p->npass > p->nphases + 1));
    if (p->npass > p->nphases + 1)
        CHECK(st->kind == SCHED_ROW_STORE && p->pass[p->nphases + 1].kind == SCHED_ROW_RETRY);
    if (st->kind == SCHED_ROW_STORE_ONE)
        CHECK(!p->per_elem[last] && p->ostash < 0 && p->nfd == 0);
    else if (p->per_elem[last])
        CHECK(evaluated(st->act[last]));
    for (int i = 0; i < n; i++) {
        const sched_instr *in = &k->instr[i];
        /* per row: computed once, before the pass of its stage, after its sources */
        int once = 0;
        for (int P = 0; P < p->npass; P++) {
            int a = p->pass[P].act[i];
            once += a == SCHED_ROW_PER_ROW;
            if (a == SCHED_ROW_PER_ROW)
                CHECK_EQ_INT(P, p->stage[i]);
            CHECK(a == SCHED_ROW_SKIP || a == SCHED_ROW_PER_ROW || p->per_elem[i]);
            CHECK(a != SCHED_ROW_PER_ROW || !p->per_elem[i]);
            /* a stash is loaded only after a phase pass filled it */
            if (a == SCHED_ROW_LOAD) {
                bool filled = false;
                for (int Q = 0; Q < P && Q < p->nphases; Q++)
                    filled |= p->pass[Q].act[i] == SCHED_ROW_EVAL_STASH;
                CHECK(filled);
            }
            CHECK(p->stash[i] || (a != SCHED_ROW_LOAD && a != SCHED_ROW_EVAL_STASH));
        }
        CHECK_EQ_INT(once, !p->per_elem[i] && in->kind != SCHED_I_REDUCE);
        for (int s = 0; s < sched_instr_nsrc(in); s++) {
            CHECK(p->per_elem[i] || in->kind == SCHED_I_REDUCE || !p->per_elem[in->src[s]]);
            CHECK(p->per_elem[i] || in->kind == SCHED_I_REDUCE || p->stage[i] >= p->stage[in->src[s]]);
        }
        /* stashes hold math results; the output row holds one */
        CHECK(!p->stash[i] || (in->kind == SCHED_I_OP && sched_op_is_math(in->op) && p->per_elem[i]));
        CHECK((p->stash[i] == SCHED_STASH_OUT) == (i == p->ostash));
        CHECK(p->fdslot[i] < 0 || (in->op == IR_OP_DIV && p->per_elem[i] && !p->per_elem[in->src[1]]));
    }
    CHECK(p->nfd <= SCHED_ROW_FD_SLOTS && p->npf <= SCHED_ROW_PF_LOADS);
}

/* Builds the plan of root's phased kernel and checks its invariants (each
 * test's scope owns the tensors; the schedule borrows them). */
static void done(sched_schedule *s, sched_rowplan *p);

static const sched_kernel *plan_of(rlx_tensor *root, bool fma, sched_schedule *s, sched_rowplan *p)
{
    const sched_kernel *k = phased_of(root, s);
    char err[256];
    memset(p, 0, sizeof *p);
    if (!k) {
        test_fail(__FILE__, __LINE__, "no phased kernel");
        done(s, p);
        return NULL;
    }
    rlx_status st = sched_rowplan_build(k, fma, false, p, err, sizeof err);
    if (st != RLX_OK) {
        test_fail(__FILE__, __LINE__, "sched_rowplan_build: %s", err);
        done(s, p);
        return NULL;
    }
    check_invariants(k, p);
    return k;
}

static void done(sched_schedule *s, sched_rowplan *p)
{
    sched_rowplan_free(p);
    sched_free(s);
}

static const int64_t ROWS[2] = {7, 33};

static rlx_tensor *x_of(rlx_dtype dt) { return trand(dt, 2, ROWS, -1, 1); }

/* softmax: max, sum of exp(x - m) (stashed in the output row), then the
 * store divides by the sum, guarded, with a retry that recomputes exp. */
TEST(softmax_stashes_exp_in_the_output_row)
{
    rlx_tensor *x = x_of(RLX_F32);
    sched_schedule s;
    sched_rowplan p;
    const sched_kernel *k = plan_of(rlx_softmax(x, -1), true, &s, &p);
    if (!k)
        return;
    CHECK(!strcmp(kinds(&p), "RRST"));
    CHECK_EQ_INT(p.r1, 1);
    CHECK_EQ_INT(p.rowlen, 33);
    CHECK_EQ_INT(k->instr[p.phase[0]].op, IR_OP_RMAX);
    CHECK_EQ_INT(k->instr[p.phase[1]].op, IR_OP_SUM);
    CHECK_EQ_INT(p.pass[0].acc_dtype, RLX_F32);
    CHECK_EQ_INT(p.pass[1].acc_dtype, RLX_F64); /* f32 sums accumulate in f64 */
    CHECK_EQ_INT(p.pass[0].block, 0);
    CHECK_EQ_INT(p.pass[1].block, SCHED_SUM_BLOCK); /* ... in blocks first summed in f32 */
    int e = find_op(k, IR_OP_EXP), div = find_op(k, IR_OP_DIV);
    CHECK(e >= 0 && div >= 0);
    CHECK_EQ_INT(p.ostash, e);
    CHECK_EQ_INT(p.nstash_row, 0);
    CHECK_EQ_INT(p.pass[1].act[e], SCHED_ROW_EVAL_STASH);
    CHECK_EQ_INT(p.pass[2].act[e], SCHED_ROW_LOAD);
    CHECK_EQ_INT(p.pass[3].act[e], SCHED_ROW_EVAL_STASH); /* overwritten by the store pass */
    CHECK_EQ_INT(p.nfd, 1);
    CHECK_EQ_INT(p.fdslot[div], 0);
    CHECK(p.pass[2].fast_div && !p.pass[3].fast_div);
    CHECK_EQ_INT(p.pass[2].act[div], SCHED_ROW_EVAL);
    CHECK(!p.per_elem[k->instr[div].src[1]]); /* divides by the per-row sum */
    for (int P = 0; P < p.npass; P++)
        CHECK_EQ_INT(p.pass[P].chunk, 0); /* too small to prefetch */
    done(&s, &p);
}

/* softmax on f16 and bf16: the tensor layer computes it in f32 and rounds
 * once (rlx.h), so the kernel is f32's plan (max in f32, sum in f64, the
 * guarded division with its retry pass) with the casts fused into its
 * loads and store; the exp is stashed in a row buffer, not in the 16-bit
 * output row. */
TEST(half_softmax_stashes_a_row_buffer)
{
    for (int v = 0; v < 2; v++) {
        rlx_dtype dt = v ? RLX_F16 : RLX_BF16;
        rlx_tensor *x = x_of(dt);
        sched_schedule s;
        sched_rowplan p;
        const sched_kernel *k = plan_of(rlx_softmax(x, -1), true, &s, &p);
        if (!k)
            return;
        CHECK(!strcmp(kinds(&p), "RRST"));
        CHECK_EQ_INT(p.pass[0].acc_dtype, RLX_F32);
        CHECK_EQ_INT(p.pass[1].acc_dtype, RLX_F64);
        int e = find_op(k, IR_OP_EXP);
        CHECK(e >= 0);
        CHECK_EQ_INT(p.ostash, -1);
        CHECK_EQ_INT(p.stash[e], SCHED_STASH_ROW);
        CHECK_EQ_INT(p.nstash_row, 1);
        CHECK_EQ_INT(p.nfd, 1);
        done(&s, &p);
    }
}

/* Without fma (or in f64) no division is guarded: no retry pass. */
TEST(softmax_without_guard)
{
    rlx_tensor *x = x_of(RLX_F32), *x64 = x_of(RLX_F64);
    sched_schedule s;
    sched_rowplan p;
    const sched_kernel *k = plan_of(rlx_softmax(x, -1), false, &s, &p);
    if (k) {
        CHECK(!strcmp(kinds(&p), "RRS"));
        CHECK_EQ_INT(p.nfd, 0);
        CHECK(!p.pass[2].fast_div);
        CHECK_EQ_INT(p.ostash, find_op(k, IR_OP_EXP));
        done(&s, &p);
    }
    k = plan_of(rlx_softmax(x64, -1), true, &s, &p);
    if (k) {
        CHECK(!strcmp(kinds(&p), "RRS"));
        CHECK_EQ_INT(p.nfd, 0);
        CHECK_EQ_INT(p.pass[0].acc_dtype, RLX_F64);
        CHECK_EQ_INT(p.pass[1].acc_dtype, RLX_F64);
        done(&s, &p);
    }
}

/* log_softmax: exp is needed by the sum pass only (no stash); log of the
 * sum is a per-row value computed before the store pass. */
TEST(log_softmax_log_is_per_row)
{
    rlx_tensor *x = x_of(RLX_F32);
    sched_schedule s;
    sched_rowplan p;
    const sched_kernel *k = plan_of(rlx_log_softmax(x, -1), true, &s, &p);
    if (!k)
        return;
    CHECK(!strcmp(kinds(&p), "RRS"));
    int e = find_op(k, IR_OP_EXP), lg = find_op(k, IR_OP_LOG);
    CHECK(e >= 0 && lg >= 0);
    CHECK(p.per_elem[e] && !p.per_elem[lg]);
    CHECK_EQ_INT(p.stage[lg], 2);
    CHECK_EQ_INT(p.pass[2].act[lg], SCHED_ROW_PER_ROW);
    CHECK_EQ_INT(p.ostash, -1);
    CHECK_EQ_INT(p.nstash_row, 0);
    CHECK_EQ_INT(p.pass[1].act[e], SCHED_ROW_EVAL);
    CHECK_EQ_INT(p.pass[2].act[e], SCHED_ROW_SKIP);
    done(&s, &p);
}

/* layer_norm: two sums (mean, variance), the normalizer per row. */
TEST(layer_norm_two_sums)
{
    int64_t n1 = ROWS[1];
    rlx_tensor *x = x_of(RLX_F32), *g = trand(RLX_F32, 1, &n1, -1, 1), *b = trand(RLX_F32, 1, &n1, -1, 1);
    sched_schedule s;
    sched_rowplan p;
    const sched_kernel *k = plan_of(rlx_layer_norm(x, g, b, 1e-5), true, &s, &p);
    if (!k)
        return;
    CHECK(!strcmp(kinds(&p), "RRS"));
    for (int L = 0; L < 2; L++) {
        CHECK_EQ_INT(k->instr[p.phase[L]].op, IR_OP_SUM);
        CHECK_EQ_INT(p.pass[L].acc_dtype, RLX_F64);
    }
    int rs = find_op(k, IR_OP_RSQRT) >= 0 ? find_op(k, IR_OP_RSQRT) : find_op(k, IR_OP_SQRT);
    CHECK(rs >= 0 && !p.per_elem[rs] && p.stage[rs] == 2);
    CHECK(p.per_elem[k->ninstr - 1]);
    CHECK_EQ_INT(p.ostash, -1);
    done(&s, &p);
}

/* Blocked f32 sums: every f32 and f16 SUM phase, none with acc_f64
 * (knob reduce_acc_f64), none for f64 or RMAX. */
TEST(sum_blocks_follow_the_policy)
{
    int64_t n1 = ROWS[1];
    for (int v = 0; v < 4; v++) {
        rlx_dtype dt = v == 2 ? RLX_F64 : v == 3 ? RLX_F16 : RLX_F32;
        bool f64 = v == 1;
        rlx_tensor *x = x_of(dt), *g = trand(dt, 1, &n1, -1, 1), *b = trand(dt, 1, &n1, -1, 1);
        sched_schedule s;
        const sched_kernel *k = phased_of(rlx_layer_norm(x, g, b, 1e-5), &s);
        if (!k) {
            test_fail(__FILE__, __LINE__, "no phased kernel");
            sched_free(&s);
            continue;
        }
        sched_rowplan p;
        char err[256];
        CHECK_EQ_INT(sched_rowplan_build(k, true, f64, &p, err, sizeof err), RLX_OK);
        CHECK_EQ_INT(p.nphases, 2);
        for (int L = 0; L < p.nphases; L++) {
            CHECK_EQ_INT(p.pass[L].acc_dtype, RLX_F64);
            CHECK_EQ_INT(p.pass[L].block, f64 || dt == RLX_F64 ? 0 : SCHED_SUM_BLOCK);
        }
        sched_rowplan_free(&p);
        sched_free(&s);
    }
}

/* rms_norm: one phase (the sum of squares), then the store pass. */
TEST(rms_norm_one_phase)
{
    int64_t n1 = ROWS[1];
    rlx_tensor *x = x_of(RLX_F32), *g = trand(RLX_F32, 1, &n1, -1, 1);
    sched_schedule s;
    sched_rowplan p;
    const sched_kernel *k = plan_of(rlx_rms_norm(x, g, 1e-5), true, &s, &p);
    if (!k)
        return;
    CHECK(!strcmp(kinds(&p), "RS"));
    CHECK_EQ_INT(k->instr[p.phase[0]].op, IR_OP_SUM);
    int sq = k->instr[p.phase[0]].src[0];
    CHECK(p.per_elem[sq] && p.pass[0].act[sq] == SCHED_ROW_EVAL);
    CHECK_EQ_INT(p.ostash, -1);
    done(&s, &p);
}

/* logsumexp without keepdim: a per-row result, stored once per row. */
TEST(logsumexp_stores_once_per_row)
{
    rlx_tensor *x = x_of(RLX_F32);
    sched_schedule s;
    sched_rowplan p;
    const sched_kernel *k = plan_of(rlx_logsumexp(x, -1, false), true, &s, &p);
    if (!k)
        return;
    CHECK(!strcmp(kinds(&p), "RRO"));
    int last = k->ninstr - 1, lg = find_op(k, IR_OP_LOG);
    CHECK(!p.per_elem[last]);
    CHECK(lg >= 0 && p.pass[2].act[lg] == SCHED_ROW_PER_ROW);
    CHECK_EQ_INT(p.pass[2].act[last], SCHED_ROW_PER_ROW);
    CHECK_EQ_INT(p.nfd, 0);
    done(&s, &p);
}

/* Two math values several passes need: exp (first, the stored value is
 * computed from it) in the output row, tanh in a row buffer. */
TEST(second_stash_is_a_row_buffer)
{
    rlx_tensor *x = x_of(RLX_F32);
    rlx_tensor *e = rlx_exp(rlx_sub(x, rlx_max(x, (int[]){1}, 1, true))), *th = rlx_tanh(x);
    rlx_tensor *s1 = rlx_sum(e, (int[]){1}, 1, true), *s2 = rlx_sum(rlx_mul(th, e), (int[]){1}, 1, true);
    rlx_tensor *a = rlx_div(e, s1), *b = rlx_div(th, s2);
    sched_schedule s;
    sched_rowplan p;
    const sched_kernel *k = plan_of(rlx_add(a, b), true, &s, &p);
    if (!k)
        return;
    CHECK(!strcmp(kinds(&p), "RRRST"));
    int ie = find_op(k, IR_OP_EXP), it = find_op(k, IR_OP_TANH);
    CHECK_EQ_INT(p.ostash, ie);
    CHECK_EQ_INT(p.stash[it], SCHED_STASH_ROW);
    CHECK_EQ_INT(p.nstash_row, 1);
    CHECK_EQ_INT(p.nfd, 2);
    /* the retry reloads tanh (filled before the store) but recomputes exp */
    CHECK_EQ_INT(p.pass[4].act[it], SCHED_ROW_LOAD);
    CHECK_EQ_INT(p.pass[4].act[ie], SCHED_ROW_EVAL_STASH);
    done(&s, &p);
}

/* A matrix beyond the caches: the sum pass (it computes exp) runs in
 * chunks, prefetching the next row of x. */
TEST(large_softmax_prefetches_in_chunks)
{
    int64_t big[2] = {1024, 1024};
    rlx_tensor *x = trand(RLX_F32, 2, big, -1, 1);
    sched_schedule s;
    sched_rowplan p;
    const sched_kernel *k = plan_of(rlx_softmax(x, -1), true, &s, &p);
    if (!k)
        return;
    CHECK(!strcmp(kinds(&p), "RRST"));
    for (int P = 0; P < p.npass; P++)
        CHECK_EQ_INT(p.pass[P].chunk, P == 1 ? SCHED_ROW_PF_CHUNK : 0);
    CHECK_EQ_INT(p.pass[1].block, SCHED_ROW_PF_CHUNK); /* the chunks are the sum's blocks */
    CHECK_EQ_INT(p.npf, 1);
    const sched_instr *ld = &k->instr[p.pf[0]];
    CHECK(ld->kind == SCHED_I_LOAD && ld->idx.stride[0] == 1024 && ld->idx.stride[1] == 1);
    done(&s, &p);
}

/* A plain reduction is the one-reduction form, not a row kernel. */
TEST(plain_reduction_has_no_plan)
{
    rlx_tensor *x = x_of(RLX_F32);
    rlx_tensor *r = rlx_sum(rlx_exp(x), (int[]){1}, 1, false);
    ir_node *root = (ir_node *)r;
    sched_schedule s;
    sched_ctx c = {0};
    CHECK_EQ_INT(sched_build(&c, &root, 1, &s), RLX_OK);
    const sched_kernel *k = NULL;
    for (long j = 0; j < s.count; j++)
        if (s.k[j].kind == SCHED_LOOP)
            k = &s.k[j];
    CHECK(k && k->red_op == IR_OP_SUM);
    if (k) {
        sched_rowplan p;
        char err[256];
        CHECK_EQ_INT(sched_rowplan_build(k, true, false, &p, err, sizeof err), RLX_E_INTERNAL);
        CHECK(strstr(err, "not a phased") != NULL);
    }
    sched_free(&s);
}

/* A hand-made row kernel over [4, 8]: x loaded per element, then nphases
 * sums of it, the last one stored once per row (its node: a [4] f32). */
static sched_kernel hand_kernel(sched_instr *in, int nphases)
{
    sched_kernel k;
    memset(&k, 0, sizeof k);
    int64_t rows = 4;
    k.kind = SCHED_LOOP;
    k.node = (ir_node *)trand(RLX_F32, 1, &rows, 0, 1);
    k.red_op = IR_OP_COUNT;
    k.rank = 2;
    k.shape[0] = 4;
    k.shape[1] = 8;
    k.red_mask = 2;
    k.out.stride[0] = 1;
    k.nargs = 2;
    k.ninstr = 1 + nphases;
    k.instr = in;
    memset(in, 0, (size_t)k.ninstr * sizeof *in);
    in[0].kind = SCHED_I_LOAD;
    in[0].dtype = RLX_F32;
    in[0].arg = 1;
    in[0].idx.stride[0] = 8;
    in[0].idx.stride[1] = 1;
    for (int L = 1; L <= nphases; L++) {
        in[L].kind = SCHED_I_REDUCE;
        in[L].op = IR_OP_SUM;
        in[L].dtype = RLX_F32;
        in[L].src[0] = 0;
    }
    return k;
}

TEST(phase_limit_is_an_error)
{
    sched_instr in[SCHED_MAX_PHASES + 2];
    sched_rowplan p;
    char err[256] = "";
    sched_kernel k = hand_kernel(in, SCHED_MAX_PHASES);
    CHECK_EQ_INT(sched_rowplan_build(&k, true, false, &p, err, sizeof err), RLX_OK);
    CHECK_EQ_INT(p.nphases, SCHED_MAX_PHASES);
    CHECK_EQ_INT(p.npass, SCHED_MAX_PHASES + 1);
    CHECK_EQ_INT(p.pass[SCHED_MAX_PHASES].kind, SCHED_ROW_STORE_ONE);
    check_invariants(&k, &p);
    sched_rowplan_free(&p);
    k = hand_kernel(in, SCHED_MAX_PHASES + 1);
    CHECK_EQ_INT(sched_rowplan_build(&k, true, false, &p, err, sizeof err), RLX_E_INTERNAL);
    CHECK(strstr(err, "9 phases, at most 8") != NULL);
    CHECK(p.mem == NULL);
    sched_rowplan_free(&p); /* harmless */
}

TEST(malformed_kernel_is_an_error)
{
    sched_instr in[3];
    sched_rowplan p;
    char err[256] = "";
    sched_kernel k = hand_kernel(in, 2);
    in[2].src[0] = 2; /* reads itself */
    CHECK_EQ_INT(sched_rowplan_build(&k, true, false, &p, err, sizeof err), RLX_E_INTERNAL);
    CHECK(strstr(err, "instruction 2") != NULL);
    k.ninstr = 0;
    CHECK_EQ_INT(sched_rowplan_build(&k, true, false, &p, err, sizeof err), RLX_E_INTERNAL);
}

TEST(allocation_failure_is_reported)
{
    sched_instr in[3];
    sched_rowplan p;
    char err[256] = "";
    sched_kernel k = hand_kernel(in, 2);
    ir_alloc_fail_after(0);
    rlx_status st = sched_rowplan_build(&k, true, false, &p, err, sizeof err);
    ir_alloc_fail_after(-1);
    CHECK_EQ_INT(st, RLX_E_NOMEM);
    CHECK(strstr(err, "out of memory") != NULL && p.mem == NULL);
}

TEST_MAIN(T(softmax_stashes_exp_in_the_output_row), T(half_softmax_stashes_a_row_buffer), T(softmax_without_guard), T(log_softmax_log_is_per_row),
          T(layer_norm_two_sums), T(sum_blocks_follow_the_policy), T(rms_norm_one_phase), T(logsumexp_stores_once_per_row),
          T(second_stash_is_a_row_buffer), T(large_softmax_prefetches_in_chunks), T(plain_reduction_has_no_plan),
          T(phase_limit_is_an_error), T(malformed_kernel_is_an_error), T(allocation_failure_is_reported))
