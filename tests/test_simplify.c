/*
 * test_simplify.c — the graph simplifier (src/passes/simplify.c) that the
 * JIT backend runs before scheduling.
 *
 * Each rule is built as raw IR (so the pattern really is in the graph),
 * simplified directly to check that it fires (the count of unrealized
 * nodes left) and that the result verifies, then realized twice from
 * scratch: with the reference backend (the oracle, never simplified) and
 * with the JIT (simplified). The two must agree bit for bit (any NaN
 * equals any NaN; signed zeros must match) unless a tolerance is given.
 * The oracle's graph is released before the JIT's is built, so
 * hash-consing cannot hand the JIT an already realized node.
 */
#include "harness.h"

#include <stdbool.h>

#include "ir/ir.h"
#include "passes/passes.h"

/* simp_run with the pass's message copied to err. */
static rlx_status simp_into(ir_node *const *roots, int n, ir_node **out, char *err, size_t cap)
{
    sched_ctx c = {0};
    rlx_status st = simp_run(&c, roots, n, ts_simp_fold, out);
    snprintf(err, cap, "%.190s", c.msg);
    return st;
}

static void backend(const char *b)
{
    if (rlx_set_option("backend", b) != RLX_OK)
        test_fail(__FILE__, __LINE__, "cannot select backend %s", b);
}

/* ------------------------------------------------------------- builders */

static ir_node *mk(ir_op op, int nsrc, ir_node *const *src, const ir_attrs *a)
{
    char err[200] = "";
    ir_node *n = ir_make(op, nsrc, src, a, RLX_F32, 0, NULL, err, sizeof err);
    if (!n)
        test_fail(__FILE__, __LINE__, "ir_make(%s): %s", ir_ops[op].name, err);
    return n;
}

/* Consumes the references to its sources (keeps builders short). */
static ir_node *op1(ir_op op, ir_node *x, const ir_attrs *a)
{
    ir_node *n = x ? mk(op, 1, &x, a) : NULL;
    ir_release(x);
    return n;
}

static ir_node *op2(ir_op op, ir_node *x, ir_node *y)
{
    ir_node *src[2] = {x, y};
    ir_node *n = x && y ? mk(op, 2, src, NULL) : NULL;
    ir_release(x);
    ir_release(y);
    return n;
}

static ir_node *op3(ir_op op, ir_node *x, ir_node *y, ir_node *z)
{
    ir_node *src[3] = {x, y, z};
    ir_node *n = x && y && z ? mk(op, 3, src, NULL) : NULL;
    ir_release(x);
    ir_release(y);
    ir_release(z);
    return n;
}

/* v as dt holds it (what the tensor layer stores in a CONST). */
static double as_dt(rlx_dtype dt, double v)
{
    if (dt == RLX_F32)
        return (double)(float)v;
    if (dt == RLX_F64)
        return v;
    if (dt == RLX_BOOL)
        return v != 0;
    return test_quantize(dt, v);
}

static ir_node *cst(rlx_dtype dt, int rank, const int64_t *shape, double v)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.cst.value = as_dt(dt, v);
    char err[200] = "";
    ir_node *n = ir_make(IR_OP_CONST, 0, NULL, &a, dt, rank, shape, err, sizeof err);
    if (!n)
        test_fail(__FILE__, __LINE__, "const: %s", err);
    return n;
}

/* A CONST shaped like x. */
static ir_node *cst_like(const ir_node *x, double v) { return cst(x->dtype, x->rank, x->shape, v); }

static ir_node *shaped(ir_op op, ir_node *x, int rank, const int64_t *shape)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.shape.rank = rank;
    memcpy(a.shape.dims, shape, (size_t)rank * sizeof *shape);
    return op1(op, x, &a);
}

static ir_node *permute(ir_node *x, const int *perm)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    memcpy(a.perm.perm, perm, (size_t)x->rank * sizeof *perm);
    return op1(IR_OP_PERMUTE, x, &a);
}

static ir_node *red(ir_op op, ir_node *x, uint32_t mask)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.red.mask = mask;
    return op1(op, x, &a);
}

static ir_node *cast(ir_node *x, rlx_dtype dt)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.cast.dtype = dt;
    return op1(IR_OP_CAST, x, &a);
}

/* Awkward values per dtype, used cyclically. */
static const double F_VALS[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 1.5, -2.25, 3e38};
static const double F_SMOOTH[] = {1.5, -2.25, 0.5, 4, -0.0, 6, -1, 0.25}; /* exact sums */
static const int32_t I32_VALS[] = {INT32_MIN, INT32_MAX, -1, 0, 1, 7, -7, 123456};
static const int64_t I64_VALS[] = {INT64_MIN, INT64_MAX, -1, 0, 1, 7, -7, (int64_t)1 << 53};
static const unsigned char B_VALS[] = {1, 0, 1, 1, 0, 0, 1, 0};
static const double *float_vals = F_VALS;

/* A fresh realized buffer (a new reference; never shared by consing). */
static ir_node *buf(rlx_dtype dt, int rank, const int64_t *shape)
{
    int64_t n = test_numel(rank, shape);
    char *p = calloc((size_t)(n ? n : 1), 8);
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case RLX_F32: ((float *)p)[i] = (float)float_vals[i % 8]; break;
        case RLX_F64: ((double *)p)[i] = float_vals[i % 8]; break;
        case RLX_I32: ((int32_t *)p)[i] = I32_VALS[i % 8]; break;
        case RLX_I64: ((int64_t *)p)[i] = I64_VALS[i % 8]; break;
        default: ((unsigned char *)p)[i] = B_VALS[i % 8]; break;
        }
    }
    rlx_scope_begin();
    rlx_tensor *t = rlx_from_data(dt, rank, shape, p);
    ir_retain((ir_node *)t); /* not recorded: it outlives the scope */
    rlx_scope_end();
    free(p);
    if (!t)
        test_fail(__FILE__, __LINE__, "rlx_from_data: %s", rlx_last_error());
    return (ir_node *)t;
}

