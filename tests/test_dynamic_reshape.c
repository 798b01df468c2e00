/*
 * test_dynamic_reshape.c — reshapes whose target dims name symbols
 * (rlx_reshape with a dim <= -2: the bound size of that rlx_input symbol),
 * and the gradient of a gather whose index has several dynamic dims.
 * Each expression is traced over inputs x [B, C] and y [S, C] (symbols B
 * and S), compiled with its gradients and run at many (B, S) bindings, 0
 * and 1 included; every output must equal the same expression built over
 * the bound values (static shapes, where the symbols are the sizes) on the
 * reference backend, on both backends, in f32 and f64, and in f64 central
 * differences check gradient entries of both inputs.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dyn_check.h"

#define SB ((int64_t)-2) /* symbol B: x's rows */
#define SS ((int64_t)-3) /* symbol S: y's rows */

/* Dim d of t, or sym when it is dynamic: a traced expression names B and
 * S where the same expression over static values has their sizes (as
 * PyTorch code writes y.view(B, S, D) with symbolic ints). */
static int64_t sz(rlx_tensor *t, int d, int64_t sym)
{
    int64_t v = rlx_dim(t, d);
    return v >= 0 ? v : sym;
}

/* [B, S, C] */
static rlx_tensor *outer3(rlx_tensor *x, rlx_tensor *y) { return rlx_mul(rlx_unsqueeze(x, 1), rlx_unsqueeze(y, 0)); }

/* [B, S, C] -> [B*S, C] -> a linear -> [B, S, C] by name, joined with
 * the unflattened tensor (tracing took their -1s as equal) */
static rlx_tensor *g_split_back(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *o = outer3(x, y);
    rlx_tensor *w = rlx_reshape(rlx_mul_s(rlx_arange(rlx_dtype_of(x), 1, 1 + C * C, 1), 0.1), 2, (int64_t[]){C, C});
    rlx_tensor *h = rlx_tanh(rlx_linear(rlx_reshape(o, 2, (int64_t[]){-1, C}), w, NULL));
    return rlx_add(rlx_reshape(h, 3, (int64_t[]){sz(x, 0, SB), sz(y, 0, SS), C}), o);
}
/* [B, S, C] read as [S, B, C] (the same elements, not a transpose), then
 * y broadcast over the B now in the middle */
static rlx_tensor *g_swap(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *r = rlx_reshape(outer3(rlx_exp(x), y), 3, (int64_t[]){sz(y, 0, SS), sz(x, 0, SB), C});
    return rlx_mul(r, rlx_unsqueeze(rlx_cos(y), 1));
}
/* [B*S*C] -> [B, -1]: S*C inferred from the count (B >= 1: with B = 0 a
 * -1 beside it is ambiguous, static or bound) */
static rlx_tensor *g_infer(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *flat = rlx_reshape(outer3(x, rlx_sin(y)), 1, (int64_t[]){-1});
    return rlx_softmax(rlx_reshape(flat, 2, (int64_t[]){sz(x, 0, SB), -1}), -1);
}
/* [B, S, 6] flattened to [-1, 6] and split into heads [B, S, 2, 3] by name */
static rlx_tensor *g_heads(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *o = outer3(x, y);
    rlx_tensor *o6 = rlx_cat((rlx_tensor *[]){o, rlx_sin(o)}, 2, 2);
    rlx_tensor *f = rlx_exp(rlx_reshape(o6, 2, (int64_t[]){-1, 6}));
    rlx_tensor *h = rlx_reshape(f, 4, (int64_t[]){sz(x, 0, SB), sz(y, 0, SS), 2, 3});
    return rlx_sum(rlx_mul(h, h), (int[]){2}, 1, false);
}
/* a named reshape reshaped again: by the -1 rules (unsqueeze, rlx_dim's
 * -1s), by name once more (B and S swapped), and back */
