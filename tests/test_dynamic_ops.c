/*
 * test_dynamic_ops.c — the ops and gradients that once refused dynamic
 * (-1) dims in compiled programs: each expression is traced over inputs
 * x [-1, C] and y [-1, C] (two independent lengths), compiled with its
 * gradients, and run at many pairs of lengths (0 and 1 included); every
 * output must equal the same expression built over the bound values
 * (static shapes) on the reference backend, on both backends, in f32 and
 * f64, and in f64 a central difference checks a gradient entry of each
 * input.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dyn_check.h"

/* 1. cats of several pieces of dynamic length (static ones between). */
static rlx_tensor *g_cat2(rlx_tensor *x, rlx_tensor *y) { return rlx_cat((rlx_tensor *[]){x, y}, 2, 0); }
static rlx_tensor *g_cat_mixed(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *s = rlx_full(rlx_dtype_of(x), 2, (int64_t[]){2, C}, 0.5);
    rlx_tensor *p[5] = {rlx_exp(y), x, s, rlx_mul_s(y, 3), rlx_tanh(x)};
    return rlx_cat(p, 5, 0);
}
static rlx_tensor *g_cat_axis1(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *a = rlx_transpose(x, 0, NULL), *b = rlx_transpose(rlx_sin(y), 0, NULL);
    return rlx_cat((rlx_tensor *[]){a, b, a}, 3, 1);
}
/* second order: the gradient of a cat, differentiated again */
static rlx_tensor *g_cat_twice(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *c = rlx_cat((rlx_tensor *[]){x, y, x}, 3, 0), *g[2];
    if (rlx_grad(rlx_sum(rlx_mul(rlx_mul(c, c), c), NULL, 0, false), (rlx_tensor *[]){x, y}, 2, g) != RLX_OK)
        return NULL;
    return rlx_cat(g, 2, 0);
}

/* 4. attention over past keys x and new keys y, both of dynamic length */
static rlx_tensor *kv_attention(rlx_tensor *x, rlx_tensor *y, rlx_mask mask)
{
    rlx_tensor *q = rlx_reshape(rlx_sin(rlx_arange(rlx_dtype_of(x), 1, 1 + 2 * C, 1)), 3, (int64_t[]){1, 2, C});
    rlx_tensor *k = rlx_unsqueeze(x, 0), *v = rlx_unsqueeze(rlx_sin(x), 0);
    rlx_tensor *k2 = rlx_unsqueeze(rlx_mul_s(y, 0.5), 0), *v2 = rlx_unsqueeze(rlx_cos(y), 0);
    rlx_attention_opts o = {.mask = mask};
    return rlx_attention_kv(q, k, v, k2, v2, 1, C, &o);
}
static rlx_tensor *g_kv(rlx_tensor *x, rlx_tensor *y) { return kv_attention(x, y, RLX_MASK_NONE); }
static rlx_tensor *g_kv_causal(rlx_tensor *x, rlx_tensor *y) { return kv_attention(x, y, RLX_MASK_CAUSAL); }

/* 2. slices of a dynamic axis with a step other than 1 (and partial
 * reversed ranges) */