static const int64_t S24[2] = {2, 4}, S14[2] = {1, 4}, S34[2] = {3, 4};

/* ------------------------------------------------------------ the check */

typedef ir_node *(*build_fn)(rlx_dtype dt);

/* Reads t's payload (realizing it with the current backend). */
static void *payload(ir_node *t, size_t *bytes)
{
    *bytes = ir_node_bytes(t);
    void *p = malloc(*bytes ? *bytes : 1);
    if (rlx_read((rlx_tensor *)t, p, *bytes) != RLX_OK) {
        test_fail(__FILE__, __LINE__, "realize: %s", rlx_last_error());
        free(p);
        return NULL;
    }
    return p;
}

static bool same_value(rlx_dtype dt, const char *a, const char *b, int64_t i, double tol)
{
    double x, y;
    if (dt == RLX_F32) {
        float fx, fy;
        memcpy(&fx, a + 4 * i, 4);
        memcpy(&fy, b + 4 * i, 4);
        x = fx;
        y = fy;
    } else if (dt == RLX_F64) {
        memcpy(&x, a + 8 * i, 8);
        memcpy(&y, b + 8 * i, 8);
    } else {
        size_t es = ir_dtype_size(dt);
        return memcmp(a + (int64_t)es * i, b + (int64_t)es * i, es) == 0;
    }
    if (isnan(x) || isnan(y))
        return isnan(x) && isnan(y);
    if (tol > 0 && isfinite(y))
        return fabs(x - y) <= tol * (1 + fabs(y));
    return x == y && signbit(x) == signbit(y);
}

/* want: unrealized nodes left by the pass; -1: fewer than before. */
static void check_tol(const char *what, build_fn b, rlx_dtype dt, long want, double tol)
{
    long live = ir_live_nodes();
    backend("ref");
    ir_node *r = b(dt);
    if (!r)
        return;
    size_t nb;
    char *ref = payload(r, &nb);
    ir_release(r);
    if (ir_live_nodes() != live)
        test_fail(__FILE__, __LINE__, "%s/%s: the oracle's graph stays alive", what, rlx_dtype_name(dt));
    backend("jit");
    r = b(dt);
    if (!r || !ref) {
        ir_release(r);
        free(ref);
        return;
    }
    long before = simp_count(&r, 1);
    ir_node *s = NULL;
    char err[300];
    if (simp_into(&r, 1, &s, err, sizeof err) != RLX_OK) {
        test_fail(__FILE__, __LINE__, "%s/%s: simp_run: %s", what, rlx_dtype_name(dt), err);
    } else {
        long after = simp_count(&s, 1);
        if (want >= 0 ? after != want : after >= before)
            test_fail(__FILE__, __LINE__, "%s/%s: %ld nodes before, %ld after, want %ld", what,
                      rlx_dtype_name(dt), before, after, want);
        if (s->dtype != r->dtype || !ir_shape_eq(s->rank, s->shape, r->rank, r->shape))
            test_fail(__FILE__, __LINE__, "%s/%s: simplified type differs", what, rlx_dtype_name(dt));
        if (!ir_verify(s, err, sizeof err))
            test_fail(__FILE__, __LINE__, "%s/%s: simplified graph: %s", what, rlx_dtype_name(dt), err);
    }
    ir_release(s);
    size_t jb;
    char *jit = payload(r, &jb);
    int64_t n = ir_node_numel(r);
    for (int64_t i = 0; jit && i < n; i++) {
        if (!same_value(r->dtype, jit, ref, i, tol)) {
            double g = r->dtype == RLX_F32 ? ((float *)jit)[i] : r->dtype == RLX_F64 ? ((double *)jit)[i] : 0;
            double w = r->dtype == RLX_F32 ? ((float *)ref)[i] : r->dtype == RLX_F64 ? ((double *)ref)[i] : 0;
            test_fail(__FILE__, __LINE__, "%s/%s: element %lld differs from the reference (%.17g vs %.17g)", what,
                      rlx_dtype_name(dt), (long long)i, g, w);
            break;
        }
    }
    free(jit);
    free(ref);
    ir_release(r);
    backend("ref");
}

static void check(const char *what, build_fn b, rlx_dtype dt, long want) { check_tol(what, b, dt, want, 0); }

static const rlx_dtype FLOATS[] = {RLX_F32, RLX_F64};
static const rlx_dtype ALL[] = {RLX_F32, RLX_F64, RLX_I32, RLX_I64, RLX_BOOL};
static const rlx_dtype NUMERIC[] = {RLX_F32, RLX_F64, RLX_I32, RLX_I64};
#define EACH(list, what, b, want) \
    for (size_t k_ = 0; k_ < sizeof list / sizeof *list; k_++) check(what, b, list[k_], want)

/* ----------------------------------------------------------- identities */

