/*
 * knobs.c — the knob table, explicit settings and the tuning file (see
 * knobs.h for the precedence and the file format). Every change makes a
 * new immutable state (knob_state) that later snapshots share; a state is
 * freed when its last snapshot is released. The environment is read by
 * the option table (src/tensor/options.c), never here.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "passes/knobs.h"

const knob_info knob_table[KNOB_COUNT] = {
    [KNOB_VECTOR_WIDTH] = {"vector_width", 0, 0, 64},
    [KNOB_UNROLL] = {"unroll", 0, 0, 16},
    [KNOB_REDUCE_ACC] = {"reduce_accumulators", 0, 0, 16},
    [KNOB_GRAIN] = {"grain", 32768, 64, 1L << 26},
    [KNOB_GEMM_BLOCK] = {"gemm_block", 0, 0, 1 << 20},
    [KNOB_SMALL_MATMUL] = {"small_matmul", 0, 0, 1L << 40},
    [KNOB_BF16_GEMM] = {"bf16_gemm", 0, 0, 1},
    [KNOB_F32_GEMM] = {"f32_gemm", 0, 0, 2},
    [KNOB_FUSE_ELEMENTWISE] = {"fuse_elementwise", 1, 0, 1},
    [KNOB_FUSE_REDUCE] = {"fuse_reduce", 1, 0, 1},
    [KNOB_FUSE_PHASES] = {"fuse_phases", 1, 0, 1},
    [KNOB_GENERIC_KERNELS] = {"generic_kernels", 1, 0, 2},
    [KNOB_REDUCE_ACC_F64] = {"reduce_acc_f64", 0, 0, 1},
    [KNOB_ATTENTION_BWD] = {"attention_bwd", 2, 0, 2},
    [KNOB_GEMV] = {"gemv", 0, 0, 1},
    [KNOB_HALF_GELU] = {"half_gelu", 1, 0, 1},
    [KNOB_HALF_KERNELS] = {"half_kernels", 3, 0, 3},
};
const char *const knob_class_names[KCLASS_COUNT] = {"any", "ew", "ew_math", "reduce", "rows", "matmul"};
const char *const knob_bucket_names[KBUCKET_COUNT] = {"tiny", "small", "medium", "large"};

enum { MAX_ENTRIES = 4096, MAX_LINE = 1024, MAX_FILE = 1 << 20 };
#define UNSET LONG_MIN

/* The tuning entries of one loaded file, shared by the states made while
 * it is loaded. */
typedef struct {
    atomic_long refs;
    int n;
    knob_entry *e; /* owns (ir_alloc'ed by knobs_parse) */
} knob_file;

struct knob_state {
    atomic_long refs;
    unsigned long epoch;
    long val[KNOB_COUNT]; /* explicit settings, UNSET when none */
    knob_file *file;      /* shares; NULL: no entries */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static knob_state initial;  /* the first state: never freed */
static knob_state *cur;     /* under lock: what a snapshot takes */
static char status[512] = "none"; /* under lock */
static atomic_ulong epoch;  /* bumped by every change of a knob's value */

unsigned long knob_epoch(void) { return atomic_load(&epoch); }

int knob_find(const char *name)
{
    for (int i = 0; name && i < KNOB_COUNT; i++)
        if (strcmp(name, knob_table[i].name) == 0)
            return i;
    return -1;
}

int knob_bucket(int64_t elems)
{
    return elems < (1 << 12) ? 0 : elems < (1 << 16) ? 1 : elems < (1 << 22) ? 2 : 3;
}

/* Vector widths are powers of two (0 = auto): the vectorizer takes no other. */
static bool valid(int id, long v)
{
    if (v < knob_table[id].lo || v > knob_table[id].hi)
        return false;
    return id != KNOB_VECTOR_WIDTH || (v & (v - 1)) == 0;
}

static bool parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end)
        return false;
    *out = v;
    return true;
}

static void file_release(knob_file *f)
{
    if (f && atomic_fetch_sub(&f->refs, 1) == 1) {
        ir_free(f->e);
        ir_free(f);
    }
}

/* The current state; under lock. */
static knob_state *current(void)
{
    if (!cur) {
        atomic_init(&initial.refs, 1); /* the reference cur holds */
        for (int i = 0; i < KNOB_COUNT; i++)
            initial.val[i] = UNSET;
        cur = &initial;
    }
    return cur;
}

knob_state *knob_snapshot(void)
{
    pthread_mutex_lock(&lock);
    knob_state *ks = current();
    atomic_fetch_add_explicit(&ks->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&lock);
    return ks;
}

