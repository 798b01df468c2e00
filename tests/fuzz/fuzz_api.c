/*
 * fuzz_api.c — the API fuzzer: decodes the input bytes into a sequence of
 * rlx_* calls with arbitrary arguments (valid and invalid shapes, axes,
 * dtypes, NULL tensors, huge sizes, views of views, reductions, matmul,
 * gather with any indices, cat, pad, slice, grad, programs, scopes, both
 * backends), realizes and reads some results and releases everything.
 *
 * Beyond the sanitizers (ASan, UBSan, libFuzzer's leak check), every call
 * is checked against the error contract of rlx.h:
 *   - a call returning NULL (or a non-OK status) has recorded an error
 *     whose message starts with "rlx_", and that error is not
 *     RLX_E_INTERNAL (a librlx bug);
 *   - a call returning a tensor has recorded none (errors are cleared
 *     before each call) and the tensor's rank, dims and dtype are sane;
 *   - a realized tensor reads back without error;
 *   - after the input, with every handle released, no graph node is alive
 *     and every from_blob deleter ran exactly once.
 * One of the decoded actions arms the allocation-failure hook (the N-th
 * allocation from then on fails), so out-of-memory paths are fuzzed too:
 * they must give clean errors, leak nothing and leave the library usable.
 */
#include "fuzz_common.h"

enum { NSLOT = 12, NPROG = 2, DATA_BYTES = 1 << 16 };

typedef struct {
    rlx_tensor *t;
    int depth; /* scope depth the handle is recorded in; 0: owned by the fuzzer */
} slot;

static slot slots[NSLOT];
static int depth;
/* failed rlx_scope_begin calls whose rlx_scope_end has not come: the
 * library counts them as open, innermost, and hands out no handle */
static int unopened;
static struct {
    rlx_program *p;
    int nout;
} progs[NPROG];
static long blobs_made, blobs_freed;
static unsigned char data_buf[DATA_BYTES];

static void blob_free(void *ctx)
{
    blobs_freed++;
    free(ctx);
}

/* ----------------------------------------------------------- contract */

static void check_failure(const char *what)
{
    FUZZ_ASSERT(strncmp(rlx_last_error(), "rlx_", 4) == 0, "%s: message '%s'", what, rlx_last_error());
    FUZZ_ASSERT(rlx_last_status() != RLX_E_INTERNAL, "%s: an internal error", what);
}

static void check_tensor(rlx_tensor *t, const char *what)
{
    int r = rlx_rank(t);
    FUZZ_ASSERT(r >= 0 && r <= RLX_MAX_RANK, "%s: rank %d", what, r);
    int dt = (int)rlx_dtype_of(t);
    FUZZ_ASSERT(dt >= 0 && dt <= RLX_C128, "%s: dtype %d", what, dt);
    int64_t shape[RLX_MAX_RANK];
    FUZZ_ASSERT(rlx_shape(t, shape, RLX_MAX_RANK) == r, "%s: rlx_shape", what);
    for (int i = 0; i < r; i++)
        FUZZ_ASSERT(shape[i] >= -1 && rlx_dim(t, i) == shape[i], "%s: dim %d is %lld", what, i, (long long)shape[i]);
    FUZZ_ASSERT(rlx_last_status() == RLX_OK, "%s: introspection recorded an error", what);
}

/* After a call that returned t (NULL on failure). */
static rlx_tensor *checked(rlx_tensor *t, const char *what)
{
    if (!t) {
        FUZZ_ASSERT(rlx_last_status() != RLX_OK, "%s returned NULL without an error", what);
        check_failure(what);
    } else {
        FUZZ_ASSERT(rlx_last_status() == RLX_OK, "%s returned a tensor and recorded an error", what);
        check_tensor(t, what);
    }
    return t;
}

static rlx_status checked_status(rlx_status st, const char *what)
{
    if (st != RLX_OK) {
        FUZZ_ASSERT(rlx_last_status() == st, "%s returned %d but recorded %d", what, (int)st, (int)rlx_last_status());
        check_failure(what);
    } else {
        FUZZ_ASSERT(rlx_last_status() == RLX_OK, "%s returned OK and recorded an error", what);
    }
    return st;
}

/* ------------------------------------------------------------- slots */

static rlx_tensor *get(fz_reader *r)
{
    uint8_t b = fz_u8(r);
    if (b >= 250)
        return NULL; /* NULL on purpose */
    return slots[b % NSLOT].t;
}

