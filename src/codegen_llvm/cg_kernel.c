/*
 * cg_kernel.c — one scheduled LOOP kernel (passes/schedule.c) as one LLVM
 * function:
 *
 *   void name(void *const *buffers, const double *consts, int64_t begin, int64_t end)
 *
 * buffers[0] is the output, buffers[i] the kernel's args; consts[s] is the
 * value of CONST slot s (read once, before the loops, and converted to the
 * constant's dtype: values are arguments, so a changed scalar reuses the
 * code); [begin, end) is the range of loop dim 0, which the runtime may
 * split between threads. In a specialized kernel shapes and strides are
 * constants, so every inner trip count is known; a size-generic one
 * (cg_mod.generic) reads them from the parameter array in buffers[nargs]
 * (sched_kernel_params), except the strides its key fixes (0 anywhere, 1
 * or -1 innermost: what the vectorizer needs to know), and sizes its row
 * buffers at run time.
 * The body is plain scalar IR written the way clang writes it (loop
 * counters and accumulators in allocas, one load/compute/store per element)
 * and left to LLVM's O3 pipeline: mem2reg, LICM hoists what the inner
 * loop does not change, and the loop vectorizer widens the inner loop (the
 * buffers are noalias arguments of an internal body function). A row
 * kernel's passes, stashes, guarded divisions and prefetching are decided
 * by its plan (passes/rowplan.c); emit_phased only follows it.
 *
 * Semantics follow the reference evaluator (runtime/ref_elementwise.c):
 * f32 math computes in f32, which for + - * / sqrt and the roundings is the
 * reference's double result rounded once; integers wrap (narrow ones in
 * their own width); integer division by 0 gives 0; float -> int casts
 * truncate, saturate, NaN -> 0. f16 and bf16 values are f32 inside the
 * kernel, rounded once on store (a CAST to them rounds where it stands);
 * for one + - * / sqrt that is the reference's result too (f32 has more
 * than twice their precision, so the two roundings are one).
 * f32 division by a value fixed along the vectorized loop is IEEE division
 * bit for bit: in a row kernel's store pass without a divide (fast_div),
 * elsewhere a divide.
 * Reductions: PROD of f32, f16, bf16 accumulates in f64, and so does SUM
 * under the knob reduce_acc_f64; the accumulate is the only instruction
 * with a fast-math flag (reassoc), so the vectorizer may keep several
 * partial sums. Otherwise SUM of f32, f16, bf16 is blocked: one loop dim
 * (the innermost reduced one; in a row kernel the innermost row dim) runs
 * in blocks, each summed in an f32 accumulator (reassoc: partial sums in
 * 16 lanes), whose value is then added, exactly converted, into the f64
 * accumulator (flush_block: in block order, no reassoc) and reset. A block
 * holds at most m elements per accumulator: SCHED_SUM_BLOCK (1024) along a
 * row, SUM_BLOCK_ROWS (64) rows of a row buffer over tail dims (column
 * sums: each slot adds them in order), SCHED_ROW_PF_CHUNK (256) in a
 * chunked row pass; a compiled-in extent within one block is one block.
 * f32 holds f16 and bf16 values exactly, so for n values, s their exact
 * sum, A = sum |x_i|, u = 2^-24, g(k) = k u / (1 - k u), g64 the same
 * with 2^-53:
 *  - a block of j <= m values summed in f32 in any order (any binary tree
 *    of j leaves is at most j - 1 deep; Higham, Accuracy and Stability,
 *    4.3): |err_b| <= g(m-1) A_b;
 *  - the k <= n block sums added in f64 in order: g64(k-1) times the sum
 *    of their magnitudes, which is at most (1 + g(m-1)) A;
 *  - one rounding of that f64 value to the output (f16/bf16 through f32
 *    rounded to odd: still one rounding), uo its unit roundoff:
 *      |out - s| <= uo |s| + (1 + uo) (g(m-1) + g64(n) (1 + g(m-1))) A,
 * with m = 1024 about uo |s| + 6.1e-5 A (include/rlx.h states it;
 * test_reduce checks it on 10^7-element sums, which the naive f32 loop
 * breaks). The order is fixed by the code and the kernel's shape (blocks
 * run along a reduced dim, threads split loop dim 0, never reduced), so
 * the result is deterministic and independent of the thread count.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <llvm-c/DebugInfo.h>
#include <llvm-c/TargetMachine.h>

#include "codegen_llvm/cg_internal.h"
#include "ir/cast.h"
#include "passes/knobs.h"

void cg_mod_init(cg_mod *m, LLVMContextRef ctx, LLVMModuleRef mod)
{
    memset(m, 0, sizeof *m);
    m->ctx = ctx;
    m->mod = mod;
    m->i1 = LLVMInt1TypeInContext(ctx);
    m->i8 = LLVMInt8TypeInContext(ctx);
    m->i16 = LLVMInt16TypeInContext(ctx);
    m->i32 = LLVMInt32TypeInContext(ctx);
    m->i64 = LLVMInt64TypeInContext(ctx);
    m->f16 = LLVMHalfTypeInContext(ctx);
    m->f32 = LLVMFloatTypeInContext(ctx);
    m->f64 = LLVMDoubleTypeInContext(ctx);
    m->ptr = LLVMPointerTypeInContext(ctx, 0);
    m->vd = LLVMVoidTypeInContext(ctx);
    /* llvm.fma without the instruction would be a libm call per element */
    char *f = LLVMGetHostCPUFeatures(), *t = LLVMGetDefaultTargetTriple();
    m->fma = (f && (strstr(f, "+fma") || strstr(f, "+neon"))) || (t && !strncmp(t, "aarch64", 7));
    /* without it fptrunc/fpext on half are compiler-rt calls the JIT
     * process cannot resolve: f16 then converts with integer operations */
    m->f16c = (f && strstr(f, "+f16c")) || (t && !strncmp(t, "aarch64", 7));
    LLVMDisposeMessage(f);
    LLVMDisposeMessage(t);
}

LLVMValueRef cg_intrinsic(cg_mod *m, LLVMBuilderRef b, const char *name, LLVMTypeRef ty, LLVMValueRef *args,
                          unsigned nargs)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(m->mod, id, &ty, 1);
    return LLVMBuildCall2(b, LLVMIntrinsicGetType(m->ctx, id, &ty, 1), fn, args, nargs, "");
}

LLVMValueRef cg_intrinsic2(cg_mod *m, LLVMBuilderRef b, const char *name, LLVMTypeRef t0, LLVMTypeRef t1,
                           LLVMValueRef *args, unsigned nargs)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMTypeRef tys[2] = {t0, t1};
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(m->mod, id, tys, 2);
    return LLVMBuildCall2(b, LLVMIntrinsicGetType(m->ctx, id, tys, 2), fn, args, nargs, "");
}

/* ------------------------------------------------------------ the state */

enum { FD_SLOTS = SCHED_ROW_FD_SLOTS, PF_LOADS = SCHED_ROW_PF_LOADS };
/* A blocked sum keeping tail dims (column sums): rows per block. Each
 * slot adds them in order; the flush costs a pass over the f64 row
 * buffer per block. */
enum { SUM_BLOCK_ROWS = 64 };
enum { DIV_PLAIN, DIV_FAST };

typedef struct {
    cg_mod *m;
    const sched_kernel *k;
    LLVMBuilderRef b;
    LLVMValueRef fn;
    LLVMValueRef *bufs;              /* the noalias arguments */
    LLVMValueRef *cvals;             /* per CONST slot: its value in its dtype */
    LLVMValueRef begin, end;
    LLVMValueRef ivslot[SCHED_MAX_LOOP]; /* loop counters (allocas) */
    LLVMValueRef iv[SCHED_MAX_LOOP];     /* their values inside the open loops */
    LLVMBasicBlockRef head[SCHED_MAX_LOOP], exit[SCHED_MAX_LOOP];
    LLVMValueRef *vals;                  /* per instruction */
    LLVMValueRef acc;                    /* reduction accumulators (alloca) */
    LLVMTypeRef acc_t;
    int r1, r2;                          /* reduced dims are [r1, r2) */
    LLVMValueRef acc_stride[SCHED_MAX_LOOP]; /* accumulator index over the tail dims */
    /* a generic kernel (cg_mod.generic): pv[p] is parameter p loaded in
     * the entry block where the kernel reads it (NULL where the number is
     * compiled in); pbase[i]: instruction i's first parameter */
    bool generic;
    LLVMValueRef *pv;
    int *pbase;
    int interleave, width;               /* forced on the innermost loop when > 1 */
    unsigned char *inner;                /* per instruction: varies along the innermost loop dim */
    unsigned char *lowp;                 /* per instruction: LOWP_BF16/F16 where mark_lowp allows (else 0) */
    /* f32 divisions by a per-row value in a row kernel's store pass
     * (emit_phased): per instruction its guard slot or -1 (fdslot NULL:
     * none); the slot's accumulators (allocas) and divisor once used */
    signed char *fdslot;
    LLVMValueRef fdlo[FD_SLOTS], fdhi[FD_SLOTS], fdb[FD_SLOTS];
    int divmode; /* DIV_PLAIN (fdiv) or DIV_FAST (guarded, see fast_div) */
    /* chunk > 0: the innermost loop runs as chunks of that many elements,
     * each first prefetching the same chunk of the pf loads at row pfrow
     * (emit_phased: the next row, during the arithmetic of this one) */
    int64_t chunk;
    int npf, pf[PF_LOADS];
    LLVMValueRef chslot, chiv, jiv, pfrow;
    LLVMBasicBlockRef chhead, chexit;
    /* a blocked f32 sum (the file header): acc32 (non-NULL) holds the f32
     * partial sums, acc64 the f64 accumulators they are added into, each
     * a row buffer over the tail dims [r2, rank) when btail; loop dim
     * blkdim (-1: none) runs in blocks of `block` iterations, and at the
     * end of each (or of each chunk, with blk_chunk) flush_block adds them */
    LLVMValueRef acc32, acc64;
    bool btail, blk_chunk;
    int blkdim;
    int64_t block;
    LLVMValueRef blkslot, bstart;
    LLVMBasicBlockRef bhead, bexit;
    char *msg;
    size_t cap;
    bool failed, oom;
} kctx;

/* A value of dt inside a kernel: f16 and bf16 are held in f32 (computed
 * in f32, rounded once on store), narrow integers in their own width, so
 * their arithmetic wraps there; u8 and u32 share i8 and i32 with the
 * signed types, the operations choosing unsigned forms (is_uns). */
static LLVMTypeRef reg_type(cg_mod *m, rlx_dtype dt)
{
    switch (dt) {
    case RLX_BOOL: return m->i1;
    case RLX_I8:
    case RLX_U8: return m->i8;
    case RLX_I16: return m->i16;
    case RLX_I32:
    case RLX_U32: return m->i32;
    case RLX_I64: return m->i64;
    case RLX_F32:
    case RLX_F16:
    case RLX_BF16: return m->f32;
    default: return m->f64;
    }
}

static bool is_half(rlx_dtype dt) { return dt == RLX_F16 || dt == RLX_BF16; }
static bool is_uns(rlx_dtype dt) { return ir_dtype_is_unsigned(dt); }

/* In memory: bool a byte, f16 and bf16 their 16-bit patterns. */
static LLVMTypeRef mem_type(cg_mod *m, rlx_dtype dt)
{
    return dt == RLX_BOOL ? m->i8 : is_half(dt) ? m->i16 : reg_type(m, dt);
}

static LLVMValueRef ci(kctx *c, LLVMTypeRef t, long long v) { (void)c; return LLVMConstInt(t, (unsigned long long)v, 1); }
static LLVMValueRef cf(LLVMTypeRef t, double v) { return LLVMConstReal(t, v); }

/* Number v of the kernel, parameter p: compiled in, or in a generic
 * kernel the parameter read at run time. */
static LLVMValueRef num(kctx *c, int p, int64_t v)
{
    return c->generic && c->pv[p] ? c->pv[p] : ci(c, c->m->i64, v);
}

/* The extent of loop dim d. */
static LLVMValueRef extent(kctx *c, int d) { return num(c, d, c->k->shape[d]); }

/* off + sum stride[d] * iv[d] over the dims with a nonzero stride; its
 * parameters from base (a generic kernel's 0 strides are compiled in). */
static LLVMValueRef affine(kctx *c, const sched_affine *a, int base)
{
    LLVMValueRef v = num(c, base, a->off);
    for (int d = 0; d < c->k->rank; d++) {
        if (a->stride[d] == 0)
            continue;
        bool fixed = !(c->generic && c->pv[base + 1 + d]);
        LLVMValueRef t = fixed && a->stride[d] == 1 ? c->iv[d]
                                                    : LLVMBuildNSWMul(c->b, c->iv[d], num(c, base + 1 + d, a->stride[d]), "");
        v = LLVMBuildNSWAdd(c->b, v, t, "");
    }
    return v;
}

/* The index of instruction in (a LOAD, IOTA or GUARD), and the output's. */
static LLVMValueRef aff_in(kctx *c, const sched_instr *in) { return affine(c, &in->idx, c->pbase[in - c->k->instr]); }
static LLVMValueRef aff_out(kctx *c) { return affine(c, &c->k->out, c->k->rank); }

static LLVMValueRef elem_ptr(kctx *c, int arg, rlx_dtype dt, LLVMValueRef index)
{
    return LLVMBuildInBoundsGEP2(c->b, mem_type(c->m, dt), c->bufs[arg], &index, 1, "");
}

static LLVMValueRef half_to_f32(kctx *c, LLVMValueRef h, rlx_dtype dt);
static LLVMValueRef f32_to_half(kctx *c, LLVMValueRef x, rlx_dtype dt);
static LLVMValueRef intr1(kctx *c, const char *name, LLVMValueRef x);

