/* test_memplan.c — the JIT's memory plan (passes/memplan.c) and compiled
 * programs (tensor/program.c over runtime/jit_exec.c plans).
 *
 * Arena sizes are checked against sizes worked out by hand from the
 * schedule the graph gets (each intermediate rounded up to 64 bytes,
 * values alive together never sharing bytes, an elementwise kernel over a
 * dying same-index input writing in place); values against the reference
 * backend on an independent copy of the inputs (buffers are never
 * hash-consed, so the reference graph shares no node with the JIT's). */
#include "harness.h"

long ir_live_nodes(void);
uint64_t rt_bufpool_fresh_bytes(void);

static void use(const char *backend) { CHECK(rlx_set_option("backend", backend) == RLX_OK); }

/* A realized copy of x with the same values and no shared node. */
static rlx_tensor *twin(rlx_tensor *x)
{
    int64_t n = 0;
    double *v = test_values(x, &n);
    int64_t shape[8];
    int rank = rlx_rank(x);
    rlx_shape(x, shape, 8);
    rlx_tensor *t = v ? test_tensor(rlx_dtype_of(x), rank, shape, v) : NULL;
    free(v);
    return t;
}

/* got (realized on the JIT) equals want (realized on the reference
 * backend) within float tolerance. */
static void same_values(const char *what, rlx_tensor *got, rlx_tensor *want, double rtol)
{
    int64_t ng = 0, nw = 0;
    use("jit");
    double *g = test_values(got, &ng);
    use("ref");
    double *w = test_values(want, &nw);
    use("jit");
    if (!g || !w || ng != nw) {
        test_fail(__FILE__, __LINE__, "%s: %lld values vs %lld", what, (long long)ng, (long long)nw);
    } else {
        for (int64_t i = 0; i < ng; i++) {
            if (!test_close(g[i], w[i], rtol, rtol)) {
                test_fail(__FILE__, __LINE__, "%s[%lld] = %.9g, reference %.9g", what, (long long)i, g[i], w[i]);
                break;
            }
        }
    }
    free(g);
    free(w);
}

/* Realizes t on the JIT alone and gives the arena of that realization. */
static uint64_t arena_of(rlx_tensor *t)
{
    use("jit");
    rlx_stats_reset();
    CHECK(rlx_realize(t) == RLX_OK);
    rlx_stats_t s;
    rlx_stats(&s);
    return s.arena_bytes;
}

static rlx_tensor *w2(rlx_tensor *x)
{
    rlx_tensor *t = rlx_relu(rlx_add_s(rlx_mul_s(x, 1.5), 0.5));
    t = rlx_exp(rlx_mul(rlx_sub_s(t, 0.25), x));
    return rlx_tanh(rlx_sub_s(rlx_add(rlx_mul(t, t), x), 1));
}

/* One fused kernel: its only value is the root, so there is no arena. */
TEST(w2_has_no_arena)
{
    int64_t n = (int64_t)1 << 24;
    rlx_tensor *x = trand(RLX_F32, 1, &n, -2, 2);
    rlx_tensor *y = w2(x);
    CHECK_EQ_INT(arena_of(y), 0);
    rlx_stats_t s;
    rlx_stats(&s);
    CHECK_EQ_INT(s.kernels_run, 1);
    CHECK(s.peak_bytes >= (uint64_t)n * 4); /* the root's own buffer */
    same_values("w2", y, w2(twin(x)), 2e-5);
}

/* exp(x) -> cumsum (a REF kernel) -> tanh: exp(x) is the one intermediate
 * (1000 f32 = 4000 bytes, 4032 rounded); the cumsum output is the
 * reference evaluator's own. Then a second intermediate (f64, 8000 bytes)
 * born after the first died shares its bytes: the arena is the larger. */
TEST(arena_around_a_ref_kernel)
{
    int64_t n = 1000;
    rlx_tensor *x = trand(RLX_F32, 1, &n, -1, 1);
    rlx_tensor *x2 = twin(x);
    rlx_tensor *y = rlx_tanh(rlx_cumsum(rlx_exp(x), 0, false));
    CHECK_EQ_INT(arena_of(y), 4032);
    same_values("tanh(cumsum(exp))", y, rlx_tanh(rlx_cumsum(rlx_exp(x2), 0, false)), 2e-5);
    rlx_tensor *z = rlx_tanh(rlx_cumsum(rlx_cast(rlx_tanh(rlx_cumsum(rlx_exp(x), 0, true)), RLX_F64), 0, false));
    CHECK_EQ_INT(arena_of(z), 8000);
    same_values("two ref kernels", z,
                rlx_tanh(rlx_cumsum(rlx_cast(rlx_tanh(rlx_cumsum(rlx_exp(x2), 0, true)), RLX_F64), 0, false)), 2e-5);
}

