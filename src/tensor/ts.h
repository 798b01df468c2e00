/*
 * ts.h — the tensor layer's internals: handles, errors, scopes and the
 * node-building helpers every public function uses.
 *
 * A handle (rlx_tensor *) is an ir_node * whose refcount is the handle's.
 * Public functions check arguments here, at the edge, with messages naming
 * the function; below this layer values are trusted.
 *
 * Composites (softmax, attention, ...) are written with public calls inside
 * ts_open/ts_close: an internal scope that releases intermediates, and that
 * makes errors raised inside name the composite the user called.
 */
#ifndef RLX_TS_H
#define RLX_TS_H

#include <stdarg.h>

#include "ir/ir.h"
#include "rlx.h"

static inline ir_node *ts_node(rlx_tensor *t) { return (ir_node *)t; }

/* error.c: the one place failures are recorded (one breakpoint). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void ts_error(rlx_status st, const char *fn, const char *fmt, ...);
/* True when t is NULL; records RLX_E_ARG naming arg unless an error is
 * already recorded (NULL propagation keeps the first error). */
bool ts_null(const char *fn, const char *arg, const rlx_tensor *t);
/* Normalizes axis for rank (axis in [-rank, rank)); -1 and an error if not. */
int ts_axis(const char *fn, int axis, int rank);
/* x's node with axis normalized into *ax; NULL (error recorded) when x is
 * NULL or the axis is out of range. */
ir_node *ts_node_axis(const char *fn, rlx_tensor *x, int axis, int *ax);
/* Checks a user shape (rank 0..8, dims >= 0, or -1 when dynamic_ok, byte
 * size within int64). */
bool ts_check_shape(const char *fn, rlx_dtype dt, int rank, const int64_t *shape, bool dynamic_ok);
bool ts_check_dtype(const char *fn, int dt);
/* "[2,3]" of a node, in a thread-local ring of buffers (4 live at once). */
const char *ts_shape_str(const ir_node *n);
const char *ts_dims_str(int rank, const int64_t *shape);

/* handle.c */
/* Records n in the open scope and returns it as a handle; NULL passes. */
rlx_tensor *ts_wrap(ir_node *n);
bool ts_scope_reserve(void);
/* Internal scope for composites; fn names their errors. */
bool ts_open(const char *fn); /* false (error recorded) when out of memory */
/* Escapes result (may be NULL) from the internal scope, closes it, returns it. */
rlx_tensor *ts_close(rlx_tensor *result);
/* The composite currently building, or fn. */
const char *ts_fn(const char *fn);

/* Node helpers (new references, errors recorded under fn). */
ir_node *ts_make(const char *fn, ir_op op, int nsrc, ir_node *const *src, const ir_attrs *a);
ir_node *ts_leaf(const char *fn, ir_op op, const ir_attrs *a, rlx_dtype dt, int rank, const int64_t *shape);
/* x cast to dt; from c64 to a real dtype it refuses (RLX_E_DTYPE), so no
 * op drops an imaginary part it was not asked to drop. */
ir_node *ts_cast_node(const char *fn, ir_node *x, rlx_dtype dt);
/* As ts_cast_node, c64 to real included (the real part, rlx.h). */
ir_node *ts_cast_lossy(const char *fn, ir_node *x, rlx_dtype dt);
ir_node *ts_reshape_node(const char *fn, ir_node *x, int rank, const int64_t *shape);
/* Broadcasts x to shape (reshape to the rank, then expand). */
ir_node *ts_expand_node(const char *fn, ir_node *x, int rank, const int64_t *shape);
ir_node *ts_const_node(const char *fn, rlx_dtype dt, int rank, const int64_t *shape, double v);

/* Narrow dtypes (rlx.h): the dtype a library kernel or a composite
 * computes dt in: f16/bf16 in f32, i8/u8/i16/u32 in i64, others as they
 * are. */
rlx_dtype ts_wide_dtype(rlx_dtype dt);
/* The dtype float math on dt returns: dt when it is a float, else f32. */
rlx_dtype ts_float_dtype(rlx_dtype dt);
/* dt promoted with t's dtype; dt when t is NULL (an optional operand). */
rlx_dtype ts_promote_opt(rlx_dtype dt, rlx_tensor *t);
/* ts_make for a library primitive (an IR_EMIT_LIB row, whose shape rule
 * takes no narrow dtype): each narrow source is cast to its wide dtype,
 * the primitive made, and its result cast to back (the dtype the public
 * function's rule gives; no cast when it already has it). */
ir_node *ts_make_lib(const char *fn, ir_op op, int nsrc, ir_node *const *src, const ir_attrs *a, rlx_dtype back);

/* elementwise.c: the shared bodies of the unary and binary entry points. */
rlx_tensor *ts_unary(const char *fn, ir_op op, rlx_tensor *x);
/* x as a composite computes it: integers and bools in f32, like every
 * float math, f16/bf16 in f32 too (PyTorch's opmath), so a composite rounds
 * to the narrow dtype once, at ts_close_as. */
rlx_tensor *ts_as_float(rlx_tensor *x);
/* Casts result (may be NULL) to dt unless it has it, then ts_close. */
rlx_tensor *ts_close_as(rlx_tensor *result, rlx_dtype dt);
/* A real numeric (not bool, not c64) input; false with RLX_E_DTYPE naming
 * arg: the composites of real math (softmax, norms, activations, ...). */
bool ts_numeric(const char *fn, const char *arg, rlx_tensor *t);
rlx_tensor *ts_binary(const char *fn, ir_op op, rlx_tensor *a, rlx_tensor *b);
rlx_tensor *ts_binary_s(const char *fn, ir_op op, rlx_tensor *a, double s);

