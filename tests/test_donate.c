/*
 * test_donate.c — rlx_program_run_donate: a run that owns its inputs
 * writes an output computed elementwise from one over its buffer, gives
 * the values rlx_program_run gives, and never writes over memory anything
 * else can read (another reference, a user's block, an input a later
 * kernel reads, an input that is also an output).
 */
#include "harness.h"

enum { R = 48, C = 40 };

/* A handle the test owns outside its scope (a donating run releases it). */
static rlx_tensor *owned(rlx_tensor *t) { return rlx_escape(t); }

static const void *data_of(rlx_tensor *t) { return rlx_data(t); }

/* w - 0.5 g and m * 0.9 + g, and sum(g * g): an SGD step with momentum
 * whose updates can each take their input's buffer. */
static rlx_program *step_program(void)
{
    const int64_t sh[2] = {R, C};
    rlx_tensor *w = rlx_input("w", RLX_F32, 2, sh), *m = rlx_input("m", RLX_F32, 2, sh),
               *g = rlx_input("g", RLX_F32, 2, sh);
    rlx_tensor *out[3] = {rlx_sub(w, rlx_mul_s(g, 0.5)), rlx_add(rlx_mul_s(m, 0.9), g),
                          rlx_sum(rlx_mul(g, g), NULL, 0, false)};
    return rlx_compile(out, 3);
}

static void expect_step(rlx_tensor *const *out, const float *w, const float *m, const float *g)
{
    double *ew = malloc(sizeof(double) * R * C), *em = malloc(sizeof(double) * R * C), loss = 0;
    for (int i = 0; i < R * C; i++) {
        ew[i] = (double)(float)(w[i] - g[i] * 0.5f);
        em[i] = (double)(float)(m[i] * 0.9f + g[i]);
        loss += (double)g[i] * g[i];
    }
    const int64_t sh[2] = {R, C};
    EXPECT(out[0], RLX_F32, 2, sh, ew, 1e-6);
    EXPECT(out[1], RLX_F32, 2, sh, em, 1e-6);
    EXPECT(out[2], RLX_F32, 0, NULL, &loss, 1e-5);
    free(ew);
    free(em);
}

static void fill(float *v, int n, float lo, float hi)
{
    for (int i = 0; i < n; i++)
        v[i] = (float)test_uniform(lo, hi);
}

/* Random w, m and g for step_program. */
static void step_values(float *w, float *m, float *g)
{
    fill(w, R * C, -1, 1);
    fill(m, R * C, -1, 1);
    fill(g, R * C, -1, 1);
}

TEST(donated_inputs_are_updated_in_place)
{
    static float w[R * C], m[R * C], g[R * C];
    step_values(w, m, g);
    const int64_t sh[2] = {R, C};
    EACH_BACKEND(jit)
    {
        rlx_program *p = step_program();
        CHECK(p != NULL);
        rlx_tensor *tw = owned(tf32(2, sh, w)), *tm = owned(tf32(2, sh, m)), *tg = owned(tf32(2, sh, g));
        const void *pw = data_of(tw), *pm = data_of(tm);
        rlx_binding b[3] = {{"w", tw}, {"m", tm}, {"g", tg}};
        rlx_tensor *out[3];
        CHECK_EQ_INT(rlx_program_run_donate(p, b, 3, out), RLX_OK);
        expect_step(out, w, m, g);
        if (jit) { /* the updates took the buffers of w and m */
            CHECK(data_of(out[0]) == pw);
            CHECK(data_of(out[1]) == pm);
        }
        /* a second step over the first one's outputs: donated again */
        float w1[R * C], m1[R * C];
        CHECK_EQ_INT(rlx_read_f32(out[0], w1, R * C), RLX_OK);
        CHECK_EQ_INT(rlx_read_f32(out[1], m1, R * C), RLX_OK);
        rlx_tensor *tg2 = owned(tf32(2, sh, g));
        rlx_binding b2[3] = {{"w", owned(out[0])}, {"m", owned(out[1])}, {"g", tg2}};
        rlx_tensor *out2[3];
        CHECK_EQ_INT(rlx_program_run_donate(p, b2, 3, out2), RLX_OK);
        expect_step(out2, w1, m1, g);
        if (jit)
            CHECK(data_of(out2[0]) == pw);
        rlx_program_free(p);
    }
}

