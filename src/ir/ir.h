/*
 * ir.h — the graph of librlx: immutable, refcounted, hash-consed nodes.
 *
 * A node is one primitive of ops.def applied to source nodes, with a small
 * typed attribute struct, a dtype and a static shape (a -1 dim is dynamic,
 * only below an IR_OP_INPUT). Nodes are created through ir_make, which runs
 * the op's shape rule and returns an existing identical node when there is
 * one (hash-consing), so identical subexpressions are one node.
 *
 * Invariants the tensor layer establishes before calling ir_make, and every
 * later stage relies on: binary and ternary sources have the node's shape
 * (broadcasts are explicit EXPAND nodes) and one dtype; float-math ops get
 * float sources; reductions of integers already work in i64.
 *
 * src/ir depends on nothing else of librlx. Nothing here knows handles.
 */
#ifndef RLX_IR_H
#define RLX_IR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/table.h"
#include "rlx.h"

#define IR_MAX_RANK RLX_MAX_RANK
#define IR_MAX_BYTES ((int64_t)1 << 47) /* beyond any address space here */

typedef enum {
#define IR_OP(e, name, arity, cls, emit, jit, flags) e,
#include "ir/ops.def"
#undef IR_OP
    IR_OP_COUNT
} ir_op;

typedef enum {
    IR_CLS_LEAF, IR_CLS_UNARY, IR_CLS_BINARY, IR_CLS_TERNARY, IR_CLS_REDUCE,
    IR_CLS_MOVEMENT, IR_CLS_INDEX, IR_CLS_SCAN, IR_CLS_LIBRARY
} ir_class;

enum {
    IR_F_COMMUTATIVE = 1 << 0,
    IR_F_FLOAT_MATH = 1 << 1, /* needs float input: the tensor layer casts ints to f32 */
    IR_F_BOOL_OUT = 1 << 2,   /* result is bool */
    IR_F_BOOL_OK = 1 << 3,    /* a binary op defined on two bools */
    IR_F_NO_BOOL = 1 << 4     /* a unary op undefined on bool */
};

/* How the JIT computes a primitive: ops.def's emit column (described there). */
typedef enum {
    IR_EMIT_LOAD, IR_EMIT_INSTR, IR_EMIT_INTRIN, IR_EMIT_MATH, IR_EMIT_VIEW, IR_EMIT_REF, IR_EMIT_LIB
} ir_emit;

/* ops.def's jit column: a set of dtypes, bit 1 << dtype. f16 and bf16
 * values compute in f32 inside a kernel (rounded on store), so every row
 * that fuses f32 fuses them: F32H is f32's code and theirs. */
#define IR_JIT_DT(dt) (1u << (dt))
enum {
    IR_JIT_NONE = 0,
    IR_JIT_F32H = IR_JIT_DT(RLX_F32) | IR_JIT_DT(RLX_F16) | IR_JIT_DT(RLX_BF16),
    IR_JIT_FLOAT = IR_JIT_F32H | IR_JIT_DT(RLX_F64),
    IR_JIT_INT = IR_JIT_DT(RLX_BOOL) | IR_JIT_DT(RLX_I32) | IR_JIT_DT(RLX_I64) | IR_JIT_DT(RLX_I8) | IR_JIT_DT(RLX_U8) |
                 IR_JIT_DT(RLX_I16) | IR_JIT_DT(RLX_U32),
    IR_JIT_ALL = IR_JIT_INT | IR_JIT_FLOAT
};

typedef struct {
    const char *name;
    int arity; /* -1: variadic */
    ir_class cls;
    ir_emit emit;
    unsigned jit; /* IR_JIT_* */
    unsigned flags;
} ir_op_info;

extern const ir_op_info ir_ops[IR_OP_COUNT];

enum { IR_POOL_MAX = 0, IR_POOL_AVG = 1 };
/* SCATTER's mode: duplicates add up, or the last one in index order wins. */
enum { IR_SCATTER_ADD = 0, IR_SCATTER_SET = 1 };