static rlx_tensor *g_step2(rlx_tensor *x, rlx_tensor *y) { (void)y; return rlx_slice(x, 0, 1, RLX_END, 2); }
static rlx_tensor *g_steps(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *a = rlx_slice(x, 0, RLX_END, RLX_END, -2), *b = rlx_slice(y, 0, -1, 0, -3);
    rlx_tensor *c = rlx_slice(x, 0, 5, 1, -1), *d = rlx_slice(rlx_exp(y), 0, -4, RLX_END, 3);
    rlx_tensor *p[4] = {rlx_sum(a, NULL, 0, false), rlx_sum(rlx_mul(b, b), NULL, 0, false),
                        rlx_sum(rlx_sin(c), NULL, 0, false), rlx_sum(d, NULL, 0, false)};
    return rlx_add(rlx_add(p[0], p[1]), rlx_add(p[2], p[3]));
}
/* both axes sliced, the static one with a step too */
static rlx_tensor *g_step_2d(rlx_tensor *x, rlx_tensor *y)
{
    (void)y;
    return rlx_slice(rlx_slice(rlx_tanh(x), 1, 0, RLX_END, 2), 0, 2, RLX_END, 3);
}
static rlx_tensor *g_step_twice(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *s = rlx_slice(rlx_mul(x, rlx_exp(x)), 0, RLX_END, RLX_END, -2), *u = rlx_slice(y, 0, 1, RLX_END, 3);
    rlx_tensor *l = rlx_add(rlx_sum(rlx_mul(rlx_mul(s, s), s), NULL, 0, false), rlx_sum(rlx_exp(u), NULL, 0, false));
    rlx_tensor *g[2];
    if (rlx_grad(l, (rlx_tensor *[]){x, y}, 2, g) != RLX_OK)
        return NULL;
    return rlx_cat((rlx_tensor *[]){g[0], rlx_mul(g[1], g[1])}, 2, 0);
}

/* 3. gathers from tensors with dynamic dims off the gather axis */
static rlx_tensor *idx(const int64_t *v, int rank, const int64_t *shape) { return ti64(rank, shape, v); }
static rlx_tensor *g_gather_col(rlx_tensor *x, rlx_tensor *y)
{
    (void)y;
    return rlx_gather(x, idx((int64_t[]){2, -3, 2, 1}, 1, (int64_t[]){4}), 1);
}
static rlx_tensor *g_gather_2d_index(rlx_tensor *x, rlx_tensor *y)
{
    (void)y;
    return rlx_gather(rlx_sin(x), idx((int64_t[]){0, 2, 2, 1, 0, 0}, 2, (int64_t[]){2, 3}), 1);
}
static rlx_tensor *g_gather_scalar(rlx_tensor *x, rlx_tensor *y)
{
    (void)y;
    return rlx_gather(x, idx((int64_t[]){-1}, 0, NULL), 1);
}
/* an outer [-1, -1, C] gathered along its static axis and along y's axis */
static rlx_tensor *outer3(rlx_tensor *x, rlx_tensor *y) { return rlx_mul(rlx_unsqueeze(x, 1), rlx_unsqueeze(y, 0)); }
static rlx_tensor *g_gather_outer(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *o = outer3(x, y);
    rlx_tensor *a = rlx_gather(o, idx((int64_t[]){1, 1, 0}, 1, (int64_t[]){3}), 2);
    rlx_tensor *b = rlx_index_select(o, 1, idx((int64_t[]){0, -1, 0}, 1, (int64_t[]){3}));
    return rlx_add(rlx_sum(a, NULL, 0, false), rlx_sum(rlx_mul(b, b), NULL, 0, false));
}
/* a 2-D index along the static axis of [-1, -1, C]: its gradient merges
 * both dynamic dims (the reshape's ends carried, program.c) */
static rlx_tensor *g_gather_outer_2d(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *o = rlx_gather(rlx_exp(outer3(x, y)), idx((int64_t[]){2, 0, -1, 1}, 2, (int64_t[]){2, 2}), 2);
    return rlx_sum(rlx_mul(o, rlx_sin(o)), (int[]){3}, 1, false);
}
static rlx_tensor *g_gather_twice(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *o = rlx_gather(outer3(x, y), idx((int64_t[]){2, 0, 2}, 1, (int64_t[]){3}), 2), *g[2];
    if (rlx_grad(rlx_sum(rlx_mul(rlx_mul(o, o), o), NULL, 0, false), (rlx_tensor *[]){x, y}, 2, g) != RLX_OK)
        return NULL;
    return rlx_cat(g, 2, 0);
}