/* Two reductions that the consumer cannot absorb (not over its trailing
 * dims) are both alive when it runs: two slots side by side. */
TEST(two_reductions_feed_a_third)
{
    int ax0 = 0, ax1 = 1;
    rlx_tensor *x = trand(RLX_F32, 2, (int64_t[]){30, 50}, -1, 1), *z = trand(RLX_F32, 2, (int64_t[]){20, 50}, -1, 1);
    rlx_tensor *x2 = twin(x), *z2 = twin(z);
    /* [50] f32 = 200 bytes, 256 rounded, twice */
    rlx_tensor *y = rlx_mul(rlx_sum(x, &ax0, 1, false), rlx_max(z, &ax0, 1, false));
    CHECK_EQ_INT(arena_of(y), 512);
    same_values("sum*max", y, rlx_mul(rlx_sum(x2, &ax0, 1, false), rlx_max(z2, &ax0, 1, false)), 2e-5);
    /* middle-axis reductions of [8,30,50]: [8,50] f32 = 1600 bytes each */
    rlx_tensor *w = trand(RLX_F32, 3, (int64_t[]){8, 30, 50}, -1, 1), *w2c = twin(w);
    rlx_tensor *m = rlx_mul(rlx_sum(w, &ax1, 1, false), rlx_exp(rlx_max(w, &ax1, 1, false)));
    CHECK_EQ_INT(arena_of(m), 3200);
    same_values("middle axes", m, rlx_mul(rlx_sum(w2c, &ax1, 1, false), rlx_exp(rlx_max(w2c, &ax1, 1, false))),
                2e-5);
}

/* a = exp(s) feeds cumsum(a) and then f(a), which cumsum also reads (so
 * f(a) is a kernel of its own) and after which a is dead. f reading a at
 * its own index writes over a: one 6400-byte slot; f reading a transposed
 * or flipped would overwrite elements still to be read: two slots. */
static rlx_tensor *in_place_graph(rlx_tensor *s, int form)
{
    rlx_tensor *a = rlx_exp(s), *f;
    switch (form) {
    case 0: f = rlx_sin(a); break;
    case 1: f = rlx_mul(a, rlx_add_s(a, 1)); break;
    case 2: f = rlx_add(a, rlx_t(a)); break;
    default: f = rlx_add(a, rlx_flip(a, 1)); break;
    }
    return rlx_add(rlx_cumsum(a, 1, false), rlx_cumsum(f, 1, false));
}

TEST(in_place_only_at_the_same_index)
{
    rlx_tensor *s = trand(RLX_F32, 2, (int64_t[]){40, 40}, -1, 1), *s2 = twin(s);
    static const uint64_t want[4] = {6400, 6400, 12800, 12800};
    static const char *const what[4] = {"sin(a)", "a*(a+1)", "a+a^T", "a+flip(a)"};
    for (int f = 0; f < 4; f++) {
        rlx_tensor *y = in_place_graph(s, f);
        uint64_t got = arena_of(y);
        if (got != want[f])
            test_fail(__FILE__, __LINE__, "%s: arena %llu bytes, expected %llu", what[f], (unsigned long long)got,
                      (unsigned long long)want[f]);
        same_values(what[f], y, in_place_graph(s2, f), 2e-5);
    }
}

/* The arena and the roots of a realization come from the recycling pool:
 * realizing the same graph shape again asks the OS for nothing. */
TEST(repeated_realization_maps_nothing)
{
    int64_t n = (int64_t)1 << 20; /* 4 MiB intermediates */
    rlx_tensor *x = trand(RLX_F32, 1, &n, -1, 1);
    use("jit");
    uint64_t fresh = 0;
    for (int r = 0; r < 4; r++) {
        rlx_scope_begin();
        rlx_tensor *y = rlx_tanh(rlx_cumsum(rlx_exp(rlx_add_s(x, r)), 0, false));
        rlx_stats_reset();
        CHECK(rlx_realize(y) == RLX_OK);
        rlx_stats_t s;
        rlx_stats(&s);
        CHECK_EQ_INT(s.arena_bytes, (uint64_t)n * 4);
        rlx_scope_end(); /* the result dies: its buffer goes back to the pool */
        if (r == 0)
            fresh = rt_bufpool_fresh_bytes();
        else
            CHECK_EQ_INT(rt_bufpool_fresh_bytes(), fresh);
    }
    use("ref");
}