/* Attributes, one typed struct per op family. Zero-filled before use so
 * that they hash and compare as bytes (the input name is compared apart). */
typedef struct {
    union {
        struct { double value; } cst;                            /* CONST */
        struct { double start, step; int axis; } iota;           /* IOTA */
        struct { uint64_t seed; int normal; } rand;              /* RAND */
        struct { int normal; rlx_dtype dtype; int rank; int64_t dims[IR_MAX_RANK]; } rands; /* RAND_SEEDED */
        struct { char *name; int64_t sym[IR_MAX_RANK]; } input;   /* INPUT, owns name; sym: a dynamic dim's symbol (<= -2), 0 anonymous */
        struct { uint32_t mask; } red;                           /* SUM..ARGMIN: reduced axes */
        struct { int axis; } ax;                                 /* CAT, GATHER */
        struct { int axis; int exclusive; } scan;                /* CUMSUM */
        struct { int axis; int descending; int64_t k; } sort;    /* ARGSORT: the first k positions */
        struct { uint64_t seed; int64_t samples; int replacement; } multinomial; /* MULTINOMIAL */
        struct { int axis; int mode; } scatter;                  /* SCATTER: mode IR_SCATTER_* */
        struct { rlx_dtype dtype; } cast;                        /* CAST */
        struct { int rank; int64_t dims[IR_MAX_RANK]; } shape;   /* RESHAPE, EXPAND */
        struct { int perm[IR_MAX_RANK]; } perm;                  /* PERMUTE: out axis i = in axis perm[i] */
        struct { int64_t before[IR_MAX_RANK], after[IR_MAX_RANK]; double value; } pad;
        struct { int64_t start[IR_MAX_RANK], step[IR_MAX_RANK], len[IR_MAX_RANK]; } slice;
        struct { int axis; int inverse; } fft;
        struct { int stride[2], pad[2], dil[2], groups; } conv;
        struct { int kind, kernel[2], stride[2], pad[2]; } pool;
        struct { int fmt, block; } quant;
        struct { int heads, kv_heads, head_dim, mask, window; double scale; } attn; /* ATTENTION: mask an rlx_mask */
    };
} ir_attrs;

/* A block of payload bytes with its own refcount; several nodes (a tensor
 * and views of it realized in place) may share one. */
typedef struct ir_storage {
    atomic_long refs;
    void *data;      /* borrows when free_fn is a user deleter, else owns */
    size_t bytes;
    void (*free_fn)(void *data, void *ctx);
    void *ctx;
} ir_storage;

typedef struct ir_node ir_node;
struct ir_node {
    atomic_long refs;
    ir_op op;
    rlx_dtype dtype;
    int rank;
    int64_t shape[IR_MAX_RANK];
    int nsrc;
    ir_node **src; /* owns one reference each; the array follows the node in its block */
    ir_attrs attr;
    uint64_t cons_hash;   /* identity: op, attrs, type and source pointers */
    ir_node *dead_next;   /* ir_release's list of nodes to free */
    bool consed;
    bool detached;        /* made by ir_make_detached: outside the live count */
    /* Realization: set once, published with release ordering. */
    _Atomic(ir_storage *) storage; /* owns one reference */
    size_t offset;                 /* bytes into storage->data */
};

/* dtype.c */
size_t ir_dtype_size(rlx_dtype dt);
bool ir_dtype_valid(int dt);
bool ir_dtype_is_float(rlx_dtype dt);
bool ir_dtype_is_int(rlx_dtype dt); /* any integer dtype (not bool) */
bool ir_dtype_is_unsigned(rlx_dtype dt); /* u8, u32 */
bool ir_dtype_is_index(rlx_dtype dt);    /* i32, i64: what gather, scatter and friends take */
/* f16, bf16, i8, u8, i16, u32: the dtypes library kernels do not take (the
 * tensor layer converts around them) and the JIT loads and stores by
 * converting. */
