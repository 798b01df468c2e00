/* harness.c — the implementation of harness.h. */
#include "harness.h"

#include "ir/cast.h"

#include <stdarg.h>
#include <unistd.h>

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

void test_check_null(const char *file, int line, const char *call, rlx_tensor *r, int want, const char *fn)
{
    if (r)
        test_fail(file, line, "%s returned a tensor, expected NULL", call);
    if (want >= 0) {
        test_check_error(file, line, call, (rlx_status)want, fn);
        return;
    }
    if (rlx_last_status() == RLX_OK)
        test_fail(file, line, "%s recorded no error", call);
    else if (strncmp(rlx_last_error(), fn, strlen(fn)) != 0)
        test_fail(file, line, "%s: message '%s' does not name %s", call, rlx_last_error(), fn);
    rlx_clear_error();
}

void ir_alloc_fail_after(long n); /* internal: the allocation-failure hook */

void test_alloc_walk(const char *file, int line, int (*workload)(void), int min_failures)
{
    /* Some failures are absorbed by design (a cons table that cannot grow
     * keeps longer chains), so one success does not mean every allocation
     * was tried. */
    long live = ir_live_nodes();
    int failures = 0, in_a_row = 0;
    for (long n = 0; n < 20000 && in_a_row < 200; n++) {
        rlx_clear_error();
        ir_alloc_fail_after(n);
        int ok = workload();
        ir_alloc_fail_after(-1);
        in_a_row = ok ? in_a_row + 1 : 0;
        if (!ok) {
            failures++;
            if (rlx_last_status() != RLX_E_NOMEM)
                test_fail(file, line, "failing allocation %ld gave status %d: %s", n, (int)rlx_last_status(),
                          rlx_last_error());
        }
        if (ir_live_nodes() != live)
            test_fail(file, line, "failing allocation %ld leaked %ld nodes", n, ir_live_nodes() - live);
    }
    if (failures < min_failures || in_a_row < 200)
        test_fail(file, line, "allocation walk: %d failing runs (want >= %d), %d clean in a row", failures,
                  min_failures, in_a_row);
    rlx_clear_error();
    if (!workload())
        test_fail(file, line, "the workload fails after the walk: %s", rlx_last_error());
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

bool test_graph_names(rlx_tensor *t, const char *what)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/rlx_test_graph_%d.dot", (int)getpid());
    if (rlx_dump_dot(t, path) != RLX_OK)
        return false;
    FILE *f = fopen(path, "r");
    bool found = false;
    char line[4096];
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, what) != NULL;
    if (f)
        fclose(f);
    remove(path);
    return found;
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

double test_quantize(rlx_dtype dt, double v) { return ir_cast_const(v, dt); }

/* Stores v (already quantized to dt) as element i of a dt buffer. */
static void store(rlx_dtype dt, void *buf, int64_t i, double v)
{
    switch (dt) {
    case RLX_BOOL: ((unsigned char *)buf)[i] = (unsigned char)(v != 0); break;
    case RLX_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case RLX_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case RLX_F32: ((float *)buf)[i] = (float)v; break;
    case RLX_F16: ((uint16_t *)buf)[i] = ir_f16_bits(v); break;
    case RLX_BF16: ((uint16_t *)buf)[i] = ir_bf16_bits(v); break;
    case RLX_I8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case RLX_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case RLX_I16: ((int16_t *)buf)[i] = (int16_t)v; break;
    case RLX_U32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    default: ((double *)buf)[i] = v; break;
    }
}

int64_t test_numel(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    return n;
}

rlx_tensor *test_tensor(rlx_dtype dt, int rank, const int64_t *shape, double *v)
{
    int64_t n = test_numel(rank, shape);
    void *buf = malloc((size_t)(n ? n : 1) * 8);
    for (int64_t i = 0; i < n; i++) {
        v[i] = test_quantize(dt, v[i]);
        store(dt, buf, i, v[i]);
    }
    rlx_tensor *t = make(dt, rank, shape, buf);
    free(buf);
    return t;
}

const char *test_dims(int rank, const int64_t *shape)
{
    static char buf[4][160];
    static int k;
    char *s = buf[k++ & 3];
    strcpy(s, "[");
    for (int i = 0; i < rank && strlen(s) < 140; i++)
        snprintf(s + strlen(s), 160 - strlen(s), "%s%lld", i ? "," : "", (long long)shape[i]);
    strcat(s, "]");
    return s;
}