void knob_release(knob_state *ks)
{
    if (!ks || atomic_fetch_sub_explicit(&ks->refs, 1, memory_order_acq_rel) != 1 || ks == &initial)
        return;
    file_release(ks->file);
    ir_free(ks);
}

unsigned long knob_state_epoch(const knob_state *ks) { return ks ? ks->epoch : 0; }

/* Makes a new current state: the old one with val[id] = v (id >= 0) or
 * with file f (taken; id < 0). False when out of memory (nothing changes). */
static bool replace(int id, long v, knob_file *f)
{
    knob_state *ks = ir_alloc(sizeof *ks);
    if (!ks)
        return false;
    pthread_mutex_lock(&lock);
    knob_state *old = current();
    memcpy(ks->val, old->val, sizeof ks->val);
    ks->file = old->file;
    if (id >= 0) {
        ks->val[id] = v;
        if (ks->file)
            atomic_fetch_add(&ks->file->refs, 1);
    } else {
        ks->file = f;
    }
    atomic_init(&ks->refs, 1);
    ks->epoch = atomic_fetch_add(&epoch, 1) + 1;
    cur = ks;
    pthread_mutex_unlock(&lock);
    knob_release(old); /* the reference cur held */
    return true;
}

/* Most specific entry wins: (cls, bucket), (cls, any), (any, any). */
long knob_value(const knob_state *ks, knob_id id, knob_class cls, int64_t elems)
{
    if (!ks)
        return knob_table[id].def;
    long v = ks->val[id];
    if (v != UNSET)
        return v;
    int b = elems < 0 ? KBUCKET_ANY : knob_bucket(elems);
    int best = -1;
    v = knob_table[id].def;
    for (int i = 0; ks->file && i < ks->file->n; i++) {
        const knob_entry *e = &ks->file->e[i];
        if (e->id != (int)id)
            continue;
        int score;
        if (e->cls == (int)cls && cls != KCLASS_ANY && e->bucket == b && b != KBUCKET_ANY)
            score = 3;
        else if (e->cls == (int)cls && e->bucket == KBUCKET_ANY)
            score = 2;
        else if (e->cls == KCLASS_ANY && e->bucket == KBUCKET_ANY)
            score = 1;
        else
            continue;
        if (score >= best) /* a later line overrides an earlier one */
            best = score, v = e->value;
    }
    return v;
}

long knob_for(knob_id id, knob_class cls, int64_t elems)
{
    knob_state *ks = knob_snapshot();
    long v = knob_value(ks, id, cls, elems);
    knob_release(ks);
    return v;
}

long knob_get(knob_id id) { return knob_for(id, KCLASS_ANY, -1); }

rlx_status knob_set(const char *name, const char *value, char *msg, size_t cap)
{
    int id = knob_find(name);
    if (id < 0) {
        snprintf(msg, cap, "unknown knob '%s'", name ? name : "(null)");
        return RLX_E_ARG;
    }
    long v = UNSET;
    if (value && *value && strcmp(value, "default") != 0 && (!parse_long(value, &v) || !valid(id, v))) {
        snprintf(msg, cap, "%s must be an integer in %ld..%ld%s, got '%s'", name, knob_table[id].lo,
                 knob_table[id].hi, id == KNOB_VECTOR_WIDTH ? " (0 or a power of two)" : "", value);
        return RLX_E_ARG;
    }
    if (!replace(id, v, NULL)) {
        snprintf(msg, cap, "out of memory");
        return RLX_E_NOMEM;
    }
    return RLX_OK;
}

void knob_set_from_env(const char *name, const char *env, const char *value, int debug)
{
    int id = knob_find(name);
    long v;
    if (id < 0 || !value || !*value)
        return;
    if (parse_long(value, &v) && valid(id, v))
        replace(id, v, NULL); /* out of memory: the default stays */
    else if (debug >= 1)
        fprintf(stderr, "rlx: ignoring %s='%s' (want an integer in %ld..%ld)\n", env, value, knob_table[id].lo,
                knob_table[id].hi);
}

bool knob_format(const char *name, char *buf, size_t cap)
{
    int id = knob_find(name);
    if (id < 0)
        return false;
    snprintf(buf, cap, "%ld", knob_get((knob_id)id));
    return true;
}

/* ------------------------------------------------------------ the file */