/* datamove.c: for k (i64) of x's rank, the flat positions in x of x[p with
 * its axis coordinate replaced by k[p]] (k's size-1 dims broadcast to 0):
 * NumPy take_along_axis as a gather of x's flattened elements. Any dim
 * may be dynamic: the strides that depend on one are computed when a
 * program binds it (ts_dims_value). */
rlx_tensor *ts_along_positions(const char *fn, rlx_tensor *k, int ax, const ir_node *x);
/* The i64 scalar product of x's dims [from, to): a constant when they are
 * static, else counted from the dynamic ones' positions when bound. */
rlx_tensor *ts_dims_value(const ir_node *x, int from, int to);

/* reduce.c: reduction over an axis mask (bit i = axis i); keepdim as rlx_sum. */
rlx_tensor *ts_reduce_mask(const char *fn, ir_op op, rlx_tensor *x, uint32_t mask, bool keepdim);
/* Parses (axes, naxes) into a mask; false with an error recorded. */
bool ts_axes_mask(const char *fn, int rank, const int *axes, int naxes, uint32_t *mask);

/* movement.c: a slice of a dynamic axis cannot know its start or length
 * while tracing, so its attrs there hold them relative to the size and a
 * program resolves them when it binds the size (ts_dyn_resolve). On a
 * dynamic axis: len -1 (start 0, step 1) takes it whole; len >= 0 is that
 * many elements from index start (checked against the size when bound);
 * len <= -2 is Python's start:stop:step with stop = ts_dyn_stop(len). An
 * index is a Python one (negative from the end, clamped as slices clamp)
 * within +-TS_DYN_IX, or a tagged one: TS_DYN_ROLL + s is size - (s mod
 * size) (rlx_roll), TS_DYN_CHUNK + (i << 31 | n) is where piece i of n
 * starts (rlx_chunk), TS_DYN_REST + (need << 29 | x) is size - x (x <
 * 2^28) or x - 2^28, for a size of at least need, or exactly need
 * with TS_DYN_EXACT set (else the slice does not fit; rlx_split). TS_DYN_PIECE + k is where piece k of a cat along the
 * axis starts (k = its piece count: its end), for a slice that reads the
 * cat itself or where(true, t, cat) (t in the cat's shape: its cotangent);
 * the program resolves it from the bound pieces (program.c), so a
 * gradient of a cat of several pieces of dynamic length is a slice. */
#define TS_DYN_IX ((int64_t)1 << 58)
#define TS_DYN_ROLL ((int64_t)1 << 60)
#define TS_DYN_CHUNK ((int64_t)1 << 61)
#define TS_DYN_REST ((int64_t)3 << 59)
#define TS_DYN_EXACT ((int64_t)1 << 57) /* in a TS_DYN_REST index: the size is need */
#define TS_DYN_PIECE ((int64_t)3 << 61) /* above every TS_DYN_CHUNK index */
static inline int64_t ts_dyn_len(int64_t stop) { return -2 - (stop + TS_DYN_IX); }
static inline int64_t ts_dyn_stop(int64_t len) { return -2 - len - TS_DYN_IX; }
/* Resolves the slice (*start, *step, *len) of a dynamic axis for size dim
 * into a static one; false when it does not fit dim. */
bool ts_dyn_resolve(int64_t dim, int64_t *start, int64_t *step, int64_t *len);
/* The slice start:stop:step (TS_DYN_* indices) of the dynamic axis ax of n. */
ir_node *ts_dyn_range(const char *fn, ir_node *n, int ax, int64_t start, int64_t stop, int64_t step);

/* program.c: how a program rebuilds reshape(traced, dims) with dynamic
 * dims for bound sizes: 1 when the non-1 dims are the source's in order
 * (they move with it), 2 when exactly one target dim is dynamic and the
 * others' product *known > 0 (it is inferred from the count), 3 when the
 * leading and trailing dims traced equal (dynamic ones too) move with the
 * source and the middle follows rule 1 or 2 or is static, with as many
 * dynamic dims on both sides (no dynamic dim merged or split), else 0 (it
 * cannot be rebuilt). */
int ts_reshape_rule(const ir_node *traced, int rank, const int64_t *dims, int64_t *known);

/* movement.c: whether n is a reshape whose target names symbols (attrs
 * dims <= -2, rlx_reshape; its traced shape has -1 there): a program
 * takes those dims from the inputs that carry the symbols. */
bool ts_reshape_names_symbol(const ir_node *n);
/* Whether n is a nonzero constant, through reshapes and broadcasts (the
 * condition of where(true, a, ref), how full_like and the gradients
 * follow a dynamic shape). */
bool ts_const_true(const ir_node *n);
/* The node a reshape of x is made over (ts_reshape_node): x's source when
 * x is a reshape (a reshape of a reshape is one), x itself when x names
 * symbols or goes back to a value's bound dims (a gradient through a
 * reshape of dynamic dims): a reshape over its source could not rebuild
 * x's dims. */
ir_node *ts_reshape_base(const ir_node *x);

/* construct.c: x broadcast to ref's shape, which may have dynamic dims (a
 * program resolves them with ref's); NULL with the error recorded. */
ir_node *ts_expand_like(const char *fn, ir_node *x, ir_node *ref);
/* rlx_rand_seeded's f32 U[0,1) values, dynamic (-1) dims allowed: a mask
 * traced over a program's dynamic dims (norm.c's dropout), which the
 * program makes in the bound shape (program.c, instantiate). */
rlx_tensor *ts_rand_seeded_traced(const char *fn, int rank, const int64_t *shape, rlx_tensor *seed);

/* realize.c */
rlx_status ts_realize_nodes(const char *fn, ir_node *const *nodes, int n);

#endif