/* Stores a new handle (the reference of the fuzzer or of the open scope). */
static void put(fz_reader *r, rlx_tensor *t)
{
    if (!t)
        return;
    FUZZ_ASSERT(unopened == 0, "a handle was handed out inside a scope whose rlx_scope_begin failed");
    int i = fz_u8(r) % NSLOT;
    if (slots[i].t && slots[i].depth == 0)
        rlx_release(slots[i].t);
    slots[i].t = t;
    slots[i].depth = depth;
}

/* ------------------------------------------------------------ tables */

typedef rlx_tensor *(*un_fn)(rlx_tensor *);
typedef rlx_tensor *(*bin_fn)(rlx_tensor *, rlx_tensor *);
typedef rlx_tensor *(*bins_fn)(rlx_tensor *, double);
typedef rlx_tensor *(*red_fn)(rlx_tensor *, const int *, int, bool);

static const un_fn unary[] = {
    rlx_neg, rlx_relu, rlx_gelu, rlx_gelu_tanh, rlx_silu, rlx_tanh, rlx_exp, rlx_log, rlx_sqrt, rlx_rsqrt,
    rlx_sigmoid, rlx_abs, rlx_sin, rlx_cos, rlx_tan, rlx_atan, rlx_round, rlx_recip, rlx_floor, rlx_ceil,
    rlx_sign, rlx_softplus, rlx_elu, rlx_erf, rlx_hard_swish, rlx_hard_sigmoid, rlx_mish, rlx_softsign,
    rlx_log_sigmoid, rlx_logical_not, rlx_flatten, rlx_squeeze_all, rlx_t, rlx_contiguous,
    rlx_stop_gradient, rlx_zeros_like, rlx_ones_like, rlx_sum_all, rlx_mean_all, rlx_inv, rlx_fft, rlx_ifft,
    rlx_conj, rlx_real, rlx_imag};
static const bin_fn binary[] = {rlx_add, rlx_sub, rlx_mul, rlx_div, rlx_pow, rlx_maximum, rlx_minimum,
                                rlx_atan2, rlx_rem, rlx_eq, rlx_ne, rlx_lt, rlx_le, rlx_gt, rlx_ge,
                                rlx_logical_and, rlx_logical_or, rlx_matmul, rlx_matmul_t, rlx_solve,
                                rlx_cross_entropy, rlx_softmax_cross_entropy_with_logits,
                                rlx_synth_reconstruct, rlx_complex};
static const bins_fn binary_s[] = {rlx_add_s, rlx_sub_s, rlx_mul_s, rlx_div_s, rlx_pow_s, rlx_maximum_s,
                                   rlx_minimum_s, rlx_atan2_s, rlx_rem_s, rlx_eq_s, rlx_ne_s, rlx_lt_s,
                                   rlx_le_s, rlx_gt_s, rlx_ge_s, rlx_rsub_s, rlx_rdiv_s, rlx_clamp_min,
                                   rlx_clamp_max, rlx_full_like};
static const red_fn reductions[] = {rlx_sum, rlx_mean, rlx_max, rlx_min, rlx_prod, rlx_var, rlx_std, rlx_norm};

#define N(a) (sizeof(a) / sizeof *(a))

static void read_shape(fz_reader *r, int rank, int64_t *shape)
{
    int n = rank < 0 ? 0 : rank > 16 ? 16 : rank;
    for (int i = 0; i < n; i++)
        shape[i] = fz_dim(r);
}

/* Bytes of a valid shape and dtype, or SIZE_MAX when that overflows or the
 * shape is invalid (the library then rejects it before reading data). */
static size_t shape_bytes(int dt, int rank, const int64_t *shape)
{
    if (dt < 0 || dt > RLX_C128 || rank < 0 || rank > RLX_MAX_RANK)
        return SIZE_MAX;
    unsigned __int128 b = ir_dtype_size((rlx_dtype)dt);
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0)
            return SIZE_MAX;
        b *= (uint64_t)shape[i];
        if (b > ((unsigned __int128)1 << 100))
            b = (unsigned __int128)1 << 100;
    }
    return b > SIZE_MAX / 2 ? SIZE_MAX : (size_t)b;
}

