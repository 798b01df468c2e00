/*
 * cg_internal.h — shared between the files of src/codegen_llvm (the only
 * place that includes llvm-c): the module being built and its helpers.
 *
 *   cg_kernel.c  a scheduled LOOP kernel -> one LLVM function
 *   cg_math.c    vectorizable polynomial exp/log/tanh/... as IR functions
 *   cg_jit.c     passes, ORC LLJIT, the kernel cache (all Orc calls)
 */
#ifndef RLX_CG_INTERNAL_H
#define RLX_CG_INTERNAL_H

#include <llvm-c/Core.h>
#include <stdbool.h>

#include "codegen_llvm/cg.h"
#include "passes/passes.h"

/* One module under construction. */
typedef struct {
    LLVMContextRef ctx; /* borrows */
    LLVMModuleRef mod;  /* borrows */
    LLVMTypeRef i1, i8, i16, i32, i64, f16, f32, f64, ptr, vd;
    LLVMValueRef math[IR_OP_COUNT][4]; /* [op][f32, f64, f32 for bf16, for f16]: emitted math functions */
    LLVMValueRef trig_table;           /* the f32 sin/cos reduction table, once */
    bool fma;                          /* the host (the JIT's target) has fused multiply-add */
    bool f16c;                         /* ... converts f32 <-> half in hardware (x86 F16C, aarch64) */
    int width, interleave;             /* the kernel's innermost loop (cg_kernel_knobs), set by the caller */
    bool acc_f64;                      /* f32 sums in f64, not blocked f32 (knob reduce_acc_f64), set by the caller */
    bool half_gelu;                    /* gelu_tanh of half results in one piece (knob half_gelu), ditto */
    bool generic;                      /* size-generic: numbers from the parameter array (sched_kernel_key) */
} cg_mod;

void cg_mod_init(cg_mod *m, LLVMContextRef ctx, LLVMModuleRef mod);

/* A call of an overloaded intrinsic ("llvm.fmuladd") on type ty. */
LLVMValueRef cg_intrinsic(cg_mod *m, LLVMBuilderRef b, const char *name, LLVMTypeRef ty, LLVMValueRef *args,
                          unsigned nargs);
/* An intrinsic with two overloaded types (llvm.fptosi.sat: result, source). */
LLVMValueRef cg_intrinsic2(cg_mod *m, LLVMBuilderRef b, const char *name, LLVMTypeRef t0, LLVMTypeRef t1,
                           LLVMValueRef *args, unsigned nargs);

/* cg_math.c: the scalar function computing op (EXP, LOG, SIN, COS, TANH,
 * ERF, SIGMOID) on ty (f32 or f64): internal, always-inline, branch-free,
 * so the loop vectorizer widens it with the loop. */
LLVMValueRef cg_math_fn(cg_mod *m, ir_op op, LLVMTypeRef ty);
/* The f32 function of op for a value whose precision only matters as far
 * as a rounding to half (RLX_F16 or RLX_BF16) sees it: EXP, TANH and
 * SIGMOID have cheaper variants (cg_math.c says how precise), other ops
 * give cg_math_fn's. */
LLVMValueRef cg_math_fn_lowp(cg_mod *m, ir_op op, rlx_dtype half);
/* f32 gelu_tanh(x) for a result only rounded to half (RLX_F16 or
 * RLX_BF16), as x / (1 + e^(-2y)): the composite's value without its
 * cancellation, in fewer operations. */
LLVMValueRef cg_math_gelu_half(cg_mod *m, rlx_dtype half);

/* cg_kernel.c: builds function `name` of kernel k into m's module:
 * void name(void *const *buffers, const double *consts, int64_t begin,
 * int64_t end); with m->generic, buffers[k->nargs] is the kernel's
 * parameter array (sched_kernel_params), which it reads once per call. */
rlx_status cg_emit_kernel(cg_mod *m, const sched_kernel *k, const char *name, char *msg, size_t cap);
/* The innermost loop's vector width and interleave for k (knobs or the
 * built-in rules; 0 = the vectorizer's choice), and both packed in one
 * word for the kernel cache key. */
void cg_kernel_knobs(const knob_state *ks, const sched_kernel *k, int *width, int *interleave);
/* The knob word: width, interleave and acc_f64 (the kernel cache key's
 * last word); cg_kernel_knob_apply sets them in m from it. */
uint64_t cg_kernel_knob_word(const knob_state *ks, const sched_kernel *k);
void cg_kernel_knob_apply(cg_mod *m, uint64_t word);

#endif