static rlx_tensor *g_chain(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *o = outer3(x, y);
    rlx_tensor *r = rlx_reshape(rlx_sin(rlx_reshape(o, 2, (int64_t[]){-1, C})), 3,
                                (int64_t[]){sz(x, 0, SB), sz(y, 0, SS), C});
    rlx_tensor *u = rlx_reshape(rlx_unsqueeze(r, 1), 3, (int64_t[]){rlx_dim(r, 0), rlx_dim(r, 1), C});
    rlx_tensor *s = rlx_reshape(rlx_exp(u), 3, (int64_t[]){sz(y, 0, SS), sz(x, 0, SB), C});
    rlx_tensor *back = rlx_reshape(rlx_mul(s, s), 3, (int64_t[]){sz(x, 0, SB), sz(y, 0, SS), C});
    return rlx_add(back, rlx_mul(u, o));
}
/* a named reshape whose count does not follow from the source alone:
 * [B*S*C] -> [S, C, B] */
static rlx_tensor *g_rotate(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *flat = rlx_flatten(outer3(rlx_tanh(x), y));
    rlx_tensor *r = rlx_reshape(flat, 3, (int64_t[]){sz(y, 0, SS), C, sz(x, 0, SB)});
    return rlx_sum(rlx_mul(r, r), (int[]){1}, 1, true);
}

/* Gathers whose index has two dynamic dims, from tensors with dynamic
 * dims off the gather axis: the index [B, S] (or [S, B]) of positions
 * (b + 2s) mod C, every other one negative (counted from the end). */
static rlx_tensor *index_bs(rlx_tensor *x, rlx_tensor *y, bool swap)
{
    rlx_tensor *b = rlx_arange_of(x, 0, RLX_I64), *s = rlx_arange_of(y, 0, RLX_I64);
    rlx_tensor *bs = rlx_add(rlx_unsqueeze(b, 1), rlx_mul_s(rlx_unsqueeze(s, 0), 2)); /* [B, S] */
    rlx_tensor *k = rlx_rem(bs, rlx_scalar(RLX_I64, C));
    k = rlx_where(rlx_eq(rlx_rem(bs, rlx_scalar(RLX_I64, 2)), rlx_scalar(RLX_I64, 1)), rlx_add_s(k, -C), k);
    return swap ? rlx_transpose(k, 0, NULL) : k;
}
/* [B, S, C] along its static axis: [B, S, B, S] */
static rlx_tensor *g_gather_bs(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *o = rlx_gather(rlx_exp(outer3(x, y)), index_bs(x, y, false), 2);
    return rlx_sum(rlx_mul(o, o), (int[]){3}, 1, false);
}
/* [B, C, S] along its middle axis with an [S, B] index: [B, S, B, S];
 * and index_select-like use of a [B, S] index on [B, C] */
static rlx_tensor *g_gather_mid(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *t = rlx_transpose(outer3(x, rlx_sin(y)), 3, (int[]){0, 2, 1});
    rlx_tensor *a = rlx_gather(t, index_bs(x, y, true), 1);
    rlx_tensor *b = rlx_gather(rlx_tanh(x), index_bs(x, y, false), 1); /* [B, B, S] */
    return rlx_add(rlx_sum(a, (int[]){1}, 1, false), rlx_mul(b, b));
}

TEST(grad_gather_index_with_two_dynamic_dims)
{
    dyn_check("gather_bs", g_gather_bs, true, SB, SS, 0, 0);
    dyn_check("gather_mid", g_gather_mid, true, SB, SS, 0, 0);
    /* an index out of range: the gradient alone is RLX_E_ARG too, as the
     * gather (nothing lands in another row) */
    EACH_BACKEND(b)
    {
        rlx_tensor *x = rlx_input("x", RLX_F64, 2, (int64_t[]){SB, C}), *y = rlx_input("y", RLX_F64, 2, (int64_t[]){SS, C});
        rlx_tensor *o = outer3(x, y), *g = NULL;
        rlx_tensor *bad = rlx_add_s(index_bs(x, y, false), C); /* C..2C-1 where non-negative */
        CHECK_EQ_INT(rlx_grad(rlx_sum(rlx_gather(o, bad, 2), NULL, 0, false), &x, 1, &g), RLX_OK);
        rlx_program *p = rlx_compile(&g, 1);
        CHECK(p != NULL);
        rlx_tensor *xv = trand(RLX_F64, 2, (int64_t[]){2, C}, -1, 1), *yv = trand(RLX_F64, 2, (int64_t[]){3, C}, -1, 1);
        rlx_tensor *out = NULL;
        CHECK_ERR(rlx_program_run(p, (rlx_binding[]){{"x", xv}, {"y", yv}}, 2, &out), RLX_E_ARG, "rlx_program_run");
        CHECK(out == NULL);
        rlx_program_free(p);
    }
}

