/*
 * blas.c — the library-call primitives MATMUL and SOLVE, through CBLAS and
 * LAPACKE. This is the only file of librlx that includes their headers.
 *
 * Matmul operands arrive as strided views with equal batch dims. A float
 * matrix whose last two dims are row-major or column-major with a usable
 * leading dimension goes to gemm as it is (a transposed or sliced view is
 * CblasTrans / a leading dimension, not a copy); any other layout
 * (broadcast rows, negative or odd strides) is packed once per distinct
 * matrix, so a batch dim of stride 0 is never copied per batch. A batch
 * whose b is the same matrix for every item and whose a rows are evenly
 * spaced is one gemm of batch*m rows. Other batches run as parallel
 * single-threaded gemms on our pool, or one after the other, each split
 * in blocks over the pool (rules at use_pool, mm_blocks). Tiny products skip BLAS for a plain loop (knob
 * small_matmul, default SMALL_MATMUL_FLOPS). A block of one row (m = 1,
 * as in decoding) is a gemv (mm_gemv). Integer matmul is a plain
 * loop with wrapping int64 accumulation.
 *
 * bf16 products (bf16 in and out, f32 accumulation, rounded once) go to
 * oneDNN's matmul when the build has it (RLX_HAVE_DNNL: its AVX512-BF16
 * kernels, about 3.6x cblas_sgemm at 2048^3 here), one oneDNN thread per
 * block of our split; without oneDNN, on a CPU where it declines, or with
 * the knob bf16_gemm 1, each block is converted to f32, multiplied by
 * sgemm and rounded. f16 products (oneDNN 2.6 has no f16 matmul without
 * AVX512-FP16) convert panels of F16_KC inner indices with F16C for sgemm
 * and round the f32 block once (f16_block): no widened operand copies.
 *
 * Solve factors with getrf and finishes with two trsm (trsv for one
 * column) on the output, which starts as a copy of b: a row-major a is
 * factored as the column-major a^T it already is, so neither a nor b is
 * ever transposed. Batches split like matmul's. A singular matrix is
 * RLX_E_LINALG naming its (first) batch index.
 *
 * Threads: matmul runs OpenBLAS at one thread and spreads batch items or
 * blocks of one f32 product over our pool (the realization's thread count,
 * rt_threads; rule at mm_blocks), so its threads and ours never run
 * at the same time. Solve sets OpenBLAS's count before every call region,
 * to our budget for threaded calls and to 1 inside our pool's regions.
 */
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include <cblas.h>
#include <lapacke.h>
#ifdef RLX_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
void omp_set_num_threads(int n); /* libgomp, oneDNN's threading runtime */
#endif

#include "runtime/exec/pool.h"
#include "passes/knobs.h"
#include "runtime/rt.h"

/* ------------------------------------------------------------ threads */

int rt_blas_threads(int n)
{
    int prev = openblas_get_num_threads();
    if (n >= 1 && n != prev)
        openblas_set_num_threads(n);
    return prev;
}

/* ------------------------------------------------------------ oneDNN */

#ifdef RLX_HAVE_DNNL
static dnnl_engine_t dnnl_cpu_engine;
static pthread_once_t dnnl_once = PTHREAD_ONCE_INIT;
/* A oneDNN matmul made for one shape, layout and alpha/beta, with its
 * memory objects (pointed at the operands per call). */
typedef struct {
    dnnl_data_type_t dt;
    int64_t dims[8]; /* m, n, k, ars, acs, brs, bcs, ldc */
    float alpha, beta;
    dnnl_primitive_t prim;
    dnnl_memory_t mem[4]; /* a, b, c, and its scratchpad (NULL when it needs none) */
    size_t scratch_bytes;
    uint64_t used; /* the cache's clock at the last call: 0 when empty */
} dnnl_mm;

/* Each thread's last DNNL_MM_KEEP matmuls and its stream. Making a matmul
 * (descriptors, primitive descriptor, a primitive cache lookup, memory
 * objects, a stream) per call took W10a's step from 1.09 to 1.20x its
 * GEMMs' time (rlx-bench-w10 --config a, RLX_BENCH_GEMM=onednn); a thread
 * sees few shapes, so a small table per thread keeps them, freed when the
 * thread exits. Each primitive would own a
 * scratchpad of its own (oneDNN's default): kept, they grew W10a's peak
 * memory by 16 MiB; they share the thread's one buffer instead. */
enum { DNNL_MM_KEEP = 32 };
typedef struct {
    dnnl_stream_t stream;
    uint64_t clock;
    void *scratch; /* the largest scratchpad the table's matmuls need */
    size_t scratch_cap;
    dnnl_mm e[DNNL_MM_KEEP];
} dnnl_mm_cache;

static pthread_key_t dnnl_mm_key;

static void dnnl_mm_clear(dnnl_mm *e)
{
    for (int i = 0; i < 4; i++)
        if (e->mem[i])
            dnnl_memory_destroy(e->mem[i]);
    if (e->prim)
        dnnl_primitive_destroy(e->prim);
    memset(e, 0, sizeof *e);
}

static void dnnl_mm_cache_free(void *p)
{
    dnnl_mm_cache *c = p;
    for (int i = 0; i < DNNL_MM_KEEP; i++)
        dnnl_mm_clear(&c->e[i]);
    if (c->stream)
        dnnl_stream_destroy(c->stream);
    ir_free(c->scratch);
    ir_free(c);
}

static void dnnl_init(void)
{
    if (dnnl_engine_create(&dnnl_cpu_engine, dnnl_cpu, 0) != dnnl_success ||
        pthread_key_create(&dnnl_mm_key, dnnl_mm_cache_free) != 0)
        dnnl_cpu_engine = NULL;
}

/* Makes e's primitive and memory objects for its key; false when oneDNN
 * declines (no kernel for this CPU, no memory). Alpha is an output scale,
 * beta a sum post-op. */
static bool dnnl_mm_make(dnnl_mm *e)
{
    const int64_t *d = e->dims;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t amd, bmd, cmd;
    dnnl_matmul_desc_t mmd;
    bool ok = dnnl_primitive_attr_create(&attr) == dnnl_success &&
              dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
              (e->alpha == 1 || dnnl_primitive_attr_set_output_scales(attr, 1, 0, &e->alpha) == dnnl_success) &&
              (e->beta == 0 || (dnnl_post_ops_create(&post) == dnnl_success &&
                                dnnl_post_ops_append_sum(post, e->beta) == dnnl_success &&
                                dnnl_primitive_attr_set_post_ops(attr, post) == dnnl_success)) &&
              dnnl_memory_desc_init_by_strides(&amd, 2, (dnnl_dims_t){d[0], d[2]}, e->dt, (dnnl_dims_t){d[3], d[4]}) ==
                  dnnl_success &&
              dnnl_memory_desc_init_by_strides(&bmd, 2, (dnnl_dims_t){d[2], d[1]}, e->dt, (dnnl_dims_t){d[5], d[6]}) ==
                  dnnl_success &&
              dnnl_memory_desc_init_by_strides(&cmd, 2, (dnnl_dims_t){d[0], d[1]}, e->dt, (dnnl_dims_t){d[7], 1}) ==
                  dnnl_success &&
              dnnl_matmul_desc_init(&mmd, &amd, &bmd, NULL, &cmd) == dnnl_success &&
              dnnl_primitive_desc_create(&pd, &mmd, attr, dnnl_cpu_engine, NULL) == dnnl_success &&
              dnnl_primitive_create(&e->prim, pd) == dnnl_success &&
              dnnl_memory_create(&e->mem[0], &amd, dnnl_cpu_engine, DNNL_MEMORY_NONE) == dnnl_success &&
              dnnl_memory_create(&e->mem[1], &bmd, dnnl_cpu_engine, DNNL_MEMORY_NONE) == dnnl_success &&
              dnnl_memory_create(&e->mem[2], &cmd, dnnl_cpu_engine, DNNL_MEMORY_NONE) == dnnl_success;
    const dnnl_memory_desc_t *smd = ok ? dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0) : NULL;
    e->scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (ok && e->scratch_bytes)
        ok = dnnl_memory_create(&e->mem[3], smd, dnnl_cpu_engine, DNNL_MEMORY_NONE) == dnnl_success;
    if (post)
        dnnl_post_ops_destroy(post);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return ok;
}

/* C = alpha A B + beta C: A (m x k) with strides (ars, acs), B (k x n)
 * with (brs, bcs), C (m x n, row stride ldc), all of oneDNN type dt (f32,
 * or bf16 with f32 accumulation), through oneDNN's matmul at one thread;
 * false when oneDNN declines (no kernel for this CPU, no memory: nothing
 * written then). The matmul comes from this thread's table (dnnl_mm_cache)
 * or is made and kept there in place of the least recently used. */