static LLVMValueRef load(kctx *c, int arg, rlx_dtype dt, LLVMValueRef index)
{
    LLVMValueRef v = LLVMBuildLoad2(c->b, mem_type(c->m, dt), elem_ptr(c, arg, dt, index), "");
    LLVMSetAlignment(v, (unsigned)ir_dtype_size(dt));
    if (dt == RLX_BOOL)
        v = LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstInt(c->m->i8, 0, 0), "");
    if (is_half(dt))
        v = half_to_f32(c, v, dt);
    return v;
}

static LLVMValueRef icmp(kctx *c, LLVMIntPredicate p, LLVMValueRef a, LLVMValueRef b);

/* True when GUARD in, though its index moves along the innermost loop,
 * has one value over each run of it: the index is a + s*i (i < E, the
 * innermost extent) with a, lo and hi multiples of s*E, so the run stays
 * inside one block of s*E values that [lo, hi) holds whole or not at all
 * (a pad of the flat [.., heads*width] dim read as [.., heads, width]).
 * It is then computed at i = 0, fixed along the loop. */
static bool guard_blockwise(const kctx *c, const sched_instr *in)
{
    int last = c->k->rank - 1;
    if (c->generic || last < 0 || in->idx.stride[last] <= 0)
        return false;
    int64_t p = in->idx.stride[last] * c->k->shape[last];
    if (p <= 0 || in->idx.off % p || in->lo % p || in->hi % p)
        return false;
    for (int d = 0; d < last; d++)
        if (in->idx.stride[d] % p)
            return false;
    return true;
}

/* A guarded load (a pad's source): loaded only where its guard holds,
 * else 0, in a block of its own that the loop vectorizer if-converts into
 * a masked load (its address may lie outside the buffer elsewhere). */
static LLVMValueRef guarded_load(kctx *c, const sched_instr *in)
{
    const sched_kernel *k = c->k;
    int last = k->rank - 1;
    LLVMValueRef g = c->vals[in->src[0]];
    /* A guard fixed along the innermost loop (a pad of an outer dim: the
     * q/k/v gradient slices of attention) puts a whole vector on one side.
     * The masked load the vectorizer makes of the block below still
     * translates the masked-off lanes' addresses, outside the buffer: a
     * page walk per vector (W10b's [8,128,768] sum of three padded
     * gradients took 3.2 ms instead of 0.1). There the load is plain, from
     * the first elements of the buffer where the guard fails (in bounds,
     * as the source's size checks here), and its value dropped. */
    if (last >= 0 && !c->generic && !c->inner[in->src[0]] && in->idx.stride[last] >= 0 &&
        (k->shape[last] - 1) * in->idx.stride[last] < ir_node_numel(k->args[in->arg])) {
        LLVMValueRef safe = in->idx.stride[last] == 0 ? ci(c, c->m->i64, 0)
                                                      : LLVMBuildNSWMul(c->b, c->iv[last],
                                                                        ci(c, c->m->i64, in->idx.stride[last]), "");
        LLVMValueRef v = load(c, in->arg, in->dtype, LLVMBuildSelect(c->b, g, aff_in(c, in), safe, ""));
        return LLVMBuildSelect(c->b, g, v, LLVMConstNull(LLVMTypeOf(v)), "");
    }
    LLVMBasicBlockRef from = LLVMGetInsertBlock(c->b);
    LLVMBasicBlockRef take = LLVMAppendBasicBlockInContext(c->m->ctx, c->fn, "gload");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(c->m->ctx, c->fn, "gjoin");
    LLVMBuildCondBr(c->b, g, take, join);
    LLVMPositionBuilderAtEnd(c->b, take);
    LLVMValueRef v = load(c, in->arg, in->dtype, aff_in(c, in));
    LLVMBuildBr(c->b, join);
    LLVMPositionBuilderAtEnd(c->b, join);
    LLVMValueRef phi = LLVMBuildPhi(c->b, LLVMTypeOf(v), "");
    LLVMValueRef vin[2] = {v, LLVMConstNull(LLVMTypeOf(v))};
    LLVMBasicBlockRef bin[2] = {take, from};
    LLVMAddIncoming(phi, vin, bin, 2);
    return phi;
}

static LLVMValueRef half_bits_of(kctx *c, LLVMValueRef v, rlx_dtype dt);

/* The 16-bit pattern a half value v is stored as. */
static LLVMValueRef half_store_bits(kctx *c, LLVMValueRef v, rlx_dtype dt)
{
    LLVMValueRef h = half_bits_of(c, v, dt);
    return h ? h : f32_to_half(c, v, dt);
}

static void store(kctx *c, int arg, rlx_dtype dt, LLVMValueRef index, LLVMValueRef v)
{
    if (dt == RLX_BOOL)
        v = LLVMBuildZExt(c->b, v, c->m->i8, "");
    if (is_half(dt))
        v = half_store_bits(c, v, dt);
    LLVMValueRef s = LLVMBuildStore(c->b, v, elem_ptr(c, arg, dt, index));
    LLVMSetAlignment(s, (unsigned)ir_dtype_size(dt));
}

/* ----------------------------------------------------------- conversion */

static LLVMValueRef bits32(kctx *c, LLVMValueRef v) { return LLVMBuildBitCast(c->b, v, c->m->i32, ""); }
static LLVMValueRef f32_of(kctx *c, LLVMValueRef v) { return LLVMBuildBitCast(c->b, v, c->m->f32, ""); }
static LLVMValueRef k32(kctx *c, long long v) { return ci(c, c->m->i32, v); }
static LLVMValueRef shr(kctx *c, LLVMValueRef v, int n) { return LLVMBuildLShr(c->b, v, k32(c, n), ""); }
static LLVMValueRef band(kctx *c, LLVMValueRef v, long long k) { return LLVMBuildAnd(c->b, v, k32(c, k), ""); }
static LLVMValueRef sel(kctx *c, LLVMValueRef p, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(c->b, p, a, b, ""); }

/* 16-bit float patterns <-> f32, every step exact or one rounding to
 * nearest even (ir_f16_bits/ir_bf16_bits in ir/cast.h are the reference:
 * test_jit checks all patterns and random values bit for bit). No
 * libcalls: compiler-rt's __truncsfbf2 and friends are not in the JIT's
 * process. bf16 is the high half of an f32; f16 converts in hardware
 * where the host can (F16C: vcvtph2ps, vcvtps2ph), else in integers. */
static LLVMValueRef half_to_f32(kctx *c, LLVMValueRef h, rlx_dtype dt)
{
    cg_mod *m = c->m;
    if (dt == RLX_F16 && m->f16c)
        return LLVMBuildFPExt(c->b, LLVMBuildBitCast(c->b, h, m->f16, ""), m->f32, "");
    LLVMValueRef w = LLVMBuildZExt(c->b, h, m->i32, "");
    if (dt == RLX_BF16)
        return f32_of(c, LLVMBuildShl(c->b, w, k32(c, 16), ""));
    /* the exponent and fraction shifted into f32's places read as an f32
     * 2^112 times too small (half subnormals as f32 subnormals), scaled
     * exactly; inf and NaN keep their fraction under an all-ones exponent */
    LLVMValueRef em = band(c, w, 0x7fff), sh = LLVMBuildShl(c->b, em, k32(c, 13), "");
    LLVMValueRef fin = bits32(c, LLVMBuildFMul(c->b, f32_of(c, sh), cf(m->f32, 0x1p112), ""));
    LLVMValueRef r = sel(c, icmp(c, LLVMIntUGE, em, k32(c, 0x7c00)), LLVMBuildOr(c->b, sh, k32(c, 0x7f800000), ""), fin);
    return f32_of(c, LLVMBuildOr(c->b, r, LLVMBuildShl(c->b, band(c, w, 0x8000), k32(c, 16), ""), ""));
}

/* The pattern of f32 x rounded to dt; NaN gives the quiet NaN of its sign
 * with no payload, as the reference stores it. */
static LLVMValueRef f32_to_half(kctx *c, LLVMValueRef x, rlx_dtype dt)
{
    cg_mod *m = c->m;
    LLVMValueRef b = bits32(c, x), sign = band(c, shr(c, b, 16), 0x8000), r;
    LLVMValueRef nan = LLVMBuildOr(c->b, sign, k32(c, dt == RLX_BF16 ? 0x7fc0 : 0x7e00), "");
    if (dt == RLX_BF16) { /* + 0x7fff + lowest kept bit: to nearest, ties to even; a carry runs into the exponent */
        LLVMValueRef t = shr(c, b, 16), rnd = LLVMBuildAdd(c->b, k32(c, 0x7fff), band(c, t, 1), "");
        r = shr(c, LLVMBuildAdd(c->b, b, rnd, ""), 16);
        /* NaN: its high half with the quiet bit and no payload; x is never
         * an fpext here, so the unordered compare stays one vcmpunordps */
        LLVMValueRef qn = band(c, LLVMBuildOr(c->b, t, k32(c, 0x7fc0), ""), 0xffc0);
        return LLVMBuildTrunc(c->b, sel(c, LLVMBuildFCmp(c->b, LLVMRealUNO, x, x, ""), qn, r), m->i16, "");
    } else if (m->f16c) {
        r = LLVMBuildZExt(c->b, LLVMBuildBitCast(c->b, LLVMBuildFPTrunc(c->b, x, m->f16, ""), m->i16, ""), m->i32, "");
    } else {
        LLVMValueRef a = band(c, b, 0x7fffffff);
        /* below 2^-14: adding 0.5 rounds a to a multiple of 2^-24, the
         * subnormal's fraction the low bits of the sum */
        LLVMValueRef sub = LLVMBuildSub(c->b, bits32(c, LLVMBuildFAdd(c->b, f32_of(c, a), cf(m->f32, 0.5), "")),
                                        k32(c, 0x3f000000), "");
        /* normal: rebias, round on the 13 bits dropped */
        LLVMValueRef nrm = LLVMBuildAdd(c->b, a, k32(c, (int32_t)(((uint32_t)(15 - 127) << 23) + 0xfff)), "");
        nrm = shr(c, LLVMBuildAdd(c->b, nrm, band(c, shr(c, a, 13), 1), ""), 13);
        r = sel(c, icmp(c, LLVMIntULT, a, k32(c, 0x38800000)), sub, nrm);
        r = sel(c, icmp(c, LLVMIntUGE, a, k32(c, 0x477ff000)), k32(c, 0x7c00), r); /* 65520 and up: inf */
        r = LLVMBuildOr(c->b, r, sign, "");
    }
    /* NaN tested on the bits: an fcmp of x would be folded through a
     * preceding fpext into a compare of halves, which x86 scalarizes */
    LLVMValueRef isnan = icmp(c, LLVMIntUGT, band(c, b, 0x7fffffff), k32(c, 0x7f800000));
    r = sel(c, isnan, nan, r);
    return LLVMBuildTrunc(c->b, r, m->i16, "");
}

/* The pattern f32_to_half gave for v when v is round_half's result for
 * dt (half_to_f32 of f32_to_half's trunc: a CAST to dt, the usual last op
 * of a half composite), else NULL: such a value is stored as those bits,
 * not rounded a second time (LLVM cannot see that the second rounding is
 * exact: it was a fifth of W1 bf16's ops). A loaded pattern does not
 * qualify: the store turns its NaN payloads into the reference's NaN. */
static LLVMValueRef half_bits_of(kctx *c, LLVMValueRef v, rlx_dtype dt)
{
    cg_mod *m = c->m;
    LLVMValueRef h;
    if (!LLVMIsAInstruction(v))
        return NULL;
    LLVMOpcode op = LLVMGetInstructionOpcode(v);
    if (dt == RLX_F16 && m->f16c) { /* fpext (bitcast (trunc ...) to half) */
        if (op != LLVMFPExt || !LLVMIsABitCastInst(h = LLVMGetOperand(v, 0)) || LLVMTypeOf(h) != m->f16)
            return NULL;
        h = LLVMGetOperand(h, 0);
    } else if (dt == RLX_BF16 && op == LLVMBitCast) { /* bitcast (shl (zext (trunc ...)), 16) */
        LLVMValueRef s = LLVMGetOperand(v, 0), z, k;
        if (!LLVMIsAInstruction(s) || LLVMGetInstructionOpcode(s) != LLVMShl)
            return NULL;
        z = LLVMGetOperand(s, 0), k = LLVMGetOperand(s, 1);
        if (!LLVMIsAConstantInt(k) || LLVMConstIntGetZExtValue(k) != 16 || !LLVMIsAZExtInst(z))
            return NULL;
        h = LLVMGetOperand(z, 0);
    } else {
        return NULL;
    }
    return LLVMIsATruncInst(h) && LLVMTypeOf(h) == m->i16 ? h : NULL;
}

/* f32 x rounded to dt's precision, still an f32. */
static LLVMValueRef round_half(kctx *c, LLVMValueRef x, rlx_dtype dt)
{
    return half_to_f32(c, f32_to_half(c, x, dt), dt);
}

/* f64 v as an f32 rounded to odd (toward zero, the last bit set when
 * inexact): rounding that to f16 or bf16 (16 and more bits narrower) to
 * nearest even is the single rounding of v, where f64 -> f32 -> 16 bits
 * to nearest twice is not. Overflow gives FLT_MAX (odd), which rounds on
 * to inf; NaN stays NaN. */
static LLVMValueRef f64_to_f32_odd(kctx *c, LLVMValueRef v)
{
    cg_mod *m = c->m;
    LLVMValueRef f = LLVMBuildFPTrunc(c->b, v, m->f32, ""), back = LLVMBuildFPExt(c->b, f, m->f64, "");
    LLVMValueRef fb = bits32(c, f);
    /* rounded away from zero: one step back toward it (sign-magnitude) */
    LLVMValueRef away = LLVMBuildFCmp(c->b, LLVMRealOGT, intr1(c, "llvm.fabs", back), intr1(c, "llvm.fabs", v), "");
    LLVMValueRef t = sel(c, away, LLVMBuildSub(c->b, fb, k32(c, 1), ""), fb);
    LLVMValueRef exact = LLVMBuildFCmp(c->b, LLVMRealOEQ, back, v, "");
    return f32_of(c, sel(c, exact, fb, LLVMBuildOr(c->b, t, k32(c, 1), "")));
}

