/*
 * rlx.h — the public API of librlx, a C11 library of lazy tensors.
 *
 * This header is the specification. It follows ../shared/API.md section by
 * section; where API.md is silent, the decision taken is written here.
 *
 * Ownership, once for all: every function returning `rlx_tensor *` returns a
 * NEW reference (release it with rlx_release); every `rlx_tensor *` argument
 * is BORROWED, never consumed. Exceptions are stated at the function.
 *
 * Errors, once for all: no function aborts, asserts, exits or prints because
 * of its input. A failing function returns NULL (handles), a non-RLX_OK
 * status, or the sentinel given at the function, and records a thread-local
 * error (rlx_last_status / rlx_last_error). An op given a NULL tensor returns
 * NULL and keeps the error already recorded (or records RLX_E_ARG when none
 * is), so a whole expression can be built and checked once. A new error
 * replaces the recorded one; successful calls never clear it — only
 * rlx_clear_error does. Messages name the function and the offending values:
 * "rlx_matmul: inner dimensions differ: [2,3] @ [4,5]".
 *
 * Shapes are `int rank` + `const int64_t *shape`, rank 0..8 (RLX_MAX_RANK),
 * row-major. A negative axis counts from the end. Shapes whose byte size does
 * not fit in int64_t are RLX_E_SHAPE. Building allocates no payload and runs
 * nothing; rlx_realize (or a read) computes. Identical subexpressions are one
 * node, so building the same expression twice may return the same pointer
 * (retained twice): compare values, not pointers.
 *
 * Threads: any number of threads may build, realize and release at once;
 * errors and scopes are per thread.
 */
#ifndef RLX_H
#define RLX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RLX_BUILDING_LIBRARY) && defined(__GNUC__)
#define RLX_API __attribute__((visibility("default")))
#else
#define RLX_API
#endif

/* Version: the macros describe this header, rlx_version() the library. */
#define RLX_VERSION_MAJOR 0
#define RLX_VERSION_MINOR 1
#define RLX_VERSION_PATCH 0
#define RLX_VERSION_STRING "0.1.0"
#define RLX_MAX_RANK 8
#define RLX_END INT64_MAX /* "to the end" for rlx_slice */

/* ------------------------------------------------------------------ types */

typedef struct rlx_tensor rlx_tensor; /* opaque, immutable, lazy */

typedef enum {
    RLX_OK = 0,
    RLX_E_ARG = 1,         /* bad argument: NULL, out-of-range axis, bad option */
    RLX_E_SHAPE = 2,       /* shapes do not fit the operation */
    RLX_E_DTYPE = 3,       /* dtype not accepted by the operation */
    RLX_E_NOMEM = 4,       /* allocation failed or larger than the address space */
    RLX_E_JIT = 5,         /* code generation failed (LLVM's message attached) */
    RLX_E_LINALG = 6,      /* singular matrix (the batch index is named) */
    RLX_E_UNSUPPORTED = 7, /* not available in this build or not yet implemented */
    RLX_E_IO = 8,          /* a file could not be written or read */
    RLX_E_INTERNAL = 9     /* a bug in librlx: please report it */
} rlx_status;

typedef enum {
    RLX_BOOL = 0, RLX_I32 = 1, RLX_I64 = 2, RLX_F32 = 3, RLX_F64 = 4,
    RLX_F16 = 5,  /* IEEE binary16 */
    RLX_BF16 = 6, /* bfloat16: f32's exponent, 8 significant bits */
    RLX_I8 = 7, RLX_U8 = 8, RLX_I16 = 9, RLX_U32 = 10,
    RLX_C64 = 11, /* complex64: interleaved (re, im) f32 pairs, NumPy's layout */
    RLX_C128 = 12 /* complex128: interleaved (re, im) f64 pairs, NumPy's layout */
} rlx_dtype;
/* Later types take new numbers; never renumber.
 *
 * The narrow dtypes, once for all:
 * - Storage is the C/NumPy layout: f16 is IEEE binary16, bf16 the high
 *   half of an f32 (both as uint16_t bit patterns), i8/u8/i16/u32 the C
 *   integer types.
 * - Promotion follows PyTorch (and NumPy for the pairs PyTorch lacks):
 *   bool < every integer < every float; two integers of one signedness give
 *   the wider; an unsigned with a wider signed gives the signed one, with a
 *   signed of its width or narrower the signed type of twice its width
 *   (u8+i8 -> i16, u32+i32 -> i64, u32+i64 -> i64); an integer with a float
 *   gives the float (i64+f16 -> f16); f16+bf16 -> f32; other float pairs the
 *   wider.
 * - Casts: to f16/bf16 round once to nearest even from the exact value (an
 *   f64 is not rounded through f32), overflow gives +-inf, NaN stays NaN;
 *   float to any integer truncates toward zero and saturates at the
 *   target's range (NaN gives 0, -1.5 to u8 gives 0); integer to a narrower
 *   integer wraps modulo 2^bits (300 to u8 is 44, -1 to u32 is 4294967295).
 * - Compute: integer arithmetic wraps in the result's dtype (C, NumPy);
 *   f16 and bf16 ops compute in f32 or wider and round to the result's
 *   dtype. Inside one fused JIT kernel, intermediates stay in f32 and are
 *   rounded once on store (PyTorch's compiled CPU semantics; an explicit
 *   rlx_cast to f16 or bf16 rounds where it stands); the reference
 *   evaluator rounds each op's result. Reductions of f16/bf16 accumulate in
 *   f32 or wider and round the result once.
 * - Math precision matched to a half result (JIT): exp, tanh and sigmoid
 *   whose value is only rounded to f16/bf16 (the op's own dtype is f16 or
 *   bf16, or it is f32 inside a kernel that stores f16/bf16 and reaches
 *   that rounding only through add, sub, mul, div, neg, abs, tanh and
 *   exact casts, as in gelu_tanh of bf16) compute with cheaper f32
 *   kernels of relative error <= 2^-15.5 (bf16) and 2^-21 (f16), and those
 *   products and sums may fuse into an fma. The stored value is the
 *   correctly rounded one except where the exact value lies within that
 *   error of a rounding midpoint (1 ulp off: a few of the 65,536 inputs
 *   of each dtype); an add that cancels amplifies the error as it does
 *   f32 rounding errors. An f32 op whose value reaches an f32 or wider
 *   result unrounded keeps the f32 math.
 * - Library kernels (matmul, attention, conv, FFT, solve, sort, scatter)
 *   compute f16/bf16 in f32 and round the result (bf16 matmul multiplies
 *   bf16 directly, accumulating in f32: see the option "bf16_gemm"; f16
 *   matmul converts panels of 256 inner indices to f32 for sgemm, the
 *   f32 sum rounded once, no f32 copy of whole operands; attention and its
 *   gradient run on f32 copies of f16/bf16 q, k, v by default, or with
 *   the option "half_kernels" 0 read them as they are, converting blocks
 *   to f32 in the kernel's scratch (either way the output and dq, dk, dv
 *   are rounded once); bf16 conv2d without a bias runs oneDNN's AVX512-BF16
 *   convolution, f32 accumulation, rounded once, and so do the gradients
 *   of a bf16 conv2d, which are convolutions; with a bias, and f16 conv2d
 *   (oneDNN 2.6 has none without AVX512-FP16), widen to f32 copies; see
 *   the option "half_kernels");
 *   narrow integers go through i64 (or f32 where the op needs floats) and
 *   come back in the dtype the op's rule gives (i8 @ i8 is i8, wrapping).
 *   rlx_linear_q8 reads its i8/u8 weights as they are (no widened copy).
 * - Composites (the activations, softmax, log_softmax, layer/rms/batch/
 *   group norm, dropout, cross entropies, rope, spline_activation,
 *   mean/var/std/norm/logsumexp, linear and conv2d with their bias) also
 *   compute f16/bf16 in f32 and round their result once. sum, prod and
 *   cumsum of bool or any integer give i64; mean/var/std/norm of integers
 *   give f32. Index operands (gather, index_select, the scatter family,
 *   rope positions) are i32 or i64; a narrow integer index is RLX_E_DTYPE.
 * - rlx_rand/randn take the four float dtypes; rlx_grad any float loss and
 *   wrt, each gradient in its wrt's dtype.
 *
 * complex64 (RLX_C64) and complex128 (RLX_C128), once for all (what is
 * said of c64 holds for c128 with f64 parts, computed and stored in
 * double):
 * - Storage: 8 bytes per element, the real then the imaginary part as f32
 *   (C's float complex, NumPy complex64); c128 16 bytes, f64 parts (double
 *   complex, NumPy complex128). from_data/from_blob/rlx_read copy
 *   those pairs; rlx_read_f32/f64 and rlx_item refuse it (RLX_E_DTYPE: read
 *   the pairs with rlx_read, or take rlx_real/rlx_imag first);
 *   rlx_to_string writes NumPy's "1+2j".
 * - Promotion (PyTorch's table): c128 with any dtype gives c128; c64 with
 *   f64 gives c128; c64 with any other dtype (bool, the integers, f32,
 *   f16, bf16, c64) gives c64. Scalars of the _s functions are real: x + s
 *   adds s to the real part.
 * - Casts (PyTorch's): real -> c64 has imaginary part 0; c64 -> a real
 *   dtype keeps the real part (converted as that dtype's cast rules say)
 *   and discards the imaginary part; c64 -> bool is re != 0 || im != 0;
 *   c64 <-> c128 converts each part (c128 -> c64 rounds each once).
 * - Ops computing c64 (the reference evaluator's complex double arithmetic,
 *   rounded once to f32 parts; on the JIT backend they run as reference
 *   kernels, never fused): add, sub, mul, div, neg, exp (C's cexp; mul,
 *   div and exp follow C Annex G for inf and NaN), eq, ne (both parts
 *   equal), their _s forms, where, masked_fill, sum, mean, matmul
 *   (cblas_cgemm, c128 cblas_zgemm; matmul_t, linear and einsum through
 *   it), abs (-> f32, c128 -> f64, hypot), full/zeros/ones/eye/full_like/ones_like/zeros_like, and
 *   rlx_conj, rlx_real, rlx_imag, rlx_complex, rlx_fft_c below; the
 *   movement and indexing ops that copy elements (reshape, transpose,
 *   slice, narrow, select, flip, roll, tile, broadcast_to, pad with a real
 *   value, cat, stack, split, gather, index_select, contiguous,
 *   stop_gradient). Every other op (ordering, rounding, float math other
 *   than exp, var/std/norm, the activations and every composite of real
 *   math, scatter, cumsum, solve, conv, the [..., 2N] FFT, rand, arange)
 *   refuses c64 with RLX_E_DTYPE naming the function and c64.
 * - Autodiff (PyTorch's convention): the gradient of a complex z is
 *   dL/dRe(z) + i dL/dIm(z) for the real loss L (a complex wrt gets it in
 *   its dtype). Rules: add, sub, neg, sum, mean, where, casts and the
 *   movement ops as for reals; mul g*conj(other); div g/conj(b) and
 *   -g*conj(a/b)/conj(b); exp g*conj(exp z); abs Re(g)*z/|z| (0 at 0);
 *   conj conj(g); real complex(g, 0); imag complex(0, g); complex(re, im)
 *   Re(g), Im(g); matmul g B^H, A^H g; gather/index_select each part
 *   scattered back; fft_c the adjoint transform (unnormalized both ways).
 *   Every op above that computes complex has its rule; one added later
 *   without a complex rule is refused (RLX_E_UNSUPPORTED naming the op and
 *   the dtype), never wrong. A complex loss is RLX_E_DTYPE. */

typedef enum {
    RLX_ACT_NONE = 0, RLX_ACT_RELU = 1, RLX_ACT_GELU = 2, RLX_ACT_GELU_TANH = 3,
    RLX_ACT_SILU = 4, RLX_ACT_TANH = 5, RLX_ACT_SIGMOID = 6
} rlx_act;

typedef enum { RLX_MASK_NONE = 0, RLX_MASK_CAUSAL = 1, RLX_MASK_SLIDING = 2 } rlx_mask;

typedef enum {
    RLX_FP8_E4M3 = 0, RLX_FP8_E5M2 = 1, RLX_FP6_E2M3 = 2, RLX_FP6_E3M2 = 3, RLX_FP4_E2M1 = 4
} rlx_minifloat;

/* How rlx_pad_mode fills the border (PyTorch F.pad modes; NumPy np.pad
 * "constant", "reflect", "edge"). */
