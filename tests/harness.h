/*
 * harness.h — the tiny test harness of librlx's C tests.
 *
 * A test file defines TEST(name) functions and lists them in a table passed
 * to test_main; `./test_x [filter]` runs those whose name contains filter.
 * Checks record failures and go on; seeds are fixed and printed on failure.
 * Each test runs inside an rlx scope, starts with no recorded error, and
 * must leave no live node behind (checked through test_live_nodes).
 */
#ifndef RLX_TEST_HARNESS_H
#define RLX_TEST_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlx.h"

typedef struct {
    const char *name;
    void (*fn)(void);
} test_case;

extern int test_failures;
extern const char *test_current;
extern uint64_t test_seed;

#define TEST(name) static void name(void)
#define T(name) {#name, name}

void test_fail(const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond))                                                        \
            test_fail(__FILE__, __LINE__, "CHECK(%s) failed", #cond);       \
    } while (0)
#define CHECK_EQ_INT(a, b)                                                  \
    do {                                                                    \
        long long a_ = (long long)(a), b_ = (long long)(b);                 \
        if (a_ != b_)                                                       \
            test_fail(__FILE__, __LINE__, "%s == %lld, expected %s == %lld", #a, a_, #b, b_); \
    } while (0)
#define CHECK_NEAR(a, b, tol)                                               \
    do {                                                                    \
        double a_ = (double)(a), b_ = (double)(b);                          \
        if (!test_close(a_, b_, (tol), (tol)))                              \
            test_fail(__FILE__, __LINE__, "%s = %.17g, expected %.17g (tol %g)", #a, a_, b_, (double)(tol)); \
    } while (0)

/* Close in the NumPy allclose sense: |a-b| <= atol + rtol*|b|; NaN equals
 * NaN and infinities must match in sign. */
int test_close(double a, double b, double rtol, double atol);

/* A status and message check: status equals want and the message names fn. */
#define CHECK_ERR(call, want, fn)                                           \
    do {                                                                    \
        rlx_clear_error();                                                  \
        (void)(call);                                                       \
        test_check_error(__FILE__, __LINE__, #call, (want), (fn));          \
    } while (0)
/* The call returns NULL and records status want naming fn; want -1
 * accepts any error status (for cases documented only as "an error"). An
 * unexpected result stays in the test's scope, which frees it. */
#define CHECK_NULL_ERR(call, want, fn) \
    (rlx_clear_error(), test_check_null(__FILE__, __LINE__, #call, (call), (int)(want), (fn)))
#define CHECK_NULL_ANY(call, fn) CHECK_NULL_ERR(call, -1, fn)
void test_check_null(const char *file, int line, const char *call, rlx_tensor *r, int want, const char *fn);
void test_check_error(const char *file, int line, const char *call, rlx_status want, const char *fn);

/* Fails every allocation of workload in turn (internal hook) until 200
 * runs in a row succeed untouched: each failed run must report
 * RLX_E_NOMEM and leave no graph node alive, and at least min_failures
 * runs must fail. The workload returns nonzero on success. */
void test_alloc_walk(const char *file, int line, int (*workload)(void), int min_failures);
#define ALLOC_WALK(workload, min_failures) test_alloc_walk(__FILE__, __LINE__, (workload), (min_failures))

/* Builders (results recorded in the test's scope). */
rlx_tensor *tf32(int rank, const int64_t *shape, const float *data);
rlx_tensor *tf64(int rank, const int64_t *shape, const double *data);
rlx_tensor *ti32(int rank, const int64_t *shape, const int32_t *data);
rlx_tensor *ti64(int rank, const int64_t *shape, const int64_t *data);
rlx_tensor *tbool(int rank, const int64_t *shape, const unsigned char *data);
/* Random uniform values in [lo, hi) from the harness's seeded generator. */
rlx_tensor *trand(rlx_dtype dt, int rank, const int64_t *shape, double lo, double hi);
double test_uniform(double lo, double hi);

/* v[i] as dt stores it (float -> int truncates). */
double test_quantize(rlx_dtype dt, double v);
int64_t test_numel(int rank, const int64_t *shape);
/* A tensor of dtype dt holding v, which is quantized in place to what dt
 * stores, so v can serve as the expectation afterwards. */
rlx_tensor *test_tensor(rlx_dtype dt, int rank, const int64_t *shape, double *v);
/* "[2,3]" in a ring of 4 static buffers. */
const char *test_dims(int rank, const int64_t *shape);

/* Whether the dot dump of t's graph (rlx_dump_dot) contains the text what
 * (an op name, a dtype): what a graph holds, for tests of rewrites. */
bool test_graph_names(rlx_tensor *t, const char *what);
/* Reads t as doubles into a malloc'ed array (NULL and a failure if it
 * does not realize); *n gets the element count. */
double *test_values(rlx_tensor *t, int64_t *n);
/* Compares t's shape, dtype and values with expected (as doubles). */
void test_expect(const char *file, int line, const char *what, rlx_tensor *t, rlx_dtype dt, int rank,
                 const int64_t *shape, const double *expected, double rtol, double atol);
#define EXPECT(t, dt, rank, shape, expected, tol) \
    test_expect(__FILE__, __LINE__, #t, (t), (dt), (rank), (shape), (expected), (tol), (tol))
/* EXPECT with a label and separate tolerances. */
#define EXPECT_V(what, t, dt, rank, shape, e, rtol, atol) \
    test_expect(__FILE__, __LINE__, (what), (t), (dt), (rank), (shape), (e), (rtol), (atol))
/* Compares two tensors of one shape (values as doubles). */
void test_expect_same(const char *file, int line, rlx_tensor *got, rlx_tensor *want, double rtol, double atol);
#define EXPECT_SAME(got, want, tol) test_expect_same(__FILE__, __LINE__, (got), (want), (tol), (tol))

/* Narrow floats against f32: f over n random inputs of dtype dt (values
 * in [lo, hi), shapes[i] of rank ranks[i]) must have dtype dt and the
 * values of f over the same values in f32 rounded once to dt: exactly on
 * the reference backend, within ulps of dt (relative to the largest
 * |value|) on the JIT, which may fuse the two computations differently. */
typedef rlx_tensor *(*test_narrow_fn)(rlx_tensor *const *in);
void test_narrow_vs_f32(const char *file, int line, const char *what, test_narrow_fn f, rlx_dtype dt, int n,
                        const int *ranks, const int64_t *const *shapes, double lo, double hi, double ulps);
#define EXPECT_NARROW(f, dt, n, ranks, shapes, lo, hi, ulps) \
    test_narrow_vs_f32(__FILE__, __LINE__, #f, (f), (dt), (n), (ranks), (shapes), (lo), (hi), (ulps))

/* Runs the statement after it with the backend set to "ref" (b = 0), then
 * "jit" (b = 1); restores the backend after. Not reentrant. */
#define EACH_BACKEND(b)                                                                      \
    for (int b = 0, once_ = (test_backend_save(), 1); once_; once_ = 0, test_backend_restore()) \
        for (; b < 2 && rlx_set_option("backend", b ? "jit" : "ref") == RLX_OK; b++)
void test_backend_save(void);
void test_backend_restore(void);

int test_main(int argc, char **argv, const test_case *cases, int ncases);
#define TEST_MAIN(...)                                                      \
    int main(int argc, char **argv)                                         \
    {                                                                       \
        static const test_case cases_[] = {__VA_ARGS__};                    \
        return test_main(argc, argv, cases_, (int)(sizeof cases_ / sizeof *cases_)); \
    }

#endif