/* 5. tiling a dynamic axis; rolls of one by shifts beyond any size */
static rlx_tensor *g_tile(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *a = rlx_tile(rlx_exp(x), 0, 3), *b = rlx_tile(y, 0, 0), *c = rlx_tile(rlx_sin(y), 0, 1);
    return rlx_cat((rlx_tensor *[]){a, b, c}, 3, 0);
}
static rlx_tensor *g_tile_outer(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *o = outer3(x, y);
    return rlx_add(rlx_sum(rlx_tile(o, 1, 2), NULL, 0, false), rlx_sum(rlx_sin(rlx_tile(o, 0, 3)), NULL, 0, false));
}
static rlx_tensor *g_roll_far(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *a = rlx_roll(rlx_exp(x), 0, ((int64_t)1 << 62) + 5), *b = rlx_roll(y, 0, INT64_MIN);
    rlx_tensor *c = rlx_roll(rlx_sin(x), 0, -INT64_MAX), *d = rlx_roll(y, 0, ((int64_t)1 << 57) + 1);
    return rlx_cat((rlx_tensor *[]){a, b, c, d}, 4, 0);
}

/* 7. sort, argsort and topk along a dynamic axis, and with dynamic dims
 * other than dim 0 off the axis */
static rlx_tensor *g_sort(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *a = rlx_sort(rlx_exp(x), 0, false), *b = rlx_sort(y, 0, true);
    return rlx_cat((rlx_tensor *[]){a, b}, 2, 0);
}
static rlx_tensor *g_argsort(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *a = rlx_argsort(x, 0, true), *b = rlx_argsort(outer3(x, y), 1, false);
    return rlx_add(rlx_sum(rlx_mul(a, a), NULL, 0, false), rlx_sum(rlx_mul_s(b, 3), NULL, 0, false));
}
static rlx_tensor *g_topk(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *v, *i, *v2, *i2;
    if (rlx_topk(rlx_sin(x), 2, 0, true, &v, &i) != RLX_OK || rlx_topk(y, 1, 0, false, &v2, &i2) != RLX_OK)
        return NULL;
    rlx_tensor *w = rlx_add(rlx_cast(i, rlx_dtype_of(x)), rlx_cast(i2, rlx_dtype_of(x)));
    return rlx_cat((rlx_tensor *[]){rlx_add(v, rlx_mul_s(w, 0.25)), v2}, 2, 0);
}
static rlx_tensor *g_sort_outer(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *o = outer3(x, rlx_add_s(y, 0.5));
    rlx_tensor *a = rlx_sort(o, 2, false), *b = rlx_sort(o, 1, true), *c = rlx_sort(o, 0, false);
    return rlx_add(rlx_add(rlx_sum(rlx_mul(a, b), NULL, 0, false), rlx_sum(rlx_sin(c), NULL, 0, false)),
                   rlx_sum(rlx_exp(b), NULL, 0, false));
}

/* 6. einsums whose matmul would merge or split several dynamic dims */
static rlx_tensor *eq2(const char *eq, rlx_tensor *a, rlx_tensor *b)
{
    return rlx_einsum(eq, (rlx_tensor *[]){a, b}, 2);
}
static rlx_tensor *wmat(rlx_tensor *x)
{
    return rlx_cos(rlx_reshape(rlx_arange(rlx_dtype_of(x), 0, 4 * C, 1), 2, (int64_t[]){C, 4}));
}
static rlx_tensor *g_es_merge_m(rlx_tensor *x, rlx_tensor *y) { return eq2("bij,jk->bik", outer3(x, y), wmat(x)); }
static rlx_tensor *g_es_nmulti(rlx_tensor *x, rlx_tensor *y) { return eq2("jk,bij->kbi", wmat(x), outer3(x, y)); }
static rlx_tensor *g_es_mk(rlx_tensor *x, rlx_tensor *y)
{
    /* [m, n, k, l] = x[m, n] y[k, l]: m and k dynamic, contracted over k, l with y */
    rlx_tensor *o4 = rlx_mul(rlx_reshape(x, 4, (int64_t[]){-1, C, 1, 1}),
                             rlx_reshape(rlx_sin(y), 4, (int64_t[]){1, 1, -1, C}));
    return eq2("mnkl,kl->mn", o4, y);
}
static rlx_tensor *g_es_mn(rlx_tensor *x, rlx_tensor *y)
{
    /* two dynamic free labels on each side: [m, i, j] . [k, n, j] -> [m, i, k, n] */
    return eq2("mij,knj->mikn", outer3(x, y), outer3(rlx_exp(y), x));
}