typedef enum { RLX_PAD_CONSTANT = 0, RLX_PAD_REFLECT = 1, RLX_PAD_REPLICATE = 2 } rlx_padding;

/* ----------------------------------------------------------------- errors */

/* Status of the last recorded error on this thread (RLX_OK when none). */
RLX_API rlx_status rlx_last_status(void);
/* Message of the last recorded error on this thread, "" when none. Owned by
 * the library; valid until the next librlx call on this thread. */
RLX_API const char *rlx_last_error(void);
/* Forget the recorded error of this thread. */
RLX_API void rlx_clear_error(void);
/* Library version, "MAJOR.MINOR.PATCH"; compare with RLX_VERSION_STRING. */
RLX_API const char *rlx_version(void);
/* The machine the library compiles for and the kernels OpenBLAS chose, e.g.
 * "LLVM 19.1.7, x86_64-pc-linux-gnu, cpu znver5, avx512f, OpenBLAS Zen",
 * then ", f32 GEMM oneDNN" where f32 products go to oneDNN by default
 * (option "f32_gemm"). Owned by the library. */
RLX_API const char *rlx_host_info(void);
/* "bool", "i32", "i64", "f32", "f64", "f16", "bf16", "i8", "u8", "i16",
 * "u32", "c64", "c128"; "?" (and RLX_E_ARG) for other values. */
RLX_API const char *rlx_dtype_name(rlx_dtype dt);

/* -------------------------------------------------------------- lifecycle */

/* Adds a reference; returns t (NULL stays NULL, with no error recorded). */
RLX_API rlx_tensor *rlx_retain(rlx_tensor *t);
/* Drops a reference; NULL is a no-op. Releasing a 100,000-node chain does
 * not recurse. */
RLX_API void rlx_release(rlx_tensor *t);
/* Opens a scope on this thread: until the matching rlx_scope_end, every
 * handle returned to this thread (rlx_retain included) is also recorded in
 * it. Scopes nest. When it cannot open (out of memory) it records
 * RLX_E_NOMEM and the scope counts as open but poisoned: until its
 * rlx_scope_end (which closes it as usual), every call on this thread that
 * would return a handle returns NULL with RLX_E_NOMEM instead (no handle
 * the caller trusts the scope with escapes it), scopes begun inside fail
 * the same way, and rlx_escape returns its argument unchanged. */
RLX_API void rlx_scope_begin(void);
/* Releases every handle recorded in the innermost scope, then closes it.
 * Without an open scope it does nothing (and records RLX_E_ARG). */
RLX_API void rlx_scope_end(void);
/* Moves one recorded occurrence of t from the innermost scope to the
 * enclosing one (or to the caller when none); returns t. A handle not in the
 * scope is returned unchanged. */
RLX_API rlx_tensor *rlx_escape(rlx_tensor *t);

/* ---------------------------------------------------------- introspection */
/* On error: -1 / false / 0 and a recorded error. */

RLX_API rlx_dtype rlx_dtype_of(rlx_tensor *t);     /* (rlx_dtype)-1 on error */
RLX_API int rlx_rank(rlx_tensor *t);
RLX_API int64_t rlx_dim(rlx_tensor *t, int axis);   /* -1 also for a dynamic dim */
/* Writes min(rank, cap) dims to out and returns the rank. */
RLX_API int rlx_shape(rlx_tensor *t, int64_t *out, int cap);
RLX_API int64_t rlx_numel(rlx_tensor *t);            /* -1 when a dim is dynamic */
RLX_API bool rlx_is_realized(rlx_tensor *t);
/* True when a and b would read (part of) the same backing buffer. */
RLX_API bool rlx_shares_storage(rlx_tensor *a, rlx_tensor *b);
/* Payload bytes physically held by the buffers t reads (0 for an unrealized
 * expression over no realized data; a view of a 1 MiB tensor reports 1 MiB). */
RLX_API size_t rlx_storage_bytes(rlx_tensor *t);

/* ----------------------------------------------------------- constructors */

/* Copies numel * size(dt) bytes from data (row-major). data may be NULL only
 * for an empty shape. */
RLX_API rlx_tensor *rlx_from_data(rlx_dtype dt, int rank, const int64_t *shape, const void *data);
/* Zero-copy: the tensor reads data in place (64-byte alignment not needed).
 * deleter(ctx) runs once when the last tensor reading data is gone; it may be
 * NULL. Writes to data before realization are visible to the results. On
 * failure the deleter is NOT called: the caller still owns data. */
RLX_API rlx_tensor *rlx_from_blob(rlx_dtype dt, int rank, const int64_t *shape, void *data,
                                  void (*deleter)(void *ctx), void *ctx);
/* Constant tensors; value is converted to dt (float -> int truncates). */
RLX_API rlx_tensor *rlx_full(rlx_dtype dt, int rank, const int64_t *shape, double value);
RLX_API rlx_tensor *rlx_zeros(rlx_dtype dt, int rank, const int64_t *shape);
RLX_API rlx_tensor *rlx_ones(rlx_dtype dt, int rank, const int64_t *shape);
RLX_API rlx_tensor *rlx_scalar(rlx_dtype dt, double value); /* rank 0 */
/* [start, stop) by step, NumPy length ceil((stop-start)/step); step 0 or a
 * non-finite argument is RLX_E_ARG; bool is RLX_E_DTYPE. */
RLX_API rlx_tensor *rlx_arange(rlx_dtype dt, double start, double stop, double step);
/* [n] = 0, 1, ..., n-1 in dt, n the size of t's axis (PyTorch's
 * torch.arange(t.size(axis))): a plain rlx_arange when the axis is static;
 * over a dynamic axis (rlx_input) a compiled program makes it in each
 * binding's size, so one compile serves every length (e.g. the positions of
 * a dynamic sequence for rlx_index_select). t's values are never read; the
 * result has no gradient. Errors: t NULL propagates; axis out of range
 * RLX_E_ARG; dt bool or c64 RLX_E_DTYPE. */
RLX_API rlx_tensor *rlx_arange_of(rlx_tensor *t, int axis, rlx_dtype dt);
RLX_API rlx_tensor *rlx_eye(rlx_dtype dt, int64_t n); /* [n, n] identity */
/* Counter-based random numbers: the same (dt, shape, seed) always gives the
 * same values, whatever the backend or thread count. Float dtypes only
 * (f16 and bf16 draw as many bits as they hold, so rand stays below 1). */
RLX_API rlx_tensor *rlx_rand(rlx_dtype dt, int rank, const int64_t *shape, uint64_t seed);  /* U[0,1) */
RLX_API rlx_tensor *rlx_randn(rlx_dtype dt, int rank, const int64_t *shape, uint64_t seed); /* N(0,1) */
/* rlx_rand and rlx_randn with the seed a tensor whose value is read when
 * the result is realized, not when the graph is built: a compiled program
 * whose seed is an rlx_input draws new numbers for each seed it is bound
 * to, with no new compilation (the seed's value is not part of the
 * program's structure). seed is an i32 or i64 scalar, shape [] or [1];
 * its value s gives exactly rlx_rand(dt, rank, shape, (uint64_t)s) (a
 * negative i32 sign-extends, as C's conversion does), on either backend.
 * The result has no gradient. Errors: seed NULL propagates; seed not
 * i32/i64 RLX_E_DTYPE, any other shape RLX_E_SHAPE; dt and shape as
 * rlx_rand's. */
RLX_API rlx_tensor *rlx_rand_seeded(rlx_dtype dt, int rank, const int64_t *shape, rlx_tensor *seed);
RLX_API rlx_tensor *rlx_randn_seeded(rlx_dtype dt, int rank, const int64_t *shape, rlx_tensor *seed);
RLX_API rlx_tensor *rlx_full_like(rlx_tensor *t, double value);
RLX_API rlx_tensor *rlx_zeros_like(rlx_tensor *t);
RLX_API rlx_tensor *rlx_ones_like(rlx_tensor *t);
/* A named placeholder for compiled programs. A dim -1 is dynamic (an
 * anonymous symbol of its own); a dim <= -2 names a symbol: every dim of
 * every input carrying that value is one size, and binding two sizes to it
 * is RLX_E_SHAPE at rlx_program_run, naming the symbol, both inputs and
 * both sizes. (The tensor reports -1 for either.) Two dynamic dims an
 * elementwise op joins while tracing are taken as equal: bound
 * differently, the run fails with RLX_E_SHAPE naming the op and the
 * shapes; a dynamic dim bound to 1 is never broadcast silently (a static
 * 1 is, as tracing did; a dynamic dim meeting a static one other than 1
 * is RLX_E_SHAPE while tracing).
 * Realizing a graph that still holds an unbound input is RLX_E_ARG.
 * Dynamic dims flow through elementwise ops and broadcasting, reductions
 * (mean/var/std count at run time), matmul/linear, softmax-style ops and
 * norms over static axes, attention over a dynamic sequence (every mask),
 * transpose/unsqueeze, cat, pad (every mode, of any axis), the FFTs over
 * any axis (an odd [..., 2N] length is RLX_E_SHAPE when bound), reshape
 * (below), conv2d/conv1d, the transposed convolutions and the 2-D pools
 * over any dynamic dim (N, C, H, W: the output size is computed when
 * bound, where a kernel larger than the padded input is RLX_E_SHAPE; a
 * transposed convolution of an H or W bound to 0 gives zeros, where the
 * static call refuses an empty input),
 * group_norm over dynamic channels and positions (C % num_groups checked
 * when bound), multinomial over dynamic rows and categories (N = 0, or
 * fewer categories than samples without replacement, RLX_E_SHAPE when
 * bound), gather/index_select with a dynamic count of indices or a dynamic axis
 * (and their scatter-add gradient), softmax_cross_entropy_with_logits over
 * a dynamic number of rows or of classes, rlx_arange_of (the positions 0..n-1 of a
 * dynamic axis: e.g. a GPT's position embeddings over a dynamic sequence
 * length), einsum (a letter of dynamic size; see rlx_einsum), dropout
 * with a seed value or a seed tensor (rlx_dropout_seeded: the mask of the
 * bound shape for the seed bound), and rlx_grad.
 * Reshape of a dynamic x takes one -1 (inferred from the count) or
 * several, as rlx_dim reports dynamic dims: a -1 where x has a dynamic
 * dim keeps it in place, and between the kept dims static ones are split
 * or merged with at most one dynamic dim ([B, S, H*D] -> [B, S, H, D],
 * [B, S, 3] -> [B, 3S]); -1s that could be read two ways ([B, 3, S] ->
 * [-1, -1]: [B, 3S] or [3B, S]; a flattened [B*S, D] split back into
 * [-1, -1, D]) are RLX_E_UNSUPPORTED while tracing. A reshape's target
 * dim <= -2 names a symbol instead: that dim is the symbol's bound size,
 * so [B*S, D] -> [SYM_B, SYM_S, D] is never ambiguous (PyTorch's
 * y.view(B, S, D) with symbolic ints). Beside symbols at most one -1 is
 * allowed (inferred from the count when bound; several are
 * RLX_E_UNSUPPORTED). The result reports -1 for those dims. Tracing
 * checks what it can: x must have a dynamic dim (a symbol over a static x
 * is RLX_E_SHAPE: nothing binds it), a -1 beside static dims of 0
 * elements is RLX_E_SHAPE, and when every dynamic dim of x is a known
 * symbol (x an input, or a reshape naming them) and the target names
 * exactly those, the static parts must agree (divide, around a -1), else
 * RLX_E_SHAPE. rlx_compile refuses a symbol no input of the program
 * carries (RLX_E_SHAPE, naming the symbol and the reshape's shapes). A run
 * takes each symbol's size from its inputs; a count that does not match
 * x's, or a -1 that cannot be inferred (a symbol bound to 0 beside it, as
 * a static reshape of 0 elements), is RLX_E_SHAPE at rlx_program_run
 * naming the reshape, its symbols and sizes. Gradients through such a
 * reshape take x's bound dims.
 * Slices of a dynamic axis (slice, narrow, select, split, chunk, flip,
 * roll) keep their bounds relative to the size (Python
 * rules: a negative index counts from the end) and resolve them when a run
 * binds it; a narrow or select that does not fit the bound size is
 * RLX_E_SHAPE then, and so is rlx_split into fixed sizes (no -1) whose sum
 * is not the bound size (naming the input, its symbol, the sum and the
 * size). rlx_roll of a dynamic axis takes any int64 shift
 * (mod the bound size); rlx_tile of a dynamic axis and sort, argsort and
 * topk along one (or with any dynamic dims off the axis) work, topk's k
 * checked against the bound length (RLX_E_SHAPE when larger). rlx_grad
 * goes through every op above: slices of any step, cats of several
 * pieces of dynamic length (the program places each piece's cotangent
 * where the bound pieces put it), gathers with dynamic dims off the axis
 * (an index of any rank and any number of dynamic dims), reshapes that
 * merged several dynamic dims or named symbols, and the convolutions and
 * pools above; einsum merging several dynamic dims works too
 * (rlx_einsum). Still refused, RLX_E_UNSUPPORTED while tracing: an
 * ambiguous reshape of -1s (above; naming symbols resolves it), an einsum
 * intermediate of rank above 8 (dynamic batch
 * letters are not merged); at a run (no public call is known to make
 * one): an op other than elementwise, permute, matmul or solve reading a
 * broadcast from 1 to a dynamic dim (for matmul and solve: in a matrix
 * dim; the gradient of a batched matmul by a weight permutes the
 * weight's broadcast over the batch).
 * None computes a wrong value. */
