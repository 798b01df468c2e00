/*
 * passes.h — analyses and rewrites over the graph, between the tensor layer
 * and the backends. They see nodes only: no LLVM, no executor.
 *
 * One contract: every pass takes the realization's context (sched_ctx)
 * and returns an rlx_status; a failure is recorded once, in the context
 * (sched_fail: the first one wins), with a message naming the pass. The
 * pipeline that sequences them is src/runtime/exec/pipeline.c.
 */
#ifndef RLX_PASSES_H
#define RLX_PASSES_H

#include <stdint.h>
#include <stdio.h>

#include "ir/ir.h"
#include "passes/knobs.h"

/* The context of one realization, from its first pass to the end of its
 * run: the options it runs under and its first failure. The runtime calls
 * it rt_ctx and adds its counters to it. Zero-filled is a valid context
 * (the defaults: one thread, no verification). */
typedef struct {
    rlx_status status;      /* the first failure; RLX_OK while none */
    char msg[400];          /* its message */
    const knob_opts *opts;  /* borrows; NULL: the defaults */
    bool generic;           /* size-generic kernels always (a program over dynamic dims; pipeline.h) */
    uint64_t nodes_run;     /* the run's counters (runtime) */
    uint64_t live_bytes, peak_bytes;
} sched_ctx;