/* an einsum over a named reshape ([B*S, C] -> [B, S, C]) and its result
 * named again */
static rlx_tensor *g_einsum(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *flat = rlx_reshape(rlx_exp(outer3(x, y)), 2, (int64_t[]){-1, C});
    rlx_tensor *r = rlx_reshape(flat, 3, (int64_t[]){sz(x, 0, SB), sz(y, 0, SS), C});
    rlx_tensor *w = rlx_reshape(rlx_mul_s(rlx_arange(rlx_dtype_of(x), 0, 2 * C, 1), 0.2), 2, (int64_t[]){C, 2});
    rlx_tensor *e = rlx_einsum("bsc,cd->bsd", (rlx_tensor *[]){r, w}, 2);
    rlx_tensor *f = rlx_reshape(rlx_sin(e), 2, (int64_t[]){-1, 2});
    return rlx_mul(rlx_reshape(f, 3, (int64_t[]){sz(x, 0, SB), sz(y, 0, SS), 2}), e);
}

TEST(reshape_names_symbols)
{
    dyn_check("einsum", g_einsum, true, SB, SS, 0, 0);
    dyn_check("split_back", g_split_back, true, SB, SS, 0, 0);
    dyn_check("swap", g_swap, true, SB, SS, 0, 0);
    dyn_check("infer", g_infer, true, SB, SS, 1, 0);
    dyn_check("heads", g_heads, true, SB, SS, 0, 0);
    dyn_check("chain", g_chain, true, SB, SS, 0, 0);
    dyn_check("rotate", g_rotate, true, SB, SS, 0, 0);
}

/* A transformer-like block with B and S both dynamic: [B, S, D] @ W^T
 * (W broadcast over the dynamic batch: its gradient transposes the
 * broadcast) -> causal attention over S with two heads -> [B*S, D] ->
 * linear -> gelu -> [B, S, D] by name -> residual and layer norm (the
 * attention's gradient splits into heads a cotangent that came back from
 * [B*S, D]); one program (with the gradients of X and W) run at several
 * (B, S). */
enum { D = 4 };
static rlx_tensor *block(rlx_tensor *X, rlx_tensor *W, int64_t b, int64_t s)
{
    rlx_tensor *bias = rlx_mul_s(rlx_arange(rlx_dtype_of(W), 0, D, 1), 0.25);
    rlx_tensor *q = rlx_matmul(X, rlx_transpose(W, 0, NULL));
    rlx_tensor *a = rlx_attention(q, X, X, 2, D / 2, RLX_MASK_CAUSAL, 0);
    rlx_tensor *h = rlx_gelu_tanh(rlx_linear(rlx_reshape(a, 2, (int64_t[]){-1, D}), W, bias));
    rlx_tensor *y = rlx_add(rlx_reshape(h, 3, (int64_t[]){b, s, D}), X);
    return rlx_layer_norm(y, NULL, NULL, 1e-5);
}

static double block_loss(const double *xd, int64_t b, int64_t s, const double *wd)
{
    double l = NAN;
    rlx_tensor *o = loss_of(block(tf64(3, (int64_t[]){b, s, D}, xd), tf64(2, (int64_t[]){D, D}, wd), b, s));
    if (rlx_read_f64(o, &l, 1) != RLX_OK)
        test_fail(__FILE__, __LINE__, "block loss: %s", rlx_last_error());
    return l;
}