static ir_node *b_mul1(rlx_dtype dt) { ir_node *x = buf(dt, 2, S24); return op2(IR_OP_MUL, x, cst_like(x, 1)); }
static ir_node *b_1mul(rlx_dtype dt) { ir_node *x = buf(dt, 2, S24); return op2(IR_OP_MUL, cst_like(x, 1), x); }
static ir_node *b_div1(rlx_dtype dt) { ir_node *x = buf(dt, 2, S24); return op2(IR_OP_DIV, x, cst_like(x, 1)); }
static ir_node *b_add0(rlx_dtype dt) { ir_node *x = buf(dt, 2, S24); return op2(IR_OP_ADD, x, cst_like(x, 0)); }
static ir_node *b_0add(rlx_dtype dt) { ir_node *x = buf(dt, 2, S24); return op2(IR_OP_ADD, cst_like(x, 0), x); }
static ir_node *b_addm0(rlx_dtype dt) { ir_node *x = buf(dt, 2, S24); return op2(IR_OP_ADD, x, cst_like(x, -0.0)); }
static ir_node *b_m0add(rlx_dtype dt) { ir_node *x = buf(dt, 2, S24); return op2(IR_OP_ADD, cst_like(x, -0.0), x); }
static ir_node *b_sub0(rlx_dtype dt) { ir_node *x = buf(dt, 2, S24); return op2(IR_OP_SUB, x, cst_like(x, 0)); }
static ir_node *b_subm0(rlx_dtype dt) { ir_node *x = buf(dt, 2, S24); return op2(IR_OP_SUB, x, cst_like(x, -0.0)); }
static ir_node *b_mul0(rlx_dtype dt) { ir_node *x = buf(dt, 2, S24); return op2(IR_OP_MUL, x, cst_like(x, 0)); }
static ir_node *b_negneg(rlx_dtype dt) { return op1(IR_OP_NEG, op1(IR_OP_NEG, buf(dt, 2, S24), NULL), NULL); }
static ir_node *b_castsame(rlx_dtype dt) { return cast(buf(dt, 2, S24), dt); }
static ir_node *b_stopgrad(rlx_dtype dt) { return op1(IR_OP_STOP_GRAD, buf(dt, 2, S24), NULL); }
static ir_node *b_mul1_rank0(rlx_dtype dt) { ir_node *x = buf(dt, 0, NULL); return op2(IR_OP_MUL, x, cst_like(x, 1)); }
static ir_node *b_mul1_empty(rlx_dtype dt)
{
    static const int64_t s[2] = {0, 3};
    ir_node *x = buf(dt, 2, s);
    return op2(IR_OP_MUL, x, cst_like(x, 1));
}
/* 1 broadcast from a [1,1] constant, as the tensor layer writes x * 1 */
static ir_node *b_mul1_bcast(rlx_dtype dt)
{
    static const int64_t one[2] = {1, 1};
    ir_node *x = buf(dt, 2, S24);
    return op2(IR_OP_MUL, x, shaped(IR_OP_EXPAND, cst(dt, 2, one, 1), 2, S24));
}
static ir_node *b_where_const(rlx_dtype dt)
{
    ir_node *x = buf(dt, 2, S24);
    return op3(IR_OP_WHERE, cst(RLX_BOOL, 2, S24, 1), x, buf(dt, 2, S24));
}
static ir_node *b_where_same(rlx_dtype dt)
{
    ir_node *x = buf(dt, 2, S24);
    return op3(IR_OP_WHERE, buf(RLX_BOOL, 2, S24), x, ir_retain(x));
}
/* a realized intermediate is a leaf: neg(neg x) with the inner realized stays */
static ir_node *b_negneg_realized(rlx_dtype dt)
{
    ir_node *y = op1(IR_OP_NEG, buf(dt, 2, S24), NULL);
    if (y && rlx_realize((rlx_tensor *)y) != RLX_OK)
        test_fail(__FILE__, __LINE__, "realize: %s", rlx_last_error());
    return op1(IR_OP_NEG, y, NULL);
}

TEST(identities_fire)
{
    EACH(ALL, "x*1", b_mul1, 0);
    EACH(ALL, "1*x", b_1mul, 0);
    EACH(ALL, "x*expand(1)", b_mul1_bcast, 0);
    EACH(NUMERIC, "x/1", b_div1, 0);
    EACH(ALL, "x*1 rank 0", b_mul1_rank0, 0);
    EACH(ALL, "x*1 empty", b_mul1_empty, 0);
    /* one zero for integers and bools */
    check("x+0", b_add0, RLX_I32, 0);
    check("x+0", b_add0, RLX_I64, 0);
    check("x+0", b_add0, RLX_BOOL, 0);
    check("0+x", b_0add, RLX_I64, 0);
    check("0+x", b_0add, RLX_BOOL, 0);
    check("x-0", b_sub0, RLX_I32, 0);
    check("x-0", b_sub0, RLX_I64, 0);
    /* floats: x + (-0) and x - (+0) are the identity, -0 included */
    EACH(FLOATS, "x+(-0)", b_addm0, 0);
    EACH(FLOATS, "(-0)+x", b_m0add, 0);
    EACH(FLOATS, "x-(+0)", b_sub0, 0);
    EACH(NUMERIC, "neg(neg x)", b_negneg, 0);
    EACH(ALL, "cast to the same dtype", b_castsame, 0);
    EACH(ALL, "stop_gradient", b_stopgrad, 0);
    EACH(ALL, "where(true, x, y)", b_where_const, 0);
    EACH(ALL, "where(c, x, x)", b_where_same, 0);
}

TEST(identities_that_must_not_fire)
{
    /* NaN*0 and inf*0 are NaN, -1*0 is -0: x*0 stays a multiplication */
    EACH(ALL, "x*0", b_mul0, 2);
    /* -0 + +0 is +0: a float x + 0 is not x */
    EACH(FLOATS, "x+(+0)", b_add0, 2);
    EACH(FLOATS, "(+0)+x", b_0add, 2);
    EACH(FLOATS, "x-(-0)", b_subm0, 2);
    EACH(NUMERIC, "neg(realized neg x)", b_negneg_realized, 1);
}

/* --------------------------------------------------------------- folding */

typedef struct {
    ir_op op;
    rlx_dtype dt, to; /* sources' dtype; CAST's target */
    int nsrc;
    double v[3];
    long want; /* nodes left: 1 folded, else the op and its constants */
} fold_case;
static fold_case fc;