TEST(donation_never_writes_over_what_others_read)
{
    static float w[R * C], m[R * C], g[R * C];
    step_values(w, m, g);
    const int64_t sh[2] = {R, C};
    rlx_program *p = step_program();
    /* the caller keeps a reference to w: w stays as it was */
    rlx_tensor *tw = tf32(2, sh, w), *tm = owned(tf32(2, sh, m)), *tg = owned(tf32(2, sh, g));
    const void *pw = data_of(tw);
    rlx_binding b[3] = {{"w", owned(rlx_retain(tw))}, {"m", tm}, {"g", tg}};
    rlx_tensor *out[3];
    CHECK_EQ_INT(rlx_program_run_donate(p, b, 3, out), RLX_OK);
    expect_step(out, w, m, g);
    CHECK(data_of(out[0]) != pw);
    double ew[R * C];
    for (int i = 0; i < R * C; i++)
        ew[i] = w[i];
    EXPECT(tw, RLX_F32, 2, sh, ew, 0);
    /* a lazy graph over w holds it too */
    rlx_tensor *lazy = rlx_mul_s(tw, 3);
    rlx_binding b2[3] = {{"w", owned(rlx_retain(tw))}, {"m", owned(tf32(2, sh, m))}, {"g", owned(tf32(2, sh, g))}};
    CHECK_EQ_INT(rlx_program_run_donate(p, b2, 3, out), RLX_OK);
    CHECK(data_of(out[0]) != pw);
    for (int i = 0; i < R * C; i++)
        ew[i] = (double)(w[i] * 3.0f);
    EXPECT(lazy, RLX_F32, 2, sh, ew, 1e-6);
    /* a user's block is never written */
    float blk[R * C];
    memcpy(blk, w, sizeof blk);
    rlx_tensor *tb = owned(rlx_from_blob(RLX_F32, 2, sh, blk, NULL, NULL));
    rlx_binding b3[3] = {{"w", tb}, {"m", owned(tf32(2, sh, m))}, {"g", owned(tf32(2, sh, g))}};
    CHECK_EQ_INT(rlx_program_run_donate(p, b3, 3, out), RLX_OK);
    expect_step(out, w, m, g);
    CHECK(memcmp(blk, w, sizeof blk) == 0);
    rlx_program_free(p);
}

TEST(donation_respects_readers_and_outputs)
{
    const int64_t sh[2] = {R, R}, sv[2] = {R, 1};
    rlx_tensor *w = rlx_input("w", RLX_F32, 2, sh), *x = rlx_input("x", RLX_F32, 2, sv);
    /* w + 1 read transposed (not in place), w as an output itself, and
     * w @ x, which may run after the elementwise kernels */
    rlx_tensor *out_g[4] = {rlx_add_s(rlx_transpose(w, 0, NULL), 1), w, rlx_matmul(w, x), rlx_mul_s(w, 2)};
    rlx_program *p = rlx_compile(out_g, 4);
    CHECK(p != NULL);
    static float wv[R * R], xv[R];
    fill(wv, R * R, -1, 1);
    fill(xv, R, -1, 1);
    EACH_BACKEND(jit)
    {
        rlx_tensor *tw = owned(tf32(2, sh, wv));
        const void *pw = data_of(tw);
        rlx_binding b[2] = {{"w", tw}, {"x", owned(tf32(2, sv, xv))}};
        rlx_tensor *out[4];
        CHECK_EQ_INT(rlx_program_run_donate(p, b, 2, out), RLX_OK);
        double e0[R * R], e1[R * R], e2[R], e3[R * R];
        for (int i = 0; i < R; i++) {
            double acc = 0;
            for (int j = 0; j < R; j++) {
                e0[i * R + j] = (double)(wv[j * R + i] + 1.0f);
                e1[i * R + j] = wv[i * R + j];
                e3[i * R + j] = (double)(wv[i * R + j] * 2.0f);
                acc += (double)wv[i * R + j] * xv[j];
            }
            e2[i] = acc;
        }
        EXPECT(out[0], RLX_F32, 2, sh, e0, 1e-6);
        EXPECT(out[1], RLX_F32, 2, sh, e1, 0);
        EXPECT(out[2], RLX_F32, 2, sv, e2, 1e-5);
        EXPECT(out[3], RLX_F32, 2, sh, e3, 1e-6);
        CHECK(data_of(out[0]) != pw || !jit);
        CHECK(data_of(out[3]) != pw || !jit); /* w is an output: its buffer is shared */
    }
    rlx_program_free(p);
}

/* The update and a reduction both read w; whichever kernel runs last may
 * take w's buffer, and the reduction must still see the old values. */