/* CAST as the reference defines it: integers load as int64 (zero-extended
 * when unsigned) and wrap into the target; floats to integers truncate
 * and saturate; to f16/bf16 one rounding of the exact value (the value is
 * then held in f32, exact). */
static LLVMValueRef convert(kctx *c, LLVMValueRef v, rlx_dtype from, rlx_dtype to)
{
    cg_mod *m = c->m;
    LLVMTypeRef tt = reg_type(m, to), ft = reg_type(m, from);
    if (from == to)
        return v;
    bool ff = ir_dtype_is_float(from), tf = ir_dtype_is_float(to);
    bool fu = from == RLX_BOOL || is_uns(from);
    if (to == RLX_BOOL)
        return ff ? LLVMBuildFCmp(c->b, LLVMRealUNE, v, cf(ft, 0), "")
                  : LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstInt(ft, 0, 0), "");
    if (tf && !ff && is_half(to)) { /* as the reference: (double)i, rounded once */
        if (LLVMGetIntTypeWidth(ft) > 16)
            v = f64_to_f32_odd(c, fu ? LLVMBuildUIToFP(c->b, v, m->f64, "") : LLVMBuildSIToFP(c->b, v, m->f64, ""));
        else /* exact */
            v = fu ? LLVMBuildUIToFP(c->b, v, m->f32, "") : LLVMBuildSIToFP(c->b, v, m->f32, "");
        return round_half(c, v, to);
    }
    if (tf && !ff) /* one rounding (none to f64) */
        return fu ? LLVMBuildUIToFP(c->b, v, tt, "") : LLVMBuildSIToFP(c->b, v, tt, "");
    if (tf) {
        if (to == RLX_F64)
            return LLVMBuildFPExt(c->b, v, tt, "");
        if (from == RLX_F64)
            v = is_half(to) ? f64_to_f32_odd(c, v) : LLVMBuildFPTrunc(c->b, v, tt, "");
        return is_half(to) ? round_half(c, v, to) : v; /* f16, bf16 -> f32 is exact */
    }
    if (ff) /* truncate toward zero, saturate, NaN -> 0 */
        return cg_intrinsic2(m, c->b, is_uns(to) ? "llvm.fptoui.sat" : "llvm.fptosi.sat", tt, ft, &v, 1);
    unsigned fw = LLVMGetIntTypeWidth(ft), tw = LLVMGetIntTypeWidth(tt);
    if (fw < tw)
        return fu ? LLVMBuildZExt(c->b, v, tt, "") : LLVMBuildSExt(c->b, v, tt, "");
    return fw > tw ? LLVMBuildTrunc(c->b, v, tt, "") : v; /* wraps; i32 <-> u32 keep the bits */
}

/* ------------------------------------------------------ elementwise ops */

static LLVMValueRef fcmp(kctx *c, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildFCmp(c->b, p, a, b, "");
}
static LLVMValueRef icmp(kctx *c, LLVMIntPredicate p, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildICmp(c->b, p, a, b, "");
}
static LLVMValueRef intr1(kctx *c, const char *name, LLVMValueRef x)
{
    return cg_intrinsic(c->m, c->b, name, LLVMTypeOf(x), &x, 1);
}
static LLVMValueRef intr2(kctx *c, const char *name, LLVMValueRef a, LLVMValueRef b)
{
    LLVMValueRef args[2] = {a, b};
    return cg_intrinsic(c->m, c->b, name, LLVMTypeOf(a), args, 2);
}

/* A call of op's cg_math.c function (ops.def's MATH rows), or NULL when
 * there is none for t. */
static LLVMValueRef math_call(kctx *c, ir_op op, LLVMTypeRef t, LLVMValueRef *args, unsigned nargs)
{
    LLVMValueRef fn = cg_math_fn(c->m, op, t);
    return fn ? LLVMBuildCall2(c->b, LLVMGlobalGetValueType(fn), fn, args, nargs, "") : NULL;
}

/* The element functions below return NULL for an op they have no rule
 * for; emit_instr reports it. */
static LLVMValueRef unary_float(kctx *c, ir_op op, LLVMValueRef x, rlx_dtype dt, rlx_dtype out)
{
    LLVMTypeRef t = reg_type(c->m, dt);
    if (ir_ops[op].emit == IR_EMIT_MATH)
        return math_call(c, op, t, &x, 1);
    switch (op) {
    case IR_OP_SQRT: return intr1(c, "llvm.sqrt", x);
    case IR_OP_RSQRT: return LLVMBuildFDiv(c->b, cf(t, 1), intr1(c, "llvm.sqrt", x), "");
    case IR_OP_RECIP: return LLVMBuildFDiv(c->b, cf(t, 1), x, "");
    case IR_OP_NEG: return LLVMBuildFNeg(c->b, x, "");
    case IR_OP_ABS: return intr1(c, "llvm.fabs", x);
    case IR_OP_SIGN: /* keeps NaN and signed zero */
        return LLVMBuildSelect(c->b, fcmp(c, LLVMRealOGT, x, cf(t, 0)), cf(t, 1),
                               LLVMBuildSelect(c->b, fcmp(c, LLVMRealOLT, x, cf(t, 0)), cf(t, -1), x, ""), "");
    case IR_OP_ROUND: return intr1(c, "llvm.roundeven", x); /* nearbyint: half to even */
    case IR_OP_FLOOR: return intr1(c, "llvm.floor", x);
    case IR_OP_CEIL: return intr1(c, "llvm.ceil", x);
    case IR_OP_NOT: return fcmp(c, LLVMRealOEQ, x, cf(t, 0));
    case IR_OP_CAST: return convert(c, x, dt, out);
    case IR_OP_CONTIGUOUS:
    case IR_OP_STOP_GRAD: return x;
    default: return NULL;
    }
}

static LLVMValueRef unary_int(kctx *c, ir_op op, LLVMValueRef x, rlx_dtype dt, rlx_dtype out)
{
    LLVMTypeRef t = reg_type(c->m, dt);
    bool b = dt == RLX_BOOL, u = is_uns(dt);
    switch (op) {
    case IR_OP_NEG: return LLVMBuildSub(c->b, ci(c, t, 0), x, "");
    case IR_OP_ABS:
        return b || u ? x : LLVMBuildSelect(c->b, icmp(c, LLVMIntSLT, x, ci(c, t, 0)), LLVMBuildSub(c->b, ci(c, t, 0), x, ""), x, "");
    case IR_OP_SIGN:
        return b ? x
               : u ? LLVMBuildZExt(c->b, icmp(c, LLVMIntNE, x, ci(c, t, 0)), t, "")
                 : LLVMBuildSelect(c->b, icmp(c, LLVMIntSGT, x, ci(c, t, 0)), ci(c, t, 1),
                                   LLVMBuildSelect(c->b, icmp(c, LLVMIntSLT, x, ci(c, t, 0)), ci(c, t, -1), ci(c, t, 0), ""), "");
    case IR_OP_NOT: return icmp(c, LLVMIntEQ, x, ci(c, t, 0));
    case IR_OP_CAST: return convert(c, x, dt, out);
    case IR_OP_ROUND: /* integers are whole already */
    case IR_OP_FLOOR:
    case IR_OP_CEIL:
    case IR_OP_CONTIGUOUS:
    case IR_OP_STOP_GRAD: return x;
    default: return NULL;
    }
}

static LLVMValueRef binary_float(kctx *c, ir_op op, LLVMValueRef a, LLVMValueRef b, rlx_dtype dt)
{
    LLVMTypeRef t = reg_type(c->m, dt);
    if (ir_ops[op].emit == IR_EMIT_MATH) {
        LLVMValueRef args[2] = {a, b};
        return math_call(c, op, t, args, 2);
    }
    switch (op) {
    case IR_OP_ADD: return LLVMBuildFAdd(c->b, a, b, "");
    case IR_OP_SUB: return LLVMBuildFSub(c->b, a, b, "");
    case IR_OP_MUL: return LLVMBuildFMul(c->b, a, b, "");
    case IR_OP_DIV: return LLVMBuildFDiv(c->b, a, b, "");
    case IR_OP_MAX:
    case IR_OP_MIN: { /* NaN if either is; otherwise a > b ? a : b exactly as the reference (signed zeros) */
        LLVMValueRef pick = fcmp(c, op == IR_OP_MAX ? LLVMRealOGT : LLVMRealOLT, a, b);
        LLVMValueRef v = LLVMBuildSelect(c->b, pick, a, b, "");
        return LLVMBuildSelect(c->b, fcmp(c, LLVMRealUNO, a, b), cf(t, NAN), v, "");
    }
    case IR_OP_EQ: return fcmp(c, LLVMRealOEQ, a, b);
    case IR_OP_NE: return fcmp(c, LLVMRealUNE, a, b);
    case IR_OP_LT: return fcmp(c, LLVMRealOLT, a, b);
    case IR_OP_LE: return fcmp(c, LLVMRealOLE, a, b);
    case IR_OP_GT: return fcmp(c, LLVMRealOGT, a, b);
    case IR_OP_GE: return fcmp(c, LLVMRealOGE, a, b);
    case IR_OP_AND:
    case IR_OP_OR: {
        LLVMValueRef x = fcmp(c, LLVMRealUNE, a, cf(t, 0)), y = fcmp(c, LLVMRealUNE, b, cf(t, 0));
        return op == IR_OP_AND ? LLVMBuildAnd(c->b, x, y, "") : LLVMBuildOr(c->b, x, y, "");
    }
    default: return NULL;
    }
}

static LLVMValueRef binary_int(kctx *c, ir_op op, LLVMValueRef a, LLVMValueRef b, rlx_dtype dt)
{
    LLVMTypeRef t = reg_type(c->m, dt);
    if (dt == RLX_BOOL) { /* the reference adds in int64 and stores v != 0 */
        switch (op) {
        case IR_OP_ADD: case IR_OP_MAX: case IR_OP_OR: return LLVMBuildOr(c->b, a, b, "");
        case IR_OP_MUL: case IR_OP_MIN: case IR_OP_AND: return LLVMBuildAnd(c->b, a, b, "");
        case IR_OP_EQ: return icmp(c, LLVMIntEQ, a, b);
        case IR_OP_NE: return icmp(c, LLVMIntNE, a, b);
        case IR_OP_LT: return icmp(c, LLVMIntULT, a, b);
        case IR_OP_LE: return icmp(c, LLVMIntULE, a, b);
        case IR_OP_GT: return icmp(c, LLVMIntUGT, a, b);
        case IR_OP_GE: return icmp(c, LLVMIntUGE, a, b);
        default: return NULL;
        }
    }
    /* narrow integers compute in their own width: + - * wrap there as the
     * reference's int64 result wraps on store; unsigned values (zero-
     * extended by the reference) compare, divide and pick unsigned */
    bool u = is_uns(dt);
    switch (op) {
    case IR_OP_ADD: return LLVMBuildAdd(c->b, a, b, "");
    case IR_OP_SUB: return LLVMBuildSub(c->b, a, b, "");
    case IR_OP_MUL: return LLVMBuildMul(c->b, a, b, "");
    case IR_OP_DIV:
    case IR_OP_REM:
        if (u) { /* b == 0 gives 0; no other divisor is special */
            LLVMValueRef z = icmp(c, LLVMIntEQ, b, ci(c, t, 0));
            LLVMValueRef sb = LLVMBuildSelect(c->b, z, ci(c, t, 1), b, "");
            LLVMValueRef q = op == IR_OP_DIV ? LLVMBuildUDiv(c->b, a, sb, "") : LLVMBuildURem(c->b, a, sb, "");
            return LLVMBuildSelect(c->b, z, ci(c, t, 0), q, "");
        }
        {
        /* b == 0 gives 0, b == -1 gives -a (div, wrapping) or 0 (rem);
         * the divisor is made safe so no lane traps */
        LLVMValueRef z = icmp(c, LLVMIntEQ, b, ci(c, t, 0)), m1 = icmp(c, LLVMIntEQ, b, ci(c, t, -1));
        LLVMValueRef bad = LLVMBuildOr(c->b, z, m1, "");
        LLVMValueRef sb = LLVMBuildSelect(c->b, bad, ci(c, t, 1), b, "");
        if (op == IR_OP_REM)
            return LLVMBuildSelect(c->b, bad, ci(c, t, 0), LLVMBuildSRem(c->b, a, sb, ""), "");
        LLVMValueRef q = LLVMBuildSDiv(c->b, a, sb, "");
        q = LLVMBuildSelect(c->b, m1, LLVMBuildSub(c->b, ci(c, t, 0), a, ""), q, "");
        return LLVMBuildSelect(c->b, z, ci(c, t, 0), q, "");
    }
    case IR_OP_MAX: return intr2(c, u ? "llvm.umax" : "llvm.smax", a, b);
    case IR_OP_MIN: return intr2(c, u ? "llvm.umin" : "llvm.smin", a, b);
    case IR_OP_EQ: return icmp(c, LLVMIntEQ, a, b);
    case IR_OP_NE: return icmp(c, LLVMIntNE, a, b);
    case IR_OP_LT: return icmp(c, u ? LLVMIntULT : LLVMIntSLT, a, b);
    case IR_OP_LE: return icmp(c, u ? LLVMIntULE : LLVMIntSLE, a, b);
    case IR_OP_GT: return icmp(c, u ? LLVMIntUGT : LLVMIntSGT, a, b);
    case IR_OP_GE: return icmp(c, u ? LLVMIntUGE : LLVMIntSGE, a, b);
    case IR_OP_AND:
    case IR_OP_OR: {
        LLVMValueRef x = icmp(c, LLVMIntNE, a, ci(c, t, 0)), y = icmp(c, LLVMIntNE, b, ci(c, t, 0));
        return op == IR_OP_AND ? LLVMBuildAnd(c->b, x, y, "") : LLVMBuildOr(c->b, x, y, "");
    }
    default: return NULL;
    }
}