/* Realizes (or reads) t when that is cheap, and checks the contract. */
static void realize_and_read(fz_reader *r, rlx_tensor *t)
{
    ir_node *n = (ir_node *)t;
    if (!fz_cheap(&n, 1))
        return;
    uint8_t how = fz_u8(r) % 8;
    rlx_clear_error();
    if (how == 0) {
        checked_status(rlx_realize(t), "rlx_realize");
        if (t && rlx_last_status() == RLX_OK)
            FUZZ_ASSERT(rlx_is_realized(t), "realized tensor is not realized");
        return;
    }
    if (!t) {
        checked_status(rlx_realize(t), "rlx_realize(NULL)");
        return;
    }
    int64_t numel = rlx_numel(t);
    int dt = (int)rlx_dtype_of(t);
    if (numel < 0 || dt < 0)
        return;
    size_t need = (size_t)numel * ir_dtype_size((rlx_dtype)dt);
    size_t give = fz_u8(r) < 230 ? need : need / 2; /* sometimes too small: an error, no write past the end */
    switch (how) {
    case 1:
    case 2: {
        void *dst = malloc(give ? give : 1);
        rlx_status st = checked_status(rlx_read(t, dst, give), "rlx_read");
        FUZZ_ASSERT(st != RLX_OK || give >= need, "rlx_read accepted a short buffer");
        free(dst);
        break;
    }
    case 3: {
        size_t count = give == need ? (size_t)numel : (size_t)numel / 2;
        float *dst = malloc((count ? count : 1) * sizeof *dst);
        checked_status(rlx_read_f32(t, dst, count), "rlx_read_f32");
        free(dst);
        break;
    }
    case 4: {
        size_t count = give == need ? (size_t)numel : (size_t)numel / 2;
        double *dst = malloc((count ? count : 1) * sizeof *dst);
        checked_status(rlx_read_f64(t, dst, count), "rlx_read_f64");
        free(dst);
        break;
    }
    case 5: {
        double v;
        checked_status(rlx_item(t, fz_u8(r) < 250 ? &v : NULL), "rlx_item");
        break;
    }
    case 6: {
        const unsigned char *p = rlx_data(t);
        if (p) {
            FUZZ_ASSERT(rlx_last_status() == RLX_OK, "rlx_data returned data and an error");
            volatile unsigned char sum = 0;
            for (size_t i = 0; i < need; i++)
                sum ^= p[i]; /* ASan checks that the whole payload is there */
            (void)sum;
        } else {
            FUZZ_ASSERT(rlx_last_status() != RLX_OK, "rlx_data returned NULL without an error");
        }
        break;
    }
    default: {
        char *s = rlx_to_string(t);
        if (s) {
            FUZZ_ASSERT(strlen(s) > 0, "empty string");
            free(s);
        } else {
            FUZZ_ASSERT(rlx_last_status() != RLX_OK, "rlx_to_string returned NULL without an error");
        }
        break;
    }
    }
}

static rlx_tensor *make_leaf(fz_reader *r)
{
    int64_t shape[16] = {0};
    int dt = fz_dtype(r), rank = fz_rank(r);
    read_shape(r, rank, shape);
    const int64_t *sp = fz_u8(r) < 252 ? shape : NULL;
    switch (fz_u8(r) % 13) {
    case 0:
    case 1: {
        size_t b = shape_bytes(dt, rank, shape);
        const void *d = b <= DATA_BYTES ? data_buf : NULL;
        return checked(rlx_from_data((rlx_dtype)dt, rank, sp, d), "rlx_from_data");
    }
    case 2: {
        size_t b = shape_bytes(dt, rank, shape);
        if (b > DATA_BYTES)
            return NULL;
        void *copy = malloc(b ? b : 1);
        memcpy(copy, data_buf, b);
        rlx_tensor *t = checked(rlx_from_blob((rlx_dtype)dt, rank, sp, copy, blob_free, copy), "rlx_from_blob");
        if (t)
            blobs_made++;
        else
            free(copy); /* on failure the caller keeps the data */
        return t;
    }
    case 3: return checked(rlx_full((rlx_dtype)dt, rank, sp, fz_double(r)), "rlx_full");
    case 4: return checked(rlx_zeros((rlx_dtype)dt, rank, sp), "rlx_zeros");
    case 5: return checked(rlx_ones((rlx_dtype)dt, rank, sp), "rlx_ones");
    case 6: return checked(rlx_scalar((rlx_dtype)dt, fz_double(r)), "rlx_scalar");
    case 7: {
        double a = fz_double(r), b = fz_double(r), s = fz_double(r);
        return checked(rlx_arange((rlx_dtype)dt, a, b, s), "rlx_arange");
    }
    case 8: return checked(rlx_eye((rlx_dtype)dt, fz_dim(r)), "rlx_eye");
    case 9:
        if (fz_u8(r) < 64) /* the seed a tensor from a slot: any dtype and shape */
            return checked(rlx_rand_seeded((rlx_dtype)dt, rank, sp, get(r)), "rlx_rand_seeded");
        return checked(rlx_rand((rlx_dtype)dt, rank, sp, fz_u8(r)), "rlx_rand");
    case 10:
        if (fz_u8(r) < 64)
            return checked(rlx_randn_seeded((rlx_dtype)dt, rank, sp, get(r)), "rlx_randn_seeded");
        return checked(rlx_randn((rlx_dtype)dt, rank, sp, fz_u8(r)), "rlx_randn");
    case 11: {
        static const char *names[] = {"x", "y", "z", "", NULL};
        uint8_t b = fz_u8(r);
        return checked(rlx_input(names[b % 5], (rlx_dtype)dt, rank, sp), "rlx_input");
    }
    default: {
        /* a small realized tensor with data from the input: gives gather
         * indices and masks arbitrary values */
        int64_t n = fz_u8(r) % 9;
        int64_t sh[1] = {n};
        for (int64_t i = 0; i < n * 16 && !fz_empty(r); i++) /* c128: 16 bytes an element */
            data_buf[i] = fz_u8(r);
        return checked(rlx_from_data((rlx_dtype)(dt >= 0 && dt <= RLX_C128 ? dt : RLX_I64), 1, sh, data_buf),
                       "rlx_from_data");
    }
    }
}