static ir_node *b_fold(rlx_dtype dt)
{
    (void)dt;
    static const int64_t one[2] = {1, 1};
    ir_node *s[3];
    for (int k = 0; k < fc.nsrc; k++) {
        rlx_dtype sdt = fc.op == IR_OP_WHERE && k == 0 ? RLX_BOOL : fc.dt;
        /* the first source broadcast from [1,1], the others full constants */
        s[k] = k == 0 ? shaped(IR_OP_EXPAND, cst(sdt, 2, one, fc.v[0]), 2, S24) : cst(sdt, 2, S24, fc.v[k]);
    }
    if (fc.op == IR_OP_CAST)
        return cast(s[0], fc.to);
    if (fc.nsrc == 1)
        return op1(fc.op, s[0], NULL);
    if (fc.nsrc == 2)
        return op2(fc.op, s[0], s[1]);
    return op3(fc.op, s[0], s[1], s[2]);
}

TEST(constant_folding)
{
    const double I32MAX = 2147483647.0, I32MIN = -2147483648.0, P53 = 9007199254740992.0;
    static const fold_case cases[] = {
        {IR_OP_ADD, RLX_F32, 0, 2, {INFINITY, -INFINITY}, 1},
        {IR_OP_MUL, RLX_F32, 0, 2, {NAN, 0}, 1},
        {IR_OP_MUL, RLX_F64, 0, 2, {INFINITY, 0}, 1},
        {IR_OP_DIV, RLX_F32, 0, 2, {1, -0.0}, 1},
        {IR_OP_SUB, RLX_F32, 0, 2, {3e38, -3e38}, 1}, /* overflows f32 */
        {IR_OP_ADD, RLX_F64, 0, 2, {0.1, 0.2}, 1},
        {IR_OP_SQRT, RLX_F32, 0, 1, {-1}, 1},
        {IR_OP_EXP, RLX_F32, 0, 1, {100}, 1},
        {IR_OP_LOG, RLX_F64, 0, 1, {0}, 1},
        {IR_OP_RSQRT, RLX_F64, 0, 1, {-0.0}, 1},
        {IR_OP_SIGMOID, RLX_F64, 0, 1, {-800}, 1},
        {IR_OP_TANH, RLX_F32, 0, 1, {0.5}, 1},
        {IR_OP_NEG, RLX_F64, 0, 1, {0}, 1},
        {IR_OP_SIGN, RLX_F32, 0, 1, {-0.0}, 1},
        {IR_OP_ROUND, RLX_F64, 0, 1, {2.5}, 1},
        {IR_OP_MAX, RLX_F32, 0, 2, {NAN, 1}, 1},
        {IR_OP_MIN, RLX_F64, 0, 2, {-0.0, 0.0}, 1},
        {IR_OP_POW, RLX_F64, 0, 2, {0, -1}, 1},
        {IR_OP_REM, RLX_F64, 0, 2, {5.5, -2}, 1},
        {IR_OP_ATAN2, RLX_F64, 0, 2, {-0.0, -1}, 1},
        {IR_OP_LT, RLX_F32, 0, 2, {NAN, 1}, 1},
        {IR_OP_NE, RLX_F64, 0, 2, {NAN, NAN}, 1},
        {IR_OP_ADD, RLX_I32, 0, 2, {I32MAX, 1}, 1}, /* wraps */
        {IR_OP_MUL, RLX_I32, 0, 2, {65536, 65536}, 1},
        {IR_OP_DIV, RLX_I32, 0, 2, {I32MIN, -1}, 1},
        {IR_OP_DIV, RLX_I64, 0, 2, {7, 0}, 1},
        {IR_OP_REM, RLX_I64, 0, 2, {-7, 2}, 1},
        {IR_OP_NEG, RLX_I32, 0, 1, {I32MIN}, 1},
        {IR_OP_ABS, RLX_I64, 0, 1, {-5}, 1},
        {IR_OP_POW, RLX_I64, 0, 2, {2, 52}, 1},
        {IR_OP_ADD, RLX_I64, 0, 2, {P53 / 2, P53 / 2}, 1},
        {IR_OP_ADD, RLX_I64, 0, 2, {P53, 1}, 3}, /* 2^53 + 1: no double holds it, not folded */
        {IR_OP_AND, RLX_BOOL, 0, 2, {1, 0}, 1},
        {IR_OP_OR, RLX_BOOL, 0, 2, {1, 0}, 1},
        {IR_OP_ADD, RLX_BOOL, 0, 2, {1, 1}, 1},
        {IR_OP_NOT, RLX_BOOL, 0, 1, {1}, 1},
        {IR_OP_EQ, RLX_BOOL, 0, 2, {1, 1}, 1},
        {IR_OP_CAST, RLX_F32, RLX_I32, 1, {3e9}, 1}, /* saturates */
        {IR_OP_CAST, RLX_F64, RLX_I64, 1, {NAN}, 1},
        {IR_OP_CAST, RLX_F64, RLX_F32, 1, {0.1}, 1},
        {IR_OP_CAST, RLX_F64, RLX_BOOL, 1, {NAN}, 1},
        {IR_OP_CAST, RLX_F32, RLX_I32, 1, {-0.0}, 1},
        {IR_OP_CAST, RLX_I32, RLX_I64, 1, {I32MIN}, 1},
        {IR_OP_CAST, RLX_BOOL, RLX_F64, 1, {1}, 1},
        {IR_OP_WHERE, RLX_F32, 0, 3, {0, 1, NAN}, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fc = cases[i];
        char what[64];
        snprintf(what, sizeof what, "fold %s #%zu", ir_ops[fc.op].name, i);
        check(what, b_fold, fc.dt, fc.want);
    }
}

static ir_node *b_fold_rank0(rlx_dtype dt) { return op2(IR_OP_DIV, cst(dt, 0, NULL, 7), cst(dt, 0, NULL, 2)); }
static ir_node *b_fold_empty(rlx_dtype dt)
{
    static const int64_t s[2] = {0, 3};
    return op2(IR_OP_SUB, cst(dt, 2, s, 7), cst(dt, 2, s, 2));
}
/* a chain of constant ops folds to one constant */
static ir_node *b_fold_chain(rlx_dtype dt)
{
    ir_node *x = shaped(IR_OP_EXPAND, cst(dt, 2, S14, 3), 2, S34);
    for (int i = 0; i < 10; i++)
        x = op2(IR_OP_ADD, op2(IR_OP_MUL, x, cst(dt, 2, S34, 1)), cst(dt, 2, S34, 2));
    return x;
}

TEST(constant_folding_shapes)
{
    EACH(NUMERIC, "fold rank 0", b_fold_rank0, 1);
    EACH(NUMERIC, "fold empty", b_fold_empty, 1);
    EACH(NUMERIC, "fold chain", b_fold_chain, 1);
}

/* -------------------------------------------------------------- movement */

static ir_node *b_reshape_same(rlx_dtype dt) { return shaped(IR_OP_RESHAPE, buf(dt, 2, S24), 2, S24); }
static ir_node *b_expand_same(rlx_dtype dt) { return shaped(IR_OP_EXPAND, buf(dt, 2, S24), 2, S24); }
static ir_node *b_permute_id(rlx_dtype dt)
{
    static const int id[2] = {0, 1};
    return permute(buf(dt, 2, S24), id);
}
static ir_node *b_transpose2(rlx_dtype dt)
{
    static const int t[2] = {1, 0};
    return permute(permute(buf(dt, 2, S24), t), t);
}
static ir_node *b_permute_compose(rlx_dtype dt)
{
    static const int64_t s[3] = {2, 3, 4};
    static const int p1[3] = {2, 0, 1}, p2[3] = {0, 2, 1};
    return permute(permute(buf(dt, 3, s), p1), p2); /* one permute [2,1,0] */
}
static ir_node *b_reshape2(rlx_dtype dt)
{
    static const int64_t flat[1] = {8}, s42[2] = {4, 2};
    return shaped(IR_OP_RESHAPE, shaped(IR_OP_RESHAPE, buf(dt, 2, S24), 1, flat), 2, s42);
}
static ir_node *b_reshape_back(rlx_dtype dt)
{
    static const int64_t flat[1] = {8};
    return shaped(IR_OP_RESHAPE, shaped(IR_OP_RESHAPE, buf(dt, 2, S24), 1, flat), 2, S24);
}
static ir_node *b_expand2(rlx_dtype dt)
{
    static const int64_t s0[3] = {1, 1, 4}, s1[3] = {1, 3, 4}, s2[3] = {2, 3, 4};
    return shaped(IR_OP_EXPAND, shaped(IR_OP_EXPAND, buf(dt, 3, s0), 3, s1), 3, s2);
}
static ir_node *b_slice_full(rlx_dtype dt)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.slice.start[0] = 0, a.slice.step[0] = 5, a.slice.len[0] = 1; /* one element: any step */
    a.slice.start[1] = 0, a.slice.step[1] = 1, a.slice.len[1] = 4;
    return op1(IR_OP_SLICE, buf(dt, 2, S14), &a);
}
static ir_node *b_slice_step2(rlx_dtype dt)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.slice.start[0] = 0, a.slice.step[0] = 1, a.slice.len[0] = 2;
    a.slice.start[1] = 0, a.slice.step[1] = 2, a.slice.len[1] = 2;
    return op1(IR_OP_SLICE, buf(dt, 2, S24), &a);
}
static ir_node *b_pad0(rlx_dtype dt)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.pad.value = 5;
    return op1(IR_OP_PAD, buf(dt, 2, S24), &a);
}
/* views of a constant are constants */
static ir_node *b_const_views(rlx_dtype dt)
{
    static const int t[2] = {1, 0};
    static const int64_t s43[2] = {4, 3};
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.slice.start[0] = 1, a.slice.step[0] = 1, a.slice.len[0] = 2;
    a.slice.start[1] = 0, a.slice.step[1] = 1, a.slice.len[1] = 3;
    ir_node *c = permute(shaped(IR_OP_EXPAND, cst(dt, 2, S14, -0.0), 2, S34), t); /* [4,3] */
    c = shaped(IR_OP_RESHAPE, c, 2, s43);
    return op1(IR_OP_SLICE, c, &a);
}
/* cast moves below the expand */
static ir_node *b_cast_expand(rlx_dtype dt)
{
    return cast(shaped(IR_OP_EXPAND, buf(dt, 2, S14), 2, S34), dt == RLX_F64 ? RLX_I32 : RLX_F64);
}