static bool onednn_matmul(dnnl_data_type_t dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t ars,
                          int64_t acs, const void *b, int64_t brs, int64_t bcs, void *c, int64_t ldc, double alpha,
                          double beta)
{
    pthread_once(&dnnl_once, dnnl_init);
    if (!dnnl_cpu_engine)
        return false;
    dnnl_mm_cache *tc = pthread_getspecific(dnnl_mm_key);
    if (!tc) {
        if (!(tc = ir_calloc(1, sizeof *tc)))
            return false;
        if (dnnl_stream_create(&tc->stream, dnnl_cpu_engine, dnnl_stream_default_flags) != dnnl_success ||
            pthread_setspecific(dnnl_mm_key, tc) != 0) {
            dnnl_mm_cache_free(tc);
            return false;
        }
    }
    dnnl_mm key = {.dt = dt, .dims = {m, n, k, ars, acs, brs, bcs, ldc}, .alpha = (float)alpha, .beta = (float)beta};
    dnnl_mm *e = NULL, *old = &tc->e[0];
    for (int i = 0; i < DNNL_MM_KEEP && !e; i++) {
        dnnl_mm *x = &tc->e[i];
        if (x->used && x->dt == dt && !memcmp(x->dims, key.dims, sizeof key.dims) && x->alpha == key.alpha &&
            x->beta == key.beta)
            e = x;
        else if (x->used < old->used)
            old = x;
    }
    if (!e) {
        dnnl_mm_clear(old);
        *old = key;
        if (!dnnl_mm_make(old)) {
            dnnl_mm_clear(old);
            return false;
        }
        e = old;
    }
    e->used = ++tc->clock;
    if (e->scratch_bytes > tc->scratch_cap) {
        void *grown = ir_alloc(e->scratch_bytes);
        if (!grown)
            return false;
        ir_free(tc->scratch);
        tc->scratch = grown;
        tc->scratch_cap = e->scratch_bytes;
    }
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, e->mem[0]},
                               {DNNL_ARG_WEIGHTS, e->mem[1]},
                               {DNNL_ARG_DST, e->mem[2]},
                               {DNNL_ARG_SCRATCHPAD, e->mem[3]}};
    omp_set_num_threads(1); /* this thread's OpenMP teams: our pool owns the cores */
    return (!e->mem[3] || dnnl_memory_set_data_handle(e->mem[3], tc->scratch) == dnnl_success) &&
           dnnl_memory_set_data_handle(e->mem[0], (void *)(uintptr_t)a) == dnnl_success &&
           dnnl_memory_set_data_handle(e->mem[1], (void *)(uintptr_t)b) == dnnl_success &&
           dnnl_memory_set_data_handle(e->mem[2], c) == dnnl_success &&
           dnnl_primitive_execute(e->prim, tc->stream, e->mem[3] ? 4 : 3, args) == dnnl_success &&
           dnnl_stream_wait(tc->stream) == dnnl_success;
}
#endif

/* Knob f32_gemm: 1 OpenBLAS, 2 oneDNN where the build has it, 0 (auto)
 * oneDNN on CPUs with AVX-512 (its brgemm kernels), where it measured
 * 1.8-2.1x cblas_sgemm at one thread here (Haswell kernels, the preset
 * OPENBLAS_CORETYPE on this EPYC): 2048^3 and every W6/W10 product shape,
 * each engine called alone, interleaved, best of 7. The steps: rlx-bench-w6
 * and rlx-bench-w10 (RLX_BENCH_GEMM=onednn for a oneDNN GEMM-only
 * reference). Elsewhere OpenBLAS: not measured. */
static bool f32_through_onednn(long knob)
{
#ifdef RLX_HAVE_DNNL
    return knob == 2 || (knob == 0 && __builtin_cpu_supports("avx512f"));
#else
    (void)knob;
    return false;
#endif
}

bool rt_gemm_onednn(rt_ctx *ctx)
{
    return f32_through_onednn(knob_value(sched_knobs(ctx), KNOB_F32_GEMM, KCLASS_ANY, -1));
}

/* ---------------------------------------------------------- plain gemm */

void rt_gemm(rlx_dtype dt, bool onednn, bool trans_b, int m, int n, int k, double alpha, const void *a, int lda,
             const void *b, int ldb, double beta, void *c, int ldc)
{
    enum CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
#ifdef RLX_HAVE_DNNL
    if (dt == RLX_F32 && onednn && m > 0 && n > 0 && k > 0 &&
        onednn_matmul(dnnl_f32, m, n, k, a, lda, 1, b, trans_b ? 1 : ldb, trans_b ? ldb : 1, c, ldc, alpha, beta))
        return;
#else
    (void)onednn;
#endif
    if (dt == RLX_F32)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, (float)alpha, a, lda, b, ldb, (float)beta, c, ldc);
    else
        cblas_dgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* ------------------------------------------------------------- matmul */

/* At or below this many multiply-adds per product (m*n*k) the plain loop
 * beats the call into OpenBLAS. Measured (loop at -O3, same process, one
 * OpenBLAS thread): square 2^3 and 4^3 take 0.4-0.8x the time of
 * sgemm/dgemm, 6^3 is even, 8^3 and up are 1.2-3x slower as the loop. */
enum { SMALL_MATMUL_FLOPS = 128 };

/* Batches run on our pool as parallel single-threaded calls (no sync
 * inside a call, each thread on its own item) when the items share out
 * evenly over the threads (at most 1/8 idle in the last round) or are too
 * small for a threaded call to scale (< 128^3 multiply-adds, or solve
 * n < 128); otherwise one after the other as threaded calls. Measured on
 * 2 cores, paired rounds, threaded time / pool time: 64 x 128^3 1.15,
 * 16 x 256^3 1.08, 4 x 1024^3 0.99, 2 x 1024^3 1.30, but 3 x 512^3 0.80
 * (the pool's last round leaves a core idle). */
static bool use_pool(int64_t batches, int t, bool small_items)
{
    if (batches < 2 || t < 2)
        return false;
    int64_t rounds = (batches + t - 1) / t;
    return small_items || rounds * t * 8 <= batches * 9;
}
#define MM_POOL_SMALL_ITEM (128.0 * 128 * 128)

/* One operand of a batched product, normalized for gemm. */
typedef struct {
    const char *p;            /* data of element 0 */
    int64_t off;              /* element offset of batch 0 */
    int64_t bst[IR_MAX_RANK]; /* batch strides */
    enum CBLAS_TRANSPOSE tr;  /* NoTrans: row-major with ld; Trans: column-major with ld */
    int64_t ld;
    void *owned; /* packed copy, if any */
} mm_opnd;

typedef struct {
    rlx_dtype dt;
    int nb;
    int64_t bshape[IR_MAX_RANK];
    int64_t m, k, n;
    int64_t small; /* m*n*k at or below which the plain loop runs */
    int threads;   /* the realization's thread budget */
    bool widen_bf16; /* knob bf16_gemm: bf16 blocks through sgemm, not oneDNN */
    bool onednn_f32; /* knob f32_gemm: f32 blocks through oneDNN, not sgemm */
    bool gemv_rows;  /* f32/f64 rows of one: our gemv (mm_gemv) where the layout fits */
    mm_opnd a, b;
    char *c; /* contiguous [batch, m, n] */
    _Atomic bool nomem_flag;
    _Atomic bool *nomem; /* &nomem_flag: set when a bf16/f16 block found no scratch memory */
} mm_plan;

static bool have_gemv_rows(void); /* (the gemv section) */

/* Element offset of batch item bi (row-major over bshape[0..nb)) of an
 * operand starting at off with batch strides bst. */
static int64_t batch_offset(int nb, const int64_t *bshape, const int64_t *bst, int64_t off, int64_t bi)
{
    for (int d = nb - 1; d >= 0 && bi > 0; d--) {
        off += (bi % bshape[d]) * bst[d];
        bi /= bshape[d];
    }
    return off;
}

static int64_t batch_off(const mm_plan *pl, const mm_opnd *o, int64_t bi)
{
    return batch_offset(pl->nb, pl->bshape, o->bst, o->off, bi);
}

/* Sets o up for a rows x cols matrix of view v (batch strides first, then
 * the matrix strides sr, sc): in place when one stride is 1 and the other a
 * valid leading dimension, else packed row-major once per distinct matrix
 * (batch dims of stride 0 stay shared). */
static rlx_status mm_operand(rt_ctx *ctx, mm_plan *pl, mm_opnd *o, const rt_view *v, int64_t rows, int64_t cols)
{
    int nb = pl->nb;
    int64_t sr = v->strides[nb], sc = v->strides[nb + 1];
    size_t es = ir_dtype_size(pl->dt);
    memset(o, 0, sizeof *o);
    o->p = v->st->data;
    o->off = v->off;
    memcpy(o->bst, v->strides, (size_t)nb * sizeof *o->bst);
    /* A stride along a dim of size 1 is never used: any value will do. */
    int64_t rsr = rows == 1 ? (cols > 1 ? cols : 1) : sr, rsc = cols == 1 ? 1 : sc;
    if (rsc == 1 && rsr >= (cols > 1 ? cols : 1) && rsr <= INT_MAX) {
        o->tr = CblasNoTrans;
        o->ld = rsr;
        return RLX_OK;
    }
    int64_t tsr = rows == 1 ? 1 : sr, tsc = cols == 1 ? (rows > 1 ? rows : 1) : sc;
    if (tsr == 1 && tsc >= (rows > 1 ? rows : 1) && tsc <= INT_MAX) {
        o->tr = CblasTrans;
        o->ld = tsc;
        return RLX_OK;
    }
    /* Packed: distinct matrices only, in batch order. */
    int64_t distinct = 1, pst[IR_MAX_RANK];
    for (int d = nb - 1; d >= 0; d--) {
        bool shared = v->strides[d] == 0 || pl->bshape[d] == 1;
        pst[d] = shared ? 0 : distinct * rows * cols;
        if (!shared)
            distinct *= pl->bshape[d];
    }
    char *dst = ir_alloc((size_t)(distinct * rows * cols) * es);
    if (!dst)
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory packing a matmul operand");
    rt_count_copy((uint64_t)(distinct * rows * cols) * es);
    int64_t dshape[IR_MAX_RANK], dstr[IR_MAX_RANK];
    int dn = 0;
    for (int d = 0; d < nb; d++)
        if (pst[d] != 0) {
            dshape[dn] = pl->bshape[d];
            dstr[dn++] = v->strides[d];
        }
    const char *src = v->st->data;
    for (int64_t q = 0; q < distinct; q++) {
        int64_t off = v->off, rem = q;
        for (int d = dn - 1; d >= 0; d--) {
            off += (rem % dshape[d]) * dstr[d];
            rem /= dshape[d];
        }
        char *mat = dst + q * rows * cols * (int64_t)es;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                memcpy(mat + (i * cols + j) * (int64_t)es, src + (off + i * sr + j * sc) * (int64_t)es, es);
    }
    o->p = dst;
    o->owned = dst;
    o->off = 0;
    memcpy(o->bst, pst, (size_t)nb * sizeof *pst);
    o->tr = CblasNoTrans;
    o->ld = cols > 1 ? cols : 1;
    return RLX_OK;
}