static void do_movement(fz_reader *r)
{
    rlx_tensor *x = get(r);
    int64_t shape[16] = {0};
    int axis = fz_int(r);
    rlx_tensor *y = NULL;
    switch (fz_u8(r) % 14) {
    case 0: {
        int rank = fz_rank(r);
        read_shape(r, rank, shape);
        if (fz_u8(r) < 40)
            shape[fz_u8(r) % 8] = -1;
        y = checked(rlx_reshape(x, rank, shape), "rlx_reshape");
        break;
    }
    case 1: {
        int perm[16];
        int n = fz_u8(r) % 10;
        for (int i = 0; i < 16; i++)
            perm[i] = i < n ? (fz_u8(r) < 240 ? fz_u8(r) % (n + 1) : fz_int(r)) : 0;
        bool null = fz_u8(r) < 30;
        y = checked(rlx_transpose(x, null ? 0 : n, null ? NULL : perm), "rlx_transpose");
        break;
    }
    case 2: {
        int rank = fz_rank(r);
        read_shape(r, rank, shape);
        y = checked(rlx_broadcast_to(x, rank, shape), "rlx_broadcast_to");
        break;
    }
    case 3: y = checked(rlx_unsqueeze(x, axis), "rlx_unsqueeze"); break;
    case 4: y = checked(rlx_squeeze(x, axis), "rlx_squeeze"); break;
    case 5: {
        int64_t s = fz_i64(r), l = fz_i64(r);
        y = checked(rlx_narrow(x, axis, s, l), "rlx_narrow");
        break;
    }
    case 6: {
        int64_t a = fz_u8(r) < 40 ? RLX_END : fz_i64(r), b = fz_u8(r) < 60 ? RLX_END : fz_i64(r), s = fz_i64(r);
        y = checked(rlx_slice(x, axis, a, b, s), "rlx_slice");
        break;
    }
    case 7: y = checked(rlx_select(x, axis, fz_i64(r)), "rlx_select"); break;
    case 8:
    case 9: {
        rlx_tensor *out[9];
        int64_t sizes[9];
        int n = fz_u8(r) % 10 - 1; /* -1..8 */
        for (int i = 0; i < 9; i++)
            sizes[i] = fz_u8(r) < 230 ? fz_u8(r) % 5 : fz_i64(r);
        rlx_clear_error();
        rlx_status st = (fz_u8(r) & 1) ? rlx_split(x, axis, n, fz_u8(r) < 250 ? sizes : NULL, out)
                                       : rlx_chunk(x, axis, n, out);
        checked_status(st, "rlx_split/chunk");
        for (int i = 0; i < n; i++) {
            if (st == RLX_OK)
                put(r, checked(out[i], "split piece"));
            else
                FUZZ_ASSERT(out[i] == NULL, "split failed but out[%d] is set", i);
        }
        return;
    }
    case 10: y = checked(rlx_flip(x, axis), "rlx_flip"); break;
    case 11: y = checked(rlx_roll(x, axis, fz_i64(r)), "rlx_roll"); break;
    case 12: {
        int64_t b = fz_i64(r), a = fz_i64(r);
        y = checked(rlx_pad(x, axis, b, a, fz_double(r)), "rlx_pad");
        break;
    }
    default: y = checked(rlx_tile(x, axis, fz_i64(r)), "rlx_tile"); break;
    }
    put(r, y);
}