/* Records a failure in c (the first one wins); returns c's status. */
rlx_status sched_fail(sched_ctx *c, rlx_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The options' thread count (>= 1) and knob snapshot (NULL: defaults). */
static inline int sched_threads(const sched_ctx *c)
{
    return c && c->opts && c->opts->nthreads > 0 ? c->opts->nthreads : 1;
}
static inline int sched_compile_threads(const sched_ctx *c)
{
    return c && c->opts && c->opts->compile_threads > 0 ? c->opts->compile_threads : sched_threads(c);
}
static inline const knob_state *sched_knobs(const sched_ctx *c) { return c && c->opts ? c->opts->knobs : NULL; }

/* The evaluation order of a realization and when each value dies.
 * order[i] is computed after all its sources; src_index[src_start[i] + k]
 * is the position of order[i]->src[k]; uses[i] counts the consumers of
 * order[i] within the order (roots get one extra, so they never die). */
typedef struct {
    ir_node **order;
    long count;
    long *src_start, *src_index;
    long *uses;
    ir_map pos; /* order[i] -> i (the scheduler looks nodes up in it) */
} sched_liveness;

/* Realized nodes end the walk (they are listed, without their sources).
 * Returns false when out of memory. */
bool sched_liveness_build(ir_node *const *roots, int nroots, sched_liveness *out);
void sched_liveness_free(sched_liveness *lv);

/* schedule.c — cuts the unrealized graph of a realization into kernels.
 *
 * A LOOP kernel is one loop nest computing one materialized node: views
 * (permute, expand, slice, reshape) fold into the affine index of each
 * load, a pad into a guard on the loads below it (SCHED_I_GUARD), elementwise chains and CONST/IOTA leaves fuse, and a SUM, PROD,
 * MAX or MIN reduction absorbs its elementwise producers. A reduction over
 * the trailing dims whose only reader is one kernel that broadcasts the
 * reduced value back over the same rows is absorbed into that kernel as a
 * phase (SCHED_I_REDUCE): softmax, layer_norm, logsumexp... are one kernel
 * that makes several passes over each row. A REF kernel runs
 * one node through the reference evaluator (ops the code generator does not
 * cover); a VIEW kernel publishes a root that is only a view of a
 * materialized value. The loop body is a small SSA list (sched_instr) that
 * names no payload and no constant value (CONST leaves are read from the
 * kernel's constant array at run time), so it is also the compile-cache
 * key: a changed scalar (a learning rate) reuses the compiled kernel. */
enum { SCHED_MAX_LOOP = IR_MAX_RANK + 1 };
/* A reduction keeping a trailing run of dims accumulates that run in a
 * row buffer of at most this many values (else the run is reduced in
 * another order). */
enum { SCHED_ACC_MAX = 8192 };

/* An element offset (or, for IOTA, an index along its axis) as an affine
 * function of the loop indices: off + sum stride[k] * i_k. */
typedef struct {
    int64_t off;
    int64_t stride[SCHED_MAX_LOOP];
} sched_affine;

/* A pad is a predicate on the loop indices, not a copy: pad(x) at index
 * i is where(guard(i), x[i - before], fill), guard(i) the conjunction of
 * GUARD instructions (lo <= idx(i) < hi per padded dim, AND-ed), and every
 * load below the pad is a guarded load: taken only when the guard holds
 * (its address may lie outside the buffer otherwise), else 0 of its dtype,
 * which the where discards. The code generator emits a guarded load as a
 * conditional block, which the loop vectorizer turns into a masked load. */
typedef enum {
    SCHED_I_LOAD = 0,
    SCHED_I_CONST = 1,
    SCHED_I_IOTA = 2,
    SCHED_I_OP = 3,
    SCHED_I_REDUCE = 4,
    SCHED_I_GUARD = 5
} sched_ikind;

typedef struct {
    sched_ikind kind;
    ir_op op;           /* OP: a unary, binary or ternary primitive; REDUCE: SUM, PROD, RMAX or RMIN */
    rlx_dtype dtype;    /* of the value (GUARD: bool) */
    int src[3];         /* OP, REDUCE (src[0]), guarded LOAD (src[0]: its bool guard): earlier instructions */
    int arg;            /* LOAD: index into the kernel's args; CONST: slot in its constant array */
    bool guarded;       /* LOAD: taken only where src[0] holds */
    double value, step; /* CONST: the value, already converted to dtype (not part of the key); IOTA: start, step */
    int64_t lo, hi;     /* GUARD: true where lo <= idx < hi */
    sched_affine idx;   /* LOAD: element offset; IOTA: position along the iota axis; GUARD: the index tested */
    const ir_node *cst; /* CONST: the node its value was read from (borrowed; NULL for a pad's fill; not part of the key) */
} sched_instr;

typedef enum { SCHED_LOOP = 0, SCHED_REF = 1, SCHED_VIEW = 2 } sched_kind;

typedef struct {
    sched_kind kind;
    ir_node *node; /* borrows: the value this kernel produces */
    /* SCHED_LOOP only. Loop dim 0 is never reduced: the runtime splits it.
     * Three forms:
     *  - elementwise: red_op IR_OP_COUNT, red_mask 0;
     *  - one reduction: red_op its op, the last instruction the value
     *    reduced; reduced dims sit together, after the kept dims, except a
     *    trailing run of kept dims (the contiguous output row) that may
     *    come last;
     *  - phased (row) kernel: red_op IR_OP_COUNT, red_mask the row dims,
     *    which are the last loop dims; each SCHED_I_REDUCE is one pass over
     *    the row giving a per-row value to the instructions after it; the
     *    last instruction is stored per element (if it depends on the row
     *    dims) or once per row. */
    int rank;
    int64_t shape[SCHED_MAX_LOOP];
    ir_op red_op;       /* the one-reduction form's op; else IR_OP_COUNT */
    uint32_t red_mask;  /* bit k: loop dim k is reduced (a row dim) */
    sched_affine out;   /* output element offset (stride 0 on reduced dims) */
    int nargs;          /* args[0] is node (the output); then its inputs */
    ir_node **args;     /* owns the array, borrows the nodes */
    int ninstr;
    sched_instr *instr; /* owns; the last one is the value stored or reduced */
    int nconsts;        /* CONST slots 0..nconsts-1, in instruction order */
} sched_kernel;

typedef struct {
    sched_kernel *k; /* owns; in execution order */
    long count;
} sched_schedule;

/* True when the code generator covers n as part of a fused loop. */
bool sched_fusable(const ir_node *n);
/* Builds the schedule of roots under c's fusion knobs. RLX_E_NOMEM (or
 * RLX_E_INTERNAL) recorded in c, and *out empty, on failure. */
rlx_status sched_build(sched_ctx *c, ir_node *const *roots, int nroots, sched_schedule *out);
void sched_free(sched_schedule *s);
/* What a schedule decided that holds for any sizes of its graph's
 * structure: the order it planned (borrowing the graph's nodes), each
 * node's class and whether it is materialized, and each kernel's place in
 * the order. Made by sched_build_keep; a graph of the same structure with
 * other sizes (a compiled program's new binding) is scheduled from it by
 * sched_rebuild without planning again. */
typedef struct {
    long count;                  /* the nodes of the order */
    ir_node **order;             /* borrows the graph's nodes */
    long *src_start, *src_index; /* as sched_liveness's */
    unsigned char *cls, *is_m;   /* per node (one block: is_m = cls + count) */
    long nk;                     /* the kernels */
    long *at;                    /* per kernel: its node's place */
    int nroots;
    long *root_at;               /* per root: its place */
    long *ref_at, *refs;         /* LOOP kernel k: the places of its args, then of its instructions' CONST
                                  * nodes (-1: none), in refs[ref_at[k] .. ref_at[k+1]) */
} sched_decisions;
/* sched_build, and its decisions into *keep (freed with
 * sched_decisions_free; empty on failure). */
rlx_status sched_build_keep(sched_ctx *c, ir_node *const *roots, int nroots, sched_schedule *out,
                            sched_decisions *keep);
/* The schedule of roots, a graph of d's structure (node for node: op,
 * dtype, rank, sources, class) with other sizes, from the decisions d and
 * the schedule old made with them: a LOOP kernel whose nodes (those it
 * computes and those it loads) have old's shapes and attributes is copied
 * onto the new nodes, keep[i] = 1 (its compiled code serves as is); the
 * others are lowered again with d's cuts. Returns 1 (its decisions into
 * *keep_d), 0 when the structure differs or a lowering needs another
 * plan (*out empty: schedule afresh), -1 on error (recorded in c). */
int sched_rebuild(sched_ctx *c, const sched_decisions *d, const sched_schedule *old, ir_node *const *roots,
                  int nroots, sched_schedule *out, unsigned char *keep, sched_decisions *keep_d);
void sched_decisions_free(sched_decisions *d);
/* The structural key of a LOOP kernel: words written to buf (at most cap);
 * returns the number needed. Equal keys compile to the same code.
 *
 * generic: the key of the kernel's size-generic variant, which reads its
 * numbers at run time from an int64 parameter array (sched_kernel_params)
 * instead of compiling them in. It keeps what changes the code: the op
 * list, dtypes, ranks, the reduction form, IOTA's start and step, which
 * strides are 0 (broadcasts, on any dim) and which innermost strides are
 * 1 or -1 (what lets LLVM vectorize a load or store: contiguous, or
 * reversed); every other stride, every offset, extent and guard bound is
 * a parameter. A row kernel's plan decisions that depend on sizes are in
 * it too (passes/rowplan.c: which values are stashed and where, which
 * passes run in chunks, which loads they prefetch): a stash sized by the
 * row is allocated at run time, within SCHED_ROW_STASH_BYTES as the plan
 * checked, and a reduction's accumulator row over tail dims holds at most
 * SCHED_ACC_MAX values, as the scheduler ensures. SIZE_MAX when the
 * generic key cannot be made (out of memory planning a row kernel). */
size_t sched_kernel_key(const sched_kernel *k, bool generic, uint64_t *buf, size_t cap);
/* A generic key's first word (a specialized key starts with the rank). */
#define SCHED_KEY_GENERIC 0x67656e6572696321ull /* "generic!" */
/* The parameters of a generic kernel, in this order: the extents
 * shape[0..rank); the output's off, stride[0..rank); then per LOAD, IOTA
 * and GUARD instruction, in instruction order, its idx.off and
 * idx.stride[0..rank), a GUARD's lo and hi after them. base[i] (ninstr
 * entries, may be NULL) receives each instruction's first index (-1 for
 * the others); returns the count. */
int sched_kernel_param_layout(const sched_kernel *k, int *base);
/* k's parameter values (sched_kernel_param_layout entries). */
void sched_kernel_params(const sched_kernel *k, int64_t *out);
/* Whether stride v on loop dim d of a generic kernel of rank `rank` is
 * compiled in (0 on any dim; 1 or -1 on the innermost) rather than read
 * from the parameters. Extents, offsets and guard bounds never are. */
static inline bool sched_stride_fixed(int64_t v, int d, int rank)
{
    return v == 0 || (d == rank - 1 && (v == 1 || v == -1));
}
/* The run-time constant array of k: consts[slot] of every CONST (at most
 * k->nconsts entries); with from non-NULL, from[slot] is the CONST node
 * the slot was read from (borrowed, NULL when none). */
void sched_kernel_consts(const sched_kernel *k, double *consts, const ir_node **from);
/* The constant-array entry of a CONST of value v and dtype dt (what
 * sched_kernel_consts gives for it): a run may bind new values. */
double sched_const_value(double v, rlx_dtype dt);

/* memplan.c — liveness and arena placement of a schedule's values.
 * last[i]: the last kernel reading kernel i's value (count for roots and
 * values under a root published as a view: they outlive the run).
 * offset[i]: the byte offset of kernel i's value in the arena (64-byte
 * aligned), -1 when it has storage of its own (roots, REF outputs, empty
 * values). reuses[i]: the kernel whose slot kernel i writes in place, -1
 * when none. RLX_E_NOMEM recorded in c when out of memory. */
typedef struct {
    long count;
    long *last;
    int64_t *offset;
    long *reuses;
    size_t arena_bytes;
} sched_memplan;
rlx_status sched_memplan_build(sched_ctx *c, const sched_schedule *s, ir_node *const *roots, int nroots,
                               sched_memplan *out);
void sched_memplan_free(sched_memplan *m);
/* Every load of v in LOOP kernel k reads the element k stores, so k may
 * write its output over v's buffer as it goes (a donated input). */
bool sched_reads_in_place(const sched_kernel *k, const ir_node *v);

/* simplify.c — rewrites the unrealized graph of a realization into an
 * equivalent, smaller one (constant folding, identities, composed views,
 * reductions over broadcast axes; the rules and their exactness are listed
 * in simplify.c). Linear in the graph, iterative.
 *
 * The fold computes one elementwise op (unary, binary or where) of CONST
 * sources src as a value of dtype: true with *value exactly what a CONST
 * of dtype holds, false to leave the op unfolded. The pass does not know
 * scalar semantics; its caller passes the reference evaluator's
 * (ts_simp_fold). NULL folds nothing elementwise. */
typedef bool (*simp_fold_fn)(ir_op op, const ir_attrs *attr, rlx_dtype dtype, int nsrc, ir_node *const *src,
                             double *value);
/* out[i] (a new reference) computes what roots[i] computes, with its shape
 * and dtype; it may be roots[i] itself or a realized node. RLX_E_NOMEM
 * (or RLX_E_INTERNAL) recorded in c, every out[i] NULL and nothing
 * leaked, on failure. */
rlx_status simp_run(sched_ctx *c, ir_node *const *roots, int nroots, simp_fold_fn fold, ir_node **out);
/* Unrealized nodes reachable from roots (-1 when out of memory). */
long simp_count(ir_node *const *roots, int nroots);
/* src/tensor/realize.c: the fold over the reference evaluator. */
bool ts_simp_fold(ir_op op, const ir_attrs *attr, rlx_dtype dtype, int nsrc, ir_node *const *src, double *value);

/* rowplan.c — the code decisions of a phased (row) kernel (schedule.c's
 * third LOOP form), made from the kernel alone: the code generator walks
 * the plan's passes and emits what each says, deciding nothing itself.
 *
 * Loop dims [0, r1) are the rows, [r1, rank) one row. An instruction is
 * per element when it depends on the row dims (computed inside a pass over
 * the row), else per row (computed once per row, at the start of the first
 * pass after the phases it waits for). Passes, in order:
 *  - one ROW_REDUCE per SCHED_I_REDUCE (a phase): accumulates its source
 *    over the row, in an accumulator of acc_dtype (f64 for f32 SUM, PROD;
 *    an f32 SUM in blocks of f32 partial sums unless acc_f64, see block);
 *  - then either ROW_STORE, a pass storing each element (the stored value
 *    or its place depends on the row), or ROW_STORE_ONE, one store per row;
 *  - ROW_RETRY after a ROW_STORE with guarded f32 divisions (Markstein,
 *    see cg_kernel.c fast_div): the row is stored again with divisions
 *    when its guard fails.
 * A math result that several passes need is stashed: kept in the output
 * row itself (one value the stored value is computed from, when that row
 * is contiguous and of its dtype: softmax's exp(x - m)), else in a row
 * buffer on the stack (SCHED_ROW_STASH_BYTES in all); later passes load
 * it. The pass after the first may run its row loop in chunks, each
 * prefetching the same chunk of the next row (large matrices whose rows
 * are re-read pass by pass). */
enum {
    SCHED_MAX_PHASES = 8,                  /* reductions absorbed into one kernel (schedule.c) */
    SCHED_ROW_PASSES = SCHED_MAX_PHASES + 2, /* the phases, the store, its retry */
    SCHED_ROW_FD_SLOTS = 4,                /* guarded divisions in a store pass */
    SCHED_ROW_PF_LOADS = 4,                /* loads prefetched by the chunked pass */
    SCHED_ROW_STASH_BYTES = 128 * 1024,    /* row buffers in all: a small thread stack suffices */
    SCHED_ROW_PF_CHUNK = 256,              /* beat 128 and 1024 on softmax [4096, 4096] */
    SCHED_ROW_PF_MIN_BYTES = 4 << 20,      /* the kernel's elements: beyond the caches */
    /* an f32 (f16, bf16) SUM along a row: f32 partial sums of this many
     * elements of the innermost loop dim, each block's added into the f64
     * accumulator (codegen_llvm/cg_kernel.c derives the error bound) */
    SCHED_SUM_BLOCK = 1024
};

typedef enum { SCHED_ROW_REDUCE = 0, SCHED_ROW_STORE = 1, SCHED_ROW_STORE_ONE = 2, SCHED_ROW_RETRY = 3 } sched_rowpass_kind;

/* What a pass does with instruction i: act[i]. */
typedef enum {
    SCHED_ROW_SKIP = 0,       /* nothing */
    SCHED_ROW_PER_ROW = 1,    /* a per-row value, computed before the pass's loop */
    SCHED_ROW_EVAL = 2,       /* a per-element value, computed in the loop */
    SCHED_ROW_EVAL_STASH = 3, /* computed in the loop and stored to its stash */
    SCHED_ROW_LOAD = 4        /* loaded from its stash, filled by an earlier pass */
} sched_rowact;

typedef enum { SCHED_STASH_NONE = 0, SCHED_STASH_ROW = 1, SCHED_STASH_OUT = 2 } sched_stash;

typedef struct {
    sched_rowpass_kind kind;
    int red;             /* ROW_REDUCE: its SCHED_I_REDUCE; else -1 */
    int root;            /* the value the loop ends with: red's source, or the stored value */
    rlx_dtype acc_dtype; /* ROW_REDUCE: the accumulator's */
    int64_t block;       /* ROW_REDUCE: > 0: blocked f32 sum, f32 partial sums of that many elements of the
                          * innermost row dim (a chunked pass: its chunks) added into the f64 accumulator */
    bool fast_div;       /* ROW_STORE: divisions with an fdslot are guarded ones */
    int64_t chunk;       /* > 0: the row loop runs in chunks of that many, prefetching the next row */
    unsigned char *act;  /* per instruction: sched_rowact; borrows the plan's memory */
} sched_rowpass;

typedef struct {
    int ninstr;
    int r1;                          /* the first row dim (rank when none) */
    int64_t rowlen;                  /* elements of one row */
    int64_t rstride[SCHED_MAX_LOOP]; /* index in a row buffer: sum rstride[d] * i_d over the row dims */
    int nphases;
    int phase[SCHED_MAX_PHASES];     /* the SCHED_I_REDUCE of each phase, in order */
    int npass;
    sched_rowpass pass[SCHED_ROW_PASSES];
    /* per instruction (borrowing the plan's memory) */
    unsigned char *per_elem;         /* depends on the row dims */
    int *stage;                      /* per row: the pass it is computed before (REDUCE: its pass + 1) */
    unsigned char *stash;            /* sched_stash */
    signed char *fdslot;             /* guarded division's slot in [0, nfd), or -1 */
    int nstash_row, ostash;          /* row buffers; the value kept in the output row, or -1 */
    int nfd;
    int npf, pf[SCHED_ROW_PF_LOADS]; /* loads whose next row the chunked pass prefetches */
    void *mem;                       /* owns the per-instruction arrays */
} sched_rowplan;

/* The plan of phased kernel k; fma: the target has fused multiply-add
 * (guarded divisions need it). RLX_E_NOMEM, or RLX_E_INTERNAL for a kernel
 * that is not a phased one or has more than SCHED_MAX_PHASES phases, with
 * a message in err and nothing to free. */
rlx_status sched_rowplan_build(const sched_kernel *k, bool fma, bool acc_f64, sched_rowplan *p, char *err,
                                size_t errcap);
void sched_rowplan_free(sched_rowplan *p);
/* The words of a generic kernel's key (sched_kernel_key) that say the
 * plan's decisions depending on sizes: per instruction its stash, the
 * chunked passes and their prefetched loads. Written to buf (at most
 * cap); the number needed, SIZE_MAX when the plan cannot be made. */
size_t sched_rowplan_key(const sched_kernel *k, uint64_t *buf, size_t cap);
/* The number of sources (src[0..n)) instruction in reads. */
int sched_instr_nsrc(const sched_instr *in);
/* True for the ops that cost a math function call (exp, log, tanh...). */
bool sched_op_is_math(ir_op op);

/* verify.c — the checks the pipeline runs after the passes when the
 * options say verify (RLX_VERIFY=1, debug builds), and the dumps of
 * RLX_DEBUG >= 4. A failure is RLX_E_INTERNAL naming the pass before.
 * sched_verify_graph: ir_verify over every root (after pass). sched_verify:
 * every LOOP kernel's args and instruction indices in range, sources
 * earlier, CONST slots below nconsts, loads of valid args (not the
 * output), and kernels after the kernels computing their inputs. */
rlx_status sched_verify_graph(sched_ctx *c, const char *pass, ir_node *const *roots, int nroots);
rlx_status sched_verify(sched_ctx *c, const sched_schedule *s);
void sched_dump_graph(FILE *f, const char *pass, ir_node *const *roots, int nroots);
void sched_dump(FILE *f, const sched_schedule *s);

#endif
