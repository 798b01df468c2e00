/* harness.c — the implementation of harness.h. */
#include "harness.h"

#include <stdarg.h>

long ir_live_nodes(void); /* internal: tests link the static library */

int test_failures;
const char *test_current = "";
uint64_t test_seed;
static uint64_t rng_state;

void test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "FAIL %s (%s:%d, seed %llu): ", test_current, file, line, (unsigned long long)test_seed);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    test_failures++;
}

int test_close(double a, double b, double rtol, double atol)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b))
        return a == b;
    return fabs(a - b) <= atol + rtol * fabs(b);
}

void test_check_error(const char *file, int line, const char *call, rlx_status want, const char *fn)
{
    rlx_status got = rlx_last_status();
    const char *msg = rlx_last_error();
    if (got != want)
        test_fail(file, line, "%s: status %d, expected %d (message: '%s')", call, (int)got, (int)want, msg);
    else if (fn && strncmp(msg, fn, strlen(fn)) != 0)
        test_fail(file, line, "%s: message '%s' does not start with '%s'", call, msg, fn);
    rlx_clear_error();
}

static rlx_tensor *make(rlx_dtype dt, int rank, const int64_t *shape, const void *data)
{
    rlx_tensor *t = rlx_from_data(dt, rank, shape, data);
    if (!t)
        test_fail(__FILE__, __LINE__, "rlx_from_data failed: %s", rlx_last_error());
    return t;
}

rlx_tensor *tf32(int rank, const int64_t *shape, const float *data) { return make(RLX_F32, rank, shape, data); }
rlx_tensor *tf64(int rank, const int64_t *shape, const double *data) { return make(RLX_F64, rank, shape, data); }
rlx_tensor *ti32(int rank, const int64_t *shape, const int32_t *data) { return make(RLX_I32, rank, shape, data); }
rlx_tensor *ti64(int rank, const int64_t *shape, const int64_t *data) { return make(RLX_I64, rank, shape, data); }
rlx_tensor *tbool(int rank, const int64_t *shape, const unsigned char *data) { return make(RLX_BOOL, rank, shape, data); }

double test_uniform(double lo, double hi)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(rng_state >> 11) * 0x1p-53;
}

rlx_tensor *trand(rlx_dtype dt, int rank, const int64_t *shape, double lo, double hi)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = test_uniform(lo, hi);
    rlx_tensor *d = rlx_from_data(RLX_F64, rank, shape, v);
    free(v);
    rlx_tensor *t = rlx_cast(d, dt);
    rlx_realize(t);
    return t;
}

double *test_values(rlx_tensor *t, int64_t *n)
{
    *n = rlx_numel(t);
    if (*n < 0)
        return NULL;
    double *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
    if (rlx_read_f64(t, v, (size_t)*n) != RLX_OK) {
        test_fail(__FILE__, __LINE__, "read failed: %s", rlx_last_error());
        free(v);
        return NULL;
    }
    return v;
}

void test_expect(const char *file, int line, rlx_tensor *t, rlx_dtype dt, int rank, const int64_t *shape,
                 const double *expected, double rtol, double atol)
{
    if (!t) {
        test_fail(file, line, "tensor is NULL: %s", rlx_last_error());
        return;
    }
    if (rlx_dtype_of(t) != dt) {
        test_fail(file, line, "dtype %s, expected %s", rlx_dtype_name(rlx_dtype_of(t)), rlx_dtype_name(dt));
        return;
    }
    int64_t got_shape[RLX_MAX_RANK];
    int r = rlx_shape(t, got_shape, RLX_MAX_RANK);
    if (r != rank || (rank && memcmp(got_shape, shape, (size_t)rank * sizeof *shape) != 0)) {
        char a[128] = "", b[128] = "";
        for (int i = 0; i < r && i < RLX_MAX_RANK; i++)
            snprintf(a + strlen(a), sizeof a - strlen(a), "%lld,", (long long)got_shape[i]);
        for (int i = 0; i < rank; i++)
            snprintf(b + strlen(b), sizeof b - strlen(b), "%lld,", (long long)shape[i]);
        test_fail(file, line, "shape [%s], expected [%s]", a, b);
        return;
    }
    int64_t n;
    double *v = test_values(t, &n);
    if (!v)
        return;
    for (int64_t i = 0; i < n; i++) {
        if (!test_close(v[i], expected[i], rtol, atol)) {
            test_fail(file, line, "element %lld is %.17g, expected %.17g", (long long)i, v[i], expected[i]);
            break;
        }
    }
    free(v);
}

void test_expect_same(const char *file, int line, rlx_tensor *got, rlx_tensor *want, double rtol, double atol)
{
    if (!got || !want) {
        test_fail(file, line, "tensor is NULL: %s", rlx_last_error());
        return;
    }
    int64_t shape[RLX_MAX_RANK];
    int rank = rlx_shape(want, shape, RLX_MAX_RANK);
    int64_t n;
    double *w = test_values(want, &n);
    if (!w)
        return;
    test_expect(file, line, got, rlx_dtype_of(want), rank, shape, w, rtol, atol);
    free(w);
}

int test_main(int argc, char **argv, const test_case *cases, int ncases)
{
    const char *filter = argc > 1 ? argv[1] : NULL;
    int run = 0;
    for (int i = 0; i < ncases; i++) {
        if (filter && !strstr(cases[i].name, filter))
            continue;
        test_current = cases[i].name;
        test_seed = 0x5eed0000ull + (uint64_t)i;
        rng_state = test_seed;
        int before_fail = test_failures;
        long live = ir_live_nodes();
        rlx_clear_error();
        rlx_scope_begin();
        cases[i].fn();
        rlx_scope_end();
        if (ir_live_nodes() != live)
            test_fail(__FILE__, __LINE__, "%ld graph nodes leaked", ir_live_nodes() - live);
        printf("%s %s\n", test_failures == before_fail ? "ok  " : "FAIL", cases[i].name);
        run++;
    }
    printf("%d tests, %d failures\n", run, test_failures);
    return test_failures ? 1 : 0;
}