static void do_nn(fz_reader *r)
{
    rlx_tensor *a = get(r), *b = get(r), *c = get(r), *d = get(r);
    int i1 = fz_int(r), i2 = fz_int(r);
    int k[2] = {fz_int(r), fz_int(r)}, s[2] = {fz_int(r), fz_int(r)}, p[2] = {fz_int(r), fz_int(r)},
        dl[2] = {fz_int(r), fz_int(r)};
    bool nul = fz_u8(r) < 60;
    rlx_tensor *y = NULL;
    switch (fz_u8(r) % 33) {
    case 0: y = checked(rlx_softmax(a, i1), "rlx_softmax"); break;
    case 1: y = checked(rlx_log_softmax(a, i1), "rlx_log_softmax"); break;
    case 2: y = checked(rlx_layer_norm(a, b, c, fz_double(r)), "rlx_layer_norm"); break;
    case 3: y = checked(rlx_rms_norm(a, b, fz_double(r)), "rlx_rms_norm"); break;
    case 4: y = checked(rlx_attention(a, b, c, i1, i2, (rlx_mask)(fz_u8(r) % 4), fz_int(r)), "rlx_attention"); break;
    case 5: y = checked(rlx_attention_masked(a, b, c, d, i1, i2), "rlx_attention_masked"); break;
    case 6: y = checked(rlx_rope(a, b, c, i1), "rlx_rope"); break;
    case 7:
        y = checked(rlx_conv2d(a, b, c, nul ? NULL : s, nul ? NULL : p, nul ? NULL : dl, i1), "rlx_conv2d");
        break;
    case 8: y = checked(rlx_max_pool2d(a, k, nul ? NULL : s, nul ? NULL : p), "rlx_max_pool2d"); break;
    case 9: y = checked(rlx_avg_pool2d(a, k, nul ? NULL : s, nul ? NULL : p), "rlx_avg_pool2d"); break;
    case 10:
        if (fz_u8(r) & 1)
            y = checked(rlx_fft_c(a, i1, fz_u8(r) & 1), "rlx_fft_c");
        else
            y = checked(rlx_fft_axis(a, i1, fz_u8(r) & 1), "rlx_fft_axis");
        break;
    case 11: y = checked(rlx_scaled_matmul(a, b, (rlx_minifloat)(fz_u8(r) % 6), i1), "rlx_scaled_matmul"); break;
    case 12: y = checked(rlx_synth_matmul(a, b, c), "rlx_synth_matmul"); break;
    case 13: {
        double lo = fz_double(r), hi = fz_double(r);
        y = checked(rlx_spline_activation(a, b, i1, lo, hi), "rlx_spline_activation");
        break;
    }
    case 14: y = checked(rlx_linear(a, b, c), "rlx_linear"); break;
    case 15: y = checked(rlx_linear_act(a, b, c, (rlx_act)(fz_u8(r) % 8)), "rlx_linear_act"); break;
    case 16: y = checked(rlx_where(a, b, c), "rlx_where"); break;
    case 17: y = checked(rlx_masked_fill(a, b, fz_double(r)), "rlx_masked_fill"); break;
    case 18: {
        double lo = fz_double(r), hi = fz_double(r);
        y = checked(rlx_clamp(a, lo, hi), "rlx_clamp");
        break;
    }
    case 20: {
        rlx_attention_opts o = {fz_int(r), (rlx_mask)(fz_u8(r) % 4), fz_int(r), nul ? NULL : d, fz_double(r)};
        y = checked(rlx_attention_ex(a, b, c, i1, i2, fz_u8(r) < 30 ? NULL : &o), "rlx_attention_ex");
        break;
    }
    case 21: {
        rlx_rope_opts o = {fz_i64(r), nul ? NULL : d, fz_int(r), fz_u8(r) & 1};
        y = checked(rlx_rope_ex(a, b, c, i1, fz_u8(r) < 30 ? NULL : &o), "rlx_rope_ex");
        break;
    }
    case 22: y = checked(rlx_conv1d(a, b, c, s[0], p[0], dl[0], i1), "rlx_conv1d"); break;
    case 23: {
        int op[2] = {fz_int(r), fz_int(r)};
        y = checked(rlx_conv_transpose2d(a, b, c, nul ? NULL : s, nul ? NULL : p, nul ? NULL : op, nul ? NULL : dl, i1),
                    "rlx_conv_transpose2d");
        break;
    }
    case 24: y = checked(rlx_conv_transpose1d(a, b, c, s[0], p[0], k[0], dl[0], i1), "rlx_conv_transpose1d"); break;
    case 25: {
        static const char *const eqs[] = {"ij,jk->ik", "ii->i", "ii", "...ij,...jk", "bij,bkj->bik", "i,i", "ij->",
                                          "a,b,c->abc", "ij,->ji", "i->ii", "ab,ab", "..., ...->...", "", "j,jk,k",
                                          "iij->ji", "AZ,Zb->bA", "i-j", "ij,jk->ik,"};
        rlx_tensor *xs[3] = {a, b, c};
        y = checked(rlx_einsum(nul ? NULL : eqs[fz_u8(r) % N(eqs)], xs, fz_u8(r) % 5 - 1), "rlx_einsum");
        break;
    }
    case 26: {
        rlx_tensor *nm = NULL, *nv = NULL;
        bool stats = fz_u8(r) & 1;
        y = checked(rlx_batch_norm(a, b, c, nul ? NULL : d, NULL, fz_u8(r) & 1, fz_double(r), fz_double(r),
                                   stats ? &nm : NULL, stats ? &nv : NULL),
                    "rlx_batch_norm");
        if (stats) {
            if (y) {
                put(r, checked(nm, "batch_norm new_mean"));
                put(r, checked(nv, "batch_norm new_var"));
            } else {
                FUZZ_ASSERT(nm == NULL && nv == NULL, "rlx_batch_norm failed but its statistics are set");
            }
        }
        break;
    }
    case 27: y = checked(rlx_group_norm(a, i1, b, nul ? NULL : c, fz_double(r)), "rlx_group_norm"); break;
    case 28:
        if (fz_u8(r) & 1)
            y = checked(rlx_dropout(a, fz_double(r), fz_u8(r)), "rlx_dropout");
        else
            y = checked(rlx_dropout_seeded(a, fz_double(r), b), "rlx_dropout_seeded");
        break;
    case 29: {
        int64_t bf = fz_i64(r), af = fz_i64(r);
        y = checked(rlx_pad_mode(a, i1, bf, af, (rlx_padding)(fz_u8(r) % 4)), "rlx_pad_mode");
        break;
    }
    case 30: y = checked((fz_u8(r) & 1 ? rlx_sort : rlx_argsort)(a, i1, fz_u8(r) & 1), "rlx_sort/argsort"); break;
    case 31: {
        rlx_tensor *vals = NULL, *idx = NULL;
        rlx_clear_error();
        rlx_status st = checked_status(rlx_topk(a, fz_i64(r), i1, fz_u8(r) & 1, nul ? NULL : &vals, &idx), "rlx_topk");
        if (st == RLX_OK) {
            put(r, checked(vals, "topk values"));
            y = checked(idx, "topk indices");
        } else {
            FUZZ_ASSERT(vals == NULL && idx == NULL, "rlx_topk failed but an output is set");
        }
        break;
    }
    case 32: y = checked(rlx_multinomial(a, fz_i64(r) % 64, fz_u8(r) & 1, fz_u8(r)), "rlx_multinomial"); break;
    default: y = checked(rlx_gather(a, b, i1), "rlx_gather"); break;
    }
    put(r, y);
}

