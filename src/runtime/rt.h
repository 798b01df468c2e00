/*
 * rt.h — the runtime: payload memory, and the reference evaluator that
 * computes a graph one primitive at a time with plain loops.
 *
 * The reference evaluator is the oracle for every faster backend: it
 * computes floats in double (rounding once when storing an f32), integers
 * in 64-bit wrapping arithmetic, and checks every index it reads.
 * Evaluated nodes are strided views over storages: movement ops only change
 * the view, compute ops write a fresh contiguous buffer.
 */
#ifndef RLX_RT_H
#define RLX_RT_H

#include "ir/cast.h"
#include "ir/ir.h"
#include "passes/passes.h"

/* storage.c */
/* A new storage of bytes (64-byte aligned, zero-filled when zero is true).
 * NULL when out of memory or larger than IR_MAX_BYTES. */
ir_storage *rt_storage_alloc(size_t bytes, bool zero);
/* A block of size bytes (a multiple of 64, at most RT_SLAB_ITEM_MAX) carved
 * from the process's huge-page slabs, or NULL when they are spent
 * (RT_SLAB_BUDGET in all) or cannot be mapped. Never freed: the caller
 * keeps it for reuse (bufpool.c's size classes). Why: the first touch of
 * a 4 KiB page costs ~40 us under this project's VMs (a fault in the
 * guest and one in the host), a 2 MiB huge page about what 5 small ones
 * do, so the many small outputs of a program's first run fault in far
 * faster from huge pages than from the heap's small ones. */
void *rt_slab_take(size_t size);
/* Whether p is inside a block rt_slab_take returned. */
bool rt_slab_owns(const void *p);
#define RT_SLAB_ITEM_MAX ((size_t)1 << 20)
#define RT_SLAB_BUDGET ((size_t)128 << 20)
/* A storage over user memory; deleter(ctx) runs when it dies. */
ir_storage *rt_storage_wrap(void *data, size_t bytes, void (*deleter)(void *), void *ctx);
/* Whether st's memory is librlx's own (rt_storage_alloc, the buffer
 * pool), not a user's block or a mapped file: only such memory may be
 * written over by a run that owns it (a donated program input). */
bool rt_storage_private(const ir_storage *st);

/* A strided view of a storage: element (i0..ir) lives at element offset
 * off + sum(i_k * strides[k]). Stride 0 broadcasts. */
typedef struct {
    ir_storage *st; /* owns one reference */
    int64_t off;
    int64_t strides[IR_MAX_RANK];
} rt_view;

/* One realization's context (passes/passes.h): its options (thread count,
 * knobs: what the library kernels read), first failure and counters. */
typedef sched_ctx rt_ctx;
static inline int rt_threads(const rt_ctx *ctx) { return sched_threads(ctx); }