static int jit_workload(void)
{
    rlx_scope_begin();
    int ax0 = 0;
    rlx_tensor *x = rlx_from_data(RLX_F32, 2, (int64_t[]){2, 3}, (float[]){1, 2, 3, 4, 5, 6});
    rlx_tensor *a = rlx_exp(rlx_mul_s(x, 0.5));
    rlx_tensor *y = rlx_add(rlx_cumsum(a, 1, false), rlx_cumsum(rlx_sin(a), 1, false));
    rlx_tensor *r = rlx_mul(rlx_sum(y, &ax0, 1, false), rlx_max(x, &ax0, 1, false));
    double v[3] = {0};
    int ok = r && rlx_read_f64(r, v, 3) == RLX_OK;
    /* checked against the same sums by hand-written loops */
    for (int j = 0; ok && j < 3; j++) {
        double sum = 0, mx = -INFINITY;
        for (int i = 0; i < 2; i++) {
            double c = 0;
            for (int k = 0; k <= j; k++) {
                double e = exp(0.5 * (i * 3 + k + 1));
                c += e + sin(e);
            }
            sum += c;
            mx = fmax(mx, i * 3 + j + 1);
        }
        if (!test_close(v[j], sum * mx, 1e-5, 1e-5))
            test_fail(__FILE__, __LINE__, "walk result [%d] = %.9g, expected %.9g", j, v[j], sum * mx);
    }
    rlx_scope_end();
    return ok;
}

TEST(jit_allocation_failures)
{
    use("jit");
    ALLOC_WALK(jit_workload, 10);
    use("ref");
}

/* ------------------------------------------------------------- programs */

/* The program's outputs over inputs x [3,4] and y [4], or over realized
 * tensors standing for them. */
static void program_graph(rlx_tensor *x, rlx_tensor *y, rlx_tensor *c, rlx_tensor **out)
{
    int ax1 = 1;
    rlx_tensor *e = rlx_exp(rlx_mul_s(x, 0.5));
    out[0] = rlx_tanh(rlx_add_s(rlx_mul(x, y), 1));                   /* one LOOP kernel */
    out[1] = rlx_sum(rlx_mul(e, c), &ax1, 1, false);                   /* a reduction, a captured constant */
    out[2] = rlx_add(rlx_cumsum(e, 1, false), rlx_sum(rlx_matmul(x, rlx_t(x)), &ax1, 1, true)); /* REF kernels */
    out[3] = rlx_t(rlx_sin(x));                                        /* a root that is a view */
    out[4] = x;                                                        /* an input itself */
}

TEST(programs_match_the_reference)
{
    int64_t xs[2] = {3, 4}, ys[1] = {4};
    rlx_tensor *c = trand(RLX_F32, 2, xs, -1, 1);
    for (int b = 0; b < 2; b++) {
        use(b ? "jit" : "ref"); /* compiled on either backend, checked on the JIT's results */
        rlx_tensor *ix = rlx_input("x", RLX_F32, 2, xs), *iy = rlx_input("y", RLX_F32, 1, ys);
        rlx_tensor *outs[5];
        program_graph(ix, iy, c, outs);
        rlx_program *p = rlx_compile(outs, 5);
        CHECK(p != NULL);
        use("jit");
        for (int run = 0; p && run < 3; run++) {
            rlx_tensor *x = trand(RLX_F32, 2, xs, -2, 2), *y = trand(RLX_F32, 1, ys, -2, 2);
            rlx_binding bind[2] = {{"y", y}, {"x", x}};
            rlx_tensor *got[5] = {0};
            CHECK(rlx_program_run(p, bind, 2, got) == RLX_OK);
            rlx_tensor *want[5], *x2 = twin(x), *y2 = twin(y), *c2 = twin(c);
            use("ref");
            program_graph(x2, y2, c2, want);
            use("jit");
            for (int o = 0; o < 5; o++) {
                char what[32];
                snprintf(what, sizeof what, "backend %d run %d output %d", b, run, o);
                if (got[o])
                    same_values(what, got[o], want[o], 2e-5);
                else
                    test_fail(__FILE__, __LINE__, "%s is NULL", what);
            }
        }
        rlx_program_free(p);
    }
    use("ref");
}