static void do_grad(fz_reader *r)
{
    rlx_tensor *loss = get(r), *wrt[4], *grads[4];
    int n = fz_u8(r) % 6 - 1; /* -1..4 */
    for (int i = 0; i < 4; i++)
        wrt[i] = get(r);
    rlx_clear_error();
    rlx_status st = checked_status(rlx_grad(loss, wrt, n, grads), "rlx_grad");
    for (int i = 0; i < n; i++) {
        if (st == RLX_OK)
            put(r, checked(grads[i], "gradient"));
        else
            FUZZ_ASSERT(grads[i] == NULL, "rlx_grad failed but grads[%d] is set", i);
    }
}

static void do_program(fz_reader *r)
{
    int which = fz_u8(r) % NPROG;
    if (fz_u8(r) & 1) {
        rlx_tensor *outs[3] = {get(r), get(r), get(r)};
        int n = fz_u8(r) % 5 - 1;
        if (n > 3)
            n = 3;
        bool cheap = true;
        for (int i = 0; i < n && cheap; i++)
            cheap = outs[i] && fz_cheap((ir_node *const *)&outs[i], 1);
        if (!cheap) /* a program runs later on bindings of the same shapes */
            return;
        rlx_clear_error();
        rlx_program *p = rlx_compile(outs, n);
        if (!p) {
            FUZZ_ASSERT(rlx_last_status() != RLX_OK, "rlx_compile returned NULL without an error");
            return;
        }
        FUZZ_ASSERT(rlx_last_status() == RLX_OK, "rlx_compile returned a program and an error");
        rlx_program_free(progs[which].p);
        progs[which].p = p;
        progs[which].nout = n;
        return;
    }
    if (!progs[which].p && fz_u8(r) < 200)
        return;
    static const char *names[] = {"x", "y", "z", "w", NULL};
    rlx_binding b[3];
    int nin = fz_u8(r) % 4;
    for (int i = 0; i < nin; i++) {
        b[i].name = names[fz_u8(r) % 5];
        b[i].value = get(r);
        if (b[i].value && !fz_cheap((ir_node *const *)&b[i].value, 1))
            return;
    }
    rlx_tensor *outs[3] = {NULL, NULL, NULL};
    rlx_clear_error();
    rlx_status st = checked_status(rlx_program_run(progs[which].p, b, nin, outs), "rlx_program_run");
    for (int i = 0; i < progs[which].nout && progs[which].p; i++) {
        if (st == RLX_OK)
            put(r, checked(outs[i], "program output"));
        else
            FUZZ_ASSERT(outs[i] == NULL, "rlx_program_run failed but output %d is set", i);
    }
}