RLX_API rlx_tensor *rlx_input(const char *name, rlx_dtype dt, int rank, const int64_t *shape);

/* ------------------------------------------------------------------ unary */
/* Elementwise, same shape. Math that needs floats (everything below except
 * neg, abs, sign, relu, round, floor, ceil, logical_not) on bool or integer
 * input computes and returns f32. neg/abs/sign/relu/round/floor/ceil keep
 * integer dtypes (neg of bool is RLX_E_DTYPE; abs/sign/relu/round/floor/ceil
 * of bool return it unchanged). logical_not returns bool for any dtype.
 * round is half to even. gelu is the exact erf form; gelu_tanh the tanh
 * approximation. softplus = log(1+exp(x)), elu uses alpha 1, mish =
 * x*tanh(softplus(x)), hard_sigmoid = clamp(x/6+1/2, 0, 1) (PyTorch),
 * hard_swish = x*hard_sigmoid(x), log_sigmoid = -softplus(-x), softsign =
 * x/(1+|x|). sign(NaN) is NaN. sin, cos and tan hold for every finite
 * input, huge ones included (f32 within 1 ulp; f64 sin and cos within 2
 * ulp on the JIT, libm's elsewhere); of +-inf and NaN they are NaN. At +-inf the activations follow their
 * formulas as PyTorch evaluates them: gelu, silu, mish, hard_swish of -inf
 * and softsign of +-inf are NaN (inf * 0, inf / inf). */

RLX_API rlx_tensor *rlx_neg(rlx_tensor *x);
RLX_API rlx_tensor *rlx_relu(rlx_tensor *x);
RLX_API rlx_tensor *rlx_gelu(rlx_tensor *x);
RLX_API rlx_tensor *rlx_gelu_tanh(rlx_tensor *x);
RLX_API rlx_tensor *rlx_silu(rlx_tensor *x);
RLX_API rlx_tensor *rlx_tanh(rlx_tensor *x);
RLX_API rlx_tensor *rlx_exp(rlx_tensor *x);
RLX_API rlx_tensor *rlx_log(rlx_tensor *x);
RLX_API rlx_tensor *rlx_sqrt(rlx_tensor *x);
RLX_API rlx_tensor *rlx_rsqrt(rlx_tensor *x);
RLX_API rlx_tensor *rlx_sigmoid(rlx_tensor *x);
RLX_API rlx_tensor *rlx_abs(rlx_tensor *x);
RLX_API rlx_tensor *rlx_sin(rlx_tensor *x);
RLX_API rlx_tensor *rlx_cos(rlx_tensor *x);
RLX_API rlx_tensor *rlx_tan(rlx_tensor *x);
RLX_API rlx_tensor *rlx_atan(rlx_tensor *x);
RLX_API rlx_tensor *rlx_round(rlx_tensor *x);
RLX_API rlx_tensor *rlx_recip(rlx_tensor *x);
RLX_API rlx_tensor *rlx_floor(rlx_tensor *x);
RLX_API rlx_tensor *rlx_ceil(rlx_tensor *x);
RLX_API rlx_tensor *rlx_sign(rlx_tensor *x);
RLX_API rlx_tensor *rlx_softplus(rlx_tensor *x);
RLX_API rlx_tensor *rlx_elu(rlx_tensor *x);
RLX_API rlx_tensor *rlx_erf(rlx_tensor *x);
RLX_API rlx_tensor *rlx_hard_swish(rlx_tensor *x);
RLX_API rlx_tensor *rlx_hard_sigmoid(rlx_tensor *x);
RLX_API rlx_tensor *rlx_mish(rlx_tensor *x);
RLX_API rlx_tensor *rlx_softsign(rlx_tensor *x);
RLX_API rlx_tensor *rlx_log_sigmoid(rlx_tensor *x);
RLX_API rlx_tensor *rlx_logical_not(rlx_tensor *x);

/* ----------------------------------------------------------------- binary */
/* Broadcast like NumPy, promote like NumPy for the five wide dtypes (bool <
 * i32 < i64 < f32 < f64; any integer with f32 gives f32) and like PyTorch
 * for the narrow ones (the table at rlx_dtype). The _s forms convert the scalar to the
 * tensor's dtype first, as a double converts (0.5 on an i32 tensor is 0,
 * 300 on a u8 tensor saturates to 255). Integer add/sub/mul
 * wrap; integer div and rem truncate like C, and dividing an integer by zero
 * gives 0 (NumPy's value; no trap), as does integer rem by zero. Float rem
 * is fmod. pow of an integer by a negative integer exponent gives 1/x^n
 * truncated (0 for 0^-n). atan2 computes in f32 for bool and integer
 * operands, like the unary float math. maximum/minimum
 * propagate NaN. On two bool operands add and maximum are logical or, mul
 * and minimum logical and; the other arithmetic ops are RLX_E_DTYPE.
 * Comparisons return bool (one byte per element); logical_and/or treat any
 * nonzero as true and return bool. */