/* When every item multiplies the same b and the rows of a are evenly
 * spaced across the batch, the batch is one tall product. */
static void mm_fold(mm_plan *pl)
{
    if (pl->nb == 0 || pl->a.tr != CblasNoTrans)
        return;
    int64_t expect = pl->m * pl->a.ld;
    for (int d = pl->nb - 1; d >= 0; d--) {
        if (pl->bshape[d] == 1)
            continue;
        if (pl->b.bst[d] != 0 || pl->a.bst[d] != expect)
            return;
        expect *= pl->bshape[d];
    }
    int64_t batches = ir_numel(pl->nb, pl->bshape);
    if (batches * pl->m > INT_MAX)
        return;
    pl->m *= batches;
    pl->nb = 0;
}

static void mm_free(mm_plan *pl)
{
    ir_free(pl->a.owned);
    ir_free(pl->b.owned);
}

/* Builds the plan of n over in (out's data c, contiguous). */
static rlx_status mm_prepare(rt_ctx *ctx, const ir_node *n, const rt_view *in, char *c, mm_plan *pl)
{
    int r = n->rank;
    memset(pl, 0, sizeof *pl);
    pl->dt = n->dtype;
    pl->nb = r - 2;
    memcpy(pl->bshape, n->shape, (size_t)pl->nb * sizeof *pl->bshape);
    pl->m = n->src[0]->shape[r - 2];
    pl->k = n->src[0]->shape[r - 1];
    pl->n = n->shape[r - 1];
    pl->c = c;
    pl->nomem = &pl->nomem_flag;
    long kv = knob_value(sched_knobs(ctx), KNOB_SMALL_MATMUL, KCLASS_ANY, -1); /* 0: the measured default */
    pl->threads = rt_threads(ctx); /* our budget: the same one the JIT's kernels use */
    pl->small = kv > 0 ? kv : SMALL_MATMUL_FLOPS;
    pl->widen_bf16 = knob_value(sched_knobs(ctx), KNOB_BF16_GEMM, KCLASS_ANY, -1) == 1;
    pl->onednn_f32 = rt_gemm_onednn(ctx);
    pl->gemv_rows = (pl->dt == RLX_F32 || pl->dt == RLX_F64) && have_gemv_rows() &&
                    knob_value(sched_knobs(ctx), KNOB_GEMV, KCLASS_ANY, -1) != 1;
    if (pl->m > INT_MAX || pl->k > INT_MAX || pl->n > INT_MAX)
        return rt_fail(ctx, RLX_E_UNSUPPORTED, "matmul dims %lld x %lld x %lld exceed the BLAS int range",
                       (long long)pl->m, (long long)pl->k, (long long)pl->n);
    if (mm_operand(ctx, pl, &pl->a, &in[0], pl->m, pl->k) || mm_operand(ctx, pl, &pl->b, &in[1], pl->k, pl->n)) {
        mm_free(pl);
        return ctx->status;
    }
    return RLX_OK;
}

/* Plain kernels for products too small for a BLAS call to pay off (a
 * deliberate C loop, not a BLAS replacement): c = a @ b for an m x n
 * block, a element (i, p) at a[i*ars + p*acs], b (p, j) at b[p*brs + j*bcs].
 * Accumulates in the operand type, like gemm. */
#define SMALL_KERNEL(name, T)                                                                                          \
    static void name(int64_t m, int64_t n, int64_t k, const T *a, int64_t ars, int64_t acs, const T *b, int64_t brs,   \
                     int64_t bcs, T *c, int64_t ldc)                                                                    \
    {                                                                                                                  \
        for (int64_t i = 0; i < m; i++) {                                                                              \
            T *ci = c + i * ldc;                                                                                       \
            const T *ai = a + i * ars;                                                                                 \
            if (bcs == 1) { /* rows of b are contiguous: accumulate whole rows of c */                                 \
                for (int64_t j = 0; j < n; j++)                                                                        \
                    ci[j] = 0;                                                                                         \
                for (int64_t p = 0; p < k; p++) {                                                                      \
                    T av = ai[p * acs];                                                                                \
                    const T *bp = b + p * brs;                                                                         \
                    for (int64_t j = 0; j < n; j++)                                                                    \
                        ci[j] += av * bp[j];                                                                           \
                }                                                                                                      \
            } else { /* columns of b are contiguous: dot products */                                                   \
                for (int64_t j = 0; j < n; j++) {                                                                      \
                    const T *bj = b + j * bcs;                                                                         \
                    T s = 0;                                                                                           \
                    for (int64_t p = 0; p < k; p++)                                                                    \
                        s += ai[p * acs] * bj[p * brs];                                                                \
                    ci[j] = s;                                                                                         \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }
SMALL_KERNEL(small_f32, float)
SMALL_KERNEL(small_f64, double)

/* The 16-bit float small kernel: f32 accumulation, one rounding per element. */
static void small_half(rlx_dtype dt, int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t ars, int64_t acs,
                       const uint16_t *b, int64_t brs, int64_t bcs, uint16_t *c, int64_t ldc)
{
    bool bf = dt == RLX_BF16;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float s = 0;
            for (int64_t p = 0; p < k; p++) {
                uint16_t x = a[i * ars + p * acs], y = b[p * brs + j * bcs];
                s += bf ? ir_bf16_to_f32(x) * ir_bf16_to_f32(y) : (float)ir_f16_value(x) * (float)ir_f16_value(y);
            }
            c[i * ldc + j] = bf ? ir_f32_to_bf16(s) : ir_f16_bits(s);
        }
}

/* ------------------------------------------------- f16 blocks for sgemm */

/* f16 <-> f32 runs of memory, with F16C where the CPU has it (vcvtph2ps,
 * vcvtps2ph: 8 values an instruction) else ir/cast.h's rounding. A NaN
 * stores as the quiet NaN of its sign without payload, as the reference
 * stores it (vcvtps2ph keeps the payload: fixed after). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define F16_TARGET __attribute__((target("avx2,f16c")))
F16_TARGET static void f16_to_f32_hw(const uint16_t *s, float *d, int64_t len)
{
    int64_t i = 0;
    for (; i + 8 <= len; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(s + i))));
    for (; i < len; i++)
        d[i] = (float)ir_f16_value(s[i]);
}
F16_TARGET static void f32_to_f16_hw(const float *s, uint16_t *d, int64_t len)
{
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) {
        __m256 x = _mm256_loadu_ps(s + i);
        __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        /* NaN lanes: sign | 0x7e00 */
        __m256i un = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
        __m128i nan = _mm_packs_epi32(_mm256_castsi256_si128(un), _mm256_extracti128_si256(un, 1));
        __m128i q = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16((short)0x8000)), _mm_set1_epi16(0x7e00));
        _mm_storeu_si128((__m128i *)(void *)(d + i), _mm_blendv_epi8(h, q, nan));
    }
    for (; i < len; i++)
        d[i] = ir_f16_bits(s[i]);
}
static bool have_f16c(void) { return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2"); }
#else
static void f16_to_f32_hw(const uint16_t *s, float *d, int64_t len) { (void)s, (void)d, (void)len; }
static void f32_to_f16_hw(const float *s, uint16_t *d, int64_t len) { (void)s, (void)d, (void)len; }
static bool have_f16c(void) { return false; }
#endif

static void f16_to_f32_run(const uint16_t *s, float *d, int64_t len)
{
    if (have_f16c()) {
        f16_to_f32_hw(s, d, len);
        return;
    }
    for (int64_t i = 0; i < len; i++)
        d[i] = (float)ir_f16_value(s[i]);
}

static void f32_to_f16_run(const float *s, uint16_t *d, int64_t len)
{
    if (have_f16c()) {
        f32_to_f16_hw(s, d, len);
        return;
    }
    for (int64_t i = 0; i < len; i++)
        d[i] = ir_f16_bits(s[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* bf16 to f32 is a 16-bit shift: 16 values an instruction pair (the
 * kernels convert short rows, where the scalar loop was measured to cost
 * a third of a W10a attention call) */
__attribute__((target("avx512f"))) static void bf16_to_f32_avx512(const uint16_t *s, float *d, int64_t len)
{
    int64_t i = 0;
    for (; i + 16 <= len; i += 16)
        _mm512_storeu_si512((void *)(d + i),
                            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(s + i))), 16));
    for (; i < len; i++)
        d[i] = ir_bf16_to_f32(s[i]);
}
static bool have_avx512(void) { return __builtin_cpu_supports("avx512f"); }
#else
static void bf16_to_f32_avx512(const uint16_t *s, float *d, int64_t len) { (void)s, (void)d, (void)len; }
static bool have_avx512(void) { return false; }
#endif

void rt_half_to_f32(rlx_dtype dt, const void *src, float *dst, int64_t len)
{
    const uint16_t *s = src;
    if (dt == RLX_F16) {
        f16_to_f32_run(s, dst, len);
        return;
    }
    if (have_avx512()) {
        bf16_to_f32_avx512(s, dst, len);
        return;
    }
    for (int64_t i = 0; i < len; i++)
        dst[i] = ir_bf16_to_f32(s[i]);
}

void rt_f32_to_half(rlx_dtype dt, const float *src, void *dst, int64_t len)
{
    uint16_t *d = dst;
    if (dt == RLX_F16) {
        f32_to_f16_run(src, d, len);
        return;
    }
    for (int64_t i = 0; i < len; i++)
        d[i] = ir_f32_to_bf16(src[i]);
}

/* k-panel of the f16 path: bounds its f32 copies of a and b (m x 256 and
 * 256 x n) while sgemm's own packing still sees whole cache blocks */
enum { F16_KC = 256 };

/* An f16 block: per panel of F16_KC inner indices, the a and b panels are
 * converted to f32 (F16C, contiguous runs: a transposed operand stays
 * transposed, sgemm reads it as such) and sgemm adds their product into an
 * f32 block of c, rounded to f16 once at the end. Nothing is widened
 * whole: scratch is m*n + (m + n)*F16_KC floats. False: no memory. */
static bool f16_block(int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t ars, int64_t acs, const uint16_t *b,
                      int64_t brs, int64_t bcs, uint16_t *c, int64_t ldc)
{
    int64_t kc = k < F16_KC ? k : F16_KC;
    float *c32 = ir_alloc((size_t)(m * n + (m + n) * kc) * sizeof(float));
    if (!c32)
        return false;
    float *a32 = c32 + m * n, *b32 = a32 + m * kc;
    bool arow = acs == 1, brow = bcs == 1; /* else ars == 1 / brs == 1 (mm_operand) */
    for (int64_t p0 = 0; p0 < k; p0 += kc) {
        int64_t w = k - p0 < kc ? k - p0 : kc;
        if (arow) /* [m][w] */
            for (int64_t i = 0; i < m; i++)
                f16_to_f32_run(a + i * ars + p0, a32 + i * w, w);
        else /* column-major [w][m] */
            for (int64_t p = 0; p < w; p++)
                f16_to_f32_run(a + (p0 + p) * acs, a32 + p * m, m);
        if (brow) /* [w][n] */
            for (int64_t p = 0; p < w; p++)
                f16_to_f32_run(b + (p0 + p) * brs, b32 + p * n, n);
        else /* column-major [n][w] */
            for (int64_t j = 0; j < n; j++)
                f16_to_f32_run(b + j * bcs + p0, b32 + j * w, w);
        cblas_sgemm(CblasRowMajor, arow ? CblasNoTrans : CblasTrans, brow ? CblasNoTrans : CblasTrans, (int)m, (int)n,
                    (int)w, 1.0f, a32, arow ? (int)w : (int)m, b32, brow ? (int)n : (int)w, p0 ? 1.0f : 0.0f, c32,
                    (int)n);
    }
    for (int64_t i = 0; i < m; i++)
        f32_to_f16_run(c32 + i * n, c + i * ldc, n);
    ir_free(c32);
    return true;
}

#ifdef RLX_HAVE_DNNL
/* The objects of one oneDNN convolution call, destroyed together. */
typedef struct {
    dnnl_primitive_desc_t pd[4]; /* conv, then reorders of x, w, y */
    dnnl_primitive_t prim[4];
    dnnl_memory_t mem[6]; /* x, w, y as given; x, w, y in the conv's layouts */
    dnnl_stream_t stream;
} dnnl_conv_objs;

/* Reorders memory src (layout from) into a new memory of layout to, set in
 * objs at slot i (primitive) and mem[3 + what]; the result is *dst. When
 * the layouts agree the memory is used as it is. */
static bool dnnl_reorder_into(dnnl_conv_objs *o, int i, int what, dnnl_memory_t src, const dnnl_memory_desc_t *from,
                              const dnnl_memory_desc_t *to, dnnl_memory_t *dst)
{
    if (dnnl_memory_desc_equal(from, to)) {
        *dst = src;
        return true;
    }
    if (dnnl_memory_create(&o->mem[3 + what], to, dnnl_cpu_engine, DNNL_MEMORY_ALLOCATE) != dnnl_success ||
        dnnl_reorder_primitive_desc_create(&o->pd[i], from, dnnl_cpu_engine, to, dnnl_cpu_engine, NULL) !=
            dnnl_success ||
        dnnl_primitive_create(&o->prim[i], o->pd[i]) != dnnl_success)
        return false;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, o->mem[3 + what]}};
    *dst = o->mem[3 + what];
    return dnnl_primitive_execute(o->prim[i], o->stream, 2, args) == dnnl_success;
}