/* a / b for f32 a, b with b fixed along the loop, without a division
 * (Markstein): r = RN(1/b) (hoisted), q = RN(a r), e = a - q b (exact by
 * fma), RN(q + e r) is RN(a/b) when b, 1/b and q are normal, e exact and
 * nothing overflows; copysign keeps the sign of a zero quotient. Those
 * conditions hold when every dividend of the row is 0 or has
 * max(2^-100, 2^-124 |b|) <= |a| <= min(2^126 |b|, FLT_MAX) (checked over
 * billions of pairs against IEEE division, and by test_jit): the loop
 * keeps the unsigned min of |a|'s bits - 1 (0 wraps above all) and their
 * max, fast_div_ok tests them once per row, and a row that fails is
 * computed again with divisions. */
static LLVMValueRef fast_div(kctx *c, int slot, LLVMValueRef a, LLVMValueRef b)
{
    cg_mod *m = c->m;
    LLVMValueRef r = LLVMBuildFDiv(c->b, cf(m->f32, 1), b, "");
    LLVMValueRef q = LLVMBuildFMul(c->b, a, r, "");
    LLVMValueRef args[3] = {LLVMBuildFNeg(c->b, q, ""), b, a};
    LLVMValueRef e = cg_intrinsic(m, c->b, "llvm.fma", m->f32, args, 3);
    LLVMValueRef args2[3] = {e, r, q};
    LLVMValueRef q2 = cg_intrinsic(m, c->b, "llvm.fma", m->f32, args2, 3);
    LLVMValueRef mag = LLVMBuildAnd(c->b, bits32(c, a), ci(c, m->i32, 0x7fffffff), "");
    LLVMValueRef lo = LLVMBuildLoad2(c->b, m->i32, c->fdlo[slot], "");
    LLVMBuildStore(c->b, intr2(c, "llvm.umin", lo, LLVMBuildAdd(c->b, mag, ci(c, m->i32, -1), "")), c->fdlo[slot]);
    LLVMValueRef hi = LLVMBuildLoad2(c->b, m->i32, c->fdhi[slot], "");
    LLVMBuildStore(c->b, intr2(c, "llvm.umax", hi, mag), c->fdhi[slot]);
    c->fdb[slot] = b;
    return intr2(c, "llvm.copysign", q2, q);
}

/* After a row's fast pass: true when every guarded division's dividends
 * were in range (see fast_div). */
static LLVMValueRef fast_div_ok(kctx *c)
{
    cg_mod *m = c->m;
    LLVMValueRef ok = LLVMConstInt(m->i1, 1, 0);
    for (int s = 0; s < FD_SLOTS; s++) {
        if (!c->fdb[s])
            continue;
        LLVMValueRef ab = intr1(c, "llvm.fabs", c->fdb[s]);
        ok = LLVMBuildAnd(c->b, ok, fcmp(c, LLVMRealOGE, ab, cf(m->f32, 0x1p-126)), "");
        ok = LLVMBuildAnd(c->b, ok, fcmp(c, LLVMRealOLT, ab, cf(m->f32, 0x1p126)), "");
        LLVMValueRef t = LLVMBuildFMul(c->b, ab, cf(m->f32, 0x1p-124), "");
        LLVMValueRef alo = LLVMBuildSelect(c->b, fcmp(c, LLVMRealOGT, t, cf(m->f32, 0x1p-100)), t, cf(m->f32, 0x1p-100), "");
        t = LLVMBuildFMul(c->b, ab, cf(m->f32, 0x1p126), "");
        LLVMValueRef ahi = LLVMBuildSelect(c->b, fcmp(c, LLVMRealOLT, t, cf(m->f32, 0x1.fffffep127)), t,
                                           cf(m->f32, 0x1.fffffep127), "");
        LLVMValueRef lo = LLVMBuildLoad2(c->b, m->i32, c->fdlo[s], ""), hi = LLVMBuildLoad2(c->b, m->i32, c->fdhi[s], "");
        ok = LLVMBuildAnd(c->b, ok, icmp(c, LLVMIntUGE, lo, LLVMBuildAdd(c->b, bits32(c, alo), ci(c, m->i32, -1), "")), "");
        ok = LLVMBuildAnd(c->b, ok, icmp(c, LLVMIntULE, hi, bits32(c, ahi)), "");
    }
    return ok;
}

/* Records that the code generator has no rule for op on dt (the kernel
 * then fails with RLX_E_INTERNAL) and returns a placeholder of type t. */
static LLVMValueRef no_rule(kctx *c, ir_op op, rlx_dtype dt, LLVMTypeRef t)
{
    if (!c->failed)
        snprintf(c->msg, c->cap, "code generator: no rule for %s on %s", ir_ops[op].name, ir_dtype_name(dt));
    c->failed = true;
    return LLVMGetUndef(t);
}

/* Which f32 math may use cg_math_fn_lowp's cheaper variants (relative
 * error 2^-15.5 for bf16, 2^-21 for f16, against 2^-23 and less): in an
 * elementwise kernel, a math op whose own dtype is f16/bf16 (the
 * reference rounds its value to that dtype), or an f32 one whose value
 * reaches nothing but roundings to one half dtype (its CASTs, the store),
 * through add, sub, mul, div, neg, abs, tanh and exact casts to f32: an f32 composite with a
 * half result (gelu_tanh of bf16 computes in f32 and casts back). Those
 * ops carry the relative error on (a quotient or product adds it, the
 * variants' tanh and sigmoid also hold it relative to 1 - |f|, so the
 * 1 + tanh of gelu does too); an add that cancels amplifies it as it
 * amplifies f32 rounding errors. */
enum { LOWP_NONE = 0, LOWP_BF16 = 1, LOWP_F16 = 2, LOWP_UNSET = 3 };

static int lowp_of(rlx_dtype dt) { return dt == RLX_BF16 ? LOWP_BF16 : dt == RLX_F16 ? LOWP_F16 : LOWP_NONE; }

static void lowp_meet(unsigned char *l, int v) { *l = *l == LOWP_UNSET || *l == v ? (unsigned char)v : LOWP_NONE; }

static bool has_phase(const sched_kernel *k);

static void mark_lowp(const sched_kernel *k, unsigned char *lowp)
{
    int n = k->ninstr;
    memset(lowp, LOWP_NONE, (size_t)n);
    if (!n || k->red_op != IR_OP_COUNT || k->red_mask || has_phase(k))
        return;
    memset(lowp, LOWP_UNSET, (size_t)n);
    lowp_meet(&lowp[n - 1], lowp_of(k->node->dtype));
    for (int j = n - 1; j >= 0; j--) { /* sources come before their users */
        const sched_instr *in = &k->instr[j];
        if (lowp[j] == LOWP_UNSET)
            lowp[j] = LOWP_NONE;
        if (in->kind != SCHED_I_OP)
            continue;
        int pass = LOWP_NONE;
        rlx_dtype from = k->instr[in->src[0]].dtype;
        bool fl = in->dtype == RLX_F32 || lowp_of(in->dtype), ffrom = from == RLX_F32 || lowp_of(from);
        if (in->op == IR_OP_CAST && lowp_of(in->dtype) && ffrom) /* (an f64 source keeps its one rounding) */
            pass = lowp_of(in->dtype);
        else if (in->op == IR_OP_CAST && in->dtype == RLX_F32 && ffrom)
            pass = lowp[j]; /* exact (f16, bf16 -> f32) */
        else if (in->op == IR_OP_TANH && fl)
            pass = lowp[j]; /* x tanh'(x) / tanh(x) <= 1: relative errors do not grow */
        else if (fl && (in->op == IR_OP_ADD || in->op == IR_OP_SUB || in->op == IR_OP_MUL || in->op == IR_OP_DIV ||
                        in->op == IR_OP_NEG || in->op == IR_OP_ABS))
            pass = lowp[j];
        for (int s = 0; s < sched_instr_nsrc(in); s++)
            lowp_meet(&lowp[in->src[s]], pass);
        if (ir_ops[in->op].emit == IR_EMIT_MATH && lowp_of(in->dtype))
            lowp[j] = (unsigned char)lowp_of(in->dtype);
    }
}

/* gelu_tanh as tensor/elementwise.c builds it, ending at f32 instruction
 * j: mul(mul(x, C0), add(tanh(mul(add(x, mul(mul(mul(x, x), x), C1)),
 * C2)), C3)), constants C0..C3, any operand order. Where j only reaches
 * roundings to a half dtype (mark_lowp) and the constants are gelu_tanh's,
 * it is emitted as one function of x (cg_math_gelu_half): one exp and one
 * division, no cancellation in 1 + tanh, against tanh's exp and division,
 * its clamps and six more operations. Constants are no part of the kernel
 * key: the knob word says whether every such chain has gelu_tanh's
 * (gelu_consts). */
static bool f32_op(const sched_kernel *k, int i, ir_op op)
{
    return k->instr[i].kind == SCHED_I_OP && k->instr[i].op == op && k->instr[i].dtype == RLX_F32;
}
static bool f32_const(const sched_kernel *k, int i) { return k->instr[i].kind == SCHED_I_CONST && k->instr[i].dtype == RLX_F32; }

/* i = v * c or c * v, c an f32 constant of value *cv */
static bool mul_const(const sched_kernel *k, int i, int *v, double *cv)
{
    if (!f32_op(k, i, IR_OP_MUL))
        return false;
    for (int s = 0; s < 2; s++) {
        if (f32_const(k, k->instr[i].src[1 - s])) {
            *v = k->instr[i].src[s];
            *cv = k->instr[k->instr[i].src[1 - s]].value;
            return true;
        }
    }
    return false;
}

/* i = x * x * x, as (x * x) * x or x * (x * x) */
static bool cube_of(const sched_kernel *k, int i, int x)
{
    if (!f32_op(k, i, IR_OP_MUL))
        return false;
    for (int s = 0; s < 2; s++) {
        int sq = k->instr[i].src[1 - s];
        if (k->instr[i].src[s] == x && f32_op(k, sq, IR_OP_MUL) && k->instr[sq].src[0] == x && k->instr[sq].src[1] == x)
            return true;
    }
    return false;
}

/* *canon: the constants are gelu_tanh's (as f32). */
static bool gelu_match(const sched_kernel *k, int j, int *x, bool *canon)
{
    if (!f32_op(k, j, IR_OP_MUL))
        return false;
    for (int s = 0; s < 4; s++) {
        int h = k->instr[j].src[s & 1], g = k->instr[j].src[!(s & 1)];
        int th = k->instr[g].src[s >> 1], c3 = k->instr[g].src[!(s >> 1)], xs, sv, t, x3;
        double v0, v1, v2;
        if (!mul_const(k, h, x, &v0) || !f32_op(k, g, IR_OP_ADD) || !f32_const(k, c3) || !f32_op(k, th, IR_OP_TANH) ||
            !mul_const(k, k->instr[th].src[0], &sv, &v2) || !f32_op(k, sv, IR_OP_ADD))
            continue;
        for (int u = 0; u < 2; u++) {
            xs = k->instr[sv].src[u], t = k->instr[sv].src[1 - u];
            if (xs == *x && mul_const(k, t, &x3, &v1) && cube_of(k, x3, *x)) {
                *canon = v0 == 0.5 && v1 == (float)0.044715 && v2 == (float)0.7978845608028654 &&
                         k->instr[c3].value == 1;
                return true;
            }
        }
    }
    return false;
}

/* Every gelu_tanh chain of k has gelu_tanh's constants, and there is one. */
static bool gelu_consts(const sched_kernel *k)
{
    int n = 0, x;
    bool canon;
    for (int j = 0; j < k->ninstr; j++) {
        if (!gelu_match(k, j, &x, &canon))
            continue;
        if (!canon)
            return false;
        n++;
    }
    return n > 0;
}