bool ir_dtype_is_narrow(rlx_dtype dt);
/* c64: neither float nor integer, so every float or integer check refuses
 * it unless it names complex (rlx.h lists what computes it). */
bool ir_dtype_is_complex(rlx_dtype dt);
/* The dtype of a complex dtype's parts: f32 for c64, f64 for c128. */
rlx_dtype ir_complex_part(rlx_dtype dt);
/* The ops that compute c64 (as a source or as their result): the others
 * refuse it in ir_infer, RLX_E_DTYPE from ir_make_failure. */
bool ir_c64_takes(ir_op op);
/* True when op refuses its sources for being c64 (a source is c64 and op
 * does not take it) or for not being c64 (conj, imag, complex). */
bool ir_c64_refuses(ir_op op, int nsrc, ir_node *const *src);
rlx_dtype ir_promote(rlx_dtype a, rlx_dtype b);
/* "f32", ...; "?" for a value that is not a dtype (records no error). */
const char *ir_dtype_name(rlx_dtype dt);
/* True when the library kernel of op computes dt itself: the wide dtypes,
 * bf16 matmul (oneDNN or widened blocks, runtime/kernels/blas.c) and the
 * i8/u8 weights of qmatmul (runtime/kernels/q8gemm.c); the
 * tensor layer widens other narrow sources around it (ts_make_lib). */
bool ir_lib_takes(ir_op op, rlx_dtype dt);
/* True when ops.def says the JIT computes op on dt in a LOOP kernel. */
bool ir_op_jits(ir_op op, rlx_dtype dt);

/* shape.c: helpers shared by the tensor layer and the passes. */
int64_t ir_numel(int rank, const int64_t *shape); /* -1 if a dim is dynamic */
bool ir_shape_bytes_ok(rlx_dtype dt, int rank, const int64_t *shape);
bool ir_shape_eq(int ra, const int64_t *a, int rb, const int64_t *b);
/* NumPy broadcast of two shapes into out (rank = max); false if they do not. */
bool ir_broadcast_shapes(int ra, const int64_t *a, int rb, const int64_t *b, int *rout, int64_t *out);
/* "[2,3]" into buf. */
const char *ir_shape_str(char *buf, size_t cap, int rank, const int64_t *shape);
/* Computes dtype and shape of a new node from its op, sources and attrs.
 * Returns false with a message in err when the invariants do not hold. */
bool ir_infer(ir_op op, int nsrc, ir_node *const *src, const ir_attrs *attr, rlx_dtype *dt,
              int *rank, int64_t *shape, char *err, size_t errcap);

/* node.c */
/* New node (new reference) or an existing identical one (retained).
 * Leaves give their type in dt/rank/shape; other ops infer it and ignore
 * those. Returns NULL on allocation failure or a broken invariant, with a
 * message in err. Sources are retained, not consumed. */
ir_node *ir_make(ir_op op, int nsrc, ir_node *const *src, const ir_attrs *attr, rlx_dtype dt,
                 int rank, const int64_t *shape, char *err, size_t errcap);
/* A realized leaf over storage (retained). Never hash-consed. */
ir_node *ir_make_buffer(ir_storage *st, size_t offset, rlx_dtype dt, int rank, const int64_t *shape);
/* A private copy of a node for a cache that keeps graphs of its own (the
 * JIT's plan cache): never hash-consed, so never shared with a user's
 * graph, and counted by ir_detached_nodes, not ir_live_nodes (which leak
 * tests compare). Sources should be detached too. st (retained) realizes
 * it, for a BUFFER; NULL otherwise. Types are taken as given (copies of
 * checked nodes): no shape rule runs. */
ir_node *ir_make_detached(ir_op op, int nsrc, ir_node *const *src, const ir_attrs *attr, rlx_dtype dt, int rank,
                          const int64_t *shape, ir_storage *st);
