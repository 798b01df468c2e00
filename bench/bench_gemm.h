/*
 * bench_gemm.h — the GEMM-only references' gemm: cblas_sgemm, or with
 * RLX_BENCH_GEMM=onednn (in a build with oneDNN) oneDNN's f32 matmul at one
 * thread, the engine librlx's option f32_gemm picks on AVX-512 CPUs, so a
 * step can be held against the GEMMs it actually runs. Row-major, as
 * cblas_sgemm; oneDNN takes alpha as an output scale and beta as a sum.
 */
#ifndef RLX_BENCH_GEMM_H
#define RLX_BENCH_GEMM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#ifdef BENCH_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
void omp_set_num_threads(int n);
#endif

/* The engine's name for the reports: "sgemm" or "oneDNN". */
static inline const char *bench_gemm_engine(void)
{
#ifdef BENCH_HAVE_DNNL
    const char *e = getenv("RLX_BENCH_GEMM");
    if (e && strcmp(e, "onednn") == 0)
        return "oneDNN";
#endif
    return "sgemm";
}

#ifdef BENCH_HAVE_DNNL
static inline bool bench_dnnl(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda,
                              const float *b, int ldb, float beta, float *c, int ldc)
{
    static dnnl_engine_t eng;
    static dnnl_stream_t st;
    if (!eng && (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
                 dnnl_stream_create(&st, eng, dnnl_stream_default_flags) != dnnl_success))
        return false;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post = NULL;
    dnnl_primitive_attr_create(&attr);
    if (alpha != 1)
        dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha);
    if (beta != 0) {
        dnnl_post_ops_create(&post);
        dnnl_post_ops_append_sum(post, beta);
        dnnl_primitive_attr_set_post_ops(attr, post);
        dnnl_post_ops_destroy(post);
    }
    dnnl_memory_desc_t amd, bmd, cmd;
    dnnl_matmul_desc_t mmd;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t mem[3] = {NULL, NULL, NULL};
    bool ok = dnnl_memory_desc_init_by_strides(&amd, 2, (dnnl_dims_t){m, k}, dnnl_f32,
                                               ta ? (dnnl_dims_t){1, lda} : (dnnl_dims_t){lda, 1}) == dnnl_success &&
              dnnl_memory_desc_init_by_strides(&bmd, 2, (dnnl_dims_t){k, n}, dnnl_f32,
                                               tb ? (dnnl_dims_t){1, ldb} : (dnnl_dims_t){ldb, 1}) == dnnl_success &&
              dnnl_memory_desc_init_by_strides(&cmd, 2, (dnnl_dims_t){m, n}, dnnl_f32, (dnnl_dims_t){ldc, 1}) ==
                  dnnl_success &&
              dnnl_matmul_desc_init(&mmd, &amd, &bmd, NULL, &cmd) == dnnl_success &&
              dnnl_primitive_desc_create(&pd, &mmd, attr, eng, NULL) == dnnl_success &&
              dnnl_primitive_create(&prim, pd) == dnnl_success &&
              dnnl_memory_create(&mem[0], &amd, eng, (void *)(uintptr_t)a) == dnnl_success &&
              dnnl_memory_create(&mem[1], &bmd, eng, (void *)(uintptr_t)b) == dnnl_success &&
              dnnl_memory_create(&mem[2], &cmd, eng, c) == dnnl_success;
    if (ok) {
        dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, mem[1]}, {DNNL_ARG_DST, mem[2]}};
        omp_set_num_threads(1);
        ok = dnnl_primitive_execute(prim, st, 3, args) == dnnl_success && dnnl_stream_wait(st) == dnnl_success;
    }
    for (int i = 0; i < 3; i++)
        dnnl_memory_destroy(mem[i]);
    dnnl_primitive_destroy(prim);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    return ok;
}
#endif

static inline void bench_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, const float *a,
                              int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
#ifdef BENCH_HAVE_DNNL
    if (bench_gemm_engine()[0] == 'o' &&
        bench_dnnl(ta == CblasTrans, tb == CblasTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
        return;
#endif
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

#endif