/* oracle/ref_eval.c: realizes every root (nodes already realized are skipped). */
rlx_status rt_ref_realize(ir_node *const *roots, int nroots, rt_ctx *ctx);
/* Records an error in ctx (first one wins); returns the status. */
rlx_status rt_fail(rt_ctx *ctx, rlx_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* A fresh contiguous view for n's result. */
rlx_status rt_alloc_out(rt_ctx *ctx, const ir_node *n, rt_view *out, bool zero);
void rt_contiguous_strides(int rank, const int64_t *shape, int64_t *strides);
bool rt_view_is_contiguous(const ir_node *n, const rt_view *v);
static inline char *rt_base(const rt_view *v, rlx_dtype dt)
{
    return (char *)v->st->data + v->off * (int64_t)ir_dtype_size(dt);
}

/* Element access in the two compute domains; stores cast as CAST does
 * (ir/cast.h). */
static inline double rt_ld_f(const void *p, rlx_dtype dt, int64_t i)
{
    switch (dt) {
    case RLX_BOOL: return ((const unsigned char *)p)[i] != 0;
    case RLX_I32: return ((const int32_t *)p)[i];
    case RLX_I64: return (double)((const int64_t *)p)[i];
    case RLX_F32: return ((const float *)p)[i];
    case RLX_F64: return ((const double *)p)[i];
    case RLX_F16: return ir_f16_value(((const uint16_t *)p)[i]);
    case RLX_BF16: return ir_bf16_value(((const uint16_t *)p)[i]);
    case RLX_I8: return ((const int8_t *)p)[i];
    case RLX_U8: return ((const uint8_t *)p)[i];
    case RLX_I16: return ((const int16_t *)p)[i];
    case RLX_U32: return ((const uint32_t *)p)[i];
    case RLX_C64: return ((const float *)p)[2 * i]; /* the real part, as a cast to a real dtype */
    case RLX_C128: return ((const double *)p)[2 * i];
    }
    return 0;
}
static inline int64_t rt_ld_i(const void *p, rlx_dtype dt, int64_t i)
{
    switch (dt) {
    case RLX_BOOL: return ((const unsigned char *)p)[i] != 0;
    case RLX_I32: return ((const int32_t *)p)[i];
    case RLX_I64: return ((const int64_t *)p)[i];
    case RLX_I8: return ((const int8_t *)p)[i];
    case RLX_U8: return ((const uint8_t *)p)[i];
    case RLX_I16: return ((const int16_t *)p)[i];
    case RLX_U32: return ((const uint32_t *)p)[i];
    default: return (int64_t)rt_ld_f(p, dt, i); /* callers convert floats with ir_cast_f2i */
    }
}
/* Integer v (already in dt's range) into element i of integer dtype dt. */
static inline void rt_put_int(void *p, rlx_dtype dt, int64_t i, int64_t v)
{
    switch (dt) {
    case RLX_BOOL: ((unsigned char *)p)[i] = (unsigned char)v; break;
    case RLX_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case RLX_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case RLX_I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case RLX_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case RLX_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    default: ((int64_t *)p)[i] = v; break;
    }
}
static inline void rt_st_f(void *p, rlx_dtype dt, int64_t i, double v)
{
    switch (dt) {
    case RLX_BOOL: ((unsigned char *)p)[i] = (unsigned char)ir_cast_bool(v); break;
    case RLX_F32: ((float *)p)[i] = (float)v; break;
    case RLX_F64: ((double *)p)[i] = v; break;
    case RLX_F16: ((uint16_t *)p)[i] = ir_f16_bits(v); break;
    case RLX_BF16: ((uint16_t *)p)[i] = ir_bf16_bits(v); break;
    case RLX_C64: ((float *)p)[2 * i] = (float)v; ((float *)p)[2 * i + 1] = 0; break;
    case RLX_C128: ((double *)p)[2 * i] = v; ((double *)p)[2 * i + 1] = 0; break;
    default: rt_put_int(p, dt, i, ir_cast_f2i(v, dt)); break;
    }
}
static inline void rt_st_i(void *p, rlx_dtype dt, int64_t i, int64_t v)
{
    if (dt == RLX_F32)
        ((float *)p)[i] = (float)v; /* one rounding, also past 2^53 */
    else if (ir_dtype_is_float(dt))
        rt_st_f(p, dt, i, (double)v);
    else
        rt_put_int(p, dt, i, ir_cast_wrap(v, dt));
}

/* The complex domain of c64 (rlx.h): every dtype loads as a complex
 * double (reals with imaginary part 0), and a store keeps what the
 * target holds (casts of c64 to real dtypes take the real part; to bool,
 * nonzero when either part is). */
typedef struct {
    double re, im;
} rt_cplx;
static inline rt_cplx rt_ld_c(const void *p, rlx_dtype dt, int64_t i)
{
    if (dt == RLX_C64)
        return (rt_cplx){((const float *)p)[2 * i], ((const float *)p)[2 * i + 1]};
    if (dt == RLX_C128)
        return (rt_cplx){((const double *)p)[2 * i], ((const double *)p)[2 * i + 1]};
    return (rt_cplx){ir_dtype_is_int(dt) ? (double)rt_ld_i(p, dt, i) : rt_ld_f(p, dt, i), 0};
}
static inline void rt_st_c(void *p, rlx_dtype dt, int64_t i, rt_cplx v)
{
    if (dt == RLX_C64) {
        ((float *)p)[2 * i] = (float)v.re;
        ((float *)p)[2 * i + 1] = (float)v.im;
    } else if (dt == RLX_C128) {
        ((double *)p)[2 * i] = v.re;
        ((double *)p)[2 * i + 1] = v.im;
    } else if (dt == RLX_BOOL) {
        ((unsigned char *)p)[i] = v.re != 0 || v.im != 0;
    } else {
        rt_st_f(p, dt, i, v.re);
    }
}

/* An odometer over a shape carrying element offsets of up to 4 views. */
typedef struct {
    int rank, nv;
    int64_t shape[IR_MAX_RANK], idx[IR_MAX_RANK];
    int64_t off[4];
    int64_t strides[4][IR_MAX_RANK];
} rt_iter;
void rt_iter_init(rt_iter *it, int rank, const int64_t *shape, int nv, const int64_t *const *strides);
static inline void rt_iter_next(rt_iter *it)
{
    for (int d = it->rank - 1; d >= 0; d--) {
        for (int k = 0; k < it->nv; k++)
            it->off[k] += it->strides[k][d];
        if (++it->idx[d] < it->shape[d])
            return;
        for (int k = 0; k < it->nv; k++)
            it->off[k] -= it->strides[k][d] * it->shape[d];
        it->idx[d] = 0;
    }
}

/* The evaluators of each family: compute n from its sources' views. */
typedef rlx_status (*rt_eval_fn)(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
/* The reference evaluator of op (NULL if none): also the fallback of the JIT. */
rt_eval_fn rt_ref_eval_fn(ir_op op);
/* The JIT's evaluator of op: the fast library kernel where the oracle has a
 * reference of its own (qmatmul), else rt_ref_eval_fn(op). */
rt_eval_fn rt_lib_eval_fn(ir_op op);
rlx_status rt_eval_leaf(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_rand_seeded(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_elementwise(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_reduce(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_movement(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_cat(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_gather(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_scatter(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
/* kernels/sort.c */
rlx_status rt_eval_argsort(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_multinomial(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_cumsum(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_matmul(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_solve(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
/* kernels/blas.c: rows [row_begin, row_end) of the flattened batch*m rows of the
 * float MATMUL n into out, an already allocated contiguous view of n's
 * shape (other rows untouched): lets a caller run an epilogue over a block
 * of rows while it is in cache. Uses the OpenBLAS thread count as it is
 * (set it with rt_blas_threads), except for all rows at once, which run
 * as rt_eval_matmul runs them; an operand view gemm cannot read is
 * packed per call. */
rlx_status rt_matmul_rows(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out, int64_t row_begin,
                          int64_t row_end);
/* c[m,n] = alpha a[m,k] b[k,n] (b^T when trans_b) + beta c, row-major f32
 * or f64 (dt) with leading dimensions: the gemm of the other library
 * kernels (attention, conv2d, q8), so that blas.c stays the one BLAS user.
 * onednn (rt_gemm_onednn): f32 through oneDNN's matmul, else sgemm. */
void rt_gemm(rlx_dtype dt, bool onednn, bool trans_b, int m, int n, int k, double alpha, const void *a, int lda,
             const void *b, int ldb, double beta, void *c, int ldc);
/* Whether ctx's f32 products go to oneDNN (knob f32_gemm, blas.c). */
bool rt_gemm_onednn(rt_ctx *ctx);
/* Sets OpenBLAS's thread count to n (n < 1: unchanged); returns the
 * previous count. Callers running BLAS inside their own parallel region
 * set 1 and restore after, so the two never oversubscribe the cores. */
int rt_blas_threads(int n);
/* A run of len f16/bf16 values (dt) to f32, and f32 to f16/bf16 rounded to
 * nearest even (NaN stays NaN): the library kernels that compute half
 * operands in f32 blocks (blas.c: F16C where the CPU has it). */
void rt_half_to_f32(rlx_dtype dt, const void *src, float *dst, int64_t len);
void rt_f32_to_half(rlx_dtype dt, const float *src, void *dst, int64_t len);
/* y [N, O, OH, OW] (contiguous) = conv2d of bf16 x [N, C, H, W] and w
 * [O, C/groups, KH, KW], read through their strides (elements), in
 * oneDNN's AVX512-BF16 convolution (f32 accumulation, rounded once) on
 * nthreads OpenMP threads. False without oneDNN, without the ISA, or when
 * oneDNN declines (the caller then takes its own path). */
bool rt_dnnl_conv_bf16(const void *x, const int64_t xd[4], const int64_t xs[4], const void *w, const int64_t wd[4],
                       const int64_t ws[4], void *y, const int64_t yd[4], int groups, const int stride[2],
                       const int pad[2], const int dil[2], int nthreads);
/* Products of fewer multiply-adds than mnk split in at most 2 blocks, not
 * 4 (blas.c, mm_blocks); < 0 restores the default, 0 the rule before it
 * (white-box benches compare the two). Set it while no matmul runs. */
void rt_blas_set_wide_split(long long mnk);
/* "OpenBLAS <core>": the kernel set OpenBLAS chose for this CPU. */
void rt_blas_describe(char *buf, size_t cap);
rlx_status rt_eval_fft(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_conv2d(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_pool2d(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_mxquant(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_attention(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
/* ATTENTION_BWD: kernels/attention.c (per block of query rows, BLAS) and
 * oracle/ref_attention.c (double loops, the reference). */
rlx_status rt_eval_attention_bwd(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_attention_bwd_ref(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
/* QMATMUL: oracle/ref_quant.c (double, the reference) and kernels/q8gemm.c
 * (weights dequantized to f32/f64 panels while packing, then gemm). */
rlx_status rt_eval_qmatmul_ref(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);
rlx_status rt_eval_qmatmul(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out);

/* Publishes v as the realized payload of root: in place when v is
 * contiguous, otherwise as a contiguous copy (rlx_data promises one). */
rlx_status rt_publish(rt_ctx *ctx, ir_node *root, const rt_view *v);

/* Copies view v of node-typed data (dtype dt, shape of n) into a fresh
 * contiguous view. */
rlx_status rt_materialize(rt_ctx *ctx, const ir_node *n, const rt_view *v, rt_view *out);

/* Bytes moved only to change a layout (rt_materialize, a packed matmul
 * operand), process-wide: a test's check that a plan's operands reach
 * their kernels as strides (tests/test_gpt_step.c). */
void rt_count_copy(uint64_t bytes);
uint64_t rt_copied_bytes(void);

/* Deterministic random numbers: element i of a RAND leaf with seed. */
double rt_rand_uniform(uint64_t seed, uint64_t i, rlx_dtype dt);
double rt_rand_normal(uint64_t seed, uint64_t i);

/* Minifloat rounding (kernels/quant.c): nearest-even, saturating. */
double rt_minifloat_round(double v, int fmt);
int rt_minifloat_emax(int fmt);

#endif