bool rt_dnnl_conv_bf16(const void *x, const int64_t xd[4], const int64_t xs[4], const void *w, const int64_t wd[4],
                       const int64_t ws[4], void *y, const int64_t yd[4], int groups, const int stride[2],
                       const int pad[2], const int dil[2], int nthreads)
{
    pthread_once(&dnnl_once, dnnl_init);
    if (!dnnl_cpu_engine || !__builtin_cpu_supports("avx512bf16"))
        return false;
    int64_t g = groups, og = wd[0] / g;
    int wr = groups > 1 ? 5 : 4; /* grouped weights: [G, O/G, C/G, KH, KW] */
    dnnl_dims_t wdims = {g, og, wd[1], wd[2], wd[3]}, wstr = {og * ws[0], ws[0], ws[1], ws[2], ws[3]};
    const int64_t *wdp = wr == 5 ? wdims : wdims + 1, *wsp = wr == 5 ? wstr : wstr + 1;
    dnnl_dims_t st = {stride[0], stride[1]}, di = {dil[0] - 1, dil[1] - 1}, pl = {pad[0], pad[1]}, pr;
    for (int i = 0; i < 2; i++) /* the right padding that gives floor's output size */
        pr[i] = (yd[2 + i] - 1) * stride[i] + (int64_t)dil[i] * (wd[2 + i] - 1) + 1 - xd[2 + i] - pad[i];
    dnnl_dims_t xdd = {0}, xss = {0}, ydd = {0}; /* oneDNN reads whole dnnl_dims_t arrays */
    memcpy(xdd, xd, 4 * sizeof *xd);
    memcpy(xss, xs, 4 * sizeof *xs);
    memcpy(ydd, yd, 4 * sizeof *yd);
    xd = xdd, xs = xss, yd = ydd;
    dnnl_memory_desc_t ux, uw, uy, ax, aw, ay;
    dnnl_convolution_desc_t cd;
    dnnl_conv_objs o;
    memset(&o, 0, sizeof o);
    bool ok = dnnl_memory_desc_init_by_strides(&ux, 4, xd, dnnl_bf16, xs) == dnnl_success &&
              dnnl_memory_desc_init_by_strides(&uw, wr, wdp, dnnl_bf16, wsp) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&uy, 4, yd, dnnl_bf16, dnnl_nchw) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&ax, 4, xd, dnnl_bf16, dnnl_format_tag_any) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&aw, wr, wdp, dnnl_bf16, dnnl_format_tag_any) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&ay, 4, yd, dnnl_bf16, dnnl_format_tag_any) == dnnl_success &&
              dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &ax,
                                                         &aw, NULL, &ay, st, di, pl, pr) == dnnl_success &&
              dnnl_primitive_desc_create(&o.pd[0], &cd, NULL, dnnl_cpu_engine, NULL) == dnnl_success &&
              dnnl_primitive_create(&o.prim[0], o.pd[0]) == dnnl_success &&
              dnnl_stream_create(&o.stream, dnnl_cpu_engine, dnnl_stream_default_flags) == dnnl_success &&
              dnnl_memory_create(&o.mem[0], &ux, dnnl_cpu_engine, (void *)(uintptr_t)x) == dnnl_success &&
              dnnl_memory_create(&o.mem[1], &uw, dnnl_cpu_engine, (void *)(uintptr_t)w) == dnnl_success &&
              dnnl_memory_create(&o.mem[2], &uy, dnnl_cpu_engine, y) == dnnl_success;
    dnnl_memory_t cx = NULL, cw = NULL, cy = NULL;
    if (ok) {
        omp_set_num_threads(nthreads < 1 ? 1 : nthreads); /* one call over the whole batch: oneDNN's threads */
        const dnnl_memory_desc_t *wx = dnnl_primitive_desc_query_md(o.pd[0], dnnl_query_src_md, 0);
        const dnnl_memory_desc_t *ww = dnnl_primitive_desc_query_md(o.pd[0], dnnl_query_weights_md, 0);
        const dnnl_memory_desc_t *wy = dnnl_primitive_desc_query_md(o.pd[0], dnnl_query_dst_md, 0);
        ok = wx && ww && wy && dnnl_reorder_into(&o, 1, 0, o.mem[0], &ux, wx, &cx) &&
             dnnl_reorder_into(&o, 2, 1, o.mem[1], &uw, ww, &cw);
        if (ok && dnnl_memory_desc_equal(&uy, wy)) {
            cy = o.mem[2];
        } else if (ok) {
            ok = dnnl_memory_create(&o.mem[5], wy, dnnl_cpu_engine, DNNL_MEMORY_ALLOCATE) == dnnl_success;
            cy = o.mem[5];
        }
        if (ok) {
            dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, cx}, {DNNL_ARG_WEIGHTS, cw}, {DNNL_ARG_DST, cy}};
            ok = dnnl_primitive_execute(o.prim[0], o.stream, 3, args) == dnnl_success;
        }
        if (ok && cy != o.mem[2]) { /* back to NCHW */
            dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, cy}, {DNNL_ARG_TO, o.mem[2]}};
            ok = dnnl_reorder_primitive_desc_create(&o.pd[3], wy, dnnl_cpu_engine, &uy, dnnl_cpu_engine, NULL) ==
                     dnnl_success &&
                 dnnl_primitive_create(&o.prim[3], o.pd[3]) == dnnl_success &&
                 dnnl_primitive_execute(o.prim[3], o.stream, 2, args) == dnnl_success;
        }
        ok = ok && dnnl_stream_wait(o.stream) == dnnl_success;
        omp_set_num_threads(1);
    }
    for (int i = 0; i < 6; i++)
        dnnl_memory_destroy(o.mem[i]);
    dnnl_stream_destroy(o.stream);
    for (int i = 0; i < 4; i++) {
        dnnl_primitive_destroy(o.prim[i]);
        dnnl_primitive_desc_destroy(o.pd[i]);
    }
    return ok;
}
#else
bool rt_dnnl_conv_bf16(const void *x, const int64_t xd[4], const int64_t xs[4], const void *w, const int64_t wd[4],
                       const int64_t ws[4], void *y, const int64_t yd[4], int groups, const int stride[2],
                       const int pad[2], const int dil[2], int nthreads)
{
    (void)x, (void)xd, (void)xs, (void)w, (void)wd, (void)ws, (void)y, (void)yd, (void)groups, (void)stride;
    (void)pad, (void)dil, (void)nthreads;
    return false;
}
#endif

