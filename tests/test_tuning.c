/*
 * test_tuning.c — the tuning knobs (rlx_set_option / rlx_get_option, env
 * RLX_<KNOB>) and the tuning file (passes/knobs.c): option round trips and
 * errors, the file's round trip and precedence, malformed files (rejected
 * with a line number, never loaded, never printed unless RLX_DEBUG), a
 * changed knob compiling a new kernel with the same values, the fusion
 * ablation switches, and the file read at start-up (in a child process).
 */
#include "harness.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include "passes/knobs.h"

static char tmpdir[64];

static const char *tmp_path(const char *name)
{
    static char buf[64][128]; /* a ring: a test keeps at most a few paths at once */
    static int k;
    k = (k + 1) % 64;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static long get_long(const char *key)
{
    char buf[64];
    if (rlx_get_option(key, buf, sizeof buf) != RLX_OK)
        return -999;
    return strtol(buf, NULL, 10);
}

static uint64_t compiled_since_reset(void)
{
    rlx_stats_t s;
    rlx_stats(&s);
    return s.kernels_compiled;
}

TEST(option_round_trip)
{
    for (int i = 0; i < KNOB_COUNT; i++) {
        const char *name = knob_table[i].name;
        char v[32];
        long want = knob_table[i].hi;
        snprintf(v, sizeof v, "%ld", want);
        CHECK_EQ_INT(rlx_set_option(name, v), RLX_OK);
        CHECK_EQ_INT(get_long(name), want);
        CHECK_EQ_INT(rlx_set_option(name, "default"), RLX_OK);
        CHECK_EQ_INT(get_long(name), knob_table[i].def);
    }
    CHECK_EQ_INT(rlx_set_option("unroll", "8"), RLX_OK);
    CHECK_EQ_INT(knob_get(KNOB_UNROLL), 8);
    CHECK_EQ_INT(rlx_set_option("unroll", ""), RLX_OK); /* "" also restores */
    CHECK_EQ_INT(knob_get(KNOB_UNROLL), 0);
    /* the options control.c keeps */
    char buf[64];
    CHECK_EQ_INT(rlx_set_option("num_threads", "3"), RLX_OK);
    CHECK_EQ_INT(get_long("num_threads"), 3);
    CHECK_EQ_INT(rlx_set_option("num_threads", "0"), RLX_OK);
    CHECK_EQ_INT(rlx_get_option("backend", buf, sizeof buf), RLX_OK);
    CHECK(strcmp(buf, "ref") == 0 || strcmp(buf, "jit") == 0);
}

TEST(option_errors)
{
    CHECK_ERR(rlx_set_option("unroll", "17"), RLX_E_ARG, "rlx_set_option");
    CHECK_ERR(rlx_set_option("unroll", "-1"), RLX_E_ARG, "rlx_set_option");
    CHECK_ERR(rlx_set_option("unroll", "4x"), RLX_E_ARG, "rlx_set_option");
    CHECK_ERR(rlx_set_option("vector_width", "12"), RLX_E_ARG, "rlx_set_option"); /* not a power of two */
    CHECK_ERR(rlx_set_option("grain", "1"), RLX_E_ARG, "rlx_set_option");
    CHECK_ERR(rlx_set_option("fuse_phases", "2"), RLX_E_ARG, "rlx_set_option");
    CHECK_ERR(rlx_set_option("no_such_knob", "1"), RLX_E_ARG, "rlx_set_option");
    CHECK_ERR(rlx_set_option(NULL, "1"), RLX_E_ARG, "rlx_set_option");
    CHECK_ERR(rlx_set_option("unroll", NULL), RLX_E_ARG, "rlx_set_option");
    CHECK_EQ_INT(knob_get(KNOB_UNROLL), 0); /* a refused value changes nothing */
    char buf[4];
    CHECK_ERR(rlx_get_option("no_such_knob", buf, sizeof buf), RLX_E_ARG, "rlx_get_option");
    CHECK_ERR(rlx_get_option(NULL, buf, sizeof buf), RLX_E_ARG, "rlx_get_option");
    CHECK_ERR(rlx_get_option("grain", NULL, 8), RLX_E_ARG, "rlx_get_option");
    CHECK_ERR(rlx_get_option("grain", buf, 0), RLX_E_ARG, "rlx_get_option");
    CHECK_ERR(rlx_get_option("grain", buf, sizeof buf), RLX_E_ARG, "rlx_get_option"); /* "32768" needs 6 */
    char ok[8];
    CHECK_EQ_INT(rlx_get_option("grain", ok, sizeof ok), RLX_OK);
    CHECK(strcmp(ok, "32768") == 0);
}

TEST(file_round_trip_and_precedence)
{
    const knob_entry e[] = {
        {KCLASS_ANY, KBUCKET_ANY, KNOB_UNROLL, 2},
        {KCLASS_EW_MATH, KBUCKET_ANY, KNOB_UNROLL, 4},
        {KCLASS_EW_MATH, 3, KNOB_UNROLL, 8},
        {KCLASS_REDUCE, 0, KNOB_REDUCE_ACC, 3},
        {KCLASS_ANY, KBUCKET_ANY, KNOB_GRAIN, 4096},
        {KCLASS_ROWS, 2, KNOB_VECTOR_WIDTH, 32},
    };
    int n = (int)(sizeof e / sizeof *e);
    char msg[256];
    const char *path = tmp_path("round.txt");
    CHECK_EQ_INT(knobs_save(path, e, n, "host line\nwith a newline", msg, sizeof msg), RLX_OK);
    /* the text parses back to the same entries */
    FILE *f = fopen(path, "rb");
    char text[4096];
    size_t len = f ? fread(text, 1, sizeof text, f) : 0;
    if (f)
        fclose(f);
    knob_entry *back = NULL;
    int nb = 0;
    CHECK_EQ_INT(knobs_parse(text, len, &back, &nb, msg, sizeof msg), RLX_OK);
    CHECK_EQ_INT(nb, n);
    for (int i = 0; i < n && i < nb; i++)
        CHECK(back[i].cls == e[i].cls && back[i].bucket == e[i].bucket && back[i].id == e[i].id &&
              back[i].value == e[i].value);
    free(back);
    /* loaded: the most specific entry wins, explicit settings win over all */
    CHECK_EQ_INT(rlx_set_option("tuning_file", path), RLX_OK);
    char st[256];
    CHECK_EQ_INT(rlx_get_option("tuning_status", st, sizeof st), RLX_OK);
    CHECK(strncmp(st, "loaded 6 entries from ", 22) == 0);
    CHECK_EQ_INT(knob_for(KNOB_UNROLL, KCLASS_EW_MATH, 1 << 23), 8);
    CHECK_EQ_INT(knob_for(KNOB_UNROLL, KCLASS_EW_MATH, 100), 4);
    CHECK_EQ_INT(knob_for(KNOB_UNROLL, KCLASS_EW, 1 << 23), 2);
    CHECK_EQ_INT(knob_for(KNOB_REDUCE_ACC, KCLASS_REDUCE, 100), 3);
    CHECK_EQ_INT(knob_for(KNOB_REDUCE_ACC, KCLASS_REDUCE, 1 << 20), 0);
    CHECK_EQ_INT(knob_for(KNOB_VECTOR_WIDTH, KCLASS_ROWS, 1 << 20), 32);
    CHECK_EQ_INT(knob_for(KNOB_VECTOR_WIDTH, KCLASS_ROWS, 1 << 22), 0);
    CHECK_EQ_INT(get_long("grain"), 4096);
    CHECK_EQ_INT(get_long("unroll"), 2);
    CHECK_EQ_INT(rlx_set_option("unroll", "16"), RLX_OK);
    CHECK_EQ_INT(knob_for(KNOB_UNROLL, KCLASS_EW_MATH, 1 << 23), 16);
    CHECK_EQ_INT(rlx_set_option("unroll", "default"), RLX_OK);
    CHECK_EQ_INT(knob_for(KNOB_UNROLL, KCLASS_EW_MATH, 1 << 23), 8);
    /* "" unloads */
    CHECK_EQ_INT(rlx_set_option("tuning_file", ""), RLX_OK);
    CHECK_EQ_INT(knob_for(KNOB_UNROLL, KCLASS_EW_MATH, 1 << 23), 0);
    CHECK_EQ_INT(get_long("grain"), 32768);
    /* bad entries are not written */
    knob_entry bad = {KCLASS_EW, 0, KNOB_VECTOR_WIDTH, 3};
    CHECK_EQ_INT(knobs_save(tmp_path("bad.txt"), &bad, 1, NULL, msg, sizeof msg), RLX_E_ARG);
    CHECK(access(tmp_path("bad.txt"), F_OK) != 0);
}

TEST(malformed_files)
{
    static const struct {
        const char *text, *why;
    } cases[] = {
        {"", "header"},
        {"# only a comment\n", "header"},
        {"ew any unroll=2\n", "line 1: expected the header"},
        {"rlx-tuning 2\n", "line 1: expected the header"},
        {"rlx-tuning 1 extra\n", "line 1"},
        {"rlx-tuning 1\nxx any unroll=2\n", "line 2: unknown kernel class"},
        {"rlx-tuning 1\new huge unroll=2\n", "line 2: unknown size bucket"},
        {"rlx-tuning 1\new\n", "line 2: unknown size bucket"},
        {"rlx-tuning 1\new any\n", "line 2: no knob=value"},
        {"rlx-tuning 1\n\n# c\new any unroll\n", "line 4: 'unroll' is not knob=value"},
        {"rlx-tuning 1\new any speed=2\n", "line 2: unknown knob"},
        {"rlx-tuning 1\new any unroll=99\n", "line 2: bad value"},
        {"rlx-tuning 1\new any unroll=\n", "line 2: bad value"},
        {"rlx-tuning 1\new any unroll=2x\n", "line 2: bad value"},
        {"rlx-tuning 1\new any vector_width=24\n", "line 2: bad value"},
        {"rlx-tuning 1\new any unroll=99999999999999999999999\n", "line 2: bad value"},
    };
    char msg[256];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        knob_entry *e = (knob_entry *)&msg; /* overwritten with NULL */
        int n = -1;
        rlx_status st = knobs_parse(cases[i].text, strlen(cases[i].text), &e, &n, msg, sizeof msg);
        CHECK_EQ_INT(st, RLX_E_ARG);
        CHECK(e == NULL && n == 0);
        if (!strstr(msg, cases[i].why))
            test_fail(__FILE__, __LINE__, "case %zu: message '%s' lacks '%s'", i, msg, cases[i].why);
    }
    /* NUL bytes and over-long lines */
    const char nul[] = "rlx-tuning 1\new any un\0roll=2\n";
    knob_entry *e = NULL;
    int n = 0;
    CHECK_EQ_INT(knobs_parse(nul, sizeof nul - 1, &e, &n, msg, sizeof msg), RLX_E_ARG);
    CHECK(strstr(msg, "NUL") != NULL);
    char *longl = malloc(3000);
    memset(longl, 'a', 3000);
    memcpy(longl, "rlx-tuning 1\n", 13);
    CHECK_EQ_INT(knobs_parse(longl, 3000, &e, &n, msg, sizeof msg), RLX_E_ARG);
    CHECK(strstr(msg, "line 2: longer than") != NULL);
    free(longl);
    /* CRLF and blank/comment lines are fine */
    const char crlf[] = "# x\r\n\r\nrlx-tuning 1\r\n  ew small unroll=2 vector_width=8\r\n";
    CHECK_EQ_INT(knobs_parse(crlf, sizeof crlf - 1, &e, &n, msg, sizeof msg), RLX_OK);
    CHECK_EQ_INT(n, 2);
    if (n == 2)
        CHECK(e[0].cls == KCLASS_EW && e[0].bucket == 1 && e[0].id == KNOB_UNROLL && e[0].value == 2 &&
              e[1].id == KNOB_VECTOR_WIDTH && e[1].value == 8);
    free(e);
    /* through rlx_set_option: refused, the loaded entries stay */
    const char *good = tmp_path("good.txt"), *bad = tmp_path("malformed.txt");
    write_text(good, "rlx-tuning 1\nany any unroll=4\n");
    write_text(bad, "rlx-tuning 1\nany any unroll=4\nany any bogus=1\n");
    CHECK_EQ_INT(rlx_set_option("tuning_file", good), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("tuning_file", bad), RLX_E_ARG);
    CHECK(strstr(rlx_last_error(), "rlx_set_option") && strstr(rlx_last_error(), "line 3: unknown knob 'bogus'"));
    CHECK_EQ_INT(get_long("unroll"), 4);
    CHECK_ERR(rlx_set_option("tuning_file", tmp_path("missing.txt")), RLX_E_IO, "rlx_set_option");
    CHECK_EQ_INT(get_long("unroll"), 4);
    CHECK_EQ_INT(rlx_set_option("tuning_file", ""), RLX_OK);
    CHECK_EQ_INT(get_long("unroll"), 0);
}