static LLVMValueRef emit_instr(kctx *c, const sched_instr *in)
{
    cg_mod *m = c->m;
    LLVMTypeRef t = reg_type(m, in->dtype);
    switch (in->kind) {
    case SCHED_I_LOAD: return in->guarded ? guarded_load(c, in) : load(c, in->arg, in->dtype, aff_in(c, in));
    case SCHED_I_GUARD: { /* lo <= idx < hi */
        sched_affine at0 = in->idx;
        if (guard_blockwise(c, in))
            at0.stride[c->k->rank - 1] = 0;
        LLVMValueRef i = affine(c, &at0, c->pbase[in - c->k->instr]);
        int pb = c->pbase[in - c->k->instr] + 1 + c->k->rank;
        return LLVMBuildAnd(c->b, icmp(c, LLVMIntSGE, i, num(c, pb, in->lo)), icmp(c, LLVMIntSLT, i, num(c, pb + 1, in->hi)),
                            "");
    }
    case SCHED_I_CONST: return c->cvals[in->arg]; /* loaded in the entry block */
    case SCHED_I_IOTA: {
        /* start + (double)i * step in double, then stored as the reference stores */
        LLVMValueRef i = LLVMBuildSIToFP(c->b, aff_in(c, in), m->f64, "");
        LLVMValueRef v = LLVMBuildFAdd(c->b, cf(m->f64, in->value), LLVMBuildFMul(c->b, i, cf(m->f64, in->step), ""), "");
        return convert(c, v, RLX_F64, in->dtype);
    }
    case SCHED_I_OP: break;
    case SCHED_I_REDUCE: /* emitted by emit_phased, never here */
        snprintf(c->msg, c->cap, "code generator: a reduction phase outside a phased kernel");
        c->failed = true;
        return LLVMGetUndef(t);
    }
    const ir_op_info *info = &ir_ops[in->op];
    LLVMValueRef a = c->vals[in->src[0]];
    if (info->cls == IR_CLS_TERNARY)
        return LLVMBuildSelect(c->b, a, c->vals[in->src[1]], c->vals[in->src[2]], "");
    rlx_dtype sdt = c->k->instr[in->src[0]].dtype;
    bool fdom = ir_dtype_is_float(sdt);
    LLVMValueRef r;
    if (in->op == IR_OP_DIV && sdt == RLX_F32 && !c->inner[in->src[1]]) {
        int slot = c->fdslot ? c->fdslot[in - c->k->instr] : -1;
        if (slot >= 0 && c->divmode == DIV_FAST)
            return fast_div(c, slot, a, c->vals[in->src[1]]);
        /* Elsewhere a true division. A multiply by an f64 reciprocal (the
         * earlier rule) rounds a subnormal quotient twice (about 1 in 1e9
         * random pairs: 0x1.710786p-83 / 0x1.a4cp+54), and on znver4 the
         * vector divide is the cheaper of the two (0.10 against 0.12 ns per
         * element), far below a memory-bound kernel's per-element time. */
        return LLVMBuildFDiv(c->b, a, c->vals[in->src[1]], "");
    }
    int lp = c->lowp[in - c->k->instr], gx;
    bool canon;
    if (lp && m->half_gelu && gelu_match(c->k, (int)(in - c->k->instr), &gx, &canon)) { /* (canon: the knob word) */
        LLVMValueRef fn = cg_math_gelu_half(m, lp == LOWP_BF16 ? RLX_BF16 : RLX_F16);
        return LLVMBuildCall2(c->b, LLVMGlobalGetValueType(fn), fn, &c->vals[gx], 1, "");
    }
    if (lp && info->emit == IR_EMIT_MATH && reg_type(m, sdt) == m->f32) { /* see mark_lowp */
        LLVMValueRef fn = cg_math_fn_lowp(m, in->op, lp == LOWP_BF16 ? RLX_BF16 : RLX_F16), args[2] = {a, NULL};
        unsigned n = info->cls == IR_CLS_BINARY ? 2 : 1;
        if (n == 2)
            args[1] = c->vals[in->src[1]];
        return fn ? LLVMBuildCall2(c->b, LLVMGlobalGetValueType(fn), fn, args, n, "") : no_rule(c, in->op, sdt, t);
    }
    if (info->cls == IR_CLS_UNARY)
        r = fdom ? unary_float(c, in->op, a, sdt, in->dtype) : unary_int(c, in->op, a, sdt, in->dtype);
    else
        r = fdom ? binary_float(c, in->op, a, c->vals[in->src[1]], sdt)
                 : binary_int(c, in->op, a, c->vals[in->src[1]], sdt);
    /* a product and a sum both only rounded to half may fuse into an fma
     * (one f32 rounding fewer) */
    if (r && lp && fdom && (in->op == IR_OP_ADD || in->op == IR_OP_SUB || in->op == IR_OP_MUL) && LLVMIsAInstruction(r))
        LLVMSetFastMathFlags(r, LLVMFastMathAllowContract);
    return r ? r : no_rule(c, in->op, sdt, t);
}

/* --------------------------------------------------------------- loops */

/* In a chunk loop's body: prefetches of the chunk's 64-byte lines of each
 * pf load at row pfrow (llvm.prefetch would keep the vectorizer off the
 * element loop, so they sit one loop out). */
static void emit_prefetches(kctx *c, int d)
{
    cg_mod *m = c->m;
    LLVMValueRef iv0 = c->iv[0];
    c->iv[0] = c->pfrow;
    for (int p = 0; p < c->npf; p++) {
        const sched_instr *in = &c->k->instr[c->pf[p]];
        int64_t per = 64 / (int64_t)ir_dtype_size(in->dtype);
        for (int64_t q = 0; q < c->chunk; q += per) {
            c->iv[d] = LLVMBuildNSWAdd(c->b, LLVMBuildNSWMul(c->b, c->chiv, ci(c, m->i64, c->chunk), ""), ci(c, m->i64, q), "");
            LLVMValueRef args[4] = {elem_ptr(c, in->arg, in->dtype, aff_in(c, in)), ci(c, m->i32, 0),
                                    ci(c, m->i32, 3), ci(c, m->i32, 1)};
            cg_intrinsic(m, c->b, "llvm.prefetch", m->ptr, args, 4);
        }
    }
    c->iv[0] = iv0;
}

/* Loop dim d's extent is compiled in (specialized, or a generic kernel's fixed one). */
static bool fixed_extent(const kctx *c, int d) { return !(c->generic && c->pv[d]); }
static bool one_block(const kctx *c, int d) { return fixed_extent(c, d) && c->k->shape[d] <= c->block; }

static void open_loop(kctx *c, int d)
{
    cg_mod *m = c->m;
    bool chunked = c->chunk > 0 && d == c->k->rank - 1;
    if (chunked) {
        LLVMBuildStore(c->b, ci(c, m->i64, 0), c->chslot);
        c->chhead = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "chunk");
        LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "chbody");
        c->chexit = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "chexit");
        LLVMBuildBr(c->b, c->chhead);
        LLVMPositionBuilderAtEnd(c->b, c->chhead);
        LLVMValueRef i = LLVMBuildLoad2(c->b, m->i64, c->chslot, "");
        LLVMValueRef nch = LLVMBuildSDiv(c->b, extent(c, d), ci(c, m->i64, c->chunk), ""); /* (the plan: a multiple) */
        LLVMBuildCondBr(c->b, icmp(c, LLVMIntSLT, i, nch), body, c->chexit);
        LLVMPositionBuilderAtEnd(c->b, body);
        c->chiv = LLVMBuildLoad2(c->b, m->i64, c->chslot, "");
        emit_prefetches(c, d);
    }
    LLVMValueRef lo = d == 0 ? c->begin : ci(c, m->i64, 0);
    LLVMValueRef hi = d == 0 ? c->end : chunked ? ci(c, m->i64, c->chunk) : extent(c, d);
    if (d == c->blkdim && one_block(c, d)) {
        c->bstart = NULL; /* one block: the loop as it is, flushed at its end */
    } else if (d == c->blkdim) { /* blocks [start, min(start + block, extent)) */
        LLVMBuildStore(c->b, ci(c, m->i64, 0), c->blkslot);
        c->bhead = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "block");
        LLVMBasicBlockRef bbody = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "blbody");
        c->bexit = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "blexit");
        LLVMBuildBr(c->b, c->bhead);
        LLVMPositionBuilderAtEnd(c->b, c->bhead);
        c->bstart = LLVMBuildLoad2(c->b, m->i64, c->blkslot, "");
        LLVMBuildCondBr(c->b, icmp(c, LLVMIntSLT, c->bstart, hi), bbody, c->bexit);
        LLVMPositionBuilderAtEnd(c->b, bbody);
        LLVMValueRef top = LLVMBuildNSWAdd(c->b, c->bstart, ci(c, m->i64, c->block), "");
        lo = c->bstart;
        /* a known extent, a multiple of the block: a known trip count */
        hi = fixed_extent(c, d) && c->k->shape[d] % c->block == 0 ? top : sel(c, icmp(c, LLVMIntSLT, top, hi), top, hi);
    }
    LLVMBuildStore(c->b, lo, c->ivslot[d]);
    c->head[d] = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "head");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "body");
    c->exit[d] = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "exit");
    LLVMBuildBr(c->b, c->head[d]);
    LLVMPositionBuilderAtEnd(c->b, c->head[d]);
    LLVMValueRef i = LLVMBuildLoad2(c->b, m->i64, c->ivslot[d], "");
    LLVMBuildCondBr(c->b, icmp(c, LLVMIntSLT, i, hi), body, c->exit[d]);
    LLVMPositionBuilderAtEnd(c->b, body);
    c->iv[d] = LLVMBuildLoad2(c->b, m->i64, c->ivslot[d], "");
    if (chunked) {
        c->jiv = c->iv[d];
        c->iv[d] = LLVMBuildNSWAdd(c->b, LLVMBuildNSWMul(c->b, c->chiv, ci(c, m->i64, c->chunk), ""), c->jiv, "");
    }
}

/* !llvm.loop !{self, !{"llvm.loop.vectorize.width", i32 w}?,
 * !{"llvm.loop.interleave.count", i32 n}?} on a back edge. The
 * vectorizer's cost model keeps one vector in flight for long math bodies,
 * whose latency chains then serialize; and it sizes vectors by the widest
 * type, so an f32 row summed in f64 would run 8 lanes, not 16. */
static void set_loop_md(kctx *c, LLVMValueRef br, int width, int interleave)
{
    LLVMContextRef ctx = c->m->ctx;
    LLVMMetadataRef tmp = LLVMTemporaryMDNode(ctx, NULL, 0);
    LLVMMetadataRef ops[3] = {tmp};
    unsigned nops = 1;
    const char *keys[2] = {"llvm.loop.vectorize.width", "llvm.loop.interleave.count"};
    int vals[2] = {width, interleave};
    for (int i = 0; i < 2; i++) {
        if (vals[i] <= 1)
            continue;
        LLVMMetadataRef kv[2] = {LLVMMDStringInContext2(ctx, keys[i], strlen(keys[i])),
                                 LLVMValueAsMetadata(LLVMConstInt(c->m->i32, (unsigned)vals[i], 0))};
        ops[nops++] = LLVMMDNodeInContext2(ctx, kv, 2);
    }
    LLVMMetadataRef loop = LLVMMDNodeInContext2(ctx, ops, nops);
    LLVMMetadataReplaceAllUsesWith(tmp, loop); /* self reference; frees tmp */
    LLVMSetMetadata(br, LLVMGetMDKindIDInContext(ctx, "llvm.loop", 9), LLVMMetadataAsValue(ctx, loop));
}

static void flush_block(kctx *c);

static void close_loop(kctx *c, int d)
{
    bool chunked = c->chunk > 0 && d == c->k->rank - 1;
    LLVMValueRef next = LLVMBuildNSWAdd(c->b, chunked ? c->jiv : c->iv[d], ci(c, c->m->i64, 1), "");
    LLVMBuildStore(c->b, next, c->ivslot[d]);
    LLVMValueRef br = LLVMBuildBr(c->b, c->head[d]);
    if (d == c->k->rank - 1 && (c->interleave > 1 || c->width > 1))
        set_loop_md(c, br, c->width, c->interleave);
    LLVMPositionBuilderAtEnd(c->b, c->exit[d]);
    if (d == c->blkdim && !c->bstart) {
        flush_block(c);
    } else if (d == c->blkdim) {
        flush_block(c);
        LLVMBuildStore(c->b, LLVMBuildNSWAdd(c->b, c->bstart, ci(c, c->m->i64, c->block), ""), c->blkslot);
        LLVMBuildBr(c->b, c->bhead);
        LLVMPositionBuilderAtEnd(c->b, c->bexit);
    }
    if (chunked) {
        if (c->blk_chunk)
            flush_block(c);
        LLVMBuildStore(c->b, LLVMBuildNSWAdd(c->b, c->chiv, ci(c, c->m->i64, 1), ""), c->chslot);
        LLVMBuildBr(c->b, c->chhead);
        LLVMPositionBuilderAtEnd(c->b, c->chexit);
    }
}

static void emit_body_values(kctx *c)
{
    for (int i = 0; i < c->k->ninstr && !c->failed; i++)
        c->vals[i] = emit_instr(c, &c->k->instr[i]);
}

static LLVMValueRef value_out(kctx *c) { return c->vals[c->k->ninstr - 1]; }

/* ----------------------------------------------------------- reductions */

static LLVMValueRef red_identity(kctx *c, ir_op op, rlx_dtype dt, LLVMTypeRef t)
{
    bool f = ir_dtype_is_float(dt);
    switch (op) {
    case IR_OP_SUM: return f ? cf(t, 0) : ci(c, t, 0);
    case IR_OP_PROD: return f ? cf(t, 1) : ci(c, t, 1);
    /* the ends of dt's range (bool [0, 1]; u32's top is all ones in i32) */
    case IR_OP_RMAX: return f ? cf(t, -INFINITY) : LLVMConstInt(t, (unsigned long long)ir_int_lo(dt), 0);
    case IR_OP_RMIN: return f ? cf(t, INFINITY) : LLVMConstInt(t, (unsigned long long)ir_int_hi(dt), 0);
    default: return no_rule(c, op, dt, t);
    }
}

static LLVMValueRef red_combine(kctx *c, ir_op op, rlx_dtype dt, LLVMValueRef a, LLVMValueRef v)
{
    if (ir_dtype_is_float(dt)) {
        LLVMValueRef r;
        switch (op) {
        case IR_OP_SUM: r = LLVMBuildFAdd(c->b, a, v, ""); break;
        case IR_OP_PROD: r = LLVMBuildFMul(c->b, a, v, ""); break;
        /* NaN wins (llvm.maximum propagates it); max(+0, -0) may give
         * either zero where the reference keeps the first seen, so the
         * call is nsz: x86 then needs no sign-of-zero fix-up (3 vector
         * ops a step, not 6), and with the element first its NaN test
         * stays off the accumulator's dependency chain */
        case IR_OP_RMAX:
        case IR_OP_RMIN:
            r = intr2(c, op == IR_OP_RMAX ? "llvm.maximum" : "llvm.minimum", v, a);
            LLVMSetFastMathFlags(r, LLVMFastMathNoSignedZeros);
            return r;
        default: return no_rule(c, op, dt, LLVMTypeOf(a));
        }
        /* the one place reassociation is allowed: several partial sums */
        LLVMSetFastMathFlags(r, LLVMFastMathAllowReassoc);
        return r;
    }
    bool b = dt == RLX_BOOL;
    switch (op) {
    case IR_OP_SUM: return b ? LLVMBuildOr(c->b, a, v, "") : LLVMBuildAdd(c->b, a, v, ""); /* as binary_int */
    case IR_OP_PROD: return b ? LLVMBuildAnd(c->b, a, v, "") : LLVMBuildMul(c->b, a, v, "");
    case IR_OP_RMAX: return b ? LLVMBuildOr(c->b, a, v, "") : intr2(c, is_uns(dt) ? "llvm.umax" : "llvm.smax", a, v);
    case IR_OP_RMIN: return b ? LLVMBuildAnd(c->b, a, v, "") : intr2(c, is_uns(dt) ? "llvm.umin" : "llvm.smin", a, v);
    default: return no_rule(c, op, dt, LLVMTypeOf(a));
    }
}