/* A bf16 block the plain way: operands widened to f32, sgemm, rounded. */
static bool f32_bf16(int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t ars, int64_t acs, const uint16_t *b,
                     int64_t brs, int64_t bcs, uint16_t *c, int64_t ldc)
{
    float *a32 = ir_alloc((size_t)(m * k + k * n + m * n) * sizeof(float));
    if (!a32)
        return false;
    float *b32 = a32 + m * k, *c32 = b32 + k * n;
    for (int64_t i = 0; i < m; i++)
        for (int64_t p = 0; p < k; p++)
            a32[i * k + p] = ir_bf16_to_f32(a[i * ars + p * acs]);
    for (int64_t p = 0; p < k; p++)
        for (int64_t j = 0; j < n; j++)
            b32[p * n + j] = ir_bf16_to_f32(b[p * brs + j * bcs]);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a32, (int)k, b32, (int)n,
                0.0f, c32, (int)n);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            c[i * ldc + j] = ir_f32_to_bf16(c32[i * n + j]);
    ir_free(a32);
    return true;
}

/* ------------------------------------------------------------- gemv */

/* c[j] = w[j, :] . x for j < n: w row-major n x k with rows ld apart (a
 * linear's weight, or the tied classifier's embedding), x contiguous. The
 * m = 1 products of decoding are weight streaming: each weight is read
 * once, so the kernel should run at the rate a plain loop reads memory.
 * cblas_sgemv does not here (OpenBLAS 0.3.21, Haswell kernels on this
 * EPYC): over the 43 products of a Llama-shaped decode step (288x288,
 * 768x288, 288x768, 32000x288; 60.8 MB) it takes 1.5-1.8x the time of a
 * loop summing the same bytes, this kernel 0.95-1.1x (bench/bench_w11.c
 * --gemv, interleaved rounds). GEMV_ROWS rows share each load of x and run
 * as independent accumulators; a row's sum takes the same steps (lane p
 * mod W, a masked tail, one tree reduction) whether it runs in a group or
 * alone, so its bits do not depend on how the rows are split in blocks. */
enum { GEMV_ROWS = 8 };

#if defined(__x86_64__) && defined(__GNUC__)
#define GEMV_TARGET __attribute__((target("avx512f,fma")))
/* (named accumulators: an array of vectors could live on the stack) */
#define GEMV_BODY(T, V, ZERO, LOAD, MLOAD, FMA, REDUCE, MASK_T, W)                                                    \
    const int64_t kv = k / W * W;                                                                                      \
    const MASK_T tm = (MASK_T)((1u << (k - kv)) - 1);                                                                  \
    int64_t j = 0;                                                                                                     \
    for (; j + GEMV_ROWS <= n; j += GEMV_ROWS) {                                                                       \
        const T *r0 = w + j * ld, *r1 = r0 + ld, *r2 = r1 + ld, *r3 = r2 + ld, *r4 = r3 + ld, *r5 = r4 + ld,           \
                *r6 = r5 + ld, *r7 = r6 + ld;                                                                          \
        V a0 = ZERO(), a1 = ZERO(), a2 = ZERO(), a3 = ZERO(), a4 = ZERO(), a5 = ZERO(), a6 = ZERO(), a7 = ZERO();       \
        for (int64_t p = 0; p < kv; p += W) {                                                                          \
            V xv = LOAD(x + p);                                                                                        \
            a0 = FMA(LOAD(r0 + p), xv, a0), a1 = FMA(LOAD(r1 + p), xv, a1);                                            \
            a2 = FMA(LOAD(r2 + p), xv, a2), a3 = FMA(LOAD(r3 + p), xv, a3);                                            \
            a4 = FMA(LOAD(r4 + p), xv, a4), a5 = FMA(LOAD(r5 + p), xv, a5);                                            \
            a6 = FMA(LOAD(r6 + p), xv, a6), a7 = FMA(LOAD(r7 + p), xv, a7);                                            \
        }                                                                                                              \
        if (tm) {                                                                                                      \
            V xv = MLOAD(tm, x + kv);                                                                                  \
            a0 = FMA(MLOAD(tm, r0 + kv), xv, a0), a1 = FMA(MLOAD(tm, r1 + kv), xv, a1);                                \
            a2 = FMA(MLOAD(tm, r2 + kv), xv, a2), a3 = FMA(MLOAD(tm, r3 + kv), xv, a3);                                \
            a4 = FMA(MLOAD(tm, r4 + kv), xv, a4), a5 = FMA(MLOAD(tm, r5 + kv), xv, a5);                                \
            a6 = FMA(MLOAD(tm, r6 + kv), xv, a6), a7 = FMA(MLOAD(tm, r7 + kv), xv, a7);                                \
        }                                                                                                              \
        c[j] = REDUCE(a0), c[j + 1] = REDUCE(a1), c[j + 2] = REDUCE(a2), c[j + 3] = REDUCE(a3);                        \
        c[j + 4] = REDUCE(a4), c[j + 5] = REDUCE(a5), c[j + 6] = REDUCE(a6), c[j + 7] = REDUCE(a7);                    \
    }                                                                                                                  \
    for (; j < n; j++) {                                                                                               \
        const T *r0 = w + j * ld;                                                                                      \
        V a0 = ZERO();                                                                                                 \
        for (int64_t p = 0; p < kv; p += W)                                                                            \
            a0 = FMA(LOAD(r0 + p), LOAD(x + p), a0);                                                                   \
        if (tm)                                                                                                        \
            a0 = FMA(MLOAD(tm, r0 + kv), MLOAD(tm, x + kv), a0);                                                       \
        c[j] = REDUCE(a0);                                                                                             \
    }

GEMV_TARGET static void gemv_rows_f32(int64_t n, int64_t k, const float *w, int64_t ld, const float *x, float *c)
{
    GEMV_BODY(float, __m512, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_maskz_loadu_ps, _mm512_fmadd_ps,
              _mm512_reduce_add_ps, __mmask16, 16)
}

GEMV_TARGET static void gemv_rows_f64(int64_t n, int64_t k, const double *w, int64_t ld, const double *x, double *c)
{
    GEMV_BODY(double, __m512d, _mm512_setzero_pd, _mm512_loadu_pd, _mm512_maskz_loadu_pd, _mm512_fmadd_pd,
              _mm512_reduce_add_pd, __mmask8, 8)
}