TEST(transformer_block_dynamic_batch_and_sequence)
{
    static const int64_t bs[][2] = {{2, 3}, {0, 0}, {1, 1}, {0, 4}, {3, 0}, {1, 5}, {4, 1}, {3, 2}, {2, 3}};
    const rlx_dtype dts[] = {RLX_F32, RLX_F64};
    EACH_BACKEND(be)
    {
        for (int t = 0; t < 2; t++) {
            rlx_tensor *X = rlx_input("X", dts[t], 3, (int64_t[]){SB, SS, D});
            rlx_tensor *W = rlx_input("W", dts[t], 2, (int64_t[]){D, D}), *outs[4];
            outs[0] = block(X, W, SB, SS);
            outs[1] = loss_of(outs[0]);
            CHECK_EQ_INT(rlx_grad(outs[1], (rlx_tensor *[]){X, W}, 2, outs + 2), RLX_OK);
            rlx_program *p = rlx_compile(outs, 4);
            if (!p) {
                test_fail(__FILE__, __LINE__, "block (%d, %s): %s", be, rlx_dtype_name(dts[t]), rlx_last_error());
                continue;
            }
            rlx_tensor *wv = trand(dts[t], 2, (int64_t[]){D, D}, -1, 1);
            for (size_t k = 0; k < sizeof bs / sizeof *bs; k++) {
                int64_t b = bs[k][0], s = bs[k][1];
                rlx_tensor *xv = trand(dts[t], 3, (int64_t[]){b, s, D}, -2, 2), *got[4] = {0}, *want[4] = {0};
                if (rlx_program_run(p, (rlx_binding[]){{"X", xv}, {"W", wv}}, 2, got) != RLX_OK) {
                    test_fail(__FILE__, __LINE__, "block at (%lld, %lld): %s", (long long)b, (long long)s,
                              rlx_last_error());
                    continue;
                }
                CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
                want[0] = block(xv, wv, b, s);
                want[1] = loss_of(want[0]);
                CHECK_EQ_INT(rlx_grad(want[1], (rlx_tensor *[]){xv, wv}, 2, want + 2), RLX_OK);
                for (int o = 0; o < 4; o++) {
                    CHECK_EQ_INT(rlx_rank(got[o]), rlx_rank(want[o]));
                    for (int d = 0; d < rlx_rank(want[o]); d++)
                        CHECK_EQ_INT(rlx_dim(got[o], d), rlx_dim(want[o], d));
                    EXPECT_SAME(got[o], want[o], dts[t] == RLX_F32 ? 1e-4 : 1e-10);
                }
                if (dts[t] == RLX_F64 && b * s > 0) { /* central differences: an entry of X and of W */
                    double xd[5 * 5 * D], wd[D * D], gx[5 * 5 * D], gw[D * D], h = 1e-6;
                    int64_t n = b * s * D, ax = n - 2, aw = D + 1;
                    CHECK_EQ_INT(rlx_read_f64(xv, xd, (size_t)n), RLX_OK);
                    CHECK_EQ_INT(rlx_read_f64(wv, wd, D * D), RLX_OK);
                    CHECK_EQ_INT(rlx_read_f64(got[2], gx, (size_t)n), RLX_OK);
                    CHECK_EQ_INT(rlx_read_f64(got[3], gw, D * D), RLX_OK);
                    for (int w = 0; w < 2; w++) {
                        double *v = w ? wd : xd, g = w ? gw[aw] : gx[ax];
                        int64_t at = w ? aw : ax;
                        v[at] += h;
                        double lp = block_loss(xd, b, s, wd);
                        v[at] -= 2 * h;
                        double lm = block_loss(xd, b, s, wd);
                        v[at] += h;
                        double fd = (lp - lm) / (2 * h);
                        if (fabs(fd - g) > 1e-5 * (1 + fabs(fd)))
                            test_fail(__FILE__, __LINE__, "block at (%lld, %lld): d/d%s finite difference %g, gradient %g",
                                      (long long)b, (long long)s, w ? "W" : "X", fd, g);
                    }
                }
                CHECK_EQ_INT(rlx_set_option("backend", be ? "jit" : "ref"), RLX_OK);
            }
            rlx_program_free(p);
        }
    }
}

/* failed (the call returned NULL or an error) with status want and a
 * message that names fn and holds t1 and t2 (NULL: anything). */