/* The accumulator type: f32, f16 and bf16 sums and products accumulate
 * in f64 (rowplan.c's acc_dtype, the same rule); a sum first in f32
 * blocks unless acc_f64 (blocked_sum). */
static LLVMTypeRef acc_type(kctx *c, ir_op op, rlx_dtype dt)
{
    bool wide = (op == IR_OP_SUM || op == IR_OP_PROD) && (dt == RLX_F32 || is_half(dt));
    return wide ? c->m->f64 : reg_type(c->m, dt);
}

static bool blocked_sum(const kctx *c, ir_op op, rlx_dtype dt)
{
    return op == IR_OP_SUM && (dt == RLX_F32 || is_half(dt)) && !c->m->acc_f64;
}

/* The slot of the accumulators at base (of type t) for the open tail dims. */
static LLVMValueRef slot_ptr(kctx *c, LLVMValueRef base, LLVMTypeRef t)
{
    LLVMValueRef idx = ci(c, c->m->i64, 0);
    for (int d = c->r2; d < c->k->rank; d++)
        idx = LLVMBuildNSWAdd(c->b, idx, LLVMBuildNSWMul(c->b, c->iv[d], c->acc_stride[d], ""), "");
    return LLVMBuildInBoundsGEP2(c->b, t, base, &idx, 1, "");
}

static LLVMValueRef acc_ptr(kctx *c) { return slot_ptr(c, c->acc, c->acc_t); }

/* The end of a block: acc64 += acc32 (exact conversion, one f64 rounding,
 * no reassociation: blocks add in order), acc32 = 0; per slot over the
 * tail dims when btail. */
static void flush_block(kctx *c)
{
    cg_mod *m = c->m;
    int r = c->btail ? c->k->rank : c->r2;
    for (int d = c->r2; d < r; d++)
        open_loop(c, d);
    LLVMValueRef p32 = c->btail ? slot_ptr(c, c->acc32, m->f32) : c->acc32;
    LLVMValueRef p64 = c->btail ? slot_ptr(c, c->acc64, m->f64) : c->acc64;
    LLVMValueRef part = LLVMBuildFPExt(c->b, LLVMBuildLoad2(c->b, m->f32, p32, ""), m->f64, "");
    LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, m->f64, p64, ""), part, ""), p64);
    LLVMBuildStore(c->b, cf(m->f32, 0), p32);
    for (int d = r - 1; d >= c->r2; d--)
        close_loop(c, d);
}

static void emit_reduce(kctx *c)
{
    const sched_kernel *k = c->k;
    rlx_dtype dt = k->node->dtype;
    for (int d = 0; d < c->r1; d++)
        open_loop(c, d);
    /* init the accumulators of this output row */
    for (int d = c->r2; d < k->rank; d++)
        open_loop(c, d);
    LLVMBuildStore(c->b, red_identity(c, k->red_op, dt, c->acc_t), acc_ptr(c));
    if (c->acc32)
        LLVMBuildStore(c->b, cf(c->m->f32, 0), slot_ptr(c, c->acc32, c->m->f32));
    for (int d = k->rank - 1; d >= c->r2; d--)
        close_loop(c, d);
    /* accumulate over the reduced dims (and the row, innermost); blocked:
     * into acc32, the innermost reduced dim in blocks */
    c->blkdim = c->acc32 ? c->r2 - 1 : -1;
    for (int d = c->r1; d < k->rank; d++)
        open_loop(c, d);
    emit_body_values(c);
    if (c->failed)
        return;
    LLVMValueRef v = value_out(c);
    LLVMTypeRef at = c->acc32 ? c->m->f32 : c->acc_t;
    if (at != reg_type(c->m, dt))
        v = LLVMBuildFPExt(c->b, v, at, "");
    LLVMValueRef p = c->acc32 ? slot_ptr(c, c->acc32, at) : acc_ptr(c);
    LLVMBuildStore(c->b, red_combine(c, k->red_op, dt, LLVMBuildLoad2(c->b, at, p, ""), v), p);
    for (int d = k->rank - 1; d >= c->r1; d--)
        close_loop(c, d);
    c->blkdim = -1;
    /* store the row */
    for (int d = c->r2; d < k->rank; d++)
        open_loop(c, d);
    LLVMValueRef a = LLVMBuildLoad2(c->b, c->acc_t, acc_ptr(c), "");
    if (c->acc_t != reg_type(c->m, dt)) /* the store rounds a 16-bit float once */
        a = is_half(dt) ? f64_to_f32_odd(c, a) : LLVMBuildFPTrunc(c->b, a, reg_type(c->m, dt), "");
    store(c, 0, dt, aff_out(c), a);
    for (int d = k->rank - 1; d >= c->r2; d--)
        close_loop(c, d);
    for (int d = c->r1 - 1; d >= 0; d--)
        close_loop(c, d);
}

/* bf16 elementwise kernels run the innermost loop over pairs of
 * elements: a bf16 pair is one 32-bit word, the first element its low
 * half, so each contiguous bf16 load is one word load whose two f32 values
 * are the word shifted left by 16 and the word with its low half cleared,
 * and the store one word of both rounded patterns. Vectorized, that is a
 * plain vector load, a shift and an and, where elements one by one take a
 * zero-extending shuffle and a shift per 16, and a plain store where they
 * take a shift and a narrowing shuffle: the shuffles and shifts share two
 * of the four vector pipes with the adds and multiplies, which W1 bf16
 * (gelu_tanh of a*b+c) runs out of first. Taken where the output and
 * every load that moves along the innermost dim are contiguous bf16 (other
 * loads are fixed along it), without pads or iotas; an odd last element
 * runs alone. */
static bool pair_mode(const kctx *c)
{
    const sched_kernel *k = c->k;
    int last = k->rank - 1;
    if (last < 0 || k->node->dtype != RLX_BF16 || k->out.stride[last] != 1 || (c->generic && c->pv[k->rank + 1 + last]))
        return false;
    bool any = false;
    for (int i = 0; i < k->ninstr; i++) {
        const sched_instr *in = &k->instr[i];
        if (in->kind == SCHED_I_GUARD || in->kind == SCHED_I_IOTA || (in->kind == SCHED_I_LOAD && in->guarded))
            return false;
        if (in->kind == SCHED_I_LOAD && c->inner[i]) {
            if (in->dtype != RLX_BF16 || in->idx.stride[last] != 1 || (c->generic && c->pv[c->pbase[i] + 1 + last]))
                return false;
            any = true;
        }
    }
    return any;
}

/* The pair at iv[last] and the next: v0, v1 the two elements' values. */
static void emit_pair_values(kctx *c, LLVMValueRef *v0, LLVMValueRef *v1)
{
    const sched_kernel *k = c->k;
    int last = k->rank - 1;
    LLVMValueRef i0 = c->iv[last], i1 = LLVMBuildNSWAdd(c->b, i0, ci(c, c->m->i64, 1), "");
    for (int j = 0; j < k->ninstr && !c->failed; j++) {
        const sched_instr *in = &k->instr[j];
        c->vals = v0;
        c->iv[last] = i0;
        if (in->kind == SCHED_I_LOAD && c->inner[j]) { /* contiguous bf16 (pair_mode) */
            LLVMValueRef w = LLVMBuildLoad2(c->b, c->m->i32, elem_ptr(c, in->arg, RLX_BF16, aff_in(c, in)), "");
            LLVMSetAlignment(w, 2);
            v0[j] = f32_of(c, LLVMBuildShl(c->b, w, k32(c, 16), ""));
            v1[j] = f32_of(c, band(c, w, (int32_t)0xffff0000));
            continue;
        }
        v0[j] = emit_instr(c, in);
        if (!c->inner[j]) {
            v1[j] = v0[j];
            continue;
        }
        c->vals = v1;
        c->iv[last] = i1;
        v1[j] = emit_instr(c, in);
    }
    c->vals = v0;
    c->iv[last] = i0;
}

static void emit_pairs(kctx *c)
{
    cg_mod *m = c->m;
    const sched_kernel *k = c->k;
    int d = k->rank - 1, n = k->ninstr;
    LLVMValueRef lo = d == 0 ? c->begin : ci(c, m->i64, 0), hi = d == 0 ? c->end : extent(c, d);
    LLVMValueRef *v1 = ir_calloc((size_t)n, sizeof *v1), *v0 = c->vals;
    if (!v1) {
        c->oom = c->failed = true;
        return;
    }
    LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "phead");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "pbody");
    LLVMBasicBlockRef tail = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "ptail");
    LLVMBasicBlockRef one = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "pone");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "pdone");
    /* pair p from 0 while p < (hi - lo) / 2: a unit step, so that the
     * vectorizer can count the iterations */
    LLVMValueRef np = LLVMBuildSDiv(c->b, LLVMBuildNSWSub(c->b, hi, lo, ""), ci(c, m->i64, 2), "");
    LLVMBuildStore(c->b, ci(c, m->i64, 0), c->ivslot[d]);
    LLVMBuildBr(c->b, head);
    LLVMPositionBuilderAtEnd(c->b, head);
    LLVMValueRef p = LLVMBuildLoad2(c->b, m->i64, c->ivslot[d], "");
    LLVMBuildCondBr(c->b, icmp(c, LLVMIntSLT, p, np), body, tail);
    LLVMPositionBuilderAtEnd(c->b, body);
    p = LLVMBuildLoad2(c->b, m->i64, c->ivslot[d], "");
    c->iv[d] = LLVMBuildNSWAdd(c->b, lo, LLVMBuildNSWMul(c->b, p, ci(c, m->i64, 2), ""), "");
    emit_pair_values(c, v0, v1);
    if (!c->failed) {
        LLVMValueRef h0 = LLVMBuildZExt(c->b, half_store_bits(c, v0[n - 1], RLX_BF16), m->i32, "");
        LLVMValueRef h1 = LLVMBuildZExt(c->b, half_store_bits(c, v1[n - 1], RLX_BF16), m->i32, "");
        LLVMValueRef w = LLVMBuildOr(c->b, h0, LLVMBuildShl(c->b, h1, k32(c, 16), ""), "");
        LLVMValueRef s = LLVMBuildStore(c->b, w, elem_ptr(c, 0, RLX_BF16, aff_out(c)));
        LLVMSetAlignment(s, 2);
        LLVMBuildStore(c->b, LLVMBuildNSWAdd(c->b, p, ci(c, m->i64, 1), ""), c->ivslot[d]);
        /* a vector of words holds twice the elements: half the interleave */
        set_loop_md(c, LLVMBuildBr(c->b, head), c->width, c->interleave > 1 ? (c->interleave + 1) / 2 : 0);
        LLVMPositionBuilderAtEnd(c->b, tail);
        LLVMValueRef i = LLVMBuildNSWAdd(c->b, lo, LLVMBuildNSWMul(c->b, np, ci(c, m->i64, 2), ""), "");
        LLVMBuildCondBr(c->b, icmp(c, LLVMIntSLT, i, hi), one, done);
        LLVMPositionBuilderAtEnd(c->b, one);
        c->iv[d] = i;
        emit_body_values(c);
    }
    if (!c->failed) {
        store(c, 0, k->node->dtype, aff_out(c), value_out(c));
        LLVMBuildBr(c->b, done);
        LLVMPositionBuilderAtEnd(c->b, done);
    }
    ir_free(v1);
}

static void emit_elementwise(kctx *c)
{
    const sched_kernel *k = c->k;
    bool pairs = pair_mode(c);
    for (int d = 0; d < k->rank - pairs; d++)
        open_loop(c, d);
    if (pairs) {
        emit_pairs(c);
    } else {
        emit_body_values(c);
        if (!c->failed)
            store(c, 0, k->node->dtype, aff_out(c), value_out(c));
    }
    if (c->failed)
        return;
    for (int d = k->rank - 1 - pairs; d >= 0; d--)
        close_loop(c, d);
}

/* Bodies with these run MATH_INTERLEAVE vectors per iteration: measured
 * on W1 (one tanh) 4 beats 1, 2 and 8. W2 (exp and tanh) runs about 10%
 * faster at 8 (rlx-bench W2 min 10.0-10.4 ms at unroll=8, 11.3-11.5 at 4,
 * after the Estrin exp core) but its cold compile takes 1.6x as long
 * (bench/compile_latency.sh: ~45 ms against the 30 ms target): 4 is the
 * default, and the unroll knob (tuning file, rlx-bench --tune) buys the
 * throughput back where compiles are amortized. */
enum { MATH_INTERLEAVE = 4 };
static bool is_math(ir_op op) { return sched_op_is_math(op); }

/* ------------------------------------------------------- phased kernels */

static int nsrc_of(const sched_instr *in) { return sched_instr_nsrc(in); }