TEST(movement)
{
    EACH(ALL, "reshape to the same shape", b_reshape_same, 0);
    EACH(ALL, "expand to the same shape", b_expand_same, 0);
    EACH(ALL, "identity permute", b_permute_id, 0);
    EACH(ALL, "double transpose", b_transpose2, 0);
    EACH(ALL, "permute of permute", b_permute_compose, 1);
    EACH(ALL, "reshape of reshape", b_reshape2, 1);
    EACH(ALL, "reshape there and back", b_reshape_back, 0);
    EACH(ALL, "expand of expand", b_expand2, 1);
    EACH(ALL, "full slice", b_slice_full, 0);
    EACH(ALL, "zero pad", b_pad0, 0);
    EACH(ALL, "views of a constant", b_const_views, 1);
    EACH(ALL, "strided slice stays", b_slice_step2, 1);
    EACH(ALL, "cast of expand", b_cast_expand, 2);
}

/* ------------------------------------------------------------ reductions */

/* sum over the broadcast axis of [1,4] -> [3,4]: x*3 (+0 for floats) */
static ir_node *b_sum_bcast(rlx_dtype dt) { return red(IR_OP_SUM, shaped(IR_OP_EXPAND, buf(dt, 2, S14), 2, S34), 1); }
/* sum over all axes: sum(x, axis 1) * 3 */
static ir_node *b_sum_bcast_all(rlx_dtype dt)
{
    return red(IR_OP_SUM, shaped(IR_OP_EXPAND, buf(dt, 2, S14), 2, S34), 3);
}
/* [1,1,4] -> [2,3,4] summed over axis 1: the kept axis 0 is broadcast again */
static ir_node *b_sum_keep_bcast(rlx_dtype dt)
{
    static const int64_t s0[3] = {1, 1, 4}, s1[3] = {2, 3, 4};
    return red(IR_OP_SUM, shaped(IR_OP_EXPAND, buf(dt, 3, s0), 3, s1), 2);
}
/* a sum over size-1 axes is elementwise */
static ir_node *b_sum_size1(rlx_dtype dt)
{
    static const int64_t s[3] = {2, 1, 4};
    return red(IR_OP_SUM, buf(dt, 3, s), 2);
}
static ir_node *b_max_bcast(rlx_dtype dt) { return red(IR_OP_RMAX, shaped(IR_OP_EXPAND, buf(dt, 2, S14), 2, S34), 1); }
static ir_node *b_min_bcast(rlx_dtype dt) { return red(IR_OP_RMIN, shaped(IR_OP_EXPAND, buf(dt, 2, S14), 2, S34), 1); }
static ir_node *b_argmax_bcast(rlx_dtype dt)
{
    return red(IR_OP_ARGMAX, shaped(IR_OP_EXPAND, buf(dt, 2, S14), 2, S34), 1);
}
static ir_node *b_sum_empty(rlx_dtype dt)
{
    static const int64_t s[2] = {0, 4};
    return red(IR_OP_SUM, buf(dt, 2, s), 1);
}
static ir_node *b_sum_const(rlx_dtype dt) { return red(IR_OP_SUM, cst(dt, 2, S34, -0.5), 3); }
static ir_node *b_sum_const_inexact(rlx_dtype dt) { return red(IR_OP_SUM, cst(dt, 2, S34, 0.1), 3); }
/* The CONST rlx_full(dt, 1e300) makes: the dtype's maximum as a double,
 * 2^63 for i64, which no int64_t holds (found by fuzz_api: the fold
 * converted it to int64_t, undefined, and summed -2^63 on x86). */