/* 8. reshapes with several -1s over dynamic dims: the dynamic dims kept
 * in place around a static one split or merged */
static rlx_tensor *outer6(rlx_tensor *x, rlx_tensor *y)
{
    rlx_tensor *o = outer3(x, y);
    return rlx_cat((rlx_tensor *[]){o, rlx_sin(o)}, 2, 2); /* [nx, ny, 6] */
}
/* as a user writes them: the sizes from rlx_dim, -1 for a dynamic one */
static rlx_tensor *g_rs_heads(rlx_tensor *x, rlx_tensor *y)
{
    /* [B, S, H*D] -> [B, S, H, D], scaled per head, and back */
    rlx_tensor *o = outer6(x, y);
    int64_t b = rlx_dim(o, 0), n = rlx_dim(o, 1);
    rlx_tensor *h = rlx_reshape(o, 4, (int64_t[]){b, n, 2, 3});
    rlx_tensor *w = rlx_reshape(rlx_arange(rlx_dtype_of(x), 1, 3, 1), 2, (int64_t[]){2, 1});
    return rlx_reshape(rlx_exp(rlx_mul(h, w)), 3, (int64_t[]){b, n, 6});
}
static rlx_tensor *g_rs_middle(rlx_tensor *x, rlx_tensor *y)
{
    /* [B, 6, S] -> [B, 2, 3, S] -> [B, 3, 2, S] (a static middle) */
    rlx_tensor *t = rlx_transpose(outer6(x, y), 3, (int[]){0, 2, 1});
    int64_t b = rlx_dim(t, 0), n = rlx_dim(t, 2);
    rlx_tensor *r = rlx_reshape(rlx_tanh(t), 4, (int64_t[]){b, 2, 3, n});
    rlx_tensor *m = rlx_reshape(rlx_mul(r, r), 4, (int64_t[]){b, 3, 2, n});
    return rlx_sum(rlx_sin(m), (int[]){2}, 1, false);
}
static rlx_tensor *g_rs_flat(rlx_tensor *x, rlx_tensor *y)
{
    /* [B, S, 3] -> [B, 3S]: B kept, S merged with the 3 */
    rlx_tensor *o = outer3(rlx_exp(x), y);
    return rlx_reshape(rlx_mul(o, o), 2, (int64_t[]){rlx_dim(o, 0), -1});
}
static rlx_tensor *g_rs_one(rlx_tensor *x, rlx_tensor *y)
{
    /* [-1, 6] -> [-1, 2, 3] (one -1: inferred from the count) */
    rlx_tensor *f = rlx_reshape(outer6(x, y), 2, (int64_t[]){-1, 6});
    return rlx_sum(rlx_reshape(rlx_exp(f), 3, (int64_t[]){-1, 2, 3}), (int[]){1}, 1, false);
}