static bool have_gemv_rows(void) { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"); }
#else
static void gemv_rows_f32(int64_t n, int64_t k, const float *w, int64_t ld, const float *x, float *c)
{
    (void)n, (void)k, (void)w, (void)ld, (void)x, (void)c;
}
static void gemv_rows_f64(int64_t n, int64_t k, const double *w, int64_t ld, const double *x, double *c)
{
    (void)n, (void)k, (void)w, (void)ld, (void)x, (void)c;
}
static bool have_gemv_rows(void) { return false; }
#endif

/* One row of c (m = 1, n columns starting at cp) as a matrix-vector
 * product: gemv streams b once, where gemm packs it first. Measured here
 * (one OpenBLAS thread, best of 7): the m = 1 products of a Llama decode
 * step (288x288, 768x288, 288x768, 32000x288) take 1.9-2.4 ms through
 * sgemv against 5.2-6.0 ms through sgemm. A weight read as w^T with a
 * contiguous a row takes our kernel (gemv_rows_*, unless the knob gemv
 * is 1); other layouts OpenBLAS's gemv. a's row has stride acs. */
static void mm_gemv(const mm_plan *pl, int64_t n, int64_t k, const char *ap, int64_t acs, const char *bp, char *cp)
{
    const mm_opnd *B = &pl->b;
    if (pl->gemv_rows && B->tr == CblasTrans && acs == 1) {
        if (pl->dt == RLX_F32)
            gemv_rows_f32(n, k, (const float *)(const void *)bp, B->ld, (const float *)(const void *)ap,
                          (float *)(void *)cp);
        else
            gemv_rows_f64(n, k, (const double *)(const void *)bp, B->ld, (const double *)(const void *)ap,
                          (double *)(void *)cp);
        return;
    }
    /* b column-major (a linear's weight w [n, k] read as w^T): c = w a, w
     * row-major n x k; b row-major k x n: c = b^T a. */
    enum CBLAS_TRANSPOSE t = B->tr == CblasTrans ? CblasNoTrans : CblasTrans;
    int rows = (int)(B->tr == CblasTrans ? n : k), cols = (int)(B->tr == CblasTrans ? k : n);
    if (pl->dt == RLX_F32)
        cblas_sgemv(CblasRowMajor, t, rows, cols, 1.0f, (const float *)(const void *)bp, (int)B->ld,
                    (const float *)(const void *)ap, (int)acs, 0.0f, (float *)(void *)cp, 1);
    else
        cblas_dgemv(CblasRowMajor, t, rows, cols, 1.0, (const double *)(const void *)bp, (int)B->ld,
                    (const double *)(const void *)ap, (int)acs, 0.0, (double *)(void *)cp, 1);
}

/* Rows [i0, i1) and columns [j0, j1) of batch item bi (or of the folded
 * product). */
static void mm_block(const mm_plan *pl, int64_t bi, int64_t i0, int64_t i1, int64_t j0, int64_t j1)
{
    size_t es = ir_dtype_size(pl->dt);
    int64_t m = i1 - i0, k = pl->k, n = j1 - j0, ldc = pl->n;
    if (m <= 0 || n <= 0)
        return;
    const mm_opnd *A = &pl->a, *B = &pl->b;
    /* Row i of a starts at i * ld (row-major) or i (column-major); column
     * j of b at j (row-major) or j * ld (column-major). */
    int64_t aoff = batch_off(pl, A, bi) + i0 * (A->tr == CblasNoTrans ? A->ld : 1);
    int64_t boff = batch_off(pl, B, bi) + j0 * (B->tr == CblasNoTrans ? 1 : B->ld);
    const char *ap = A->p + aoff * (int64_t)es, *bp = B->p + boff * (int64_t)es;
    char *cp = pl->c + ((bi * pl->m + i0) * ldc + j0) * (int64_t)es;
    if (k == 0) {
        for (int64_t i = 0; i < m; i++)
            memset(cp + i * ldc * (int64_t)es, 0, (size_t)n * es);
        return;
    }
    int64_t ars = A->tr == CblasNoTrans ? A->ld : 1, acs = A->tr == CblasNoTrans ? 1 : A->ld;
    int64_t brs = B->tr == CblasNoTrans ? B->ld : 1, bcs = B->tr == CblasNoTrans ? 1 : B->ld;
    bool small = (double)m * (double)n * (double)k <= (double)pl->small; /* in double: no overflow */
    if (pl->dt == RLX_BF16 || pl->dt == RLX_F16) {
        const uint16_t *a16 = (const uint16_t *)(const void *)ap, *b16 = (const uint16_t *)(const void *)bp;
        uint16_t *c16 = (uint16_t *)(void *)cp;
        if (small)
            small_half(pl->dt, m, n, k, a16, ars, acs, b16, brs, bcs, c16, ldc);
        else if (pl->dt == RLX_F16) {
            if (!f16_block(m, n, k, a16, ars, acs, b16, brs, bcs, c16, ldc))
                *pl->nomem = true;
        }
#ifdef RLX_HAVE_DNNL
        else if (!pl->widen_bf16 && onednn_matmul(dnnl_bf16, m, n, k, a16, ars, acs, b16, brs, bcs, c16, ldc, 1, 0))
            ;
#endif
        else if (!f32_bf16(m, n, k, a16, ars, acs, b16, brs, bcs, c16, ldc))
            *pl->nomem = true;
        return;
    }
    if (small) {
        if (pl->dt == RLX_F32)
            small_f32(m, n, k, (const float *)ap, ars, acs, (const float *)bp, brs, bcs, (float *)cp, ldc);
        else
            small_f64(m, n, k, (const double *)ap, ars, acs, (const double *)bp, brs, bcs, (double *)cp, ldc);
        return;
    }
    if (m == 1) {
        mm_gemv(pl, n, k, ap, acs, bp, cp);
        return;
    }
#ifdef RLX_HAVE_DNNL
    if (pl->dt == RLX_F32 && pl->onednn_f32 && onednn_matmul(dnnl_f32, m, n, k, ap, ars, acs, bp, brs, bcs, cp, ldc, 1, 0))
        return;
#endif
    if (pl->dt == RLX_F32)
        cblas_sgemm(CblasRowMajor, A->tr, B->tr, (int)m, (int)n, (int)k, 1.0f, (const float *)ap, (int)A->ld,
                    (const float *)bp, (int)B->ld, 0.0f, (float *)cp, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, A->tr, B->tr, (int)m, (int)n, (int)k, 1.0, (const double *)ap, (int)A->ld,
                    (const double *)bp, (int)B->ld, 0.0, (double *)cp, (int)ldc);
}

static void mm_rows(const mm_plan *pl, int64_t bi, int64_t i0, int64_t i1) { mm_block(pl, bi, i0, i1, 0, pl->n); }

/* A product of at least 2 * SPLIT_BLOCK_MNK multiply-adds runs as blocks
 * on our pool, each a single-threaded gemm over a range of the longer of
 * its rows and columns (the other operand is packed once per block, so few
 * blocks). Never OpenBLAS's own threads: after a call they spin-wait,
 * competing with our pool's workers for the cores, their static split
 * waits for a thread whose core another process holds (on our pool the
 * caller takes a block no idle worker has taken), and threaded dgemm
 * gives other bits than one thread.
 * The blocks depend on the shape only (at most SPLIT_BLOCKS, also at one
 * thread), so each element comes from the same gemm call whatever the
 * thread count. Splitting by thread count with aligned block starts is
 * not enough: with OpenBLAS's Haswell kernels (OPENBLAS_CORETYPE=Haswell
 * on this EPYC) a row split is bitwise only at multiples of 24 and a
 * column split at no alignment tried (16 to 192); dgemm's Skylake-X kernel
 * gives other bits near a block's last rows (400 x 300 x 200 split at row
 * 208). One thread pays for the extra calls: 2048^3 in 4 row blocks costs
 * +1%, 512 x 256 x 768 +4% against one call (Haswell kernels, best of 5).
 * tests/test_threads.c checks both dtypes. */
/* Block starts stay multiples of SPLIT_ALIGN rows or columns (whole
 * 64-byte lines of f32 output rows). */
enum { SPLIT_BLOCK_MNK = 1 << 21, SPLIT_ALIGN = 16, SPLIT_BLOCKS = 4 };
/* Below SPLIT_WIDE_MNK multiply-adds a product runs as at most 2 blocks:
 * each block repacks the operand it does not split, which costs the mid-
 * size products of the training steps far more than the 1% above.
 * Measured (cblas_sgemm, 1 thread, CPU time, best of 15; 2 / 4 blocks
 * over one call): W10a's 1024 x 128..512 x 128..512 products +0.2-1.3% /
 * +0.9-2.8%, its weight gradients (128 x 128 x 1024) +3% / +14%; W6's
 * +1.0-1.6% / +3.6-5.1%; W10b's (256..1024 x 256..1024 x 256..1024)
 * +0.6-2.9% / +1.5-7.6%.
 * Two blocks still keep two cores busy; products from 256M on (W10b's
 * largest, 268M) keep 4 for more cores. In the steps (1 thread, CPU time,
 * same process, new / old rule, load 5-7): W10a 0.980-0.984 (one run of
 * three 1.003), W6 0.970-0.971, W10b 0.977 (rlx-bench-threads --split-ab,
 * rlx-w10-plan --profile --ab-split). rt_blas_set_wide_split changes it
 * (0: the old rule). */
#define SPLIT_WIDE_MNK (256.0 * 1024 * 1024)
static _Atomic long long split_wide_mnk = (long long)SPLIT_WIDE_MNK;

void rt_blas_set_wide_split(long long mnk) { split_wide_mnk = mnk < 0 ? (long long)SPLIT_WIDE_MNK : mnk; }

typedef struct {
    const mm_plan *pl;
    int64_t bi, ext; /* the item, and the rows or columns of a block */
    bool by_rows;
} mm_split;

/* The blocks of item bi: their count, *sp set up. */
static int64_t mm_blocks(const mm_plan *pl, int64_t bi, mm_split *sp)
{
    double mnk = (double)pl->m * (double)pl->n * (double)pl->k;
    int64_t nblk = mnk < (double)split_wide_mnk ? 2 : SPLIT_BLOCKS;
    if (mnk < (double)nblk * SPLIT_BLOCK_MNK)
        nblk = (int64_t)(mnk / SPLIT_BLOCK_MNK);
    bool by_rows = pl->m >= pl->n;
    int64_t len = by_rows ? pl->m : pl->n;
    int64_t ext = (len + nblk - 1) / (nblk > 0 ? nblk : 1);
    ext = (ext + SPLIT_ALIGN - 1) / SPLIT_ALIGN * SPLIT_ALIGN;
    *sp = (mm_split){pl, bi, ext, by_rows};
    return nblk < 2 || ext >= len ? 1 : (len + ext - 1) / ext;
}

static void mm_split_blocks(void *const *bufs, const double *consts, int64_t lo, int64_t hi)
{
    (void)consts;
    const mm_split *sp = bufs[0];
    const mm_plan *pl = sp->pl;
    for (int64_t b = lo; b < hi; b++) {
        int64_t a0 = b * sp->ext, lim = sp->by_rows ? pl->m : pl->n;
        int64_t a1 = a0 + sp->ext < lim ? a0 + sp->ext : lim;
        if (sp->by_rows)
            mm_block(pl, sp->bi, a0, a1, 0, pl->n);
        else
            mm_block(pl, sp->bi, 0, pl->m, a0, a1);
    }
}

/* Item bi on up to t threads of our pool (OpenBLAS at one thread); t 1:
 * on the calling thread. */
static void mm_item(const mm_plan *pl, int64_t bi, int t)
{
    mm_split sp;
    int64_t nblk = mm_blocks(pl, bi, &sp);
    if (nblk == 1) {
        mm_rows(pl, bi, 0, pl->m);
        return;
    }
    void *bufs[1] = {&sp};
    if (t > 1)
        rt_pool_run(mm_split_blocks, bufs, NULL, nblk, 1, t);
    else
        mm_split_blocks(bufs, NULL, 0, nblk);
}

/* Pool body: bufs[0] is the plan; [lo, hi) are batch items. */
static void mm_pool_items(void *const *bufs, const double *consts, int64_t lo, int64_t hi)
{
    (void)consts;
    const mm_plan *pl = bufs[0];
    for (int64_t bi = lo; bi < hi; bi++)
        mm_item(pl, bi, 1);
}

/* Runs every item of pl with the threading the rule picks. */
static void mm_run(mm_plan *pl)
{
    int64_t batches = ir_numel(pl->nb, pl->bshape);
    int t = pl->threads;
    /* Our threads over items or blocks, one OpenBLAS thread each: never 2 x 2. */
    int prev = rt_blas_threads(1);
    if (use_pool(batches, t, (double)pl->m * (double)pl->n * (double)pl->k < MM_POOL_SMALL_ITEM)) {
        void *bufs[1] = {pl};
        int64_t chunk = (batches + 4 * t - 1) / (4 * t);
        rt_pool_run(mm_pool_items, bufs, NULL, batches, chunk, t);
    } else {
        for (int64_t bi = 0; bi < batches; bi++)
            mm_item(pl, bi, t);
    }
    rt_blas_threads(prev);
}

/* Integer matmul of one batch: wrapping int64 accumulation, like the rest
 * of the integer domain. */
static void int_matmul(void *dst, int64_t doff, rlx_dtype dt, const rt_view *a, int64_t aoff, const int64_t *as,
                       const rt_view *b, int64_t boff, const int64_t *bs, int64_t m, int64_t k, int64_t n)
{
    const void *ap = a->st->data, *bp = b->st->data;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            uint64_t acc = 0;
            for (int64_t p = 0; p < k; p++)
                acc += (uint64_t)rt_ld_i(ap, dt, aoff + i * as[0] + p * as[1]) *
                       (uint64_t)rt_ld_i(bp, dt, boff + p * bs[0] + j * bs[1]);
            rt_st_i(dst, dt, doff + i * n + j, (int64_t)acc);
        }
    }
}