static bool has_phase(const sched_kernel *k)
{
    for (int i = 0; i < k->ninstr; i++)
        if (k->instr[i].kind == SCHED_I_REDUCE)
            return true;
    return false;
}

static knob_class red_class(const sched_kernel *k) { return k->red_op != IR_OP_COUNT ? KCLASS_REDUCE : KCLASS_ROWS; }

/* Width and interleave of the innermost loop: the knobs of ks (passes/knobs.c,
 * per kernel class and size) where set, else the built-in rules. */
void cg_kernel_knobs(const knob_state *ks, const sched_kernel *k, int *width, int *interleave)
{
    int nmath = 0;
    for (int i = 0; i < k->ninstr; i++)
        nmath += k->instr[i].kind == SCHED_I_OP && is_math(k->instr[i].op);
    bool red = k->red_op != IR_OP_COUNT || has_phase(k);
    int64_t elems = 1;
    for (int d = 0; d < k->rank; d++)
        elems *= k->shape[d];
    knob_class cls = red ? red_class(k) : nmath ? KCLASS_EW_MATH : KCLASS_EW;
    *interleave = nmath ? MATH_INTERLEAVE : 0;
    /* f32 (f16, bf16) rows summed in f64: still 16 lanes (two f64 vectors of partial sums) */
    rlx_dtype odt = k->node->dtype;
    *width = red && (odt == RLX_F32 || is_half(odt)) ? 16 : 0;
    /* f16 in memory: LLVM's cost model widens its conversions to 4 lanes
     * only (W1 on f16 ran 5x slower than on f32); 16 lanes are one
     * vcvtph2ps/vcvtps2ph each */
    bool half = is_half(odt);
    for (int i = 0; i < k->ninstr; i++)
        half |= k->instr[i].kind == SCHED_I_LOAD && is_half(k->instr[i].dtype);
    if (half)
        *width = 16;
    /* and twice the vectors in flight where math runs on them: W1 bf16
     * 1.55 -> 1.3 ms per 4M elements (the f32 loop is memory-bound at 4) */
    if (half && nmath && !red)
        *interleave = 2 * MATH_INTERLEAVE;
    long w = knob_value(ks, KNOB_VECTOR_WIDTH, cls, elems);
    long u = knob_value(ks, red ? KNOB_REDUCE_ACC : KNOB_UNROLL, cls, elems);
    if (w > 0)
        *width = (int)w;
    if (u > 0)
        *interleave = (int)u;
}

uint64_t cg_kernel_knob_word(const knob_state *ks, const sched_kernel *k)
{
    int w, u;
    cg_kernel_knobs(ks, k, &w, &u);
    bool red = k->red_op != IR_OP_COUNT || has_phase(k);
    int64_t elems = 1;
    for (int d = 0; d < k->rank; d++)
        elems *= k->shape[d];
    /* (interleave <= 16: bits 16 and 17 are free) */
    uint64_t f64 = red && knob_value(ks, KNOB_REDUCE_ACC_F64, red_class(k), elems) != 0;
    uint64_t gelu = knob_value(ks, KNOB_HALF_GELU, KCLASS_ANY, elems) != 0 && gelu_consts(k);
    return (uint64_t)(uint32_t)w << 32 | gelu << 17 | f64 << 16 | (uint32_t)u;
}

void cg_kernel_knob_apply(cg_mod *m, uint64_t word)
{
    m->width = (int)(word >> 32);
    m->interleave = (int)(word & 0xffff);
    m->acc_f64 = word >> 16 & 1;
    m->half_gelu = word >> 17 & 1;
}

/* A phased (row) kernel follows its plan (passes/rowplan.c): the plan
 * says what each pass over the row evaluates, stashes and loads; this
 * code only emits it. What the passes share: */
typedef struct {
    const sched_rowplan *p;
    LLVMValueRef *slot; /* per instruction: its stash row buffer (alloca) */
    LLVMValueRef rstride[SCHED_MAX_LOOP], rowlen; /* the plan's, as values (parameters of a generic kernel) */
} row_emit;

/* Entry-block allocas: stash row buffers, one accumulator per phase, the
 * guarded divisions' bounds, the chunk counter. */
static void emit_row_allocas(kctx *c, row_emit *re, LLVMValueRef *accs)
{
    const sched_rowplan *p = re->p;
    const sched_kernel *k = c->k;
    cg_mod *m = c->m;
    re->rowlen = ci(c, m->i64, 1);
    for (int d = k->rank - 1; d >= p->r1; d--) {
        re->rstride[d] = re->rowlen;
        re->rowlen = LLVMBuildNSWMul(c->b, re->rowlen, extent(c, d), "");
    }
    for (int i = 0; i < k->ninstr; i++) {
        if (p->stash[i] != SCHED_STASH_ROW)
            continue;
        /* a generic kernel's row is sized at run time: the key says the
         * plan found the stash within SCHED_ROW_STASH_BYTES for it */
        LLVMTypeRef et = reg_type(m, k->instr[i].dtype);
        re->slot[i] = c->generic ? LLVMBuildArrayAlloca(c->b, et, re->rowlen, "stash")
                                 : LLVMBuildAlloca(c->b, LLVMArrayType2(et, (uint64_t)p->rowlen), "stash");
        LLVMSetAlignment(re->slot[i], 64);
    }
    for (int L = 0; L < p->nphases; L++) {
        accs[L] = LLVMBuildAlloca(c->b, reg_type(m, p->pass[L].acc_dtype), "acc");
        accs[SCHED_MAX_PHASES + L] = p->pass[L].block > 0 ? LLVMBuildAlloca(c->b, m->f32, "acc32") : NULL;
    }
    for (int s = 0; s < p->nfd; s++) {
        c->fdlo[s] = LLVMBuildAlloca(c->b, m->i32, "fdlo");
        c->fdhi[s] = LLVMBuildAlloca(c->b, m->i32, "fdhi");
    }
    c->fdslot = p->fdslot;
    c->npf = p->npf;
    memcpy(c->pf, p->pf, sizeof c->pf);
    if (p->npf)
        c->chslot = LLVMBuildAlloca(c->b, m->i64, "chunk");
}

/* Before a pass's loop: the per-row values it is the first to have. */
static void emit_per_row(kctx *c, const sched_rowpass *ps)
{
    for (int i = 0; i < c->k->ninstr && !c->failed; i++)
        if (ps->act[i] == SCHED_ROW_PER_ROW)
            c->vals[i] = emit_instr(c, &c->k->instr[i]);
}

/* Inside a pass's loops: each element value the pass evaluates, computed,
 * computed and stashed, or loaded from its stash. */
static void emit_row_values(kctx *c, const row_emit *re, const sched_rowpass *ps)
{
    const sched_kernel *k = c->k;
    const sched_rowplan *p = re->p;
    cg_mod *m = c->m;
    if (!p->per_elem[ps->root])
        return;
    LLVMValueRef idx = ci(c, m->i64, 0);
    for (int d = p->r1; d < k->rank; d++)
        idx = LLVMBuildNSWAdd(c->b, idx, LLVMBuildNSWMul(c->b, c->iv[d], re->rstride[d], ""), "");
    for (int i = 0; i <= ps->root && !c->failed; i++) {
        int act = ps->act[i];
        if (act != SCHED_ROW_EVAL && act != SCHED_ROW_EVAL_STASH && act != SCHED_ROW_LOAD)
            continue;
        rlx_dtype dt = k->instr[i].dtype;
        LLVMTypeRef t = reg_type(m, dt);
        LLVMValueRef ptr = act == SCHED_ROW_EVAL           ? NULL
                           : p->stash[i] == SCHED_STASH_OUT ? elem_ptr(c, 0, dt, aff_out(c))
                                                            : LLVMBuildInBoundsGEP2(c->b, t, re->slot[i], &idx, 1, "");
        if (act == SCHED_ROW_LOAD) {
            c->vals[i] = LLVMBuildLoad2(c->b, t, ptr, "");
            continue;
        }
        c->vals[i] = emit_instr(c, &k->instr[i]);
        if (act == SCHED_ROW_EVAL_STASH)
            LLVMBuildStore(c->b, c->vals[i], ptr);
    }
}

/* A chunked pass prefetches the next row (the last row: itself again). */
static void begin_chunks(kctx *c, const sched_rowpass *ps)
{
    if (ps->chunk <= 0)
        return;
    LLVMValueRef i1 = LLVMBuildNSWAdd(c->b, c->iv[0], ci(c, c->m->i64, 1), "");
    c->pfrow = LLVMBuildSelect(c->b, icmp(c, LLVMIntSLT, i1, c->end), i1, c->iv[0], "");
    c->chunk = ps->chunk;
}

/* A phase: its accumulator over the row, then its per-row value. A
 * blocked sum (ps->block) adds in acc32, the innermost row dim in blocks
 * (a chunked pass: its chunks), each block's sum then into acc. */
static void emit_reduce_pass(kctx *c, const row_emit *re, const sched_rowpass *ps, LLVMValueRef acc, LLVMValueRef acc32)
{
    const sched_kernel *k = c->k;
    const sched_instr *red = &k->instr[ps->red];
    LLVMTypeRef at = reg_type(c->m, ps->acc_dtype);
    rlx_dtype adt = ps->acc_dtype;
    LLVMBuildStore(c->b, red_identity(c, red->op, red->dtype, at), acc);
    if (ps->block > 0 && re->p->r1 >= k->rank) { /* (a block needs a row loop to run in) */
        snprintf(c->msg, c->cap, "code generator: blocked sum in a row plan without row dims");
        c->failed = true;
        return;
    }
    if (ps->block > 0) {
        LLVMBuildStore(c->b, cf(c->m->f32, 0), acc32);
        c->acc32 = acc32;
        c->acc64 = acc;
        c->btail = false;
        c->blk_chunk = ps->chunk > 0;
        c->blkdim = ps->chunk > 0 ? -1 : k->rank - 1;
        c->block = ps->block;
        at = c->m->f32;
        adt = RLX_F32;
    }
    begin_chunks(c, ps);
    for (int d = re->p->r1; d < k->rank; d++)
        open_loop(c, d);
    emit_row_values(c, re, ps);
    if (c->failed)
        return;
    LLVMValueRef v = c->vals[ps->root];
    LLVMValueRef ap = ps->block > 0 ? acc32 : acc;
    if (LLVMTypeOf(v) != at)
        v = convert(c, v, k->instr[ps->root].dtype, adt);
    LLVMBuildStore(c->b, red_combine(c, red->op, red->dtype, LLVMBuildLoad2(c->b, at, ap, ""), v), ap);
    for (int d = k->rank - 1; d >= re->p->r1; d--)
        close_loop(c, d);
    c->chunk = 0;
    c->acc32 = NULL;
    c->blk_chunk = false;
    c->blkdim = -1;
    at = reg_type(c->m, ps->acc_dtype);
    LLVMValueRef a = LLVMBuildLoad2(c->b, at, acc, "");
    if (ps->acc_dtype != red->dtype)
        a = convert(c, a, ps->acc_dtype, red->dtype);
    c->vals[ps->red] = a;
}

/* The row's loops computing and storing the output. */
static void emit_store_loop(kctx *c, const row_emit *re, const sched_rowpass *ps)
{
    const sched_kernel *k = c->k;
    for (int d = re->p->r1; d < k->rank; d++)
        open_loop(c, d);
    emit_row_values(c, re, ps);
    if (c->failed)
        return;
    store(c, 0, k->node->dtype, aff_out(c), c->vals[k->ninstr - 1]);
    for (int d = k->rank - 1; d >= re->p->r1; d--)
        close_loop(c, d);
}

static bool guards_emitted(const kctx *c)
{
    bool any = false;
    for (int s = 0; s < FD_SLOTS; s++)
        any |= c->fdb[s] != NULL;
    return any;
}

/* The store pass, its guarded divisions fast (fast_div). */
static void emit_store_pass(kctx *c, const row_emit *re, const sched_rowpass *ps)
{
    cg_mod *m = c->m;
    begin_chunks(c, ps);
    c->divmode = ps->fast_div ? DIV_FAST : DIV_PLAIN;
    for (int s = 0; s < re->p->nfd; s++) {
        LLVMBuildStore(c->b, ci(c, m->i32, -1), c->fdlo[s]);
        LLVMBuildStore(c->b, ci(c, m->i32, 0), c->fdhi[s]);
    }
    emit_store_loop(c, re, ps);
    c->divmode = DIV_PLAIN;
    c->chunk = 0;
}

/* A row whose guard failed is stored again with divisions, recomputing
 * the value stashed in the output row (overwritten by then). */
static void emit_retry_pass(kctx *c, const row_emit *re, const sched_rowpass *ps)
{
    cg_mod *m = c->m;
    LLVMBasicBlockRef redo = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "redo");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(m->ctx, c->fn, "done");
    LLVMBuildCondBr(c->b, fast_div_ok(c), done, redo);
    LLVMPositionBuilderAtEnd(c->b, redo);
    emit_store_loop(c, re, ps);
    if (c->failed)
        return;
    LLVMBuildBr(c->b, done);
    LLVMPositionBuilderAtEnd(c->b, done);
}

/* Emits pass P of the plan (inside the rows' loops). */
static void emit_row_pass(kctx *c, const row_emit *re, int P, LLVMValueRef *accs)
{
    const sched_rowplan *p = re->p;
    const sched_rowpass *ps = &p->pass[P];
    emit_per_row(c, ps);
    if (c->failed)
        return;
    switch (ps->kind) {
    case SCHED_ROW_REDUCE: /* the phases are passes 0..nphases-1 */
        emit_reduce_pass(c, re, ps, accs[P], accs[SCHED_MAX_PHASES + P]);
        return;
    case SCHED_ROW_STORE_ONE: store(c, 0, c->k->node->dtype, aff_out(c), c->vals[c->k->ninstr - 1]); return;
    case SCHED_ROW_RETRY: emit_retry_pass(c, re, ps); return;
    case SCHED_ROW_STORE:
        emit_store_pass(c, re, ps);
        /* the plan foresaw a retry exactly when the pass emitted a guard */
        if (!c->failed && guards_emitted(c) != (P + 1 < p->npass && p->pass[P + 1].kind == SCHED_ROW_RETRY)) {
            snprintf(c->msg, c->cap, "code generator: row plan and store pass disagree on guarded divisions");
            c->failed = true;
        }
        return;
    }
    snprintf(c->msg, c->cap, "code generator: row pass of kind %d", (int)ps->kind);
    c->failed = true;
}