TEST(reshape_several_dynamic_dims)
{
    dyn_check("rs_heads", g_rs_heads, true, -1, -1, 0, 0);
    dyn_check("rs_middle", g_rs_middle, true, -1, -1, 0, 0);
    dyn_check("rs_one", g_rs_one, true, -1, -1, 0, 0);
    dyn_check("rs_flat", g_rs_flat, true, -1, -1, 1, 0); /* (static [0, -1] of 0 elements is ambiguous) */
    /* ambiguous: a flattened B*S split back by -1s, or a -1 next to a
     * dynamic dim merged with a static one */
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){-1, C}), *y = rlx_input("y", RLX_F32, 2, (int64_t[]){-1, C});
    rlx_tensor *flat = rlx_reshape(outer3(x, y), 2, (int64_t[]){-1, C});
    CHECK(flat != NULL);
    CHECK_NULL_ERR(rlx_reshape(flat, 3, (int64_t[]){-1, -1, C}), RLX_E_UNSUPPORTED, "rlx_reshape");
    rlx_clear_error();
    CHECK(!rlx_reshape(flat, 3, (int64_t[]){-1, -1, C}) && strstr(rlx_last_error(), "ambiguous") &&
          strstr(rlx_last_error(), "[-1,-1,3]"));
    /* [B, 3, S] -> [-1, -1]: [B, 3S] or [3B, S] */
    rlx_tensor *t = rlx_transpose(outer3(x, y), 3, (int[]){0, 2, 1});
    CHECK_NULL_ERR(rlx_reshape(t, 2, (int64_t[]){-1, -1}), RLX_E_UNSUPPORTED, "rlx_reshape");
    /* [B, S, 6] -> [-1, 2, -1, 3] is [B, 2, S, 3]; [B, S, 3] -> [-1, -1] is [B, 3S] */
    CHECK(rlx_reshape(outer6(x, y), 4, (int64_t[]){-1, 2, -1, 3}) != NULL);
    CHECK(rlx_reshape(outer3(x, y), 2, (int64_t[]){-1, -1}) != NULL);
    /* several -1s of a static input stay an error */
    CHECK_NULL_ERR(rlx_reshape(rlx_zeros(RLX_F32, 2, (int64_t[]){2, 3}), 2, (int64_t[]){-1, -1}), RLX_E_SHAPE,
                   "rlx_reshape");
}

TEST(grad_cat_of_dynamic_pieces)
{
    dyn_check("cat2", g_cat2, true, -1, -1, 0, 0);
    dyn_check("cat_mixed", g_cat_mixed, true, -1, -1, 0, 0);
    dyn_check("cat_axis1", g_cat_axis1, true, -1, -1, 0, 0);
    dyn_check("cat_twice", g_cat_twice, true, -1, -1, 0, 0);
}

TEST(grad_slice_steps_of_dynamic_axis)
{
    dyn_check("step2", g_step2, true, -1, -1, 0, 0);
    dyn_check("steps", g_steps, true, -1, -1, 0, 0);
    dyn_check("step_2d", g_step_2d, true, -1, -1, 0, 0);
    dyn_check("step_twice", g_step_twice, true, -1, -1, 0, 0);
}

TEST(grad_gather_dynamic_off_axis)
{
    dyn_check("gather_col", g_gather_col, true, -1, -1, 0, 0);
    dyn_check("gather_2d_index", g_gather_2d_index, true, -1, -1, 0, 0);
    dyn_check("gather_scalar", g_gather_scalar, true, -1, -1, 0, 0);
    dyn_check("gather_outer", g_gather_outer, true, -1, -1, 0, 1);
    dyn_check("gather_twice", g_gather_twice, true, -1, -1, 0, 0);
    dyn_check("gather_outer_2d", g_gather_outer_2d, true, -1, -1, 0, 0);
}

TEST(tile_and_roll_of_dynamic_axis)
{
    dyn_check("tile", g_tile, true, -1, -1, 0, 0);
    dyn_check("tile_outer", g_tile_outer, true, -1, -1, 0, 0);
    dyn_check("roll_far", g_roll_far, true, -1, -1, 0, 0);
    /* a negative count is still an error while tracing */
    CHECK_NULL_ERR(rlx_tile(rlx_input("x", RLX_F32, 2, (int64_t[]){-1, C}), 0, -2), RLX_E_ARG, "rlx_tile");
}

TEST(sort_along_dynamic_axes)
{
    dyn_check("sort", g_sort, true, -1, -1, 0, 0);
    dyn_check("argsort", g_argsort, false, -1, -1, 0, 0);
    dyn_check("topk", g_topk, true, -1, -1, 2, 1);
    dyn_check("sort_outer", g_sort_outer, true, -1, -1, 0, 0);
}