TEST(donation_leaves_earlier_readers_the_old_value)
{
    const int64_t sh[2] = {R, C};
    rlx_tensor *w = rlx_input("w", RLX_F32, 2, sh);
    rlx_tensor *out_g[3] = {rlx_sub_s(w, 0.25), rlx_sum(rlx_mul(w, w), NULL, 0, false),
                            rlx_max(rlx_exp(w), NULL, 0, false)};
    rlx_program *p = rlx_compile(out_g, 3);
    static float v[R * C];
    fill(v, R * C, -1, 1);
    double e[R * C], ss = 0, mx = 0;
    for (int i = 0; i < R * C; i++) {
        e[i] = (double)(v[i] - 0.25f);
        ss += (double)v[i] * v[i];
        mx = fmax(mx, exp((double)v[i]));
    }
    rlx_binding b = {"w", owned(tf32(2, sh, v))};
    rlx_tensor *out[3];
    CHECK_EQ_INT(rlx_program_run_donate(p, &b, 1, out), RLX_OK);
    EXPECT(out[0], RLX_F32, 2, sh, e, 1e-6);
    EXPECT(out[1], RLX_F32, 0, NULL, &ss, 1e-5);
    EXPECT(out[2], RLX_F32, 0, NULL, &mx, 1e-6);
    rlx_program_free(p);
}

TEST(donation_over_dynamic_dims)
{
    const int64_t sh[2] = {-1, C};
    rlx_tensor *w = rlx_input("w", RLX_F32, 2, sh);
    rlx_tensor *o = rlx_mul_s(rlx_add_s(w, 1), 0.5);
    rlx_program *p = rlx_compile(&o, 1);
    for (int rows = 1; rows <= 9; rows += 4) {
        float v[9 * C];
        double e[9 * C];
        fill(v, rows * C, -2, 2);
        for (int i = 0; i < rows * C; i++)
            e[i] = (double)((v[i] + 1.0f) * 0.5f);
        const int64_t bs[2] = {rows, C};
        rlx_tensor *tw = owned(tf32(2, bs, v));
        const void *pw = data_of(tw);
        rlx_binding b = {"w", tw};
        rlx_tensor *out;
        CHECK_EQ_INT(rlx_program_run_donate(p, &b, 1, &out), RLX_OK);
        EXPECT(out, RLX_F32, 2, bs, e, 1e-6);
        CHECK(data_of(out) == pw);
    }
    rlx_program_free(p);
}

TEST(donate_bad_inputs)
{
    const int64_t sh[2] = {R, C};
    rlx_program *p = step_program();
    rlx_tensor *out[3];
    CHECK_ERR(rlx_program_run_donate(p, NULL, 3, out), RLX_E_ARG, "rlx_program_run_donate");
    CHECK_ERR(rlx_program_run_donate(p, NULL, -1, out), RLX_E_ARG, "rlx_program_run_donate");
    /* one tensor bound to two inputs with one reference: refused, kept */
    rlx_tensor *t = owned(trand(RLX_F32, 2, sh, -1, 1));
    rlx_binding twice[3] = {{"w", t}, {"m", t}, {"g", owned(trand(RLX_F32, 2, sh, -1, 1))}};
    CHECK_ERR(rlx_program_run_donate(p, twice, 3, out), RLX_E_ARG, "rlx_program_run_donate");
    CHECK(out[0] == NULL);
    CHECK_EQ_INT(rlx_numel(t), R * C); /* still alive */
    rlx_release(twice[2].value);
    /* with a reference each it runs, and nothing is written over the shared value */
    float tv[R * C];
    CHECK_EQ_INT(rlx_read_f32(t, tv, R * C), RLX_OK);
    rlx_binding ok[3] = {{"w", rlx_retain(t)}, {"m", t}, {"g", owned(tf32(2, sh, tv))}};
    rlx_escape(ok[0].value);
    CHECK_EQ_INT(rlx_program_run_donate(p, ok, 3, out), RLX_OK);
    expect_step(out, tv, tv, tv);
    /* errors of the run still release the bindings (the harness checks no node is left) */
    rlx_binding wrong[1] = {{"nope", owned(trand(RLX_F32, 2, sh, -1, 1))}};
    CHECK_ERR(rlx_program_run_donate(p, wrong, 1, out), RLX_E_ARG, "rlx_program_run_donate");
    rlx_binding none[1] = {{"w", owned(trand(RLX_F32, 2, sh, -1, 1))}};
    CHECK_ERR(rlx_program_run_donate(NULL, none, 1, out), RLX_E_ARG, "rlx_program_run_donate");
    const int64_t bad[2] = {R, C + 1};
    rlx_binding shape[3] = {{"w", owned(trand(RLX_F32, 2, bad, -1, 1))},
                            {"m", owned(trand(RLX_F32, 2, sh, -1, 1))},
                            {"g", owned(trand(RLX_F32, 2, sh, -1, 1))}};
    CHECK_ERR(rlx_program_run_donate(p, shape, 3, out), RLX_E_SHAPE, "rlx_program_run_donate");
    rlx_program_free(p);
}

TEST_MAIN(T(donated_inputs_are_updated_in_place), T(donation_never_writes_over_what_others_read),
          T(donation_respects_readers_and_outputs),
          T(donation_leaves_earlier_readers_the_old_value), T(donation_over_dynamic_dims), T(donate_bad_inputs))
