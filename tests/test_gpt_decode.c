/*
 * test_gpt_decode.c — KV-cache decoding of examples/gpt_model.c: the next-
 * token logits of gpt_decode_step at each position equal those of the full
 * forward (gpt_logits) over the sequence so far, f32 (rel 1e-5) and f64;
 * restarting at position 0 over a stale cache gives the same logits again;
 * a position past the cache is RLX_E_ARG.
 */
#include "gpt_model.h"
#include "harness.h"

enum { LEN = 8 };

static gpt_config tiny(rlx_dtype dt)
{
    return (gpt_config){.vocab = 13, .width = 16, .layers = 2, .heads = 2, .seq = LEN, .batch = 1, .dtype = dt};
}

/* Parameters of a larger scale than the 0.02 init, so the logits differ
 * clearly between positions and tokens. */
static void make_params(const gpt_layout *lay, rlx_tensor **p)
{
    for (int i = 0; i < lay->nparam; i++)
        p[i] = rlx_mul_s(rlx_randn(lay->cfg.dtype, lay->rank[i], lay->shape[i], 100 + (uint64_t)i), 0.4);
    CHECK_EQ_INT(rlx_realize_many(p, lay->nparam), RLX_OK);
}

/* The full forward's logits at the last of the first len tokens. */
static void full_logits(const gpt_layout *lay, rlx_tensor *const *p, const int32_t *tokens, int len, float *dst)
{
    const int64_t n = len, V = lay->cfg.vocab;
    rlx_tensor *logits = gpt_logits(lay, ti32(1, &n, tokens), 1, len, p);
    CHECK(logits != NULL);
    float *all = malloc((size_t)(n * V) * sizeof *all);
    CHECK_EQ_INT(rlx_read_f32(logits, all, (size_t)(n * V)), RLX_OK);
    memcpy(dst, all + (n - 1) * V, (size_t)V * sizeof *dst);
    free(all);
}

static void compare(rlx_dtype dt, double rtol)
{
    gpt_layout lay;
    gpt_config c = tiny(dt);
    CHECK_EQ_INT(gpt_layout_make(&c, &lay), RLX_OK);
    rlx_tensor *p[GPT_MAX_PARAMS];
    make_params(&lay, p);
    const int32_t tokens[LEN] = {3, 7, 0, 12, 7, 5, 1, 9};
    gpt_decoder d;
    if (gpt_decoder_init(&d, &lay) != RLX_OK) {
        test_fail(__FILE__, __LINE__, "decoder init: %s", rlx_last_error());
        return;
    }
    float got[LEN][13], want[13];
    double worst = 0;
    for (int round = 0; round < 2; round++) { /* round 1 restarts over the caches of round 0 */
        d.pos = 0;
        for (int t = 0; t < LEN; t++) {
            float cur[13];
            CHECK_EQ_INT(gpt_decode_step(&d, p, tokens[t], cur), RLX_OK);
            if (round == 0)
                memcpy(got[t], cur, sizeof cur);
            else
                CHECK(memcmp(got[t], cur, sizeof cur) == 0);
        }
    }
    for (int t = 0; t < LEN; t++) {
        full_logits(&lay, p, tokens, t + 1, want);
        double scale = 0;
        for (int j = 0; j < c.vocab; j++)
            scale = fabs(want[j]) > scale ? fabs(want[j]) : scale;
        CHECK(scale > 0.1); /* the logits are not all near 0 */
        for (int j = 0; j < c.vocab; j++) {
            double e = fabs((double)got[t][j] - want[j]) / scale;
            worst = e > worst ? e : worst;
        }
    }
    if (getenv("GPT_TEST_VERBOSE"))
        printf("  %s: worst |decode - full| / max|logit| = %g over %d positions\n", rlx_dtype_name(dt), worst, LEN);
    if (worst > rtol)
        test_fail(__FILE__, __LINE__, "%s: decode logits differ from the full forward (rel %g > %g)",
                  rlx_dtype_name(dt), worst, rtol);
    CHECK_EQ_INT(d.pos, LEN);
    CHECK_EQ_INT(gpt_decode_step(&d, p, 1, NULL), RLX_E_ARG); /* the cache is full */
    gpt_decoder_free(&d); /* (p belongs to the test's scope) */
}

TEST(gpt_decode_f32_matches_full_forward) { compare(RLX_F32, 1e-5); }
TEST(gpt_decode_f64_matches_full_forward) { compare(RLX_F64, 1e-12); }

TEST_MAIN(T(gpt_decode_f32_matches_full_forward), T(gpt_decode_f64_matches_full_forward))