/* A new f32 leaf holding v (as f32). */
static rlx_tensor *tf32v(const double *v, int64_t n)
{
    float *f = malloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)v[i];
    rlx_tensor *t = tf32(1, &n, f);
    free(f);
    return t;
}

/* x -> exp(x) * 0.5 + x over n values: one ew_math kernel */
static rlx_tensor *ew_math(rlx_tensor *x) { return rlx_add(rlx_mul_s(rlx_exp(x), 0.5), x); }

TEST(changed_knob_compiles_anew)
{
    CHECK_EQ_INT(rlx_set_option("backend", "jit"), RLX_OK);
    int64_t n = 1000 + 3;
    double *v = malloc((size_t)n * sizeof *v), *want = malloc((size_t)n * sizeof *want);
    for (int64_t i = 0; i < n; i++) {
        v[i] = test_uniform(-3, 3);
        want[i] = exp((double)(float)v[i]) * 0.5 + (double)(float)v[i];
    }
    /* a fresh input leaf per realization: an identical graph over the same
     * leaf may reuse a result still alive in the scope */
    rlx_tensor *x = tf32v(v, n);
    static const char *const settings[][2] = {
        {"unroll", "1"}, {"unroll", "1"}, {"unroll", "16"}, {"vector_width", "4"}, {"vector_width", "4"},
        {"vector_width", "default"}, {"unroll", "default"},
    };
    static const int compiles[] = {1, 0, 1, 1, 0, 0, 0}; /* the last two are earlier keys again */
    /* first, the built-in choice, so the cache holds it */
    EXPECT(ew_math(x), RLX_F32, 1, &n, want, 1e-6);
    for (size_t i = 0; i < sizeof compiles / sizeof *compiles; i++) {
        CHECK_EQ_INT(rlx_set_option(settings[i][0], settings[i][1]), RLX_OK);
        rlx_stats_reset();
        EXPECT_V(settings[i][1], ew_math(tf32v(v, n)), RLX_F32, 1, &n, want, 1e-6, 1e-6);
        if (compiled_since_reset() != (uint64_t)compiles[i])
            test_fail(__FILE__, __LINE__, "step %zu (%s=%s): %llu kernels compiled, want %d", i, settings[i][0],
                      settings[i][1], (unsigned long long)compiled_since_reset(), compiles[i]);
    }
    /* a tuning file entry for this class and bucket acts like the same explicit value */
    const char *path = tmp_path("class.txt");
    write_text(path, "rlx-tuning 1\new_math tiny unroll=16\n");
    CHECK_EQ_INT(rlx_set_option("tuning_file", path), RLX_OK);
    rlx_stats_reset();
    EXPECT(ew_math(tf32v(v, n)), RLX_F32, 1, &n, want, 1e-6);
    CHECK_EQ_INT(compiled_since_reset(), 0); /* the unroll=16 kernel of step 2 */
    CHECK_EQ_INT(rlx_set_option("tuning_file", ""), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
    free(v);
    free(want);
}

static uint64_t kernels_of(rlx_tensor *t, const double *want, int rank, const int64_t *shape)
{
    rlx_stats_reset();
    EXPECT(t, RLX_F32, rank, shape, want, 1e-5);
    rlx_stats_t s;
    rlx_stats(&s);
    return s.kernels_run;
}

TEST(fusion_ablation)
{
    CHECK_EQ_INT(rlx_set_option("backend", "jit"), RLX_OK);
    int64_t sh[2] = {6, 37};
    double v[6 * 37], sm[6 * 37], rs[6];
    for (int i = 0; i < 6 * 37; i++)
        v[i] = test_uniform(-2, 2);
    (void)test_tensor(RLX_F32, 2, sh, v); /* rounds v to f32 in place, for the expectations */
#define X rlx_reshape(tf32v(v, 6 * 37), 2, sh) /* a fresh leaf each time (see above) */
    for (int r = 0; r < 6; r++) {
        double mx = -1e30, s = 0, t = 0;
        for (int c = 0; c < 37; c++)
            mx = v[r * 37 + c] > mx ? v[r * 37 + c] : mx;
        for (int c = 0; c < 37; c++)
            s += exp(v[r * 37 + c] - mx), t += exp(v[r * 37 + c]) * 2 + 1;
        for (int c = 0; c < 37; c++)
            sm[r * 37 + c] = exp(v[r * 37 + c] - mx) / s;
        rs[r] = t;
    }
    /* sum(exp(x) * 2 + 1, axis 1) and softmax, each rule on, then off */
    uint64_t k_sum = kernels_of(rlx_sum(rlx_add_s(rlx_mul_s(rlx_exp(X), 2), 1), (int[]){1}, 1, false), rs, 1, sh);
    uint64_t k_sm = kernels_of(rlx_softmax(X, -1), sm, 2, sh);
    CHECK_EQ_INT(k_sum, 1);
    CHECK_EQ_INT(k_sm, 1);
    CHECK_EQ_INT(rlx_set_option("fuse_reduce", "0"), RLX_OK);
    CHECK(kernels_of(rlx_sum(rlx_add_s(rlx_mul_s(rlx_exp(X), 2), 1), (int[]){1}, 1, false), rs, 1, sh) > k_sum);
    CHECK_EQ_INT(rlx_set_option("fuse_reduce", "default"), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("fuse_phases", "0"), RLX_OK);
    CHECK(kernels_of(rlx_softmax(X, -1), sm, 2, sh) > k_sm);
    CHECK_EQ_INT(rlx_set_option("fuse_phases", "default"), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("fuse_elementwise", "0"), RLX_OK);
    CHECK(kernels_of(rlx_sum(rlx_add_s(rlx_mul_s(rlx_exp(X), 2), 1), (int[]){1}, 1, false), rs, 1, sh) >= 3);
    CHECK(kernels_of(rlx_softmax(X, -1), sm, 2, sh) > k_sm);
    CHECK_EQ_INT(rlx_set_option("fuse_elementwise", "default"), RLX_OK);
    CHECK_EQ_INT(kernels_of(rlx_softmax(X, -1), sm, 2, sh), k_sm);
    /* a grain of 64 iterations over 2 threads: many chunks, same values */
    CHECK_EQ_INT(rlx_set_option("grain", "64"), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("num_threads", "2"), RLX_OK);
    kernels_of(rlx_softmax(X, -1), sm, 2, sh);
    CHECK_EQ_INT(rlx_set_option("num_threads", "0"), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("grain", "default"), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
#undef X
}

/* The child: prints tuning_status and unroll to stdout (stderr is the
 * parent's to inspect). */
static int startup_child(void)
{
    char st[512];
    if (rlx_get_option("tuning_status", st, sizeof st) != RLX_OK)
        return 3;
    printf("%s|%ld\n", st, get_long("unroll"));
    return 0;
}

/* Runs this binary as a child with env name=value set; its stdout and
 * stderr into out and err. */
static int run_child(const char *self, const char *const *env, char *out, size_t oc, char *err, size_t ec)
{
    const char *o = tmp_path("child.out"), *e = tmp_path("child.err");
    pid_t pid = fork();
    if (pid == 0) {
        int fo = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0600), fe = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fo, 1);
        dup2(fe, 2);
        unsetenv("RLX_DEBUG");
        unsetenv("RLX_UNROLL");
        for (int i = 0; env[i]; i += 2) {
            if (strcmp(env[i + 1], "(unset)") == 0)
                unsetenv(env[i]);
            else
                setenv(env[i], env[i + 1], 1);
        }
        execl(self, self, "--startup-child", (char *)NULL);
        _exit(127);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    FILE *f = fopen(o, "rb");
    size_t n = f ? fread(out, 1, oc - 1, f) : 0;
    out[n] = 0;
    if (f)
        fclose(f);
    f = fopen(e, "rb");
    n = f ? fread(err, 1, ec - 1, f) : 0;
    err[n] = 0;
    if (f)
        fclose(f);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

static const char *self_path;

TEST(file_read_at_startup)
{
    char out[1024], err[1024], want[1024];
    const char *good = tmp_path("start_good.txt"), *bad = tmp_path("start_bad.txt");
    write_text(good, "# tuned\nrlx-tuning 1\nany any unroll=8\n");
    write_text(bad, "rlx-tuning 1\nany any unroll=8\new any unroll=oops\n");
    /* RLX_TUNING_FILE */
    CHECK_EQ_INT(run_child(self_path, (const char *[]){"RLX_TUNING_FILE", good, NULL}, out, sizeof out, err,
                           sizeof err), 0);
    snprintf(want, sizeof want, "loaded 1 entries from %s|8\n", good);
    if (strcmp(out, want) != 0 || err[0])
        test_fail(__FILE__, __LINE__, "good file: out '%s' err '%s'", out, err);
    /* malformed: ignored as a whole, silent */
    CHECK_EQ_INT(run_child(self_path, (const char *[]){"RLX_TUNING_FILE", bad, NULL}, out, sizeof out, err,
                           sizeof err), 0);
    if (strncmp(out, "ignored ", 8) != 0 || !strstr(out, "line 3: bad value 'oops' for unroll|0") || err[0])
        test_fail(__FILE__, __LINE__, "bad file: out '%s' err '%s'", out, err);
    /* ... and said on stderr under RLX_DEBUG */
    CHECK_EQ_INT(run_child(self_path, (const char *[]){"RLX_TUNING_FILE", bad, "RLX_DEBUG", "1", NULL}, out,
                           sizeof out, err, sizeof err), 0);
    if (!strstr(err, "tuning file ignored") || !strstr(err, "line 3"))
        test_fail(__FILE__, __LINE__, "RLX_DEBUG: err '%s'", err);
    /* the cache dir's tuning.txt; env RLX_UNROLL wins over it */
    char dir[128];
    snprintf(dir, sizeof dir, "%s", tmpdir);
    write_text(tmp_path("tuning.txt"), "rlx-tuning 1\nany any unroll=2\n");
    CHECK_EQ_INT(run_child(self_path, (const char *[]){"RLX_CACHE_DIR", dir, "RLX_TUNING_FILE", "", NULL}, out,
                           sizeof out, err, sizeof err), 0);
    CHECK(strstr(out, "|2\n") && strstr(out, "tuning.txt"));
    CHECK_EQ_INT(run_child(self_path, (const char *[]){"RLX_CACHE_DIR", dir, "RLX_TUNING_FILE", "", "RLX_UNROLL", "4", NULL},
                           out, sizeof out, err, sizeof err), 0);
    CHECK(strstr(out, "|4\n") != NULL);
    /* XDG_CACHE_HOME/rlx, and a malformed env knob is ignored silently */
    char xdg[160];
    snprintf(xdg, sizeof xdg, "%s/xdg", tmpdir);
    mkdir(xdg, 0700);
    snprintf(want, sizeof want, "%s/xdg/rlx", tmpdir);
    mkdir(want, 0700);
    write_text(tmp_path("xdg/rlx/tuning.txt"), "rlx-tuning 1\nany any unroll=1\n");
    CHECK_EQ_INT(run_child(self_path, (const char *[]){"XDG_CACHE_HOME", xdg, "RLX_CACHE_DIR", "(unset)", "RLX_TUNING_FILE", "",
                                                       "RLX_UNROLL", "zz", NULL},
                           out, sizeof out, err, sizeof err), 0);
    CHECK(strstr(out, "|1\n") != NULL);
    CHECK(err[0] == 0);
    /* no file: "none" */
    CHECK_EQ_INT(run_child(self_path, (const char *[]){"RLX_TUNING_FILE", tmp_path("absent.txt"), NULL}, out,
                           sizeof out, err, sizeof err), 0);
    CHECK(strcmp(out, "none|0\n") == 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--startup-child") == 0)
        return startup_child();
    self_path = "/proc/self/exe";
    snprintf(tmpdir, sizeof tmpdir, "/tmp/rlx_tuning_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    /* the start-up tests set these themselves; this process reads none */
    static const test_case cases[] = {
        T(option_round_trip),   T(option_errors),      T(file_round_trip_and_precedence),
        T(malformed_files),     T(changed_knob_compiles_anew), T(fusion_ablation),
        T(file_read_at_startup),
    };
    int rc = test_main(argc, argv, cases, (int)(sizeof cases / sizeof *cases));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return rc;
}