RLX_API rlx_tensor *rlx_add(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_add_s(rlx_tensor *a, double s);
RLX_API rlx_tensor *rlx_sub(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_sub_s(rlx_tensor *a, double s);
RLX_API rlx_tensor *rlx_mul(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_mul_s(rlx_tensor *a, double s);
RLX_API rlx_tensor *rlx_div(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_div_s(rlx_tensor *a, double s);
RLX_API rlx_tensor *rlx_pow(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_pow_s(rlx_tensor *a, double s);
RLX_API rlx_tensor *rlx_maximum(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_maximum_s(rlx_tensor *a, double s);
RLX_API rlx_tensor *rlx_minimum(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_minimum_s(rlx_tensor *a, double s);
RLX_API rlx_tensor *rlx_atan2(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_atan2_s(rlx_tensor *a, double s);
RLX_API rlx_tensor *rlx_rem(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_rem_s(rlx_tensor *a, double s);
RLX_API rlx_tensor *rlx_eq(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_eq_s(rlx_tensor *a, double s);
RLX_API rlx_tensor *rlx_ne(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_ne_s(rlx_tensor *a, double s);
RLX_API rlx_tensor *rlx_lt(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_lt_s(rlx_tensor *a, double s);
RLX_API rlx_tensor *rlx_le(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_le_s(rlx_tensor *a, double s);
RLX_API rlx_tensor *rlx_gt(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_gt_s(rlx_tensor *a, double s);
RLX_API rlx_tensor *rlx_ge(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_ge_s(rlx_tensor *a, double s);
RLX_API rlx_tensor *rlx_logical_and(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_logical_or(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_rsub_s(rlx_tensor *x, double s); /* s - x */
RLX_API rlx_tensor *rlx_rdiv_s(rlx_tensor *x, double s); /* s / x */

/* -------------------------------------------------------------- selection */

/* cond ? a : b, all three broadcast; cond of any dtype (nonzero is true);
 * a and b promote. */
RLX_API rlx_tensor *rlx_where(rlx_tensor *cond, rlx_tensor *a, rlx_tensor *b);
/* where(mask, value, x): mask (any dtype) must broadcast to x's shape; the
 * result has x's shape and dtype. */
RLX_API rlx_tensor *rlx_masked_fill(rlx_tensor *x, rlx_tensor *mask, double value);
/* min(max(x, lo), hi) with NaN propagating (lo > hi gives hi, as PyTorch);
 * lo/hi are converted to x's dtype. */
RLX_API rlx_tensor *rlx_clamp(rlx_tensor *x, double lo, double hi);
RLX_API rlx_tensor *rlx_clamp_min(rlx_tensor *x, double lo);
RLX_API rlx_tensor *rlx_clamp_max(rlx_tensor *x, double hi);

/* ------------------------------------------------------------- reductions */
/* axes == NULL reduces every axis; otherwise the naxes listed axes (any
 * set, negative allowed, a repeated axis is RLX_E_ARG; naxes 0 reduces
 * nothing). keepdim keeps reduced axes as size 1. Result dtypes: sum and
 * prod of bool/integers give i64 (NumPy and PyTorch); max/min keep the
 * dtype; mean, var, std, norm of bool/integers give f32. Over an empty axis:
 * sum 0, prod 1, mean/var/std NaN, norm 0, max -inf (the dtype's lowest value for integers,
 * false for bool), min +inf (highest, true). NaN propagates through max/min;
 * a float max/min over +0 and -0 may return either zero (the JIT does not
 * order them, as NumPy's vector loops do not). var is the population variance; norm is the 2-norm sqrt(sum(x^2)).
 * The gradients of norm and std are 0 where the value is 0 (PyTorch's
 * subgradient), not NaN.
 * Accuracy of f32, f16 and bf16 sums (the JIT; the reference backend adds in
 * double): blocks of at most m = 1024 elements are summed in f32 (in an
 * order the vectorizer picks), each block's sum is added in f64 in a fixed
 * order, and the result is rounded once. For n elements x_i with exact sum s:
 *   |sum - s| <= uo |s| + (1 + uo) (g(m-1) + g64(n) (1 + g(m-1))) sum|x_i|,
 *   g(k) = k u / (1 - k u), u = 2^-24, g64(n) = n 2^-53 / (1 - n 2^-53),
 * uo the output's unit roundoff (2^-24 f32, 2^-11 f16, 2^-8 bf16); about
 * uo |s| + 6.1e-5 sum|x_i| for n < 2^30 (typically far less: partial sums in
 * 16 lanes). mean is sum / n rounded once: uo |s/n| + (1 + uo) E / n, E the
 * sum's bound above with uo = 2^-24. var, std, norm, logsumexp, softmax and
 * layer_norm sum the same way. The knob "reduce_acc_f64" = 1 adds every
 * element in f64 instead: |sum - s| <= uo |s| + (1 + uo) g64(n) sum|x_i|.
 * Neither depends on the thread count. The order within a block can differ
 * between a kernel specialized to its sizes and the size-generic kernel of
 * the same structure (see "generic_kernels"), so under its default "auto"
 * the last bits of a sum can depend on the order in which a process met
 * the sizes of that structure and on evictions from the kernel cache (both
 * kernels within the bound); "generic_kernels" 0 or 2 fixes the choice. PROD of f32 multiplies in f64. */

RLX_API rlx_tensor *rlx_sum(rlx_tensor *x, const int *axes, int naxes, bool keepdim);
RLX_API rlx_tensor *rlx_mean(rlx_tensor *x, const int *axes, int naxes, bool keepdim);
RLX_API rlx_tensor *rlx_max(rlx_tensor *x, const int *axes, int naxes, bool keepdim);
RLX_API rlx_tensor *rlx_min(rlx_tensor *x, const int *axes, int naxes, bool keepdim);
RLX_API rlx_tensor *rlx_prod(rlx_tensor *x, const int *axes, int naxes, bool keepdim);
RLX_API rlx_tensor *rlx_var(rlx_tensor *x, const int *axes, int naxes, bool keepdim);
RLX_API rlx_tensor *rlx_std(rlx_tensor *x, const int *axes, int naxes, bool keepdim);
RLX_API rlx_tensor *rlx_norm(rlx_tensor *x, const int *axes, int naxes, bool keepdim);
/* i64 index of the first maximum (minimum) along axis; NaN counts as the
 * extreme (NumPy). An empty axis is RLX_E_SHAPE. Rank 0: axis 0 or -1. */
RLX_API rlx_tensor *rlx_argmax(rlx_tensor *x, int axis, bool keepdim);
RLX_API rlx_tensor *rlx_argmin(rlx_tensor *x, int axis, bool keepdim);
/* log(sum(exp(x))) along axis, stable; all -inf gives -inf. Float result.
 * Rank 0 (axis 0 or -1) returns x, as PyTorch. */
RLX_API rlx_tensor *rlx_logsumexp(rlx_tensor *x, int axis, bool keepdim);
/* Running sum along axis; exclusive starts at 0 and drops the last term.
 * bool/integer input gives i64. Rank 0 (axis 0 or -1) returns x. */
RLX_API rlx_tensor *rlx_cumsum(rlx_tensor *x, int axis, bool exclusive);
RLX_API rlx_tensor *rlx_sum_all(rlx_tensor *x);  /* rank 0 */
RLX_API rlx_tensor *rlx_mean_all(rlx_tensor *x); /* rank 0 */

/* ------------------------------------------------------- movement (views) */
/* None of these copies payload: a view reads its source's buffer
 * (rlx_shares_storage is true) until it is realized itself. Realizing a
 * view whose elements are contiguous in the source keeps sharing it;
 * realizing any other view gives it its own contiguous buffer, since
 * rlx_data promises a contiguous payload. */

/* One dim may be -1 (inferred; ambiguous with 0 elements is RLX_E_SHAPE);
 * over dynamic dims several may be, and a dim <= -2 names a symbol's bound
 * size (rlx_input lists when). */
RLX_API rlx_tensor *rlx_reshape(rlx_tensor *x, int rank, const int64_t *shape);
/* Result axis i is input axis perm[i]; nperm must equal the rank. perm NULL
 * (nperm 0) reverses all axes, as NumPy's transpose. */
RLX_API rlx_tensor *rlx_transpose(rlx_tensor *x, int nperm, const int *perm);
/* Swaps the last two axes; rank 0 and 1 are returned as they are. */
RLX_API rlx_tensor *rlx_t(rlx_tensor *x);
RLX_API rlx_tensor *rlx_broadcast_to(rlx_tensor *x, int rank, const int64_t *shape);
RLX_API rlx_tensor *rlx_flatten(rlx_tensor *x); /* rank 1 (rank 0 gives [1]) */
RLX_API rlx_tensor *rlx_unsqueeze(rlx_tensor *x, int axis); /* axis in [-rank-1, rank] */
/* The axis must have size 1 (NumPy); otherwise RLX_E_SHAPE. */
RLX_API rlx_tensor *rlx_squeeze(rlx_tensor *x, int axis);
RLX_API rlx_tensor *rlx_squeeze_all(rlx_tensor *x);
/* [start, start+len) along axis; a negative start counts from the end. */
RLX_API rlx_tensor *rlx_narrow(rlx_tensor *x, int axis, int64_t start, int64_t len);
/* Python slice rules: start/stop clamp to the axis, step != 0. stop RLX_END
 * runs to the end in the step's direction (through index 0 when step < 0);
 * start RLX_END with a negative step starts at the last element. So
 * x[::-1] is rlx_slice(x, axis, RLX_END, RLX_END, -1). */
RLX_API rlx_tensor *rlx_slice(rlx_tensor *x, int axis, int64_t start, int64_t stop, int64_t step);
RLX_API rlx_tensor *rlx_select(rlx_tensor *x, int axis, int64_t index); /* drops the axis */
/* n pieces of the given sizes (sum must equal the axis length; one size
 * may be -1, the rest of the axis) into out[n]. On a dynamic axis exactly
 * at most one size may be -1 and the fixed sizes must sum below 2^28;
 * without a -1 they must sum to the bound size (RLX_E_SHAPE at the run,
 * naming the input, its symbol and both sizes). On error every out[i] is NULL. */
RLX_API rlx_status rlx_split(rlx_tensor *x, int axis, int n, const int64_t *sizes, rlx_tensor **out);
/* n pieces; the first len%n get one element more (some may be empty). */
RLX_API rlx_status rlx_chunk(rlx_tensor *x, int axis, int n, rlx_tensor **out);

/* ---------------------------------------------------------- data movement */

/* Concatenate along an existing axis; dtypes promote; n >= 1. */
RLX_API rlx_tensor *rlx_cat(rlx_tensor *const *xs, int n, int axis);
/* Stack equal shapes along a new axis in [-rank-1, rank]; dtypes promote. */
RLX_API rlx_tensor *rlx_stack(rlx_tensor *const *xs, int n, int axis);
/* Repeats the whole axis reps times (reps >= 0), as np.tile along one axis.
 * A dynamic axis is tiled when a program binds it (a gather of its
 * positions repeated; other axes may be dynamic too). */
RLX_API rlx_tensor *rlx_tile(rlx_tensor *x, int axis, int64_t reps);
RLX_API rlx_tensor *rlx_flip(rlx_tensor *x, int axis);
/* np.roll along axis: element i moves to (i + shift) mod len. On a dynamic
 * axis any shift works, taken mod the bound size (beyond 2^57 as a
 * gather of exact i64 positions). */
RLX_API rlx_tensor *rlx_roll(rlx_tensor *x, int axis, int64_t shift);
/* Constant padding; before/after >= 0; value converted to x's dtype. A
 * dynamic axis stays dynamic (its padded size is resolved when bound). */
RLX_API rlx_tensor *rlx_pad(rlx_tensor *x, int axis, int64_t before, int64_t after, double value);
/* Padding along one axis by mode: CONSTANT pads zeros (rlx_pad for other
 * values); REFLECT mirrors without repeating the edge ([1,2,3] by 2 each
 * side: [3,2,1,2,3,2,1]) and needs before, after < the axis length
 * (PyTorch's rule; NumPy reflects repeatedly instead); REPLICATE repeats
 * the edge element (NumPy "edge") and needs a non-empty axis; on a dynamic
 * axis those rules are checked when a run binds its size (RLX_E_SHAPE
 * from rlx_program_run). Zero padding
 * returns x in every mode, even on an empty axis. Any dtype. Built from
 * slices, flips and cat (views the JIT reads in place), so gradients are
 * those of the pieces: a border element's gradient adds to its source.
 * Negative padding or an unknown mode is RLX_E_ARG, a too-short axis
 * RLX_E_SHAPE. */
RLX_API rlx_tensor *rlx_pad_mode(rlx_tensor *x, int axis, int64_t before, int64_t after, rlx_padding mode);
/* NumPy take: shape x[:axis] + indices.shape + x[axis+1:]. indices i32/i64;
 * negative indices count from the end; out of range makes rlx_realize
 * return RLX_E_ARG (nothing is read out of bounds). */
RLX_API rlx_tensor *rlx_gather(rlx_tensor *x, rlx_tensor *indices, int axis);
/* PyTorch index_select: indices must be 1-D; otherwise as rlx_gather. */
RLX_API rlx_tensor *rlx_index_select(rlx_tensor *x, int axis, rlx_tensor *indices);
/* PyTorch scatter_add: base with src[p] added at base[p with axis
 * coordinate index[p]] for every position p of index. index (i32/i64),
 * src and base have one rank; index no longer than src in any dim nor than
 * base off the axis (src's elements outside index's shape are unused).
 * The result has base's shape and the promoted dtype of base and src.
 * Duplicate targets add up in index order, so the bits do not depend on
 * the thread count (floats add in double and round once per element).
 * Negative indices count from the end; out of range makes rlx_realize
 * return RLX_E_ARG, writing nothing. Wrong ranks or shapes RLX_E_SHAPE,
 * a non-integer index RLX_E_DTYPE, a bad axis RLX_E_ARG. */
RLX_API rlx_tensor *rlx_scatter_add(rlx_tensor *base, int axis, rlx_tensor *index, rlx_tensor *src);
/* PyTorch scatter (overwrite), argument rules as rlx_scatter_add: where
 * several positions of index name one target, the last in index order
 * wins (PyTorch leaves it undefined). */
RLX_API rlx_tensor *rlx_scatter(rlx_tensor *base, int axis, rlx_tensor *index, rlx_tensor *src);
/* PyTorch index_add: index 1-D [n], src base's shape with axis of length
 * n; slice src[..., j, ...] is added to base[..., index[j], ...], as
 * np.add.at. Dtypes, duplicates, negative and out-of-range indices as
 * rlx_scatter_add. */
RLX_API rlx_tensor *rlx_index_add(rlx_tensor *base, int axis, rlx_tensor *index, rlx_tensor *src);
/* Sorting: O(len log len) per line, lines in parallel, the same bits at
 * any thread count. Stable in both directions: equal elements keep their
 * order (np.argsort(kind="stable"), torch.sort(stable=True), also when
 * descending, as torch). NaN sorts above +inf, so it comes last ascending
 * and first descending (NumPy, PyTorch); all NaNs are equal; -0.0 equals
 * 0.0 (their order is kept). Every dtype (bool false < true, integers
 * exactly). Any axis in [-rank, rank); rank 0 (axis 0 or -1) is one
 * element: sort returns x, argsort the i64 scalar 0. An empty axis gives
 * an empty result. In a program any dim may be dynamic, the axis too (a
 * whole line of the bound length; topk's k larger than it is RLX_E_SHAPE
 * when bound). */
/* The values of x sorted along axis; its gradient goes back through the
 * permutation (a scatter). */
RLX_API rlx_tensor *rlx_sort(rlx_tensor *x, int axis, bool descending);
/* i64 positions along axis that sort x (x's shape); no gradient. */
RLX_API rlx_tensor *rlx_argsort(rlx_tensor *x, int axis, bool descending);
/* The k largest (smallest when !largest) elements along axis, sorted that
 * way (torch.topk with sorted=True), into values (x's dtype) and indices
 * (i64), both x's shape with axis of length k. Ties go to the lower index;
 * NaN counts as the largest. 0 <= k <= the axis length, else RLX_E_ARG
 * naming both (rank 0 takes k 1). values and indices must not be NULL;
 * on error both are set to NULL. The gradient of values scatters back.
 * A k of at most 1/8 of the axis is selected in O(len + k log k) per line,
 * not sorted. */
RLX_API rlx_status rlx_topk(rlx_tensor *x, int64_t k, int axis, bool largest, rlx_tensor **values,
                            rlx_tensor **indices);
/* torch.multinomial: num_samples i64 category indices drawn from each row
 * of probs [N] or [B, N] (-> [num_samples] or [B, num_samples]),
 * probabilities proportional to the weights (not necessarily normalized;
 * integer weights are read as f64, bool is RLX_E_DTYPE). Without
 * replacement a row's samples are distinct, in draw order, and
 * num_samples <= N (RLX_E_ARG when building). The same (probs, seed) gives
 * the same indices on either backend at any thread count (counter-based,
 * as rlx_rand). Found when realizing, as RLX_E_ARG naming the row (nothing
 * is drawn, as torch raises): a negative, infinite or NaN weight, a row
 * with no positive weight, weights summing to infinity, or fewer positive
 * weights than num_samples without replacement. A weight of 0 is never
 * drawn. num_samples 0 gives an empty result and checks nothing. N = 0 or
 * another rank is RLX_E_SHAPE; a dynamic B or N works in a program (N
 * checked when bound: RLX_E_SHAPE); no
 * gradient. Each row draws on its own (equal rows give different samples);
 * O(N + S log N) per row with replacement; without, O(N + S log S) when
 * S <= N/8, else O(N log N). */
RLX_API rlx_tensor *rlx_multinomial(rlx_tensor *probs, int64_t num_samples, bool replacement, uint64_t seed);
/* Float -> int truncates toward zero; NaN gives 0 and out-of-range values
 * saturate; -> bool is x != 0 (NaN is true). */
RLX_API rlx_tensor *rlx_cast(rlx_tensor *x, rlx_dtype dt);
/* Same values; realizing it always gives its own contiguous buffer. */
RLX_API rlx_tensor *rlx_contiguous(rlx_tensor *x);
/* Same values; gradients do not flow through it. */
RLX_API rlx_tensor *rlx_stop_gradient(rlx_tensor *x);

/* --------------------------------------------------------- linear algebra */
/* Float results; integer operands of matmul stay integer (i64 accumulate),
 * bool operands are RLX_E_DTYPE; solve/inv of integers compute in f32. */

/* NumPy @: 1-D operands get a dim added and removed; batch dims broadcast;
 * rank 0 is RLX_E_SHAPE. */
RLX_API rlx_tensor *rlx_matmul(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_matmul_t(rlx_tensor *a, rlx_tensor *b); /* a @ swap_last_two(b) */
/* NumPy einsum over xs[n] (n >= 1): "ij,jk->ik" (explicit output) or
 * "ij,jk" (implicit: the "..." dims, then the letters used once, in ASCII
 * order, so 'A'..'Z' before 'a'..'z'). Subscripts are the 52 letters;
 * spaces are ignored; one "..." per term stands for the leading, trailing
 * or middle dims the letters leave, broadcast across operands as NumPy
 * (size 1 against n); an explicit output must then hold "..." too. A
 * letter repeated in one operand takes the diagonal (equal dims), a
 * letter absent from the output is summed, and a dim of size 1 broadcasts
 * against the same letter's size elsewhere (NumPy). Operands combine left
 * to right; each contraction is one batched rlx_matmul (BLAS for floats),
 * never a broadcast product then a sum. dtypes promote; integers stay
 * integer (wrapping in their dtype, as NumPy), bool is RLX_E_DTYPE.
 * Errors: a malformed equation, a term count other than n, or an output
 * letter repeated or in no operand is RLX_E_ARG; subscripts not matching
 * an operand's rank, or one letter with two sizes (both named) is
 * RLX_E_SHAPE; a result or intermediate above rank 8 is RLX_E_SHAPE or
 * RLX_E_UNSUPPORTED.
 * Dynamic dims (rlx_input): a letter may have a dynamic size in one or
 * more operands (taken as one size, an error at the run if bound to two;
 * against a static size other than 1 it is RLX_E_SHAPE, a static 1
 * broadcasts). A compiled program then serves every binding, gradients
 * included. Batch letters with a dynamic size stay separate matmul batch
 * dims, outer products merge no dims, and a diagonal of dynamic size is
 * taken by position equality (its two dims must be bound equal); the
 * matmul's [M, K] and [K, N] merges (and the result's split) are made when
 * at most one dim of dynamic size changes in each reshape (a program
 * infers one dim from the count), e.g. "bij,jk->bik" with b or i dynamic,
 * "bij,bkj->bik" with any of them. A split of the result into several
 * dynamic dims ("bij,jk->bik" with b and i dynamic) takes them from the
 * operands' bound dims (still one matmul). Where a merge cannot be
 * rebuilt ("mnkl,kl->mn" with m and k dynamic) that pair is a broadcast
 * multiply over [batch, M, N, K] summed over K, which merges no dims (no
 * BLAS: the JIT fuses the sum into the multiply). */
RLX_API rlx_tensor *rlx_einsum(const char *equation, rlx_tensor *const *xs, int n);
/* x [..., in] @ w[out, in]^T + b[out]; b may be NULL. */
RLX_API rlx_tensor *rlx_linear(rlx_tensor *x, rlx_tensor *w, rlx_tensor *b);
RLX_API rlx_tensor *rlx_linear_act(rlx_tensor *x, rlx_tensor *w, rlx_tensor *b, rlx_act act);
/* NumPy linalg.solve: a [..., n, n]; b [..., n, k], or [n] (a vector).
 * Batch dims broadcast. A singular matrix makes rlx_realize return
 * RLX_E_LINALG naming the batch index. */
RLX_API rlx_tensor *rlx_solve(rlx_tensor *a, rlx_tensor *b);
RLX_API rlx_tensor *rlx_inv(rlx_tensor *a); /* [..., n, n] */

/* ---------------------------------------------------- neural-network ops */
/* Integer inputs compute in f32. */

RLX_API rlx_tensor *rlx_softmax(rlx_tensor *x, int axis);
RLX_API rlx_tensor *rlx_log_softmax(rlx_tensor *x, int axis);
/* Over the last axis D; gamma and beta are [D] and may be NULL. */
RLX_API rlx_tensor *rlx_layer_norm(rlx_tensor *x, rlx_tensor *gamma, rlx_tensor *beta, double eps);
/* x / sqrt(mean(x^2, last axis) + eps) * gamma; gamma [D] may be NULL. */
RLX_API rlx_tensor *rlx_rms_norm(rlx_tensor *x, rlx_tensor *gamma, double eps);
/* PyTorch batch_norm: x [N, C, ...], channels on axis 1 (rank >= 2);
 * running_mean, running_var, weight, bias [C]; weight/bias may be NULL.
 * Evaluation (training false): (x - running_mean) / sqrt(running_var + eps)
 * * weight + bias; the running statistics are required. Training: the
 * same with the batch mean and biased variance over every axis but 1; the
 * running statistics may then be NULL. new_mean/new_var, when not NULL,
 * receive new references to the updated statistics, [C] in the running
 * statistics' dtype (f32 for integers): (1 - momentum) * running +
 * momentum * batch, with the unbiased batch variance for new_var
 * (PyTorch's); an empty batch leaves them as they were (with a dynamic
 * reduced dim the count is taken at run time, and 0 or 1 values per
 * channel give NaN there); in evaluation they are the running statistics
 * themselves. Nothing is updated in place.
 * Dtypes promote (integer x computes in f32). Errors: rank < 2 or a
 * parameter not [C] RLX_E_SHAPE; training with one value per channel
 * RLX_E_SHAPE (PyTorch: "Expected more than 1 value per channel");
 * evaluation or new_* without running statistics, only one of them,
 * eps < 0, momentum outside [0, 1] RLX_E_ARG; bool RLX_E_DTYPE. */
RLX_API rlx_tensor *rlx_batch_norm(rlx_tensor *x, rlx_tensor *running_mean, rlx_tensor *running_var,
                                   rlx_tensor *weight, rlx_tensor *bias, bool training, double momentum,
                                   double eps, rlx_tensor **new_mean, rlx_tensor **new_var);
/* PyTorch group_norm: x [N, C, ...] (rank >= 2) in num_groups groups of
 * C/num_groups consecutive channels; each (sample, group) is normalized
 * over its channels and positions with the population variance, then
 * weight and bias [C] (either may be NULL) apply per channel. num_groups
 * = C is instance norm, 1 is layer norm over [C, ...]. num_groups < 1 or
 * not dividing C, eps < 0 RLX_E_ARG; bad shapes RLX_E_SHAPE; any dim may
 * be dynamic (a bound C the groups do not divide is RLX_E_SHAPE at the
 * run); bool RLX_E_DTYPE. */
RLX_API rlx_tensor *rlx_group_norm(rlx_tensor *x, int num_groups, rlx_tensor *weight, rlx_tensor *bias,
                                   double eps);
/* Training-mode dropout (PyTorch's): each element is zeroed with
 * probability p and the rest scaled by 1/(1-p); p = 0 returns x, p = 1
 * zeros (exact zeros, even for inf/NaN inputs). The mask is element i
 * kept iff rlx_rand(RLX_F32, shape of x, seed)[i] >= p (p rounded to
 * f32), so one (shape, seed) gives one mask on either backend, for f32
 * and f64 alike; it is computed at realization from the seed, not stored
 * in the graph. The gradient is the same mask times 1/(1-p) times the
 * incoming gradient. The seed is fixed when the graph is built, so a
 * program from rlx_compile replays the same mask every run: for a new
 * mask per step, use rlx_dropout_seeded with the seed as an rlx_input.
 * Integer x computes in f32. Over dynamic dims (rlx_input) the mask is
 * drawn in each binding's shape: exactly this function's mask over the
 * bound value, from one compile. p outside [0, 1] or NaN RLX_E_ARG; bool
 * RLX_E_DTYPE. */
RLX_API rlx_tensor *rlx_dropout(rlx_tensor *x, double p, uint64_t seed);
/* rlx_dropout with the seed a tensor read at realization (as
 * rlx_rand_seeded's): for a seed of value s the result equals
 * rlx_dropout(x, p, (uint64_t)s), gradient included, and a compiled
 * program with seed an rlx_input draws a new mask per binding without
 * compiling again. The seed is checked as rlx_rand_seeded checks it, also
 * when p = 0. Errors as rlx_dropout's, plus those of the seed; x with a
 * dynamic dim is RLX_E_UNSUPPORTED (the seeded mask has a static shape:
 * use rlx_dropout there). */
RLX_API rlx_tensor *rlx_dropout_seeded(rlx_tensor *x, double p, rlx_tensor *seed);
/* -sum(probs * log_softmax(logits), -1): logits, probs [..., C] -> [...].
 * A zero probability against a -inf logit contributes 0 (not NaN). The
 * gradient with respect to probs is -log_softmax(logits), zeros included. */
RLX_API rlx_tensor *rlx_cross_entropy(rlx_tensor *logits, rlx_tensor *probs);
/* -log_softmax(logits)[i, labels[i]] per row: logits [N, C], labels [N] of
 * an integer dtype or float-coded (truncated) -> [N]. A label outside
 * [0, C) makes rlx_realize return RLX_E_ARG. */
RLX_API rlx_tensor *rlx_softmax_cross_entropy_with_logits(rlx_tensor *logits, rlx_tensor *labels);
/* q [B, Sq, H*D], k and v [B, Sk, H*D] -> [B, Sq, H*D]; scores scaled by
 * 1/sqrt(D). CAUSAL: query i sits at position p = Sk-Sq+i and sees keys
 * j <= p. SLIDING: it sees keys p - window < j <= p, exactly `window` keys
 * counting itself (window >= 1; 1 sees only itself). Conventions that
 * count the keys before the query (flash-attn window_size (w, 0), a
 * FlexAttention mask p - j <= w) see w + 1 keys: pass window = w + 1 for
 * them. A row with every key masked yields zeros. */
RLX_API rlx_tensor *rlx_attention(rlx_tensor *q, rlx_tensor *k, rlx_tensor *v, int num_heads,
                                  int head_dim, rlx_mask mask, int window);
/* As rlx_attention without a positional mask; mask [B, Sk]: nonzero keeps
 * the key, 0 drops it. */
RLX_API rlx_tensor *rlx_attention_masked(rlx_tensor *q, rlx_tensor *k, rlx_tensor *v,
                                         rlx_tensor *mask, int num_heads, int head_dim);
/* Options of rlx_attention_ex; all zero (or a NULL pointer) is plain
 * multi-head attention as rlx_attention(..., RLX_MASK_NONE, 0).
 *   num_kv_heads  Hkv, the heads of k and v (0 means H): k and v are
 *                 [B, Sk, Hkv*D], H % Hkv == 0, and query head h reads kv
 *                 head h / (H/Hkv) (grouped-query attention, MQA when
 *                 Hkv = 1; PyTorch's enable_gqa, i.e. repeat_interleave of
 *                 the kv heads). The kernel reads the shared head in place;
 *                 the gradients of k and v sum over each group's queries.
 *   mask, window  the positional mask, as rlx_attention (CAUSAL is aligned
 *                 to the bottom right: query i sees keys j <= i + Sk - Sq,
 *                 as flash-attn and the KV-cache decoding need; PyTorch's
 *                 is_causal aligns top left, which differs when Sq != Sk).
 *   attn_mask     NULL, or a tensor broadcastable (NumPy rules, rank <= 4)
 *                 to the scores [B, H, Sq, Sk], e.g. [Sq, Sk], [B, 1, Sq, Sk],
 *                 [B, H, Sq, Sk], [B, 1, 1, Sk]. bool: true keeps the key
 *                 (PyTorch SDPA's bool attn_mask); f32/f64: added to the
 *                 scaled scores (-inf drops; cast to the scores' dtype);
 *                 integer masks are RLX_E_DTYPE. It applies together with
 *                 the positional mask and is read with broadcast strides,
 *                 never expanded to [B, H, Sq, Sk]. A float mask has a
 *                 gradient (that of the scores, summed over its broadcast
 *                 dims; 0 where a key is dropped).
 *   scale         the scores' factor; 0 means 1/sqrt(D).
 * A row with every key masked yields zeros (PyTorch gives NaN there). */
typedef struct {
    int num_kv_heads;
    rlx_mask mask;
    int window;
    rlx_tensor *attn_mask;
    double scale;
} rlx_attention_opts;
/* q [B, Sq, H*D], k and v [B, Sk, Hkv*D] -> [B, Sq, H*D]; opts may be NULL.
 * Dtypes as rlx_attention. Errors: H % Hkv != 0, shapes, a mask that does
 * not broadcast (RLX_E_SHAPE); bool q/k/v, an integer mask (RLX_E_DTYPE);
 * H, Hkv or D < 1, a bad mask kind or window, a non-finite scale
 * (RLX_E_ARG). */
RLX_API rlx_tensor *rlx_attention_ex(rlx_tensor *q, rlx_tensor *k, rlx_tensor *v, int num_heads, int head_dim,
                                     const rlx_attention_opts *opts);
/* rlx_attention_ex over the keys cat(k, k_new) and values cat(v, v_new)
 * along axis 1, without forming them: the kernel reads both pieces in
 * place. For KV-cache decoding: k, v [B, L, Hkv*D] the past rows (e.g. a
 * cache bound as a view), k_new, v_new [B, Sn, Hkv*D] the step's rows,
 * which then need no copy into a concatenated cache. Sk = L + Sn
 * everywhere opts speaks of it (the causal alignment, attn_mask's last
 * dim, which spans the past then the new keys). Values equal
 * rlx_attention_ex over the cats; the gradient reaches all five inputs.
 * Errors as rlx_attention_ex, and k_new, v_new shaped unlike k, v off
 * axis 1 (RLX_E_SHAPE). */
RLX_API rlx_tensor *rlx_attention_kv(rlx_tensor *q, rlx_tensor *k, rlx_tensor *v, rlx_tensor *k_new,
                                     rlx_tensor *v_new, int num_heads, int head_dim, const rlx_attention_opts *opts);
/* x [B, S, H*D]; cos, sin [S, D/2]; rotate-half per head:
 * (x1, x2) -> (x1 c - x2 s, x2 c + x1 s). D must be even. */
RLX_API rlx_tensor *rlx_rope(rlx_tensor *x, rlx_tensor *cos, rlx_tensor *sin, int head_dim);
/* Options of rlx_rope_ex; all zero (or a NULL pointer) is rlx_rope with a
 * table of any length >= S.
 *   offset       token s sits at position offset + s (decoding one token
 *                at a time with the same tables); >= 0.
 *   positions    NULL, or i32/i64 positions [S] or [B, S] of each token
 *                (offset must then be 0): one compiled program serves
 *                every decoding step. A position outside [0, S_max) makes
 *                rlx_realize return RLX_E_ARG (never wraps around).
 *   rotary_dim   rotate only the first rotary_dim of each head's D and pass
 *                the rest through (GPT-NeoX rotary_pct); 0 means D; even.
 *   interleaved  false: NeoX rotate-half, pairs (x[i], x[i + R/2]); true:
 *                GPT-J, pairs (x[2i], x[2i+1]). Pair i turns by the angle
 *                of table column i: (a, b) -> (a c - b s, b c + a s). */
typedef struct {
    int64_t offset;
    rlx_tensor *positions;
    int rotary_dim;
    bool interleaved;
} rlx_rope_opts;
/* x [B, S, H*D]; cos, sin [S_max, R/2] with R the rotary dim, rows taken
 * by position. Errors: RLX_E_ARG for an odd or too large rotary_dim, a
 * negative offset, positions with an offset; RLX_E_SHAPE for tables that
 * are not [S_max, R/2] or too short for offset + S, positions not [S] or
 * [B, S]; RLX_E_DTYPE for positions not i32/i64. */
RLX_API rlx_tensor *rlx_rope_ex(rlx_tensor *x, rlx_tensor *cos, rlx_tensor *sin, int head_dim,
                                const rlx_rope_opts *opts);
/* x [N, C, H, W], w [O, C/groups, KH, KW], b [O] or NULL -> [N, O, OH, OW].
 * stride/padding/dilation may be NULL (1, 0, 1). Zero padding. Sums in the
 * operand dtype (f32 accumulates in f32, like NumPy/PyTorch GEMM). N and
 * C, H and W may be dynamic (rlx_input; gradients too), here and in the
 * transposed convolutions and pools: sizes are checked when bound. */
RLX_API rlx_tensor *rlx_conv2d(rlx_tensor *x, rlx_tensor *w, rlx_tensor *b, const int stride[2],
                               const int padding[2], const int dilation[2], int groups);
/* x [N, C, L], w [O, C/groups, K], b [O] or NULL -> [N, O, OL] with
 * OL = (L + 2*padding - dilation*(K-1) - 1) / stride + 1 (PyTorch conv1d):
 * conv2d over [N, C, 1, L], with its dtypes, errors and gradient. */
RLX_API rlx_tensor *rlx_conv1d(rlx_tensor *x, rlx_tensor *w, rlx_tensor *b, int stride, int padding,
                               int dilation, int groups);
/* PyTorch conv_transpose2d, the adjoint of rlx_conv2d: x [N, C_in, H, W],
 * w [C_in, C_out/groups, KH, KW] (PyTorch's layout: the conv2d weight it
 * transposes), b [C_out] or NULL -> [N, C_out, OH, OW], OH = (H-1)*stride
 * - 2*padding + dilation*(KH-1) + output_padding + 1. stride, padding,
 * output_padding, dilation may be NULL (1, 0, 0, 1). output_padding must
 * be smaller than the stride or the dilation (PyTorch's rule), else
 * RLX_E_ARG; an output size below 1 or an empty H/W is RLX_E_SHAPE. It
 * is conv2d's input gradient (conv2d's VJP calls it), built from stride-1
 * conv2d calls: without dilation, one per stride phase (s0*s1 of them,
 * strides up to 8) over the taps that phase reads, so no product meets an
 * inserted zero; with dilation (or a stride above 8), one over x with
 * stride-1 zeros inserted, costing up to s0*s1 times the products.
 * Dtypes as rlx_conv2d. */
RLX_API rlx_tensor *rlx_conv_transpose2d(rlx_tensor *x, rlx_tensor *w, rlx_tensor *b, const int stride[2],
                                         const int padding[2], const int output_padding[2],
                                         const int dilation[2], int groups);
/* x [N, C_in, L], w [C_in, C_out/groups, K]: rlx_conv_transpose2d over
 * [N, C_in, 1, L]. */
RLX_API rlx_tensor *rlx_conv_transpose1d(rlx_tensor *x, rlx_tensor *w, rlx_tensor *b, int stride, int padding,
                                         int output_padding, int dilation, int groups);
/* x [N, C, H, W]; stride NULL means the kernel size, padding NULL means 0
 * (at most half the kernel). max pads with -inf; avg counts the padding
 * (PyTorch count_include_pad=True). Floor output size. */
RLX_API rlx_tensor *rlx_max_pool2d(rlx_tensor *x, const int kernel[2], const int stride[2],
                                   const int padding[2]);
RLX_API rlx_tensor *rlx_avg_pool2d(rlx_tensor *x, const int kernel[2], const int stride[2],
                                   const int padding[2]);

/* ----------------------------------------------------------------- signal */
/* Complex values use the [..., 2N] layout: N real parts, then N imaginary
 * parts. Real input is given with zero imaginary parts. Integer inputs
 * compute in f32. Any N; f32 is transformed in double, rounded once. */

RLX_API rlx_tensor *rlx_fft(rlx_tensor *x);  /* last axis, unnormalized */
RLX_API rlx_tensor *rlx_ifft(rlx_tensor *x); /* unnormalized: ifft(fft(x)) = N x */
RLX_API rlx_tensor *rlx_fft_axis(rlx_tensor *x, int axis, bool inverse); /* axis has length 2N */
/* The same transform on complex tensors: x of any numeric dtype (real
 * dtypes convert to c64 with imaginary part 0, f64 to c128), any length
 * N >= 0 along axis, result of x's complex dtype and shape; unnormalized
 * both ways (inverse of the forward is N x). Computed in double, rounded
 * once. The [..., 2N] entry points above refuse c64/c128 (RLX_E_DTYPE). */
RLX_API rlx_tensor *rlx_fft_c(rlx_tensor *x, int axis, bool inverse);

/* ---------------------------------------------------------------- complex */
/* c64 from real parts re and imaginary parts im: any real numeric dtypes
 * (not complex), broadcast together, each converted to f32; c128 (f64
 * parts) when either is f64. */
RLX_API rlx_tensor *rlx_complex(rlx_tensor *re, rlx_tensor *im);
/* The real / imaginary part of c64 as f32 (c128: f64), a copy (the IR has no view that
 * reinterprets a dtype); of a real x: real is x itself, imag zeros of x's
 * dtype (NumPy). */
RLX_API rlx_tensor *rlx_real(rlx_tensor *x);
RLX_API rlx_tensor *rlx_imag(rlx_tensor *x);
/* Complex conjugate; a real x is returned as it is. */
RLX_API rlx_tensor *rlx_conj(rlx_tensor *x);

/* ------------------------------------- low precision and weight synthesis */

/* x [m, k] . w[n, k]^T with both operands rounded (nearest-even, saturating)
 * to the minifloat after scaling each `block` elements along k by a power of
 * two (OCP MX: scale = 2^(floor(log2(amax)) - emax of the format)); block 0
 * uses one scale per tensor; a last partial block has its own scale.
 * f32 result. */
RLX_API rlx_tensor *rlx_scaled_matmul(rlx_tensor *x, rlx_tensor *w, rlx_minifloat fmt, int block);
/* x [m, k]; indices [n, k/d] integer; codebook [E, d];
 * W row j = concat(codebook[indices[j, :]]); returns x . W^T [m, n]. */
RLX_API rlx_tensor *rlx_synth_matmul(rlx_tensor *x, rlx_tensor *indices, rlx_tensor *codebook);
RLX_API rlx_tensor *rlx_synth_reconstruct(rlx_tensor *indices, rlx_tensor *codebook); /* W^T [k, n] */
/* x [..., C], coeff [C, G] with G = num_basis >= 2, grid_max > grid_min:
 * out[..., c] = sum_g coeff[c, g] exp(-((x - ctr_g) / h)^2),
 * ctr = linspace(grid_min, grid_max, G), h = (grid_max - grid_min)/(G-1). */
RLX_API rlx_tensor *rlx_spline_activation(rlx_tensor *x, rlx_tensor *coeff, int num_basis,
                                          double grid_min, double grid_max);

/* Quantized linear for inference: x [..., in] . W^T + b -> [..., out] with
 * int8 weights wq [out, in] (PyTorch's layout), i8 or u8, dequantized per
 * output channel: W[n, k] = (wq[n, k] - zero_point[n]) * scale[n].
 * x: f32, f64, f16 or bf16; the result has x's dtype. scale [out] and b
 * [out] (may be NULL) any float dtype, used in the compute dtype: f32
 * (f64 for f64 x), accumulating in it; f16/bf16 results are rounded once.
 * zero_point [out] of wq's dtype or i32, NULL for 0 (symmetric). The
 * weights are read as bytes (a quarter of f32's traffic) and dequantized
 * to f32 panels while packing. rlx_grad: x and b get their gradients; the
 * quantized weight is frozen: scale gets zeros, and wq and zero_point,
 * integers, are refused as wrt. Errors: NULL argument RLX_E_ARG; x, scale
 * or b not float, wq not i8/u8, zero_point of another dtype RLX_E_DTYPE;
 * wq not rank 2, x not ending in in, scale/zero_point/b not [out]
 * RLX_E_SHAPE. */
RLX_API rlx_tensor *rlx_linear_q8(rlx_tensor *x, rlx_tensor *wq, rlx_tensor *scale, rlx_tensor *zero_point,
                                  rlx_tensor *b);
/* Quantizes a float tensor w per channel along axis (0 for a linear
 * weight [out, in]) into *wq of dtype dt, *scale [C] f32 and, for u8,
 * *zero_point [C] u8 (C = w's length on axis), so that
 * rlx_linear_q8(x, *wq, *scale, *zero_point, b) approximates
 * rlx_linear(x, w, b). Codes are round-half-even of w / scale (computed in
 * f32, f64 for f64 w, with the f32 scale), saturated:
 *   RLX_I8 symmetric: scale = amax / 127 over the channel, codes in
 *     [-127, 127]; *zero_point (may be NULL) gets NULL.
 *   RLX_U8 affine: lo = min(channel min, 0), hi = max(channel max, 0),
 *     scale = (hi - lo) / 255, zero_point = round(-lo / scale) in [0, 255]
 *     (0.0 is exact), codes = round(w / scale) + zero_point in [0, 255].
 * A channel whose range is 0 (all zeros, or empty) gets scale 1: no
 * division by zero, its codes are zero_point. w should be finite. Results
 * are lazy new references. Errors: NULL w, wq, scale (or zero_point for
 * u8) RLX_E_ARG; dt not i8/u8 or w not float RLX_E_DTYPE; rank-0 w
 * RLX_E_SHAPE; axis out of range RLX_E_ARG. On error the outputs are NULL. */
RLX_API rlx_status rlx_quantize_per_channel(rlx_tensor *w, rlx_dtype dt, int axis, rlx_tensor **wq,
                                            rlx_tensor **scale, rlx_tensor **zero_point);

/* ------------------------------------------------- realization, readback */

/* Computes t (and what it needs); later calls return RLX_OK at once. */
RLX_API rlx_status rlx_realize(rlx_tensor *t);
/* Realizes n tensors in one schedule; shared work runs once. */
RLX_API rlx_status rlx_realize_many(rlx_tensor *const *ts, int n);
/* Realizes t and copies its values in its own dtype, row-major; dst_bytes
 * must be at least numel * dtype size. */
RLX_API rlx_status rlx_read(rlx_tensor *t, void *dst, size_t dst_bytes);
/* As rlx_read, converting to f32 / f64; count must be at least numel. */
RLX_API rlx_status rlx_read_f32(rlx_tensor *t, float *dst, size_t count);
RLX_API rlx_status rlx_read_f64(rlx_tensor *t, double *dst, size_t count);
/* Realizes t; returns its contiguous row-major payload, owned by t and valid
 * while t lives. NULL on error. */
RLX_API const void *rlx_data(rlx_tensor *t);
/* The value of a one-element tensor, as a double (c64: RLX_E_DTYPE,
 * naming rlx_read, which copies the (re, im) pair). */
RLX_API rlx_status rlx_item(rlx_tensor *t, double *out);
/* Realizes t and formats it like NumPy, with shape and dtype, e.g.
 * "tensor([[1, 2], [3, 4]], shape=[2, 2], dtype=i32)"; more than 1000
 * elements are summarized with "...". Free it with free(). NULL on error. */
RLX_API char *rlx_to_string(rlx_tensor *t);

/* ------------------------------------------------------- compiled programs */
/* Trace once, run many times without retracing. */

typedef struct rlx_program rlx_program;
typedef struct {
    const char *name;
    rlx_tensor *value;
} rlx_binding;
/* Compiles the graphs of outputs[0..n) (which may hold rlx_input nodes).
 * With the "jit" backend selected at compile time, scheduling, memory
 * planning and kernel compilation happen here, once; a run only checks the
 * bindings and runs the kernels (whatever the backend is then). With
 * dynamic dims the plan is made on the first run of each new set of
 * bound dims and kept: the 8 (option program_specs) most recently used
 * per program (a new set evicts the least recently used other than the one
 * it is planned from; rlx_program_specs counts them). Its
 * kernels are size-generic (knob generic_kernels), so a new binding
 * schedules and plans memory but compiles nothing, except a variant where
 * the generic key differs: a dim bound to 1 (its loops drop out), a bound
 * size equal to another dim's extent where that lets a reduction fuse
 * into its consumer (a sequence length equal to attention's head dim), or
 * a size-dependent row plan: a handful of kernels the first time such a
 * binding comes. Constants bound as inputs do not count: a kernel never
 * depends on whether a constant was realized before. A new binding is not
 * scheduled afresh when a kept plan fits it (rlx_program_reuses counts
 * these): every dynamic dim in the same size class as that plan's, 0, 1
 * or more (0 empties loops, 1 drops them out of loops and index maps and
 * makes broadcasts), and the graph its sizes give of the same structure,
 * node for node (a dim the sizes derive can still be 1 or 0, as n - 1 at
 * n = 2: that binding then plans afresh). Such a plan keeps the kept
 * one's fusion decisions (which values are stored, which kernels there
 * are), copies every kernel whose nodes keep their sizes, with its
 * compiled code, and lowers the others again over the new sizes; the
 * memory plan is made anew. With the reuse, kernels that the sizes of a
 * class would fuse differently (a decision made by comparing sizes) keep
 * the first plan's choice: same values, maybe another speed. The memory
 * plans of every binding are resolved into the program's own arenas,
 * which grow only (rlx_program_arenas). With the reference backend each
 * run re-instantiates the graph. */
RLX_API rlx_program *rlx_compile(rlx_tensor *const *outputs, int n);
/* Binds every input by name and writes the new references of the n
 * outputs to outputs[]. A binding must have the input's dtype (else
 * RLX_E_DTYPE) and rank and static dims (else RLX_E_SHAPE); its dynamic
 * dims may be any size, 0 included, as long as the graph's ops accept the
 * bound shapes together (else RLX_E_SHAPE naming the op and shapes). An
 * unknown or missing name is RLX_E_ARG. On error every outputs[i] is NULL. */
RLX_API rlx_status rlx_program_run(rlx_program *p, const rlx_binding *inputs, int nin,
                                   rlx_tensor **outputs);
/* As rlx_program_run, and takes the caller's reference to every binding's
 * value (donates it, as JAX's donate_argnums): each inputs[b].value is
 * released once when the call returns, whatever the outcome, as if by
 * rlx_release (so, as for rlx_release, pass no handle an open scope
 * records; rlx_escape it first). A tensor bound to k inputs needs k
 * references (rlx_retain); with fewer the call is RLX_E_ARG and releases
 * nothing. What it buys: when the run holds the only reference to an
 * input's value (bound once, no other handle or graph node refers to it,
 * its memory librlx's own: not rlx_from_blob's, not a mapped
 * checkpoint's), an output computed elementwise from it with the same
 * dtype and byte size, by the last kernel that reads it, is written over
 * its buffer in place: a training step's parameters and optimizer state
 * are updated without a second copy (JIT backend; otherwise, and for
 * inputs still referenced elsewhere, the run is rlx_program_run's and the
 * values are the same). Nothing is ever written over memory another
 * tensor can read. */
RLX_API rlx_status rlx_program_run_donate(rlx_program *p, const rlx_binding *inputs, int nin,
                                          rlx_tensor **outputs);
RLX_API void rlx_program_free(rlx_program *p); /* NULL is a no-op */
/* How many specializations p keeps now (JIT: at most program_specs, 8 by
 * default, the most recently used; a new binding evicts the least recently used other than the one
 * it is planned from) and how many it has
 * prepared since compiled (a binding seen before and still kept prepares
 * none). Either pointer may be NULL. p NULL is RLX_E_ARG. */
RLX_API rlx_status rlx_program_specs(rlx_program *p, int *kept, int64_t *prepared);
/* How many of the specializations p prepared were made from a kept one's
 * plan (JIT; the rule is in the rlx_compile paragraph): its schedule's
 * decisions and the compiled code of every kernel whose sizes the new
 * binding leaves unchanged. p NULL is RLX_E_ARG. */
RLX_API rlx_status rlx_program_reuses(rlx_program *p, int64_t *reused);
/* The arenas p holds between runs (JIT; none on the reference backend):
 * *count of them, *bytes in all. Every specialization's memory plan is
 * resolved into the program's arenas, not one arena per specialization: a
 * run takes an idle arena, grows it when its binding needs more and gives
 * it back, so a smaller binding reuses the largest one. p keeps one per
 * run in flight at once (at most 4), each as large as the largest plan it
 * served; concurrent runs never share one. Either pointer may be NULL. p
 * NULL is RLX_E_ARG. */
RLX_API rlx_status rlx_program_arenas(rlx_program *p, int *count, int64_t *bytes);

/* --------------------------------------------------------------- autodiff */

/* grads[i] = lazy d sum(loss) / d wrt[i], with wrt[i]'s shape and dtype;
 * gradients are ordinary lazy tensors, so rlx_grad of a gradient works and
 * realizing loss and gradients together shares the forward work. A wrt not
 * reachable from loss gets zeros. stop_gradient blocks. round and the
 * scaled_matmul quantization are straight-through. floor, ceil, sign,
 * comparisons, logical ops, argmax/argmin and casts to integers give zero.
 * abs and relu at 0 give 0; so do norm and std where they are 0. Of
 * several src elements rlx_scatter sends to one place, the winner gets the
 * gradient. maximum/minimum ties (so clamp at a bound) give
 * half to each operand; max/min reductions and max_pool2d split the
 * gradient evenly over tied extremes (PyTorch's rule). prod is exact with
 * zeros. pow: d/da = 0 where b == 0, d/db = 0 where a == 0 and b >= 0.
 * loss and wrt may be any float dtype (f32, f64, f16, bf16), wrt also c64
 * or c128 (complex rules: the complex block above); each gradient has its
 * wrt's dtype. Errors: n < 0 or NULL entries RLX_E_ARG; a non-float loss
 * (complex included: it must be real) or a non-float, non-complex wrt
 * RLX_E_DTYPE; through dynamic dims what rlx_input lists as
 * refused RLX_E_UNSUPPORTED (the gradient graph has dynamic dims too and a
 * program resolves them per binding). On error every grads[i] is NULL. */
RLX_API rlx_status rlx_grad(rlx_tensor *loss, rlx_tensor *const *wrt, int n, rlx_tensor **grads);

/* ------------------------------------------------------------ checkpoints */
/* Tensors to and from files: safetensors, NumPy .npy and .npz. Every dtype
 * of rlx_dtype is read and written: safetensors BOOL I32 I64 F32 F64 F16
 * BF16 I8 U8 I16 U32 C64 C128 (C128 is librlx's name: the safetensors
 * format lists no 128-bit complex), NumPy '|b1' '<i4' '<i8' '<f4' '<f8'
 * '<f2' '|i1' '|u1' '<i2' '<u4' '<c8' '<c16' -- except that NumPy has no bfloat16: rlx_save_npy and
 * rlx_save_npz refuse a bf16 tensor with RLX_E_DTYPE before writing (save
 * it as safetensors, or cast it to f32). Files are written atomically (a temporary
 * file beside path, renamed over it), little-endian, row-major; unrealized
 * tensors are realized, views written contiguous. Loading maps the file
 * read-only: a tensor whose bytes are aligned for its dtype and in native
 * byte order reads the mapping in place (zero-copy) and keeps it mapped
 * while any tensor references it, after rlx_checkpoint_free too; other
 * tensors (misaligned, big-endian, compressed, bool bytes other than 0/1)
 * are copied. A loaded tensor is realized, except Fortran-order .npy data,
 * which is a transposed view. Don't modify a file while tensors map it.
 * A corrupt, truncated or hostile file is RLX_E_IO with a message naming
 * the path and the problem; a type librlx lacks (U16, U64, F8_E4M3,
 * '<u2', '<c32', ...) is RLX_E_UNSUPPORTED; nothing outside the file is ever read. Saving: n < 0,
 * NULL, empty or repeated names, or a NULL tensor are RLX_E_ARG; a failing
 * write RLX_E_IO with the system's reason (the old file stays as it was). */

typedef struct rlx_checkpoint rlx_checkpoint; /* the tensors of one loaded file */

/* Writes names[i] -> tensors[i], i < n, as safetensors (no __metadata__;
 * data ordered 8-, 4-, 2-, then 1-byte types so each is aligned). Names must be
 * UTF-8 and not "__metadata__" (RLX_E_ARG). */
RLX_API rlx_status rlx_save_safetensors(const char *path, int n, const char *const *names,
                                        rlx_tensor *const *tensors);
/* Loads a safetensors file; "__metadata__" (a map of strings) is accepted
 * and ignored. The tensors must tile the data region exactly (no gap, no
 * overlap); a header above 100 MB or nested deeper than 8 is RLX_E_IO.
 * NULL on error. Free it with rlx_checkpoint_free. */
RLX_API rlx_checkpoint *rlx_load_safetensors(const char *path);
/* Writes t as a .npy (version 1.0, C order). */
RLX_API rlx_status rlx_save_npy(const char *path, rlx_tensor *t);
/* Reads a .npy of version 1.0, 2.0 or 3.0: little- or big-endian, C or
 * Fortran order. */
RLX_API rlx_tensor *rlx_load_npy(const char *path);
/* Writes an .npz (np.load reads it) holding NAME.npy members, uncompressed;
 * zip64 where sizes need it. Names must be UTF-8 (RLX_E_ARG). */
RLX_API rlx_status rlx_save_npz(const char *path, int n, const char *const *names,
                                rlx_tensor *const *tensors);
/* Reads an .npz of np.savez (stored: zero-copy when aligned) or
 * np.savez_compressed (DEFLATE, through zlib: copied); CRC-32 checked. A
 * member that is not NAME.npy is RLX_E_IO. NULL on error. */
RLX_API rlx_checkpoint *rlx_load_npz(const char *path);
/* Number of tensors; -1 (RLX_E_ARG) for NULL. */
RLX_API int rlx_checkpoint_count(const rlx_checkpoint *c);
/* Name of tensor i in file order, owned by c (valid until it is freed);
 * NULL (RLX_E_ARG) when i is outside 0..count-1 or c is NULL. */
RLX_API const char *rlx_checkpoint_name(const rlx_checkpoint *c, int i);
/* The tensor named name (a new reference, valid after c is freed); NULL
 * and RLX_E_ARG when there is none. */
RLX_API rlx_tensor *rlx_checkpoint_get(const rlx_checkpoint *c, const char *name);
RLX_API void rlx_checkpoint_free(rlx_checkpoint *c); /* NULL is a no-op */

/* ---------------------------------------------------------- runtime control */

typedef struct {
    uint64_t kernels_compiled, cache_hits, cache_misses, kernels_run;
    double compile_seconds;
    uint64_t arena_bytes, peak_bytes;
    /* the caches (see rlx_stats): bytes held now, evictions since start or reset */
    uint64_t kernel_cache_bytes, kernel_evictions, plan_cache_bytes, plan_evictions;
} rlx_stats_t;

/* n <= 0 restores the default: online cores, or env RLX_NUM_THREADS. */
RLX_API void rlx_set_num_threads(int n);
RLX_API int rlx_get_num_threads(void);
/* Tuning knobs (key = value, also read from env RLX_<KEY> upper-cased):
 *   "backend"      "jit" (the fused LLVM backend, default) or "ref" (the
 *                  reference evaluator: one primitive at a time, in double,
 *                  the oracle the JIT is tested against); env RLX_BACKEND
 *                  (any value but "ref" means jit)
 *   "num_threads"  integer >= 0 (0 = default)
 *   "compile_threads" integer >= 0: threads that compile the kernels a
 *                  realization or program is missing (0 = default: env
 *                  RLX_COMPILE_THREADS, else every online CPU, whatever
 *                  num_threads is: compiling is a one-time wait, not the
 *                  steady state num_threads sizes; set it to keep
 *                  compiles off cores other processes use)
 *   "cache_dir"    directory of the on-disk kernel cache; env RLX_CACHE_DIR,
 *                  default $XDG_CACHE_HOME/rlx, else ~/.cache/rlx; "" turns
 *                  it off. Compiled kernels are stored there (one file per
 *                  kernel, mode 0600, keyed by the kernel's structure, the
 *                  LLVM version and the host CPU) and loaded by later
 *                  processes instead of compiled. The directory is created
 *                  0700 and used only if it belongs to the user and no one
 *                  else may write to it; a cache that fails (unwritable,
 *                  disk full, a corrupt file) only means compiling again.
 *                  Files are keyed by the build of librlx too (a hash of all
 *                  its sources and compile flags): a file written by any
 *                  other build is never loaded.
 *   "cache_max_bytes"    size cap of that directory in bytes (env
 *                  RLX_CACHE_MAX_BYTES; default 256 MiB): past it the files
 *                  least recently used (oldest mtime, refreshed on load) are
 *                  removed, checked every few stores; 0 keeps no files
 *   "kernel_cache_bytes" budget of the in-memory kernel cache in bytes (env
 *                  RLX_KERNEL_CACHE_BYTES; default 64 MiB): compiled kernels
 *                  that no cached plan or compiled program holds are evicted,
 *                  least recently used first, and their JIT memory returned;
 *                  kernels in use are never evicted (so the bytes held may
 *                  exceed the budget while they are); 0 keeps none idle
 *   "program_specs" specializations each compiled program keeps (env
 *                  RLX_PROGRAM_SPECS, 1..4096; option 0..4096, 0 the
 *                  variable, else 8): a binding of dynamic dims seen before
 *                  and still kept plans nothing; a new one evicts the least
 *                  recently used down to the limit (lowering it takes effect
 *                  at a program's next new binding). Each kept costs its
 *                  graph and plan, about 1 MB for the W10a GPT step
 *                  (rlx_program_specs counts them)
 * Code generation and runtime knobs (integers; "default" restores the
 * built-in choice; 0 = the built-in rule where marked "auto"). A changed
 * codegen knob compiles new kernels (it is part of the kernel cache key):
 *   "vector_width"        lanes of innermost loops: 0 auto, or 1..64, a power of two
 *   "unroll"              vectors per iteration of elementwise loops: 0 auto, 1..16
 *   "reduce_accumulators" vectors of partial results per iteration of
 *                         reduction and row (softmax, norm) loops: 0 auto, 1..16
 *   "grain"               loop iterations per parallel chunk, 64..2^26 (32768)
 *   "gemm_block"          rows per block of a fused GEMM epilogue: 0 auto
 *   "small_matmul"        m*n*k at or below which a matmul skips BLAS: 0 auto
 *   "bf16_gemm"           bf16 matmul: 0 auto (oneDNN's AVX512-BF16 kernels when
 *                         librlx was built with oneDNN and the CPU has them),
 *                         1 widen each block to f32 for sgemm (either way f32
 *                         accumulation, the result rounded once)
 *   "f32_gemm"            f32 products (matmul, linear, and the GEMMs inside
 *                         attention, conv2d and int8-weight linear): 0 auto
 *                         (oneDNN's matmul when librlx was built with oneDNN
 *                         and the CPU has AVX-512: 1.8-2.1x cblas_sgemm at one
 *                         thread on this project's EPYC, where OpenBLAS runs
 *                         its Haswell kernels; else OpenBLAS), 1 OpenBLAS, 2
 *                         oneDNN wherever the build has it. Either way one
 *                         thread per block of librlx's shape-only split, so
 *                         results do not depend on the thread count; the two
 *                         engines sum in other orders (last bits differ)
 *   "gemv"                f32/f64 matmul rows of one (m = 1, as in decoding) over
 *                         a row-major weight (linear, matmul_t): 0 auto (librlx's
 *                         AVX-512 kernel where the CPU has it: at the rate of a
 *                         loop reading the weights, OpenBLAS's sgemv 1.5-1.8x
 *                         that on a Llama decode step), 1 OpenBLAS's gemv
 *   "half_gelu"           1 (default): gelu_tanh whose result is only rounded to
 *                         bf16/f16 computes as x / (1 + e^(-2y)), one exp and
 *                         one division (correctly rounded but for 1 bf16 and 3
 *                         f16 inputs one ulp off, tests/test_halfmath.c); 0: as
 *                         0.5 x (1 + tanh y), for comparison
 *   "fuse_elementwise", "fuse_reduce", "fuse_phases"   1 (default) or 0:
 *                         fusion rules of the scheduler, for ablation:
 *                         elementwise chains, a reduction absorbing its
 *                         elementwise producers, a row reduction running as
 *                         a phase of its reader (softmax in one kernel)
 *   "reduce_acc_f64"      1: f32, f16 and bf16 sums add every element in f64
 *                         (about 2x the work per element); 0 (default): blocked
 *                         f32 sums (the error bound under reductions)
 *   "attention_bwd"       the gradient of attention (read when rlx_grad builds
 *                         it): 0 a composite of ops (recomputes each head's
 *                         S x S weights), 1 one library kernel over blocks of
 *                         query rows (float dtypes, static lengths, not when a
 *                         float mask's own gradient is wanted: those take the
 *                         ops), 2 auto (default): the kernel from 128 keys up
 *                         (step CPU time, kernel / ops: W10b 0.965-0.971x;
 *                         W10a at 64 keys 0.955-1.02x over three runs, no
 *                         clear gain), and at any length for f16/bf16 (the
 *                         kernel computes in f32; f16/bf16 ops would round
 *                         each step: where the ops run, they run on f32
 *                         copies)
 *   "half_kernels"        f16/bf16 attention and bf16 conv2d (read when the
 *                         op is built): 3 (default) conv2d its own kernel,
 *                         attention on f32 copies (its own kernel measured no
 *                         faster: 0.74-1.0x the widened path); 0 both their
 *                         own kernels, no widened copies of the operands
 *                         (attention converts blocks in its scratch; conv2d:
 *                         oneDNN where built with it and the CPU has
 *                         AVX512-BF16, else widened inside the kernel); 1 f32
 *                         copies of the operands around the f32 kernels, the
 *                         result rounded; 2 as 0, but conv2d takes the
 *                         kernel's own widening fallback (for tests)
 *   "generic_kernels"     size-generic fused kernels: 0 never, 1 auto (default),
 *                         2 always. A generic kernel reads its extents, strides,
 *                         offsets and pad bounds at run time, so one compile
 *                         serves every size of its structure (op list, dtypes,
 *                         ranks, which dims broadcast, whether the innermost
 *                         access is contiguous or reversed; a size-1 dim is
 *                         another structure: the scheduler drops it). Auto:
 *                         a structure's first size compiles a specialized
 *                         kernel (sizes as constants), a second size compiles
 *                         its generic kernel, every later size reuses it.
 *                         Compiled programs with dynamic (-1) dims use generic
 *                         kernels unless this is 0. Measured generic within a
 *                         few percent of specialized on W1-W4 (rlx-bench
 *                         --filter generic), so no size keeps auto specialized
 *   "tuning_file"         path: loads a tuning file now (rlx-bench --tune
 *                         writes one); "" clears the loaded entries
 * Set values and env RLX_<KEY> win over the tuning file, which is read at
 * start-up from RLX_TUNING_FILE, else tuning.txt in the cache directory
 * (RLX_CACHE_DIR, else $XDG_CACHE_HOME/rlx, else ~/.cache/rlx): its entries
 * set knobs per kernel class and size. A malformed file is ignored (why:
 * rlx_get_option "tuning_status"; printed under RLX_DEBUG only).
 * An unknown key or a malformed value is RLX_E_ARG; an unreadable tuning
 * file RLX_E_IO.
 * Environment only (read once, at the first call that needs a setting):
 *   RLX_DEBUG      diagnostics on stderr: 1 one line per kernel compiled or
 *                  loaded and librlx's own notices (an ignored knob value or
 *                  tuning file, a disk cache turned off); 2 adds each
 *                  kernel's optimized LLVM IR, the JIT's start-up time and
 *                  LLVM's own remarks ("rlx: llvm: ..."); 3 adds the
 *                  assembly; 4 adds the graph after simplification and the
 *                  schedule of every realization
 *   RLX_VERIFY     1: after simplification every node is re-checked
 *                  against its shape rule and after scheduling every kernel
 *                  against the schedule's invariants; a failure is
 *                  RLX_E_INTERNAL naming the pass (always on in builds
 *                  without NDEBUG)
 *   RLX_LLVM_ARGS  LLVM command-line options, space separated (debugging)
 *   RLX_JIT_PASSES an LLVM pass pipeline replacing the kernels' own */
RLX_API rlx_status rlx_set_option(const char *key, const char *value);
/* Writes the current value of "backend", "num_threads", "compile_threads", "cache_dir" (the
 * directory configured, "" when off) or a knob (the value used outside any
 * tuned class), or "tuning_status", into buf (NUL-terminated). Other keys
 * ("tuning_file" too) or a value longer than cap-1: RLX_E_ARG. */
RLX_API rlx_status rlx_get_option(const char *key, char *buf, size_t cap);
/* Process-wide counters since start or the last rlx_stats_reset. JIT:
 * every fused kernel a realization runs is one cache hit (found in memory,
 * or loaded from the disk cache, which still costs a file read and a link)
 * or one miss (compiled: kernels_compiled); compile_seconds includes the
 * loads. With the
 * reference backend kernels_run counts evaluated primitive nodes and
 * peak_bytes the largest intermediate memory of one realization.
 * arena_bytes (JIT) is the largest arena of one realization or program
 * run: the one block holding its intermediates (values that are neither
 * roots nor results of reference kernels), packed by lifetime and reused
 * in place; 0 when a realization is one fused kernel. peak_bytes (JIT) is
 * the largest arena plus the other buffers live at one time.
 * kernel_cache_bytes: what the in-memory kernel cache holds now (an
 * estimate: each kernel's object in pages plus a page and its key), in use
 * or idle; kernel_evictions: kernels evicted to stay within
 * kernel_cache_bytes. plan_cache_bytes: what the cache of prepared plans
 * holds now (estimated from its template nodes, keys and tables; at most
 * 32 MiB, 64 plans, 65,536 template nodes); plan_evictions: plans it
 * dropped. The two byte counts are the current state, not reset. */
RLX_API void rlx_stats(rlx_stats_t *out);
RLX_API void rlx_stats_reset(void);
/* Writes the graph of t as Graphviz dot to path (RLX_E_IO when it cannot). */
RLX_API rlx_status rlx_dump_dot(rlx_tensor *t, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* RLX_H */