static int name_index(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/* Splits off the next space-separated word of *p (modifies the line). */
static char *word(char **p)
{
    char *s = *p;
    while (*s == ' ' || *s == '\t')
        s++;
    if (!*s)
        return NULL;
    char *e = s;
    while (*e && *e != ' ' && *e != '\t')
        e++;
    if (*e)
        *e++ = 0;
    *p = e;
    return s;
}

static rlx_status parse_line(char *line, int lineno, knob_entry **out, int *n, int *cap_e, char *msg, size_t cap)
{
    char *p = line, *w;
    char *cls = word(&p), *bucket = word(&p);
    int c = cls ? name_index(knob_class_names, KCLASS_COUNT, cls) : -1;
    if (c < 0) {
        snprintf(msg, cap, "line %d: unknown kernel class '%.40s'", lineno, cls ? cls : "");
        return RLX_E_ARG;
    }
    int b = -2;
    if (bucket && strcmp(bucket, "any") == 0)
        b = KBUCKET_ANY;
    else if (bucket && (b = name_index(knob_bucket_names, KBUCKET_COUNT, bucket)) < 0)
        b = -2; /* name_index's -1 would read as KBUCKET_ANY */
    if (b == -2) {
        snprintf(msg, cap, "line %d: unknown size bucket '%.40s'", lineno, bucket ? bucket : "");
        return RLX_E_ARG;
    }
    int count = 0;
    while ((w = word(&p))) {
        char *eq = strchr(w, '=');
        if (!eq) {
            snprintf(msg, cap, "line %d: '%.40s' is not knob=value", lineno, w);
            return RLX_E_ARG;
        }
        *eq = 0;
        int id = knob_find(w);
        long v;
        if (id < 0) {
            snprintf(msg, cap, "line %d: unknown knob '%.40s'", lineno, w);
            return RLX_E_ARG;
        }
        if (!parse_long(eq + 1, &v) || !valid(id, v)) {
            snprintf(msg, cap, "line %d: bad value '%.40s' for %s", lineno, eq + 1, knob_table[id].name);
            return RLX_E_ARG;
        }
        if (*n >= MAX_ENTRIES) {
            snprintf(msg, cap, "line %d: more than %d entries", lineno, MAX_ENTRIES);
            return RLX_E_ARG;
        }
        if (*n == *cap_e) {
            int nc = *cap_e ? 2 * *cap_e : 16;
            knob_entry *ne = ir_realloc(*out, (size_t)nc * sizeof *ne);
            if (!ne) {
                snprintf(msg, cap, "out of memory");
                return RLX_E_NOMEM;
            }
            *out = ne;
            *cap_e = nc;
        }
        (*out)[(*n)++] = (knob_entry){c, b, id, v};
        count++;
    }
    if (!count) {
        snprintf(msg, cap, "line %d: no knob=value", lineno);
        return RLX_E_ARG;
    }
    return RLX_OK;
}

rlx_status knobs_parse(const char *text, size_t len, knob_entry **out, int *n, char *msg, size_t cap)
{
    *out = NULL;
    *n = 0;
    if (!text && len) {
        snprintf(msg, cap, "no text");
        return RLX_E_ARG;
    }
    int cap_e = 0, lineno = 0;
    bool header = false;
    rlx_status st = RLX_OK;
    size_t i = 0;
    while (i < len && st == RLX_OK) {
        size_t j = i;
        while (j < len && text[j] != '\n')
            j++;
        lineno++;
        size_t l = j - i;
        if (l && text[i + l - 1] == '\r')
            l--;
        char line[MAX_LINE + 1];
        if (l > MAX_LINE) {
            snprintf(msg, cap, "line %d: longer than %d bytes", lineno, MAX_LINE);
            st = RLX_E_ARG;
            break;
        }
        if (memchr(text + i, 0, l)) {
            snprintf(msg, cap, "line %d: NUL byte", lineno);
            st = RLX_E_ARG;
            break;
        }
        memcpy(line, text + i, l);
        line[l] = 0;
        i = j + 1;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '#')
            continue;
        if (!header) {
            char *q = p, *a = word(&q), *b = word(&q);
            if (!a || strcmp(a, "rlx-tuning") != 0 || !b || strcmp(b, "1") != 0 || word(&q)) {
                snprintf(msg, cap, "line %d: expected the header 'rlx-tuning 1'", lineno);
                st = RLX_E_ARG;
            }
            header = true;
            continue;
        }
        st = parse_line(p, lineno, out, n, &cap_e, msg, cap);
    }
    if (st == RLX_OK && !header) {
        snprintf(msg, cap, "no 'rlx-tuning 1' header");
        st = RLX_E_ARG;
    }
    if (st != RLX_OK) {
        ir_free(*out);
        *out = NULL;
        *n = 0;
    }
    return st;
}