TEST(program_bindings_are_checked)
{
    use("jit");
    int64_t four = 4;
    rlx_tensor *ia = rlx_input("a", RLX_F32, 1, &four), *ib = rlx_input("b", RLX_F32, 1, &four);
    rlx_tensor *sum = rlx_add(ia, ib);
    rlx_program *p = rlx_compile(&sum, 1);
    CHECK(p != NULL);
    rlx_tensor *a = tf32(1, &four, (float[]){1, 2, 3, 4}), *b = tf32(1, &four, (float[]){5, 6, 7, 8});
    rlx_tensor *wrong_dt = ti32(1, &four, (int32_t[]){1, 2, 3, 4});
    rlx_tensor *wrong_shape = tf32(1, (int64_t[]){3}, (float[]){1, 2, 3});
    rlx_tensor *out = NULL;
    CHECK_ERR(rlx_program_run(p, (rlx_binding[]){{"a", a}, {"c", b}}, 2, &out), RLX_E_ARG, "rlx_program_run");
    CHECK_ERR(rlx_program_run(p, (rlx_binding[]){{"a", a}}, 1, &out), RLX_E_ARG, "rlx_program_run");
    CHECK_ERR(rlx_program_run(p, (rlx_binding[]){{"a", a}, {"b", wrong_dt}}, 2, &out), RLX_E_DTYPE,
              "rlx_program_run");
    CHECK_ERR(rlx_program_run(p, (rlx_binding[]){{"a", wrong_shape}, {"b", b}}, 2, &out), RLX_E_SHAPE,
              "rlx_program_run");
    CHECK_ERR(rlx_program_run(p, (rlx_binding[]){{NULL, a}, {"b", b}}, 2, &out), RLX_E_ARG, "rlx_program_run");
    CHECK(out == NULL);
    /* a lazy binding is realized first; the program still works */
    CHECK(rlx_program_run(p, (rlx_binding[]){{"a", rlx_mul_s(a, 2)}, {"b", b}}, 2, &out) == RLX_OK);
    EXPECT(out, RLX_F32, 1, &four, ((double[]){7, 10, 13, 16}), 0);
    rlx_program_free(p);
    use("ref");
}

static int program_workload(void)
{
    rlx_scope_begin();
    int64_t xs[2] = {2, 3};
    rlx_tensor *ix = rlx_input("x", RLX_F64, 2, xs);
    int ax1 = 1;
    rlx_tensor *outs[2] = {rlx_cumsum(rlx_exp(ix), 1, false), rlx_sum(rlx_mul(ix, ix), &ax1, 1, false)};
    rlx_program *p = outs[0] && outs[1] ? rlx_compile(outs, 2) : NULL;
    rlx_tensor *x = rlx_from_data(RLX_F64, 2, xs, (double[]){1, 2, 3, 4, 5, 6});
    rlx_tensor *got[2] = {0};
    int ok = p && x && rlx_program_run(p, &(rlx_binding){"x", x}, 1, got) == RLX_OK;
    double v[6] = {0}, s[2] = {0};
    ok = ok && rlx_read_f64(got[0], v, 6) == RLX_OK && rlx_read_f64(got[1], s, 2) == RLX_OK;
    if (ok && (!test_close(v[5], exp(4) + exp(5) + exp(6), 1e-12, 0) || s[0] != 14 || s[1] != 77))
        test_fail(__FILE__, __LINE__, "program walk: %g %g %g", v[5], s[0], s[1]);
    rlx_program_free(p);
    rlx_scope_end();
    return ok;
}

TEST(program_allocation_failures)
{
    use("jit");
    ALLOC_WALK(program_workload, 10);
    use("ref");
}

/* A program's repeated runs map no fresh memory once warm. */
TEST(program_runs_map_nothing)
{
    use("jit");
    int64_t n = (int64_t)1 << 20;
    rlx_tensor *ix = rlx_input("x", RLX_F32, 1, &n);
    rlx_tensor *y = rlx_tanh(rlx_cumsum(rlx_exp(ix), 0, false));
    rlx_program *p = rlx_compile(&y, 1);
    CHECK(p != NULL);
    rlx_tensor *x = trand(RLX_F32, 1, &n, -1, 1);
    uint64_t fresh = 0;
    for (int r = 0; p && r < 4; r++) {
        rlx_tensor *out = NULL;
        rlx_stats_reset();
        CHECK(rlx_program_run(p, &(rlx_binding){"x", x}, 1, &out) == RLX_OK);
        rlx_stats_t s;
        rlx_stats(&s);
        CHECK_EQ_INT(s.arena_bytes, (uint64_t)n * 4);
        rlx_release(rlx_escape(out));
        if (r == 0)
            fresh = rt_bufpool_fresh_bytes();
        else
            CHECK_EQ_INT(rt_bufpool_fresh_bytes(), fresh);
    }
    rlx_program_free(p);
    use("ref");
}

TEST_MAIN(T(w2_has_no_arena), T(arena_around_a_ref_kernel), T(two_reductions_feed_a_third),
          T(in_place_only_at_the_same_index), T(repeated_realization_maps_nothing), T(jit_allocation_failures),
          T(programs_match_the_reference), T(program_bindings_are_checked), T(program_allocation_failures),
          T(program_runs_map_nothing))