/* A row kernel: loop dims [0, r1) are the rows; per row, the plan's
 * passes in order. */
static void emit_phased(kctx *c)
{
    const sched_kernel *k = c->k;
    sched_rowplan p;
    rlx_status st = sched_rowplan_build(k, c->m->fma, c->m->acc_f64, &p, c->msg, c->cap);
    if (st != RLX_OK) {
        c->failed = true;
        c->oom = st == RLX_E_NOMEM;
        return;
    }
    LLVMValueRef accs[2 * SCHED_MAX_PHASES]; /* per phase its accumulator, then its f32 one */
    row_emit re = {.p = &p, .slot = ir_calloc((size_t)k->ninstr, sizeof(LLVMValueRef))};
    if (!re.slot) {
        snprintf(c->msg, c->cap, "out of memory generating a kernel");
        c->failed = c->oom = true;
    } else {
        emit_row_allocas(c, &re, accs);
        for (int d = 0; d < p.r1; d++)
            open_loop(c, d);
        for (int P = 0; P < p.npass && !c->failed; P++)
            emit_row_pass(c, &re, P, accs);
        for (int d = p.r1 - 1; d >= 0 && !c->failed; d--)
            close_loop(c, d);
    }
    c->fdslot = NULL;
    c->chunk = 0;
    ir_free(re.slot);
    sched_rowplan_free(&p);
}

/* ---------------------------------------------------------------- entry */

static void add_attr(cg_mod *m, LLVMValueRef fn, LLVMAttributeIndex idx, const char *name)
{
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(m->ctx, kind, 0));
}

/* A constant of the array (a double) as a value of dt, the way the
 * scheduler already converted it: exact for f32, saturated integers (2^63
 * itself saturates to INT64_MAX), 0/1 for bool. */
static LLVMValueRef const_value(kctx *c, LLVMValueRef consts, int slot, rlx_dtype dt)
{
    cg_mod *m = c->m;
    LLVMValueRef ix = ci(c, m->i64, slot);
    LLVMValueRef v = LLVMBuildLoad2(c->b, m->f64, LLVMBuildInBoundsGEP2(c->b, m->f64, consts, &ix, 1, ""), "");
    LLVMSetAlignment(v, 8);
    switch (dt) {
    case RLX_F64: return v;
    case RLX_F32:
    case RLX_F16:
    case RLX_BF16: return LLVMBuildFPTrunc(c->b, v, m->f32, ""); /* exact: already rounded to dt */
    case RLX_BOOL: return LLVMBuildFCmp(c->b, LLVMRealUNE, v, cf(m->f64, 0), "");
    default: return cg_intrinsic2(m, c->b, is_uns(dt) ? "llvm.fptoui.sat" : "llvm.fptosi.sat", reg_type(m, dt), m->f64, &v, 1);
    }
}

/* A generic kernel's parameters, from the array (readonly, buffers[nargs]):
 * pv[p] for each number the code reads (sched_kernel_param_layout), none
 * for the strides compiled in (sched_stride_fixed). */
static void load_params(kctx *c, LLVMValueRef dims, int np)
{
    const sched_kernel *k = c->k;
    unsigned char *want = ir_calloc((size_t)np, 1);
    if (!want) {
        snprintf(c->msg, c->cap, "out of memory generating a kernel");
        c->failed = c->oom = true;
        return;
    }
    int r = k->rank;
    for (int d = 0; d < r; d++)
        want[d] = 1;
    want[r] = 1;
    for (int d = 0; d < r; d++)
        want[r + 1 + d] = !sched_stride_fixed(k->out.stride[d], d, r);
    for (int i = 0; i < k->ninstr; i++) {
        const sched_instr *in = &k->instr[i];
        int b = c->pbase[i];
        if (b < 0)
            continue;
        want[b] = 1;
        for (int d = 0; d < r; d++)
            want[b + 1 + d] = !sched_stride_fixed(in->idx.stride[d], d, r);
        if (in->kind == SCHED_I_GUARD)
            want[b + 1 + r] = want[b + 2 + r] = 1;
    }
    for (int p = 0; p < np; p++) {
        if (!want[p])
            continue;
        LLVMValueRef ix = ci(c, c->m->i64, p);
        c->pv[p] = LLVMBuildLoad2(c->b, c->m->i64, LLVMBuildInBoundsGEP2(c->b, c->m->i64, dims, &ix, 1, ""), "");
        LLVMSetAlignment(c->pv[p], 8);
    }
    ir_free(want);
}

rlx_status cg_emit_kernel(cg_mod *m, const sched_kernel *k, const char *name, char *msg, size_t cap)
{
    int na = k->nargs;
    /* body parameters: the na buffers, the parameter array, consts, begin, end */
    int np = sched_kernel_param_layout(k, NULL);
    LLVMTypeRef *pt = ir_alloc((size_t)(na + 4) * sizeof *pt);
    LLVMValueRef *bufs = ir_alloc((size_t)na * sizeof *bufs);
    LLVMValueRef *vals = ir_calloc((size_t)k->ninstr, sizeof *vals);
    LLVMValueRef *cvals = ir_calloc((size_t)(k->nconsts ? k->nconsts : 1), sizeof *cvals);
    unsigned char *inner = ir_calloc((size_t)(k->ninstr ? 2 * k->ninstr : 1), 1); /* and lowp after it */
    LLVMValueRef *pv = ir_calloc((size_t)np, sizeof *pv);
    int *pbase = ir_alloc((size_t)(k->ninstr ? k->ninstr : 1) * sizeof *pbase);
    if (!pt || !bufs || !vals || !cvals || !inner || !pv || !pbase) {
        ir_free(pt);
        ir_free(bufs);
        ir_free(vals);
        ir_free(cvals);
        ir_free(inner);
        ir_free(pv);
        ir_free(pbase);
        snprintf(msg, cap, "out of memory generating a kernel");
        return RLX_E_NOMEM;
    }
    sched_kernel_param_layout(k, pbase);
    for (int i = 0; i <= na + 1; i++)
        pt[i] = m->ptr;
    pt[na + 2] = pt[na + 3] = m->i64;
    /* the body: noalias buffers, so the vectorizer needs no runtime checks */
    char bname[96];
    snprintf(bname, sizeof bname, "%s_body", name);
    LLVMValueRef body = LLVMAddFunction(m->mod, bname, LLVMFunctionType(m->vd, pt, (unsigned)na + 4, 0));
    LLVMSetLinkage(body, LLVMInternalLinkage);
    add_attr(m, body, LLVMAttributeFunctionIndex, "nounwind");
    for (int i = 0; i <= na + 1; i++) {
        add_attr(m, body, (LLVMAttributeIndex)(i + 1), "noalias");
        add_attr(m, body, (LLVMAttributeIndex)(i + 1), "nocapture");
        if (i > 0)
            add_attr(m, body, (LLVMAttributeIndex)(i + 1), "readonly");
        if (i < na)
            bufs[i] = LLVMGetParam(body, (unsigned)i);
    }
    kctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.k = k;
    c.fn = body;
    c.bufs = bufs;
    c.vals = vals;
    c.cvals = cvals;
    c.begin = LLVMGetParam(body, (unsigned)na + 2);
    c.end = LLVMGetParam(body, (unsigned)na + 3);
    c.generic = m->generic;
    c.pv = pv;
    c.pbase = pbase;
    c.msg = msg;
    c.cap = cap;
    c.b = LLVMCreateBuilderInContext(m->ctx);
    LLVMPositionBuilderAtEnd(c.b, LLVMAppendBasicBlockInContext(m->ctx, body, "entry"));
    for (int d = 0; d < k->rank; d++)
        c.ivslot[d] = LLVMBuildAlloca(c.b, m->i64, "");
    c.blkslot = LLVMBuildAlloca(c.b, m->i64, "blk");
    c.blkdim = -1;
    if (c.generic) /* the numbers it reads, loaded once */
        load_params(&c, LLVMGetParam(body, (unsigned)na), np);
    c.inner = inner;
    c.lowp = inner + k->ninstr;
    mark_lowp(k, c.lowp);
    for (int i = 0; i < k->ninstr; i++) {
        const sched_instr *in = &k->instr[i];
        if (in->kind == SCHED_I_CONST)
            cvals[in->arg] = const_value(&c, LLVMGetParam(body, (unsigned)na + 1), in->arg, in->dtype);
        if ((in->kind == SCHED_I_LOAD || in->kind == SCHED_I_IOTA || in->kind == SCHED_I_GUARD) && k->rank > 0)
            inner[i] = in->idx.stride[k->rank - 1] != 0 && !(in->kind == SCHED_I_GUARD && guard_blockwise(&c, in));
        if (in->kind == SCHED_I_LOAD && in->guarded)
            inner[i] |= inner[in->src[0]];
        else if (in->kind == SCHED_I_OP)
            for (int s = 0; s < nsrc_of(in); s++)
                inner[i] |= inner[in->src[s]];
    }
    c.width = m->width; /* the knob word of the kernel's key */
    c.interleave = m->interleave;
    if (k->red_op != IR_OP_COUNT) {
        c.acc_t = acc_type(&c, k->red_op, k->node->dtype);
        c.r1 = k->rank;
        c.r2 = k->rank;
        for (int d = 0; d < k->rank; d++) {
            if (k->red_mask >> d & 1) {
                if (c.r1 == k->rank)
                    c.r1 = d;
                c.r2 = d + 1;
            }
        }
        if (c.r1 == k->rank) /* nothing left to reduce: one accumulate per element */
            c.r1 = c.r2 = k->rank;
        int64_t count = 1;
        LLVMValueRef cv = ci(&c, m->i64, 1);
        for (int d = k->rank - 1; d >= c.r2; d--) {
            c.acc_stride[d] = cv;
            cv = LLVMBuildNSWMul(c.b, cv, extent(&c, d), "");
            count *= k->shape[d];
        }
        /* one slot (promoted to a register) or a row buffer of at most
         * SCHED_ACC_MAX values (the scheduler's bound), in a generic
         * kernel sized at run time */
        if (c.generic && c.r2 < k->rank)
            c.acc = LLVMBuildArrayAlloca(c.b, c.acc_t, cv, "acc");
        else
            c.acc = LLVMBuildAlloca(c.b, count > 1 ? LLVMArrayType2(c.acc_t, (uint64_t)count) : c.acc_t, "acc");
        LLVMSetAlignment(c.acc, 64);
        if (c.r1 < c.r2 && blocked_sum(&c, k->red_op, k->node->dtype)) {
            c.acc32 = c.generic && c.r2 < k->rank ? LLVMBuildArrayAlloca(c.b, m->f32, cv, "acc32")
                      : LLVMBuildAlloca(c.b, count > 1 ? LLVMArrayType2(m->f32, (uint64_t)count) : m->f32, "acc32");
            LLVMSetAlignment(c.acc32, 64);
            c.acc64 = c.acc;
            c.btail = c.r2 < k->rank;
            c.block = c.btail ? SUM_BLOCK_ROWS : SCHED_SUM_BLOCK;
        }
        emit_reduce(&c);
    } else if (k->red_mask || has_phase(k)) { /* (rows of extent 1 leave no row dim) */
        emit_phased(&c);
    } else {
        emit_elementwise(&c);
    }
    if (!c.failed)
        LLVMBuildRetVoid(c.b);
    /* the entry point: unpack the buffer table, call the body */
    LLVMTypeRef et[4] = {m->ptr, m->ptr, m->i64, m->i64};
    LLVMValueRef fn = LLVMAddFunction(m->mod, name, LLVMFunctionType(m->vd, et, 4, 0));
    add_attr(m, fn, LLVMAttributeFunctionIndex, "nounwind");
    LLVMPositionBuilderAtEnd(c.b, LLVMAppendBasicBlockInContext(m->ctx, fn, "entry"));
    LLVMValueRef *args = ir_alloc((size_t)(na + 4) * sizeof *args);
    if (args) {
        for (int i = 0; i <= na; i++) { /* the buffers, then buffers[na]: the parameter array */
            LLVMValueRef ix = ci(&c, m->i64, i);
            LLVMValueRef p = LLVMBuildInBoundsGEP2(c.b, m->ptr, LLVMGetParam(fn, 0), &ix, 1, "");
            args[i] = c.generic || i < na ? LLVMBuildLoad2(c.b, m->ptr, p, "") : LLVMConstNull(m->ptr);
        }
        args[na + 1] = LLVMGetParam(fn, 1);
        args[na + 2] = LLVMGetParam(fn, 2);
        args[na + 3] = LLVMGetParam(fn, 3);
        LLVMBuildCall2(c.b, LLVMGlobalGetValueType(body), body, args, (unsigned)na + 4, "");
        LLVMBuildRetVoid(c.b);
    }
    LLVMDisposeBuilder(c.b);
    ir_free(args);
    ir_free(pt);
    ir_free(bufs);
    ir_free(vals);
    ir_free(cvals);
    ir_free(inner);
    ir_free(pv);
    ir_free(pbase);
    if (!args) {
        snprintf(msg, cap, "out of memory generating a kernel");
        return RLX_E_NOMEM;
    }
    return c.oom ? RLX_E_NOMEM : c.failed ? RLX_E_INTERNAL : RLX_OK;
}