ir_node *ir_retain(ir_node *n);
void ir_release(ir_node *n); /* iterative: deep chains do not recurse */
ir_storage *ir_storage_new(void *data, size_t bytes, void (*free_fn)(void *, void *), void *ctx);
void ir_storage_retain(ir_storage *st);
void ir_storage_release(ir_storage *st);
extern ir_storage ir_storage_busy;
static inline ir_storage *ir_node_storage(const ir_node *n)
{
    ir_node *m = (ir_node *)(uintptr_t)n; /* reading the published payload does not modify n */
    ir_storage *st = atomic_load_explicit(&m->storage, memory_order_acquire);
    return st == &ir_storage_busy ? NULL : st;
}
/* Publishes the realized payload of n; takes one reference to st. A node
 * realized already keeps its payload and st is released. */
void ir_node_set_storage(ir_node *n, ir_storage *st, size_t offset);
static inline int64_t ir_node_numel(const ir_node *n) { return ir_numel(n->rank, n->shape); }
static inline size_t ir_node_bytes(const ir_node *n)
{
    return (size_t)ir_node_numel(n) * ir_dtype_size(n->dtype);
}
/* Number of live nodes (for leak tests). */
long ir_live_nodes(void);
long ir_detached_nodes(void); /* live detached nodes (cache tests) */

/* verify.c: checks every invariant of the graph under root. */
bool ir_verify(ir_node *root, char *err, size_t errcap);
/* The same over every root: RLX_E_INTERNAL for a broken invariant,
 * RLX_E_NOMEM when out of memory (message in err). */
rlx_status ir_verify_roots(ir_node *const *roots, int nroots, char *err, size_t errcap);
/* Why ir_make with these arguments returned NULL, from the arguments (not
 * its message): RLX_E_INTERNAL for a bad op, leaf type or broken rule,
 * RLX_E_SHAPE when the result (or a CAT's length) overflows, RLX_E_NOMEM
 * otherwise. */
rlx_status ir_make_failure(ir_op op, int nsrc, ir_node *const *src, const ir_attrs *attr, rlx_dtype dt, int rank,
                           const int64_t *shape);

/* Allocation hook for fault injection: when set, ir_alloc fails (NULL) on
 * the call where the countdown reaches zero. All of librlx allocates here. */
void *ir_alloc(size_t bytes);
void *ir_calloc(size_t n, size_t size);
void *ir_realloc(void *p, size_t bytes);
void ir_free(void *p);
void ir_alloc_fail_after(long n); /* -1 disables */
/* Counts as one allocation for the hook: true when it would fail. For
 * memory not taken through ir_alloc (aligned payloads). */
bool ir_alloc_injected_failure(void);

/* visit.c: a set of node pointers and a post-order walk, without recursion.
 * Both are ir_tables (table.h) keyed by the node's address; zero-filled
 * ({0}) is empty. */
typedef struct {
    ir_table t;
} ir_set;
/* Adds n; returns 1 if added, 0 if present, -1 when out of memory. */
int ir_set_add(ir_set *s, const ir_node *n);
bool ir_set_has(const ir_set *s, const ir_node *n);
void ir_set_free(ir_set *s);
/* A map from nodes to indices. */
typedef struct {
    ir_table t;
} ir_map;
int ir_map_put(ir_map *m, const ir_node *n, long value); /* 1 new, 0 updated, -1 out of memory */
long ir_map_get(const ir_map *m, const ir_node *n);     /* -1 when absent */
void ir_map_free(ir_map *m);
/* Nodes reachable from roots in post-order (sources before users), each
 * once; a walk stops at nodes for which stop(n, ctx) is true (they are
 * still listed). Returns the count, or -1 when out of memory. *out is
 * ir_alloc'ed; free it with ir_free. */
long ir_postorder(ir_node *const *roots, int nroots, bool (*stop)(const ir_node *, void *), void *ctx,
                  ir_node ***out);

#endif