static void int_matmul_all(const ir_node *n, const rt_view *in, rt_view *out)
{
    int r = n->rank, nb = r - 2;
    int64_t m = n->src[0]->shape[r - 2], k = n->src[0]->shape[r - 1], nc = n->shape[r - 1];
    int64_t batches = ir_numel(nb, n->shape);
    const int64_t *strides[2] = {in[0].strides, in[1].strides};
    rt_iter it;
    rt_iter_init(&it, nb, n->shape, 2, strides);
    it.off[0] = in[0].off;
    it.off[1] = in[1].off;
    for (int64_t bi = 0; bi < batches; bi++, rt_iter_next(&it))
        int_matmul(out->st->data, bi * m * nc, n->dtype, &in[0], it.off[0], in[0].strides + nb, &in[1], it.off[1],
                   in[1].strides + nb, m, k, nc);
}

/* c64 and c128 matmul (rlx.h): each batch's operands packed contiguous
 * (any strides, broadcast batches included) and one cblas_cgemm (c64) or
 * cblas_zgemm (c128). */
static rlx_status complex_matmul_all(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    int r = n->rank, nb = r - 2;
    int64_t m = n->src[0]->shape[r - 2], k = n->src[0]->shape[r - 1], nc = n->shape[r - 1];
    int64_t batches = ir_numel(nb, n->shape), es = (int64_t)ir_dtype_size(n->dtype);
    char *a = ir_alloc((size_t)(m * k * es)), *b = ir_alloc((size_t)(k * nc * es));
    if (!a || !b) {
        ir_free(a);
        ir_free(b);
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory packing a %s matmul operand", ir_dtype_name(n->dtype));
    }
    const int64_t *strides[2] = {in[0].strides, in[1].strides};
    const int64_t *as = in[0].strides + nb, *bs = in[1].strides + nb;
    const char *ap = in[0].st->data, *bp = in[1].st->data;
    rt_iter it;
    rt_iter_init(&it, nb, n->shape, 2, strides);
    it.off[0] = in[0].off;
    it.off[1] = in[1].off;
    const float one_f[2] = {1, 0}, zero_f[2] = {0, 0};
    const double one_d[2] = {1, 0}, zero_d[2] = {0, 0};
    char *dst = out->st->data;
    for (int64_t bi = 0; bi < batches; bi++, rt_iter_next(&it)) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t p = 0; p < k; p++)
                memcpy(a + es * (i * k + p), ap + es * (it.off[0] + i * as[0] + p * as[1]), (size_t)es);
        for (int64_t p = 0; p < k; p++)
            for (int64_t j = 0; j < nc; j++)
                memcpy(b + es * (p * nc + j), bp + es * (it.off[1] + p * bs[0] + j * bs[1]), (size_t)es);
        char *c = dst + es * bi * m * nc;
        if (n->dtype == RLX_C128)
            cblas_zgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)nc, (int)k, one_d, a, (int)k, b,
                        (int)nc, zero_d, c, (int)nc);
        else
            cblas_cgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)nc, (int)k, one_f, a, (int)k, b,
                        (int)nc, zero_f, c, (int)nc);
    }
    ir_free(a);
    ir_free(b);
    return RLX_OK;
}

rlx_status rt_eval_matmul(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    int r = n->rank;
    int64_t k = n->src[0]->shape[r - 1];
    bool fl = ir_dtype_is_float(n->dtype);
    /* Zero-filled only when nothing overwrites it: an empty inner dim. */
    if (rt_alloc_out(ctx, n, out, k == 0))
        return ctx->status;
    if (ir_node_numel(n) == 0 || k == 0)
        return RLX_OK;
    if (ir_dtype_is_complex(n->dtype)) {
        if (n->src[0]->shape[r - 2] > INT_MAX || k > INT_MAX || n->shape[r - 1] > INT_MAX)
            return rt_fail(ctx, RLX_E_UNSUPPORTED, "%s matmul dims exceed the BLAS int range", ir_dtype_name(n->dtype));
        return complex_matmul_all(ctx, n, in, out);
    }
    if (!fl) {
        int_matmul_all(n, in, out);
        return RLX_OK;
    }
    mm_plan pl;
    if (mm_prepare(ctx, n, in, out->st->data, &pl))
        return ctx->status;
    mm_fold(&pl);
    mm_run(&pl);
    mm_free(&pl);
    return pl.nomem_flag ? rt_fail(ctx, RLX_E_NOMEM, "out of memory for a bf16/f16 matmul block") : RLX_OK;
}

rlx_status rt_matmul_rows(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out, int64_t row_begin,
                          int64_t row_end)
{
    int r = n->rank;
    int64_t m = n->src[0]->shape[r - 2], total = ir_numel(r - 2, n->shape) * m;
    if (!ir_dtype_is_float(n->dtype) || row_begin < 0 || row_end > total || row_begin > row_end)
        return rt_fail(ctx, RLX_E_INTERNAL, "rt_matmul_rows: rows [%lld, %lld) of %lld %s rows", (long long)row_begin,
                       (long long)row_end, (long long)total, ir_dtype_name(n->dtype));
    if (row_begin == row_end || n->shape[r - 1] == 0)
        return RLX_OK;
    mm_plan pl;
    if (mm_prepare(ctx, n, in, rt_base(out, n->dtype), &pl))
        return ctx->status;
    if (row_begin == 0 && row_end == total) { /* all of it: as rt_eval_matmul runs it */
        mm_fold(&pl);
        mm_run(&pl);
        mm_free(&pl);
        return pl.nomem_flag ? rt_fail(ctx, RLX_E_NOMEM, "out of memory for a bf16/f16 matmul block") : RLX_OK;
    }
    /* The rows of batch item bi are [bi*m, (bi+1)*m) of the flattened
     * output; a block may start and end inside an item. */
    for (int64_t row = row_begin; row < row_end;) {
        int64_t bi = row / m, i0 = row - bi * m, i1 = row_end - bi * m < m ? row_end - bi * m : m;
        mm_rows(&pl, bi, i0, i1);
        row = bi * m + i1;
    }
    mm_free(&pl);
    return pl.nomem_flag ? rt_fail(ctx, RLX_E_NOMEM, "out of memory for a bf16/f16 matmul block") : RLX_OK;
}