static rlx_status read_all(const char *path, char **text, size_t *len, char *msg, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(msg, cap, "cannot open '%s': %s", path, strerror(errno));
        return RLX_E_IO;
    }
    size_t n = 0;
    char *buf = ir_alloc(MAX_FILE + 1);
    rlx_status st = RLX_OK;
    if (!buf) {
        snprintf(msg, cap, "out of memory");
        st = RLX_E_NOMEM;
    } else {
        n = fread(buf, 1, MAX_FILE + 1, f);
        if (ferror(f)) {
            snprintf(msg, cap, "cannot read '%s'", path);
            st = RLX_E_IO;
        } else if (n > MAX_FILE) {
            snprintf(msg, cap, "larger than %d bytes", MAX_FILE);
            st = RLX_E_ARG;
        }
    }
    fclose(f);
    if (st != RLX_OK) {
        ir_free(buf);
        return st;
    }
    *text = buf;
    *len = n;
    return RLX_OK;
}

static rlx_status load(const char *path, char *msg, size_t cap)
{
    if (!path) {
        snprintf(msg, cap, "path is NULL");
        return RLX_E_ARG;
    }
    knob_entry *e = NULL;
    int n = 0;
    if (*path) {
        char *text = NULL, inner[300];
        size_t len = 0;
        rlx_status st = read_all(path, &text, &len, inner, sizeof inner);
        if (st == RLX_OK)
            st = knobs_parse(text, len, &e, &n, inner, sizeof inner);
        ir_free(text);
        if (st != RLX_OK) {
            snprintf(msg, cap, "%.200s: %s", path, inner);
            return st;
        }
    }
    knob_file *f = NULL;
    if (n) {
        f = ir_alloc(sizeof *f);
        if (!f) {
            ir_free(e);
            snprintf(msg, cap, "out of memory");
            return RLX_E_NOMEM;
        }
        atomic_init(&f->refs, 1);
        f->n = n;
        f->e = e;
    }
    if (!replace(-1, 0, f)) {
        file_release(f);
        snprintf(msg, cap, "out of memory");
        return RLX_E_NOMEM;
    }
    pthread_mutex_lock(&lock);
    if (*path)
        snprintf(status, sizeof status, "loaded %d entries from %.400s", n, path);
    else
        snprintf(status, sizeof status, "none");
    pthread_mutex_unlock(&lock);
    return RLX_OK;
}

rlx_status knobs_save(const char *path, const knob_entry *e, int n, const char *comment, char *msg, size_t cap)
{
    if (!path || !*path || (n && !e) || n < 0) {
        snprintf(msg, cap, "bad arguments");
        return RLX_E_ARG;
    }
    for (int i = 0; i < n; i++)
        if (e[i].cls < 0 || e[i].cls >= KCLASS_COUNT || e[i].bucket < KBUCKET_ANY ||
            e[i].bucket >= KBUCKET_COUNT || e[i].id < 0 || e[i].id >= KNOB_COUNT || !valid(e[i].id, e[i].value)) {
            snprintf(msg, cap, "entry %d is invalid", i);
            return RLX_E_ARG;
        }
    /* written beside, then renamed: a reader never sees half a file */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(msg, cap, "cannot write '%s': %s", tmp, strerror(errno));
        return RLX_E_IO;
    }
    fprintf(f, "# librlx tuning file (rlx-bench --tune)\n");
    if (comment && *comment) {
        fprintf(f, "# ");
        for (const char *p = comment; *p; p++)
            fputc(*p == '\n' ? ' ' : *p, f);
        fputc('\n', f);
    }
    fprintf(f, "rlx-tuning 1\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "%s %s %s=%ld\n", knob_class_names[e[i].cls],
                e[i].bucket == KBUCKET_ANY ? "any" : knob_bucket_names[e[i].bucket], knob_table[e[i].id].name,
                e[i].value);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        snprintf(msg, cap, "cannot write '%s': %s", path, strerror(errno));
        remove(tmp);
        return RLX_E_IO;
    }
    return RLX_OK;
}

rlx_status knobs_load(const char *path, char *msg, size_t cap) { return load(path, msg, cap); }

void knobs_load_startup(const char *path, int debug)
{
    char msg[400];
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "rb");
    if (!f)
        return; /* no tuning file: the defaults */
    fclose(f);
    if (load(path, msg, sizeof msg) != RLX_OK) {
        pthread_mutex_lock(&lock);
        snprintf(status, sizeof status, "ignored %s", msg);
        pthread_mutex_unlock(&lock);
        if (debug >= 1)
            fprintf(stderr, "rlx: tuning file ignored %s\n", msg);
    }
}

void knobs_status(char *buf, size_t cap)
{
    pthread_mutex_lock(&lock);
    snprintf(buf, cap, "%s", status);
    pthread_mutex_unlock(&lock);
}