static void do_introspect(fz_reader *r)
{
    rlx_tensor *a = get(r), *b = get(r);
    int cap = fz_u8(r) % 10 - 1;
    int64_t *out = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *out);
    (void)rlx_shape(a, cap >= 0 ? out : NULL, cap);
    free(out);
    (void)rlx_dim(a, fz_int(r));
    (void)rlx_numel(a);
    (void)rlx_is_realized(a);
    (void)rlx_shares_storage(a, b);
    (void)rlx_storage_bytes(a);
    (void)rlx_dtype_of(a);
    (void)rlx_dtype_name((rlx_dtype)fz_dtype(r));
    if (fz_u8(r) < 8)
        (void)rlx_dump_dot(a, "/dev/null");
    rlx_stats_t stats;
    rlx_stats(fz_u8(r) < 250 ? &stats : NULL);
}

static void release_all(void)
{
    ir_alloc_fail_after(-1);
    for (; unopened > 0; unopened--)
        rlx_scope_end();
    while (depth > 0) {
        rlx_scope_end();
        for (int i = 0; i < NSLOT; i++)
            if (slots[i].t && slots[i].depth == depth)
                slots[i].t = NULL;
        depth--;
    }
    for (int i = 0; i < NSLOT; i++) {
        if (slots[i].t)
            rlx_release(slots[i].t);
        slots[i].t = NULL;
    }
    for (int i = 0; i < NPROG; i++) {
        rlx_program_free(progs[i].p);
        progs[i].p = NULL;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static long live0 = -1;
    if (live0 < 0) {
        rlx_set_num_threads(2);
        live0 = ir_live_nodes();
    }
    fz_reader rd = {data, size}, *r = &rd;
    rlx_set_option("backend", "ref");
    rlx_clear_error();
    for (size_t i = 0; i < DATA_BYTES; i += 8)
        memcpy(data_buf + i, &(double){(double)(i / 8 % 7) - 3}, 8);
    blobs_made = blobs_freed = 0;
    int steps = 0;
    while (!fz_empty(r) && steps++ < 256) {
        rlx_clear_error();
        uint8_t op = fz_u8(r);
        switch (op % 20) {
        case 0:
        case 1: put(r, make_leaf(r)); break;
        case 2:
        case 3: {
            rlx_tensor *x = get(r);
            put(r, checked(unary[fz_u8(r) % N(unary)](x), "unary"));
            break;
        }
        case 4:
        case 5: {
            rlx_tensor *a = get(r), *b = get(r);
            put(r, checked(binary[fz_u8(r) % N(binary)](a, b), "binary"));
            break;
        }
        case 6: {
            rlx_tensor *a = get(r);
            put(r, checked(binary_s[fz_u8(r) % N(binary_s)](a, fz_double(r)), "binary_s"));
            break;
        }
        case 7: {
            rlx_tensor *x = get(r);
            int axes[16];
            int n = fz_u8(r) % 12 - 2;
            for (int i = 0; i < 16; i++)
                axes[i] = fz_int(r) % 12;
            bool keep = fz_u8(r) & 1, nul = fz_u8(r) < 40;
            put(r, checked(reductions[fz_u8(r) % N(reductions)](x, nul ? NULL : axes, n, keep), "reduction"));
            break;
        }
        case 8: {
            rlx_tensor *x = get(r);
            int axis = fz_int(r);
            bool f = fz_u8(r) & 1;
            switch (fz_u8(r) % 4) {
            case 0: put(r, checked(rlx_argmax(x, axis, f), "rlx_argmax")); break;
            case 1: put(r, checked(rlx_argmin(x, axis, f), "rlx_argmin")); break;
            case 2: put(r, checked(rlx_logsumexp(x, axis, f), "rlx_logsumexp")); break;
            default: put(r, checked(rlx_cumsum(x, axis, f), "rlx_cumsum")); break;
            }
            break;
        }
        case 9:
        case 10: do_movement(r); break;
        case 11: {
            rlx_tensor *xs[9];
            int n = fz_u8(r) % 10 - 1;
            for (int i = 0; i < 9; i++)
                xs[i] = get(r);
            int axis = fz_int(r);
            if (fz_u8(r) & 1)
                put(r, checked(rlx_cat(fz_u8(r) < 250 ? xs : NULL, n, axis), "rlx_cat"));
            else
                put(r, checked(rlx_stack(xs, n, axis), "rlx_stack"));
            break;
        }
        case 12: {
            rlx_tensor *x = get(r), *idx = get(r);
            int axis = fz_int(r);
            if (fz_u8(r) & 1)
                put(r, checked(rlx_gather(x, idx, axis), "rlx_gather"));
            else
                put(r, checked(rlx_index_select(x, axis, idx), "rlx_index_select"));
            break;
        }
        case 13: {
            rlx_tensor *x = get(r);
            put(r, checked(rlx_cast(x, (rlx_dtype)fz_dtype(r)), "rlx_cast"));
            break;
        }
        case 14: do_nn(r); break;
        case 15: realize_and_read(r, get(r)); break;
        case 16: {
            rlx_tensor *ts[4];
            int n = fz_u8(r) % 5;
            for (int i = 0; i < 4; i++)
                ts[i] = get(r);
            if (fz_cheap((ir_node *const *)ts, n)) {
                rlx_clear_error();
                checked_status(rlx_realize_many(ts, n), "rlx_realize_many");
            }
            break;
        }
        case 17: {
            uint8_t b = fz_u8(r);
            switch (b % 9) {
            case 0:
                rlx_scope_begin();
                if (rlx_last_status() == RLX_OK)
                    depth++;
                else
                    unopened++; /* out of memory: counted, poisoned until its end */
                break;
            case 1:
                if (unopened > 0) {
                    rlx_scope_end(); /* closes the one that never opened */
                    FUZZ_ASSERT(rlx_last_status() == RLX_OK, "rlx_scope_end of a failed scope: %s", rlx_last_error());
                    unopened--;
                } else if (depth > 0) {
                    rlx_scope_end();
                    for (int i = 0; i < NSLOT; i++)
                        if (slots[i].t && slots[i].depth == depth)
                            slots[i].t = NULL; /* released by the scope */
                    depth--;
                } else {
                    rlx_scope_end(); /* no scope: an error, nothing else */
                    FUZZ_ASSERT(rlx_last_status() == RLX_E_ARG, "rlx_scope_end without a scope");
                }
                break;
            case 2: {
                int i = fz_u8(r) % NSLOT;
                if (slots[i].t && unopened > 0) {
                    FUZZ_ASSERT(rlx_escape(slots[i].t) == slots[i].t, "rlx_escape inside a failed scope");
                } else if (slots[i].t && depth > 0 && slots[i].depth == depth) {
                    rlx_tensor *t = rlx_escape(slots[i].t);
                    if (t)
                        slots[i].depth--;
                    else
                        slots[i].t = NULL; /* out of memory: released */
                }
                break;
            }
            case 3: {
                int i = fz_u8(r) % NSLOT;
                if (slots[i].t && slots[i].depth == 0) {
                    rlx_release(slots[i].t);
                    slots[i].t = NULL;
                }
                break;
            }
            case 4: put(r, rlx_retain(get(r))); break;
            case 5: rlx_set_option("backend", (b & 8) ? "jit" : "ref"); break;
            case 6: rlx_set_num_threads(b >> 4); break;
            case 7: ir_alloc_fail_after(fz_u8(r)); break; /* fault injection: a later allocation fails */
            default: {
                static const char *keys[] = {"backend", "num_threads", "nope", "", NULL};
                static const char *vals[] = {"ref", "jit", "0", "3", "-1", "99999999999", "x", "", NULL};
                uint8_t k = fz_u8(r), v = fz_u8(r);
                rlx_status st = rlx_set_option(keys[k % 5], vals[v % 9]);
                checked_status(st, "rlx_set_option");
                break;
            }
            }
            break;
        }
        case 18: do_grad(r); break;
        default:
            if (op & 32)
                do_program(r);
            else
                do_introspect(r);
            break;
        }
    }
    release_all();
    rlx_set_option("backend", "ref");
    rlx_set_num_threads(2);
    rlx_clear_error();
    FUZZ_ASSERT(ir_live_nodes() == live0, "%ld graph nodes leaked", ir_live_nodes() - live0);
    FUZZ_ASSERT(blobs_made == blobs_freed, "%ld blobs made, %ld deleters ran", blobs_made, blobs_freed);
    return 0;
}