static ir_node *b_sum_const_max(rlx_dtype dt)
{
    rlx_scope_begin();
    ir_node *x = ir_retain((ir_node *)rlx_full(dt, 2, S34, 1e300)); /* outlives the scope */
    rlx_scope_end();
    return red(IR_OP_SUM, x, 3);
}
static ir_node *b_max_const(rlx_dtype dt) { return red(IR_OP_RMAX, cst(dt, 2, S34, -0.0), 1); }
/* the integer sum the tensor layer builds: cast to i64, then sum */
static ir_node *b_sum_cast_bcast(rlx_dtype dt)
{
    return red(IR_OP_SUM, cast(shaped(IR_OP_EXPAND, buf(dt, 2, S14), 2, S34), RLX_I64), 3);
}
static ir_node *b_sum_plain(rlx_dtype dt) { return red(IR_OP_SUM, buf(dt, 2, S24), 1); }
static ir_node *b_prod_bcast(rlx_dtype dt)
{
    return red(IR_OP_PROD, shaped(IR_OP_EXPAND, buf(dt, 2, S14), 2, S34), 1);
}

TEST(reductions_over_broadcasts)
{
    /* floats: x*3 + 0 (the +0 gives the reference's +0 for -0 copies) */
    EACH(FLOATS, "sum over a broadcast", b_sum_bcast, 4);
    check("sum over a broadcast", b_sum_bcast, RLX_I32, 2); /* x*3, wrapping */
    check("sum over a broadcast", b_sum_bcast, RLX_I64, 2);
    check("sum over a broadcast", b_sum_bcast, RLX_BOOL, 0); /* a bool sum of copies of b is b */
    float_vals = F_SMOOTH; /* partial sums exact: reassociation is invisible */
    EACH(FLOATS, "sum over a broadcast and an axis", b_sum_bcast_all, 3); /* sum(x, 1) * 3 */
    float_vals = F_VALS;
    check("sum over a broadcast and an axis", b_sum_bcast_all, RLX_I64, 3);
    check("sum over a broadcast and an axis", b_sum_bcast_all, RLX_I32, 3);
    EACH(FLOATS, "sum keeping a broadcast axis", b_sum_keep_bcast, 5);
    check("sum keeping a broadcast axis", b_sum_keep_bcast, RLX_I64, 3);
    EACH(FLOATS, "sum over size-1 axes", b_sum_size1, 2);
    check("sum over size-1 axes", b_sum_size1, RLX_I64, 0);
    EACH(ALL, "max over a broadcast", b_max_bcast, 0);
    EACH(ALL, "min over a broadcast", b_min_bcast, 0);
    EACH(ALL, "argmax over a broadcast", b_argmax_bcast, 1);
    EACH(ALL, "sum over an empty axis", b_sum_empty, 1);
    EACH(NUMERIC, "sum of a constant", b_sum_const, 1);
    EACH(NUMERIC, "max of a constant", b_max_const, 1);
    check_tol("sum of 0.1 (one product, not 12 roundings)", b_sum_const_inexact, RLX_F64, 1, 1e-15);
    check("sum of 0.1", b_sum_const_inexact, RLX_F32, 1);
    check("sum of the largest integer", b_sum_const_max, RLX_I64, 1);
    check("sum of the largest integer", b_sum_const_max, RLX_I32, 1);
    /* sum(cast(x), 1) * 3: the cast moved below the expand */
    check("int sum over a broadcast", b_sum_cast_bcast, RLX_BOOL, 4);
    check("int sum over a broadcast", b_sum_cast_bcast, RLX_I32, 4);
    /* not broadcasts: nothing to do */
    EACH(NUMERIC, "plain sum", b_sum_plain, 1);
    EACH(NUMERIC, "prod over a broadcast", b_prod_bcast, 2);
}