/* -------------------------------------------------------------- solve */

typedef struct {
    rlx_dtype dt;
    int nb;
    int64_t bshape[IR_MAX_RANK];
    int64_t n, k;
    const rt_view *in;
    char *x; /* contiguous [batch, n, k] */
    pthread_mutex_t lock;
    int64_t bad;  /* lowest failing batch item, guarded by lock; -1 none */
    int bad_info; /* its getrf info (> 0 singular, < 0 bad argument) */
    bool nomem;   /* a chunk could not get its scratch, guarded by lock */
} sv_plan;

static int64_t view_batch_off(const sv_plan *pl, const rt_view *v, int64_t bi)
{
    return batch_offset(pl->nb, pl->bshape, v->strides, v->off, bi);
}

/* Records a failure of item bi (info INT_MIN: out of memory). */
static void sv_note(sv_plan *pl, int64_t bi, int info)
{
    pthread_mutex_lock(&pl->lock);
    if (info == INT_MIN)
        pl->nomem = true;
    else if (pl->bad < 0 || bi < pl->bad) {
        pl->bad = bi;
        pl->bad_info = info;
    }
    pthread_mutex_unlock(&pl->lock);
}

/* One triangular solve on x (row-major n x k): trsv for one column, which
 * is what getrs itself does for one right-hand side (trsm with k = 1
 * measured ~5% slower end to end at n = 1024). */
#define SV_TRI(trsm, trsv, uplo, tr, diag)                                                                             \
    (k == 1 ? trsv(CblasRowMajor, uplo, tr, diag, (int)n, lu, (int)n, x, 1)                                            \
            : trsm(CblasRowMajor, CblasLeft, uplo, tr, diag, (int)n, (int)k, 1, lu, (int)n, x, (int)k))

#define SV_ITEM(name, T, getrf, trsm, trsv)                                                                            \
    static int name(const sv_plan *pl, int64_t bi, T *lu, lapack_int *ipiv)                                            \
    {                                                                                                                  \
        int64_t n = pl->n, k = pl->k;                                                                                  \
        const rt_view *A = &pl->in[0], *B = &pl->in[1];                                                                \
        const T *ap = (const T *)A->st->data + view_batch_off(pl, A, bi);                                              \
        const T *bp = (const T *)B->st->data + view_batch_off(pl, B, bi);                                              \
        int64_t ar = A->strides[pl->nb], ac = A->strides[pl->nb + 1];                                                  \
        int64_t br = B->strides[pl->nb], bc = B->strides[pl->nb + 1];                                                  \
        T *x = (T *)pl->x + bi * n * k;                                                                                \
        /* x starts as b, row by row. */                                                                               \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            if (bc == 1 || k == 1)                                                                                     \
                memcpy(x + i * k, bp + i * br, (size_t)k * sizeof(T));                                                 \
            else                                                                                                       \
                for (int64_t j = 0; j < k; j++)                                                                        \
                    x[i * k + j] = bp[i * br + j * bc];                                                                \
        }                                                                                                              \
        /* A column-major a is copied as it is (lu = a); anything else as                                 \
         * rows, which column-major is a^T. */            \
        bool colmaj = n > 1 && ar == 1;                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            if (colmaj)                                                                                                \
                memcpy(lu + i * n, ap + i * ac, (size_t)n * sizeof(T));                                                \
            else if (ac == 1)                                                                                          \
                memcpy(lu + i * n, ap + i * ar, (size_t)n * sizeof(T));                                                \
            else                                                                                                       \
                for (int64_t j = 0; j < n; j++)                                                                        \
                    lu[i * n + j] = ap[i * ar + j * ac];                                                               \
        }                                                                                                              \
        lapack_int info = getrf(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n, lu, (lapack_int)n, ipiv);              \
        if (info != 0)                                                                                                 \
            return (int)info;                                                                                          \
        /* Read row-major, lu holds M = (L\U)^T. */                                                                    \
        if (colmaj) { /* P a = L U: x = U^-1 L^-1 P b */                                                               \
            for (int64_t i = 0; i < n; i++)                                                                            \
                if (ipiv[i] - 1 != i)                                                                                  \
                    for (int64_t j = 0; j < k; j++) {                                                                  \
                        T t = x[i * k + j];                                                                            \
                        x[i * k + j] = x[(ipiv[i] - 1) * k + j];                                                       \
                        x[(ipiv[i] - 1) * k + j] = t;                                                                  \
                    }                                                                                                  \
            SV_TRI(trsm, trsv, CblasUpper, CblasTrans, CblasUnit);                                                     \
            SV_TRI(trsm, trsv, CblasLower, CblasTrans, CblasNonUnit);                                                  \
        } else { /* P a^T = L U, a = U^T L^T P: x = P^T L^-T U^-T b */                                                 \
            SV_TRI(trsm, trsv, CblasLower, CblasNoTrans, CblasNonUnit);                                                \
            SV_TRI(trsm, trsv, CblasUpper, CblasNoTrans, CblasUnit);                                                   \
            for (int64_t i = n - 1; i >= 0; i--)                                                                       \
                if (ipiv[i] - 1 != i)                                                                                  \
                    for (int64_t j = 0; j < k; j++) {                                                                  \
                        T t = x[i * k + j];                                                                            \
                        x[i * k + j] = x[(ipiv[i] - 1) * k + j];                                                       \
                        x[(ipiv[i] - 1) * k + j] = t;                                                                  \
                    }                                                                                                  \
        }                                                                                                              \
        return 0;                                                                                                      \
    }
SV_ITEM(sv_item_f32, float, LAPACKE_sgetrf_work, cblas_strsm, cblas_strsv)
SV_ITEM(sv_item_f64, double, LAPACKE_dgetrf_work, cblas_dtrsm, cblas_dtrsv)

/* Solves items [lo, hi) with one scratch; failures go to sv_note. */
static void sv_items(void *const *bufs, const double *consts, int64_t lo, int64_t hi)
{
    (void)consts;
    sv_plan *pl = bufs[0];
    size_t es = ir_dtype_size(pl->dt);
    void *lu = ir_alloc((size_t)(pl->n * pl->n) * es);
    lapack_int *ipiv = ir_alloc((size_t)pl->n * sizeof *ipiv);
    if (!lu || !ipiv) {
        sv_note(pl, lo, INT_MIN);
    } else {
        for (int64_t bi = lo; bi < hi; bi++) {
            int info = pl->dt == RLX_F32 ? sv_item_f32(pl, bi, lu, ipiv) : sv_item_f64(pl, bi, lu, ipiv);
            if (info != 0) {
                sv_note(pl, bi, info);
                break; /* later items of this chunk cannot lower the index */
            }
        }
    }
    ir_free(lu);
    ir_free(ipiv);
}

rlx_status rt_eval_solve(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *a = n->src[0];
    int r = n->rank;
    int64_t nn = a->shape[r - 1], k = n->shape[r - 1];
    int64_t batches = ir_numel(r - 2, n->shape);
    /* Not zero-filled: every item writes all of its rows (b, then x). */
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    if (batches == 0 || nn == 0 || k == 0)
        return RLX_OK;
    if (nn > INT_MAX || k > INT_MAX || nn * k > INT_MAX || nn * nn > INT_MAX)
        return rt_fail(ctx, RLX_E_UNSUPPORTED, "solve of %lld x %lld exceeds the LAPACK int range", (long long)nn,
                       (long long)k);
    sv_plan pl = {.dt = n->dtype, .nb = r - 2, .n = nn, .k = k, .in = in, .x = out->st->data, .bad = -1};
    memcpy(pl.bshape, n->shape, (size_t)pl.nb * sizeof *pl.bshape);
    pthread_mutex_init(&pl.lock, NULL);
    int t = rt_threads(ctx);
    void *bufs[1] = {&pl};
    if (use_pool(batches, t, nn < 128)) {
        int prev = rt_blas_threads(1);
        int64_t chunk = (batches + 4 * t - 1) / (4 * t);
        rt_pool_run(sv_items, bufs, NULL, batches, chunk, t);
        rt_blas_threads(prev);
    } else {
        rt_blas_threads(t);
        sv_items(bufs, NULL, 0, batches);
    }
    pthread_mutex_destroy(&pl.lock);
    if (pl.nomem) /* some items were not solved: this comes first */
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for solve scratch");
    if (pl.bad < 0)
        return RLX_OK;
    if (pl.bad_info > 0)
        return rt_fail(ctx, RLX_E_LINALG, "matrix %lld of the batch is singular (U[%d,%d] = 0)", (long long)pl.bad,
                       pl.bad_info - 1, pl.bad_info - 1);
    return rt_fail(ctx, RLX_E_INTERNAL, "getrf rejected argument %d", -pl.bad_info);
}

void rt_blas_describe(char *buf, size_t cap)
{
    /* OpenBLAS picks its kernels per CPU at load time; an unknown CPU
     * falls back to old generic ones, which changes every GEMM's speed. */
    snprintf(buf, cap, "OpenBLAS %s%s", openblas_get_corename(),
             f32_through_onednn(0) ? ", f32 GEMM oneDNN" : "");
}