void test_expect(const char *file, int line, const char *what, rlx_tensor *t, rlx_dtype dt, int rank,
                 const int64_t *shape, const double *expected, double rtol, double atol)
{
    if (!t) {
        test_fail(file, line, "%s: NULL (%s)", what, rlx_last_error());
        return;
    }
    if (rlx_dtype_of(t) != dt) {
        test_fail(file, line, "%s: dtype %s, expected %s", what, rlx_dtype_name(rlx_dtype_of(t)), rlx_dtype_name(dt));
        return;
    }
    int64_t got[RLX_MAX_RANK];
    int r = rlx_shape(t, got, RLX_MAX_RANK);
    if (r != rank || (rank && memcmp(got, shape, (size_t)rank * sizeof *shape) != 0)) {
        test_fail(file, line, "%s: shape %s, expected %s", what, test_dims(r, got), test_dims(rank, shape));
        return;
    }
    int64_t n;
    double *v = test_values(t, &n);
    for (int64_t i = 0; v && i < n; i++) {
        if (!test_close(v[i], expected[i], rtol, atol)) {
            test_fail(file, line, "%s: element %lld is %.17g, expected %.17g", what, (long long)i, v[i],
                      expected[i]);
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
    test_expect(file, line, "tensor", got, rlx_dtype_of(want), rank, shape, w, rtol, atol);
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

static char saved_backend[16];
void test_backend_save(void)
{
    if (rlx_get_option("backend", saved_backend, sizeof saved_backend) != RLX_OK)
        test_fail(__FILE__, __LINE__, "rlx_get_option(backend): %s", rlx_last_error());
}
void test_backend_restore(void)
{
    if (rlx_set_option("backend", saved_backend) != RLX_OK)
        test_fail(__FILE__, __LINE__, "rlx_set_option(backend): %s", rlx_last_error());
}

void test_narrow_vs_f32(const char *file, int line, const char *what, test_narrow_fn f, rlx_dtype dt, int n,
                        const int *ranks, const int64_t *const *shapes, double lo, double hi, double ulps)
{
    rlx_tensor *in[8], *in32[8];
    for (int i = 0; i < n && i < 8; i++) {
        int64_t m = test_numel(ranks[i], shapes[i]);
        double *v = malloc((size_t)(m ? m : 1) * sizeof *v);
        for (int64_t k = 0; k < m; k++)
            v[k] = test_uniform(lo, hi);
        in[i] = test_tensor(dt, ranks[i], shapes[i], v); /* v now holds what dt stores */
        in32[i] = test_tensor(RLX_F32, ranks[i], shapes[i], v);
        free(v);
    }
    int64_t nr = 0, ng = 0;
    double ulp = dt == RLX_BF16 ? 0x1p-7 : 0x1p-10; /* the spacing above 1 of bf16, f16 */
    EACH_BACKEND(b) {
        rlx_tensor *r = f(in);
        if (!r || rlx_dtype_of(r) != dt) {
            test_fail(file, line, "%s on %s (%s): %s", what, rlx_dtype_name(dt), b ? "jit" : "ref",
                      r ? rlx_dtype_name(rlx_dtype_of(r)) : rlx_last_error());
            continue;
        }
        /* the f32 values on the same backend: the reference evaluator
         * computes both the same way, so there they must round to the
         * same bits; the JIT may fuse the two differently */
        double *ref = test_values(rlx_cast(f(in32), dt), &nr), *got = test_values(r, &ng), scale = 0;
        for (int64_t k = 0; ref && k < nr; k++)
            scale = fmax(scale, fabs(ref[k]));
        double tol = b ? ulps * ulp : 0;
        for (int64_t k = 0; got && ref && k < ng && ng == nr; k++)
            if (!test_close(got[k], ref[k], tol, tol * scale)) {
                test_fail(file, line, "%s on %s (%s) [%lld]: %.6g, f32 rounded gives %.6g", what, rlx_dtype_name(dt),
                          b ? "jit" : "ref", (long long)k, got[k], ref[k]);
                break;
            }
        if (ng != nr)
            test_fail(file, line, "%s on %s: %lld values, f32 gives %lld", what, rlx_dtype_name(dt), (long long)ng,
                      (long long)nr);
        free(got);
        free(ref);
    }
}