/* topk's k is checked against the bound length */
TEST(topk_k_beyond_bound_length)
{
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){-1, C}), *v, *i;
    CHECK_EQ_INT(rlx_topk(x, 3, 0, true, &v, &i), RLX_OK);
    rlx_program *p = rlx_compile(&v, 1);
    CHECK(p != NULL);
    rlx_tensor *got = NULL;
    CHECK_ERR(rlx_program_run(p, &(rlx_binding){"x", trand(RLX_F32, 2, (int64_t[]){2, C}, -1, 1)}, 1, &got),
              RLX_E_SHAPE, "rlx_program_run");
    CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", trand(RLX_F32, 2, (int64_t[]){3, C}, -1, 1)}, 1, &got),
                 RLX_OK);
    rlx_program_free(p);
}

TEST(einsum_merging_dynamic_dims)
{
    dyn_check("es_merge_m", g_es_merge_m, true, -1, -1, 0, 0);
    dyn_check("es_nmulti", g_es_nmulti, true, -1, -1, 0, 0);
    dyn_check("es_mk", g_es_mk, true, -1, -1, 0, 0);
    dyn_check("es_mn", g_es_mn, true, -1, -1, 0, 0);
}

TEST(grad_attention_kv_both_dynamic)
{
    dyn_check("kv", g_kv, true, -1, -1, 0, 0);
    dyn_check("kv_causal", g_kv_causal, true, -1, -1, 0, 0);
}

/* rlx_split of a dynamic axis into fixed sizes: the values and gradient
 * at a bound size that is their sum; any other size is RLX_E_SHAPE
 * naming the input, its symbol, the sum and the bound size. */
static rlx_tensor *split_expr(rlx_tensor *x)
{
    rlx_tensor *p[3];
    if (rlx_split(x, 0, 3, (int64_t[]){2, 0, 3}, p) != RLX_OK)
        return NULL;
    return rlx_add(rlx_sum(rlx_exp(p[0]), NULL, 0, false), rlx_sum(rlx_mul(p[2], rlx_sin(p[2])), NULL, 0, false));
}

TEST(split_dynamic_axis_fixed_sizes)
{
    const rlx_dtype dts[] = {RLX_F32, RLX_F64};
    EACH_BACKEND(b)
    {
        for (int t = 0; t < 2; t++) {
            for (int named = 0; named < 2; named++) {
                rlx_tensor *x = rlx_input("x", dts[t], 2, (int64_t[]){named ? -7 : -1, C}), *outs[2], *got[2];
                outs[0] = split_expr(x);
                CHECK_EQ_INT(rlx_grad(outs[0], &x, 1, &outs[1]), RLX_OK);
                rlx_program *p = rlx_compile(outs, 2);
                CHECK(p != NULL);
                for (int k = 0; k < 2; k++) {
                    rlx_tensor *xv = trand(dts[t], 2, (int64_t[]){5, C}, -1, 1), *want[2];
                    CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", xv}, 1, got), RLX_OK);
                    CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
                    want[0] = split_expr(xv);
                    CHECK_EQ_INT(rlx_grad(want[0], &xv, 1, &want[1]), RLX_OK);
                    CHECK_EQ_INT(rlx_set_option("backend", b ? "jit" : "ref"), RLX_OK);
                    EXPECT_SAME(got[0], want[0], dts[t] == RLX_F32 ? 1e-5 : 1e-12);
                    EXPECT_SAME(got[1], want[1], dts[t] == RLX_F32 ? 1e-5 : 1e-12);
                }
                for (int64_t n = 0; n < 8; n += 1 + (n == 4)) {
                    rlx_binding bad = {"x", trand(dts[t], 2, (int64_t[]){n, C}, -1, 1)};
                    CHECK_EQ_INT(rlx_program_run(p, &bad, 1, got), RLX_E_SHAPE);
                    const char *msg = rlx_last_error();
                    char size[32];
                    snprintf(size, sizeof size, "bound to %lld", (long long)n);
                    CHECK(strstr(msg, "rlx_program_run") && strstr(msg, "sum to 5") && strstr(msg, "input 'x'") &&
                          strstr(msg, named ? "symbol -7" : "(dynamic)") && strstr(msg, size));
                }
                rlx_program_free(p);
            }
        }
    }
    /* bad sizes are still refused while tracing */
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){-1, C}), *p2[2];
    CHECK_ERR(rlx_split(x, 0, 2, (int64_t[]){1, -3}, p2), RLX_E_SHAPE, "rlx_split");
    CHECK(p2[0] == NULL && p2[1] == NULL);
}