/* max over an empty axis is not folded (the reference's identity stays) */
TEST(empty_max_not_folded)
{
    static const int64_t s[2] = {0, 4};
    ir_node *r = red(IR_OP_RMAX, buf(RLX_F32, 2, s), 1), *out = NULL;
    char err[200];
    CHECK(simp_into(&r, 1, &out, err, sizeof err) == RLX_OK);
    CHECK(out == r);
    ir_release(out);
    ir_release(r);
}

/* ones(2^23, 2^23).sum(): 2^46 copies, folded instead of looped over */
TEST(huge_broadcast_sum)
{
    static const int64_t s[2] = {(int64_t)1 << 23, (int64_t)1 << 23};
    static const rlx_dtype dts[] = {RLX_F64, RLX_F32, RLX_I64, RLX_I32, RLX_BOOL};
    backend("jit");
    for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
        rlx_tensor *t = rlx_sum(rlx_ones(dts[i], 2, s), NULL, 0, false);
        double v = 0;
        CHECK(rlx_item(t, &v) == RLX_OK);
        CHECK(v == 0x1p46);
        rlx_tensor *m = rlx_mean(rlx_ones(dts[i], 2, s), NULL, 0, false);
        CHECK(rlx_item(m, &v) == RLX_OK);
        CHECK(v == 1);
    }
    /* a broadcast buffer row summed over 2^40 copies */
    static const int64_t row[2] = {1, 8}, big[2] = {(int64_t)1 << 40, 8};
    ir_node *x = buf(RLX_F64, 2, row);
    rlx_tensor *c = rlx_sum(rlx_broadcast_to((rlx_tensor *)x, 2, big), (const int[]){0}, 1, false);
    ir_release(x);
    double got[8];
    CHECK(rlx_read_f64(c, got, 8) == RLX_OK);
    for (int i = 0; i < 8; i++)
        CHECK(same_value(RLX_F64, (const char *)&got[i], (const char *)&(double){F_VALS[i] * 0x1p40 + 0.0}, 0, 0));
    backend("ref");
}

/* ------------------------------------------------------ deep chains, OOM */

enum { CHAIN = 100000 };

static ir_node *b_chain_mul1(rlx_dtype dt)
{
    ir_node *x = buf(dt, 1, (const int64_t[]){4}), *one = cst_like(x, 1);
    for (int i = 0; i < CHAIN && x; i++)
        x = op2(IR_OP_MUL, x, ir_retain(one));
    ir_release(one);
    return x;
}

static ir_node *b_chain_neg(rlx_dtype dt)
{
    ir_node *x = buf(dt, 1, (const int64_t[]){4});
    for (int i = 0; i < CHAIN && x; i++)
        x = op1(IR_OP_NEG, x, NULL);
    return x;
}

TEST(deep_chains)
{
    check("100,000 x*1", b_chain_mul1, RLX_F32, 0);
    check("100,000 negations", b_chain_neg, RLX_I64, 0);
    /* 100,000 additions of a constant to a constant: one constant */
    backend("jit");
    rlx_tensor *x = rlx_ones(RLX_F64, 1, (const int64_t[]){4});
    for (int i = 0; i < CHAIN; i++)
        x = rlx_add_s(x, 1.0);
    ir_node *root = (ir_node *)x, *out = NULL;
    char err[200];
    CHECK(simp_count(&root, 1) == CHAIN + 1); /* the adds and one constant 1 */
    CHECK(simp_into(&root, 1, &out, err, sizeof err) == RLX_OK);
    CHECK(out && out->op == IR_OP_CONST && simp_count(&out, 1) == 1);
    ir_release(out);
    double v[4] = {0};
    CHECK(rlx_read_f64(x, v, 4) == RLX_OK);
    for (int i = 0; i < 4; i++)
        CHECK(v[i] == CHAIN + 1);
    /* a chain with nothing to simplify comes back as itself */
    ir_node *y = buf(RLX_F64, 1, (const int64_t[]){4}), *c = cst_like(y, 1.5);
    for (int i = 0; i < CHAIN && y; i++)
        y = op2(IR_OP_ADD, y, ir_retain(c));
    ir_release(c);
    CHECK(simp_into(&y, 1, &out, err, sizeof err) == RLX_OK);
    CHECK(out == y && simp_count(&out, 1) == CHAIN + 1);
    ir_release(out);
    ir_release(y);
    backend("ref");
}

/* A realization through the JIT that simplifies: x*1 inside a sum over a
 * broadcast, a double negation, a constant expression. */
static int simp_workload(void)
{
    rlx_scope_begin();
    static const float xv[4] = {1.5f, -0.0f, 4, -2};
    rlx_tensor *x = rlx_from_data(RLX_F32, 2, (const int64_t[]){1, 4}, xv);
    rlx_tensor *y = rlx_sum(rlx_broadcast_to(rlx_mul_s(x, 1.0), 2, (const int64_t[]){3, 4}), (const int[]){0}, 1,
                            false);
    rlx_tensor *z = rlx_add(y, rlx_neg(rlx_neg(rlx_reshape(x, 1, (const int64_t[]){4}))));
    rlx_tensor *w = rlx_add_s(rlx_mul_s(rlx_full(RLX_F32, 1, (const int64_t[]){4}, 2), 3), 1);
    rlx_tensor *r = rlx_add(z, w);
    float v[4];
    int ok = r && rlx_read_f32(r, v, 4) == RLX_OK;
    for (int i = 0; ok && i < 4; i++)
        ok = v[i] == xv[i] * 4 + 7;
    rlx_scope_end();
    return ok;
}