static void expect_err(const char *file, int line, const char *call, bool failed, rlx_status want, const char *fn,
                       const char *t1, const char *t2)
{
    const char *m = rlx_last_error();
    if (!failed || rlx_last_status() != want || strncmp(m, fn, strlen(fn)) != 0 || (t1 && !strstr(m, t1)) ||
        (t2 && !strstr(m, t2)))
        test_fail(file, line, "%s: failed %d, status %d (want %d), message '%s' (want %s, %s, %s)", call, failed,
                  (int)rlx_last_status(), (int)want, m, fn, t1 ? t1 : "", t2 ? t2 : "");
    rlx_clear_error();
}
#define EXPECT_ERR(failed, want, fn, t1, t2) \
    (rlx_clear_error(), expect_err(__FILE__, __LINE__, #failed, (failed), (want), (fn), (t1), (t2)))

/* A reshape naming symbols only another input carries: v [N, C] (N
 * anonymous) read as [B, S, C] by the symbols of a mask m [B, S]. */
TEST(reshape_symbol_of_another_input)
{
    EACH_BACKEND(b)
    {
        rlx_tensor *v = rlx_input("v", RLX_F64, 2, (int64_t[]){-1, C}), *m = rlx_input("m", RLX_F64, 2, (int64_t[]){SB, SS});
        rlx_tensor *out = rlx_mul(rlx_reshape(v, 3, (int64_t[]){SB, SS, C}), rlx_unsqueeze(m, 2));
        rlx_program *p = rlx_compile(&out, 1);
        CHECK(p != NULL);
        static const int64_t bs[][2] = {{2, 3}, {0, 5}, {1, 1}, {4, 0}, {3, 2}};
        for (int k = 0; p && k < 5; k++) {
            int64_t nb = bs[k][0], ns = bs[k][1];
            rlx_tensor *vv = trand(RLX_F64, 2, (int64_t[]){nb * ns, C}, -1, 1);
            rlx_tensor *mv = trand(RLX_F64, 2, (int64_t[]){nb, ns}, -1, 1), *got = NULL;
            CHECK_EQ_INT(rlx_program_run(p, (rlx_binding[]){{"v", vv}, {"m", mv}}, 2, &got), RLX_OK);
            rlx_tensor *want = rlx_mul(rlx_reshape(vv, 3, (int64_t[]){nb, ns, C}), rlx_unsqueeze(mv, 2));
            CHECK(got && rlx_rank(got) == 3 && rlx_dim(got, 0) == nb && rlx_dim(got, 1) == ns);
            if (got)
                EXPECT_SAME(got, want, 1e-12);
        }
        /* v's count is not B*S */
        rlx_tensor *vv = trand(RLX_F64, 2, (int64_t[]){5, C}, -1, 1), *mv = trand(RLX_F64, 2, (int64_t[]){2, 3}, -1, 1);
        rlx_tensor *got = NULL;
        expect_err(__FILE__, __LINE__, "run with N 5, B 2, S 3",
                   p && rlx_program_run(p, (rlx_binding[]){{"v", vv}, {"m", mv}}, 2, &got) != RLX_OK && !got,
                   RLX_E_SHAPE, "rlx_program_run", "symbol -2 bound to 2, symbol -3 bound to 3", "15 elements");
        rlx_program_free(p);
    }
}

/* Bad uses: each an error with a message, never a crash. */
TEST(reshape_symbol_errors)
{
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){SB, C}), *y = rlx_input("y", RLX_F32, 2, (int64_t[]){SS, C});
    rlx_tensor *flat = rlx_reshape(outer3(x, y), 2, (int64_t[]){-1, C}), *out = NULL;
    /* a symbol over a static x: nothing can bind it */
    EXPECT_ERR(!rlx_reshape(rlx_zeros(RLX_F32, 2, (int64_t[]){2, 3}), 2, (int64_t[]){SB, 3}), RLX_E_SHAPE,
               "rlx_reshape", "symbol -2", "[2,3]");
    /* symbols and several -1s */
    EXPECT_ERR(!rlx_reshape(flat, 4, (int64_t[]){SB, -1, -1, C}), RLX_E_UNSUPPORTED, "rlx_reshape", "[-2,-1,-1,3]",
               "several -1s");
    /* a -1 beside static dims of 0 elements */
    EXPECT_ERR(!rlx_reshape(flat, 3, (int64_t[]){SB, 0, -1}), RLX_E_SHAPE, "rlx_reshape", "[-2,0,-1]", NULL);
    /* the symbols x carries cancel: the static parts must agree (4 vs 8
     * elements; 3 does not divide 8) */
    rlx_tensor *z = rlx_input("z", RLX_F32, 3, (int64_t[]){SB, SS, 8});
    EXPECT_ERR(!rlx_reshape(z, 3, (int64_t[]){SS, SB, 4}), RLX_E_SHAPE, "rlx_reshape", "[-3,-2,4]", "[-1,-1,8]");
    EXPECT_ERR(!rlx_reshape(z, 4, (int64_t[]){SS, SB, -1, 3}), RLX_E_SHAPE, "rlx_reshape", "[-3,-2,-1,3]", "divide");
    CHECK(rlx_reshape(z, 4, (int64_t[]){SS, SB, 2, 4}) != NULL);
    CHECK(rlx_reshape(z, 3, (int64_t[]){SS, -1, 4}) != NULL);
    CHECK(rlx_reshape(z, 3, (int64_t[]){SS, -1, 3}) != NULL); /* (B unnamed: the -1 may hold 8B/3) */
    CHECK(rlx_reshape(z, 2, (int64_t[]){-7, 8}) != NULL);     /* a symbol z does not carry: rlx_compile checks */
    /* the traced shape says -1 where a symbol is named */
    rlx_tensor *r = rlx_reshape(flat, 3, (int64_t[]){SB, SS, C});
    CHECK(r && rlx_dim(r, 0) == -1 && rlx_dim(r, 1) == -1 && rlx_dim(r, 2) == C);

    rlx_tensor *u = rlx_reshape(flat, 3, (int64_t[]){SB, -7, C});
    CHECK(u != NULL);
    EACH_BACKEND(b)
    {
        /* a symbol no input carries: rlx_compile names it */
        EXPECT_ERR(!rlx_compile(&u, 1), RLX_E_SHAPE, "rlx_compile", "symbol -7", "[-2,-7,3]");

        /* a count that does not match at a binding: [B*S, C] as [B, B, C] */
        rlx_tensor *bb = rlx_exp(rlx_reshape(flat, 3, (int64_t[]){SB, SB, C}));
        rlx_program *p = rlx_compile(&bb, 1);
        CHECK(p != NULL);
        static const int64_t runs[][2] = {{3, 3}, {2, 5}, {3, 3}, {0, 0}, {0, 4}};
        for (int k = 0; p && k < 5; k++) {
            int64_t nb = runs[k][0], ns = runs[k][1];
            rlx_tensor *xv = trand(RLX_F32, 2, (int64_t[]){nb, C}, -1, 1), *yv = trand(RLX_F32, 2, (int64_t[]){ns, C}, -1, 1);
            rlx_clear_error();
            out = NULL;
            rlx_status st = rlx_program_run(p, (rlx_binding[]){{"x", xv}, {"y", yv}}, 2, &out);
            if (nb * nb == nb * ns) { /* (B = 0 fits any S: no elements either way) */
                CHECK_EQ_INT(st, RLX_OK);
                CHECK(out && rlx_dim(out, 0) == nb && rlx_dim(out, 1) == nb);
                continue;
            }
            expect_err(__FILE__, __LINE__, "run at B 2, S 5", st != RLX_OK && !out, RLX_E_SHAPE, "rlx_program_run",
                       "symbol -2 bound to 2: [2,2,3] has 12", "30 elements");
        }
        rlx_program_free(p);

        /* a -1 beside a symbol bound to 0: ambiguous, as the static reshape */
        rlx_tensor *inf = rlx_reshape(rlx_flatten(outer3(x, y)), 2, (int64_t[]){SB, -1});
        p = rlx_compile(&inf, 1);
        CHECK(p != NULL);
        rlx_tensor *xv = trand(RLX_F32, 2, (int64_t[]){0, C}, -1, 1), *yv = trand(RLX_F32, 2, (int64_t[]){4, C}, -1, 1);
        EXPECT_ERR(p && rlx_program_run(p, (rlx_binding[]){{"x", xv}, {"y", yv}}, 2, &out) != RLX_OK, RLX_E_SHAPE,
                   "rlx_program_run", "infer", "symbol -2 bound to 0");
        rlx_program_free(p);
    }
}

TEST_MAIN(T(reshape_names_symbols), T(grad_gather_index_with_two_dynamic_dims), T(transformer_block_dynamic_batch_and_sequence), T(reshape_symbol_errors), T(reshape_symbol_of_another_input))