/* multinomial over a dynamic number of categories (and rows): the same
 * indices as the static call with the same seed; too few categories for
 * the samples without replacement, or none, is RLX_E_SHAPE when bound */
TEST(multinomial_dynamic_categories)
{
    static const int64_t shapes[][2] = {{1, 1}, {2, 3}, {0, 4}, {3, 7}, {1, 40}};
    EACH_BACKEND(b)
    {
        for (int rank = 1; rank <= 2; rank++) {
            for (int rep = 0; rep < 2; rep++) {
                int64_t dims[2] = {-1, -1}, ns = rep ? 1 : 5;
                rlx_tensor *pr = rlx_input("p", RLX_F32, rank, dims);
                rlx_tensor *o = rlx_multinomial(pr, ns, !rep, 42), *got = NULL;
                rlx_program *p = o ? rlx_compile(&o, 1) : NULL;
                if (!p) {
                    test_fail(__FILE__, __LINE__, "multinomial: %s", rlx_last_error());
                    continue;
                }
                for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
                    const int64_t *s = rank == 2 ? shapes[k] : shapes[k] + 1;
                    rlx_tensor *pv = trand(RLX_F32, rank, s, 0.1, 1);
                    CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"p", pv}, 1, &got), RLX_OK);
                    CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
                    rlx_tensor *want = rlx_multinomial(pv, ns, !rep, 42);
                    EXPECT_SAME(got, want, 0);
                    CHECK_EQ_INT(rlx_set_option("backend", b ? "jit" : "ref"), RLX_OK);
                }
                /* without replacement 1 sample needs 1 category: N = 0 fails either way */
                int64_t zero[2] = {2, 0};
                CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"p", trand(RLX_F32, rank, zero + 2 - rank, 0, 1)}, 1, &got),
                             RLX_E_SHAPE);
                CHECK(strstr(rlx_last_error(), "multinomial") != NULL);
                rlx_program_free(p);
            }
        }
        /* more samples than bound categories without replacement */
        rlx_tensor *pr = rlx_input("p", RLX_F64, 2, (int64_t[]){-1, -1}), *got = NULL;
        rlx_tensor *o = rlx_multinomial(pr, 3, false, 7);
        rlx_program *p = rlx_compile(&o, 1);
        CHECK(p != NULL);
        CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"p", trand(RLX_F64, 2, (int64_t[]){2, 2}, 0.1, 1)}, 1, &got),
                     RLX_E_SHAPE);
        CHECK(strstr(rlx_last_error(), "3 samples of 2 categories") != NULL);
        CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"p", trand(RLX_F64, 2, (int64_t[]){2, 3}, 0.1, 1)}, 1, &got),
                     RLX_OK);
        rlx_program_free(p);
    }
}

TEST_MAIN(T(split_dynamic_axis_fixed_sizes), T(reshape_several_dynamic_dims), T(multinomial_dynamic_categories), T(grad_cat_of_dynamic_pieces), T(grad_slice_steps_of_dynamic_axis), T(grad_gather_dynamic_off_axis),
          T(tile_and_roll_of_dynamic_axis), T(sort_along_dynamic_axes),
          T(topk_k_beyond_bound_length), T(einsum_merging_dynamic_dims),
          T(grad_attention_kv_both_dynamic))