TEST(allocation_failures)
{
    backend("jit");
    CHECK(simp_workload());
    ALLOC_WALK(simp_workload, 20);
    backend("ref");
}

/* Several roots, some simplifying to one node or to a realized buffer. */
TEST(many_roots_published)
{
    backend("jit");
    rlx_tensor *x = rlx_from_data(RLX_F64, 1, (const int64_t[]){3}, (const double[]){1, NAN, -0.0});
    rlx_tensor *r[4] = {rlx_mul_s(x, 1), rlx_div_s(x, 1), rlx_neg(rlx_neg(x)), rlx_add_s(x, 1)};
    CHECK(rlx_realize_many(r, 4) == RLX_OK);
    for (int k = 0; k < 4; k++) {
        double v[3];
        CHECK(rlx_is_realized(r[k]));
        CHECK(rlx_read_f64(r[k], v, 3) == RLX_OK);
        CHECK(v[0] == (k == 3 ? 2 : 1) && isnan(v[1]));
        CHECK(k == 3 ? v[2] == 1 : (v[2] == 0 && signbit(v[2])));
    }
    backend("ref");
}

/* ----------------------------------------------------- a training step */

enum { B = 8, IN = 3, H = 16, OUT = 4, NP = 4 };

/* Deterministic values in [lo, hi) from a local generator, so the step can
 * be built twice from the same data. */
static rlx_tensor *det(uint64_t *st, int rank, const int64_t *shape, double lo, double hi)
{
    int64_t n = test_numel(rank, shape);
    float v[H * H];
    for (int64_t i = 0; i < n; i++) {
        *st = *st * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (float)(lo + (hi - lo) * (double)(*st >> 11) * 0x1p-53);
    }
    return rlx_from_data(RLX_F32, rank, shape, v);
}

/* loss and SGD-updated parameters of a 2-layer tanh MLP (roots[0..4]). */
static void train_step(rlx_tensor **roots)
{
    static const int64_t ps[NP][2] = {{H, IN}, {H, 0}, {OUT, H}, {OUT, 0}};
    uint64_t st = 12345;
    rlx_tensor *p[NP], *g[NP];
    for (int i = 0; i < NP; i++)
        p[i] = det(&st, ps[i][1] ? 2 : 1, ps[i], -0.5, 0.5);
    rlx_tensor *x = det(&st, 2, (const int64_t[]){B, IN}, -1, 1);
    int32_t yv[B];
    for (int i = 0; i < B; i++)
        yv[i] = i % OUT;
    rlx_tensor *y = rlx_from_data(RLX_I32, 1, (const int64_t[]){B}, yv);
    rlx_tensor *h = rlx_linear_act(x, p[0], p[1], RLX_ACT_TANH);
    roots[0] = rlx_mean_all(rlx_softmax_cross_entropy_with_logits(rlx_linear(h, p[2], p[3]), y));
    if (rlx_grad(roots[0], p, NP, g) != RLX_OK) {
        test_fail(__FILE__, __LINE__, "rlx_grad: %s", rlx_last_error());
        for (int i = 0; i < NP; i++)
            roots[1 + i] = NULL;
        return;
    }
    for (int i = 0; i < NP; i++)
        roots[1 + i] = rlx_sub(p[i], rlx_mul_s(g[i], 0.1));
}

TEST(training_step_shrinks)
{
    enum { NR = 1 + NP };
    rlx_tensor *roots[NR];
    double *want[NR];
    int64_t n[NR];
    backend("ref");
    rlx_scope_begin();
    train_step(roots);
    for (int i = 0; i < NR; i++)
        want[i] = roots[i] ? test_values(roots[i], &n[i]) : NULL;
    rlx_scope_end();
    backend("jit");
    train_step(roots);
    ir_node *nodes[NR], *out[NR];
    for (int i = 0; i < NR; i++) {
        nodes[i] = (ir_node *)roots[i];
        if (!nodes[i]) {
            test_fail(__FILE__, __LINE__, "training step root %d: %s", i, rlx_last_error());
            return;
        }
    }
    char err[200];
    long before = simp_count(nodes, NR), after = -1;
    if (simp_into(nodes, NR, out, err, sizeof err) == RLX_OK) {
        after = simp_count(out, NR);
        for (int i = 0; i < NR; i++)
            ir_release(out[i]);
    }
    if (!(after > 0 && after < before))
        test_fail(__FILE__, __LINE__, "training step: %ld nodes, %ld simplified", before, after);
    CHECK(rlx_realize_many(roots, NR) == RLX_OK);
    for (int i = 0; i < NR; i++) {
        int64_t m = 0;
        double *got = want[i] ? test_values(roots[i], &m) : NULL;
        for (int64_t k = 0; got && k < m && k < n[i]; k++)
            if (!test_close(got[k], want[i][k], 1e-4, 1e-6)) {
                test_fail(__FILE__, __LINE__, "training step root %d element %lld: %.9g, reference %.9g", i,
                          (long long)k, got[k], want[i][k]);
                break;
            }
        CHECK(got && m == n[i]);
        free(got);
        free(want[i]);
    }
    backend("ref");
}

TEST_MAIN(T(identities_fire), T(identities_that_must_not_fire), T(constant_folding), T(constant_folding_shapes),
          T(movement), T(reductions_over_broadcasts), T(empty_max_not_folded), T(huge_broadcast_sum),
          T(deep_chains), T(allocation_failures), T(many_roots_published), T(training_step_shrinks))
