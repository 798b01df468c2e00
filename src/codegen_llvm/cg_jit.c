/*
 * cg_jit.c — from a scheduled kernel to machine code: build the module
 * (cg_kernel.c), verify it, optimize it with a short pipeline made for its
 * loops (KERNEL_PASSES) for the host CPU, emit an object file in memory,
 * and link it into the process with ORC LLJIT. Functions are remembered
 * in an in-memory cache keyed by the kernel's structure (sched_kernel_key),
 * so a training loop compiles each kernel once per process, and objects in
 * the disk cache (cg_disk.c), so the next process loads them instead of
 * compiling. The in-memory cache is bounded: callers hold a reference on
 * each kernel they use (a plan holds its kernels' until it is freed), and
 * kernels no one holds are evicted least recently used first once the
 * cache passes its byte budget (kernel_cache_bytes), each object's
 * resource tracker removed so that its JIT memory is returned.
 *
 * Every llvm-c/Orc.h and LLJIT.h call of librlx is in this file: the ORC
 * C API calls itself experimental, so it stays in one place. One LLJIT
 * instance serves the process. Compiling (module, passes, codegen) runs
 * outside the cache lock, each compile with its own LLVMContext and its
 * own TargetMachine (neither is thread-safe), so cg_kernels_prepare can
 * compile a schedule's kernels in parallel; adding an object and looking
 * its symbol up are serialized by the lock.
 *
 * A kernel's symbol is named after the 128-bit hash of its key, so an
 * object from the disk cache links under the name this process expects.
 *
 * A kernel has two variants (sched_kernel_key): specialized, its sizes
 * compiled in, and size-generic, reading them from its parameter array, one
 * compile for every size of its structure. Their keys differ from the
 * first word, in memory and on disk. Knob generic_kernels picks: 0 the
 * specialized, 2 the generic, 1 (auto) the specialized on a structure's
 * first sight and the generic once it comes with other numbers (J.seen),
 * and whichever variant is in memory already.
 *
 * Memory of librlx's own comes from ir_alloc (the fault-injection hook),
 * except jit_init's two strings (J.env, J.layout): it runs once per
 * process, so a failure injected there would turn the JIT off for good.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "codegen_llvm/cg_disk.h"
#include "codegen_llvm/cg_internal.h"


/* A cached kernel. Entries are their own allocations (the table moves
 * its slots when it grows) so that a reference stays valid. refs counts
 * the references handed out (plans, tests); an entry without any is on
 * the idle list, most recently used first, and may be evicted: removing
 * its resource tracker unmaps its code and data. */
struct cg_kernel {
    cg_hash128 h;
    uint64_t *key; /* owns */
    size_t nkey;
    cg_kernel_fn fn;
    size_t bytes; /* its share of the budget (kernel_bytes) */
    long refs;
    LLVMOrcResourceTrackerRef rt; /* owns: what the JIT holds of its object */
    cg_kernel *newer, *older;     /* the idle list, while refs == 0 and cached */
    bool cached;                  /* in J.tab (false once a test reset dropped it) */
    bool generic;                 /* size-generic (its key is a generic one) */
};

/* Generic keys seen, for the auto policy (cg_kernels_prepare_as): a
 * direct-mapped table of generic key hash -> the hash of the specialized
 * key it came with. A structure arriving again with another specialized
 * key (other numbers) gets its generic kernel. A collision only forgets
 * a structure (one more specialized compile). */
enum { SEEN_SLOTS = 1024 };
typedef struct {
    cg_hash128 g, s;
} seen_ent;

typedef struct {
    uint64_t th; /* the ir_table hash word, of h.lo */
    cg_kernel *k;
} cache_ent;

/* The default budget of the kernel cache. A kernel costs 8-16 KiB (its
 * object's pages plus the key), so 64 MiB keeps 4,000-8,000 kernels idle:
 * many times what one training step or serving loop uses (the W10 GPT
 * step runs a few hundred), so a steady loop never recompiles, while a
 * process that sees endless new shapes stays bounded. */
#define DEFAULT_BUDGET ((size_t)64 << 20)

static struct {
    pthread_once_t once;
    pthread_mutex_t lock;    /* the cache, the JIT, next_id */
    pthread_mutex_t tm_lock; /* the pool of target machines */
    rlx_status init_status;
    char init_msg[512];
    LLVMOrcLLJITRef jit; /* owns; lives until exit */
    LLVMTargetRef target;
    char *triple, *cpu, *features; /* own (LLVM messages) */
    char *layout;                  /* owns */
    char passes[1024];                      /* the pipeline, KERNEL_PASSES unless RLX_JIT_PASSES */
    char llvm_args[512];                    /* RLX_LLVM_ARGS (cg_configure) */
    LLVMTargetMachineRef *tms;              /* idle target machines, for compiles */
    size_t ntms, captms;
    int debug;
    uint8_t *env; /* owns: the disk-key prefix (LLVM, CPU, features, pipeline; cg_disk.c adds the build identity) */
    size_t nenv;
    cg_hash128 env_h;
    ir_table tab; /* of cache_ent */
    size_t budget, bytes;  /* of the kernels cached, in use or idle */
    uint64_t evictions;
    cg_kernel *idle_new, *idle_old; /* the idle list's two ends */
    unsigned long long next_id;
    LLVMOrcLLJITRef *retired; /* JITs replaced by cg_cache_reset_for_tests: their code stays */
    size_t nretired;
    seen_ent seen[SEEN_SLOTS];
} J = {.once = PTHREAD_ONCE_INIT,
       .lock = PTHREAD_MUTEX_INITIALIZER,
       .tm_lock = PTHREAD_MUTEX_INITIALIZER,
       .budget = DEFAULT_BUDGET};

static atomic_int inject;

void cg_test_inject(int what) { atomic_store(&inject, what); }

/* Moves an LLVM error into msg (consumes err). */
static rlx_status take_error(LLVMErrorRef err, const char *what, char *msg, size_t cap)
{
    char *m = LLVMGetErrorMessage(err);
    snprintf(msg, cap, "LLVM %s: %s", what, m);
    LLVMDisposeErrorMessage(m);
    return RLX_E_JIT;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A target machine for the host, -O3; the JIT and every compile use the
 * same settings, so objects from the disk cache match what LLJIT makes. */
static LLVMTargetMachineRef new_machine(void)
{
    return LLVMCreateTargetMachine(J.target, J.triple, J.cpu, J.features, LLVMCodeGenLevelAggressive,
                                   LLVMRelocDefault, LLVMCodeModelJITDefault);
}

static LLVMTargetMachineRef tm_take(void)
{
    LLVMTargetMachineRef tm = NULL;
    pthread_mutex_lock(&J.tm_lock);
    if (J.ntms)
        tm = J.tms[--J.ntms];
    pthread_mutex_unlock(&J.tm_lock);
    return tm ? tm : new_machine();
}

static void tm_give(LLVMTargetMachineRef tm)
{
    pthread_mutex_lock(&J.tm_lock);
    if (J.ntms == J.captms) {
        size_t cap = J.captms ? 2 * J.captms : 4;
        LLVMTargetMachineRef *t = ir_realloc(J.tms, cap * sizeof *t);
        if (t) {
            J.tms = t;
            J.captms = cap;
        }
    }
    if (J.ntms < J.captms) {
        J.tms[J.ntms++] = tm;
        tm = NULL;
    }
    pthread_mutex_unlock(&J.tm_lock);
    if (tm)
        LLVMDisposeTargetMachine(tm);
}

/* The JIT only links the objects compiled here (its own IR compiler is
 * never used), so its target machine is a plain one for the triple: a
 * generic CPU with no features makes LLJIT start in ~0.3 ms instead of
 * ~0.8 (it builds two more target machines from this one). */
static LLVMOrcLLJITRef make_jit(char *msg, size_t cap)
{
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(J.target, J.triple, "generic", "", LLVMCodeGenLevelNone,
                                                      LLVMRelocDefault, LLVMCodeModelJITDefault);
    if (!tm) {
        snprintf(msg, cap, "LLVM could not create a target machine for %s", J.triple);
        return NULL;
    }
    LLVMOrcLLJITBuilderRef b = LLVMOrcCreateLLJITBuilder();
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(b, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm));
    LLVMOrcLLJITRef jit;
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&jit, b); /* consumes b */
    if (err) {
        take_error(err, "LLJIT", msg, cap);
        return NULL;
    }
    /* memset/memcpy that the optimizer may introduce resolve in the process */
    LLVMOrcDefinitionGeneratorRef gen;
    err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(jit), NULL, NULL);
    if (err) {
        take_error(err, "process symbols", msg, cap);
        LLVMOrcDisposeLLJIT(jit);
        return NULL;
    }
    LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(jit), gen);
    return jit;
}

static cg_hash128 hash128(const void *p, size_t n, cg_hash128 seed)
{
    return (cg_hash128){cg_disk_hash64(p, n, seed.lo), cg_disk_hash64(p, n, seed.hi ^ 0xa0761d6478bd642full)};
}

/* The optimizer's pipeline. A kernel is a few loop nests over noalias
 * buffers plus always-inline math, so O3's function simplification and
 * its repeated cleanups of the vectorized IR (a third of a W2 compile,
 * InstCombine alone a sixth) buy nothing over this: inline, promote the
 * counters and accumulators, simplify, hoist, rotate, vectorize with the
 * kernel's width/interleave metadata, clean up once. Compared with
 * default<O3> by llc on the bench's kernels: the same code (O3 also
 * unswitches integer divisions on divisors 0 and -1); on 500 test-suite
 * kernels, 17 lose what O3's full unrolling of 2..4-trip inner loops gave
 * (odd shapes; adding loop-unroll-full here unrolls 8-trip rows too and
 * then makes the outer loop a bad vector loop). IC: as in O3,
 * since a plain "instcombine" aborts the process when one run leaves work
 * for another. */
#define IC "instcombine<no-verify-fixpoint>"
#define KERNEL_PASSES                                                                                              \
    "always-inline,function(sroa,early-cse<memssa>," IC ",simplifycfg,loop-mssa(licm,loop-rotate,licm),"          \
    "loop(loop-idiom,indvars,loop-deletion),loop-vectorize," IC ",simplifycfg)"

void cg_configure(const cg_config *c)
{
    J.debug = c->debug;
    snprintf(J.llvm_args, sizeof J.llvm_args, "%s", c->llvm_args ? c->llvm_args : "");
    snprintf(J.passes, sizeof J.passes, "%s", c->passes && *c->passes ? c->passes : KERNEL_PASSES);
    cg_disk_configure(c->debug, c->default_dir);
}

static void jit_init(void)
{
    J.init_status = RLX_E_JIT;
    /* the LLVM command-line options (RLX_LLVM_ARGS, a debugging knob like
     * RLX_JIT_PASSES: e.g. "-force-vector-interleave=2") */
    const char *la = J.llvm_args;
    if (!J.passes[0]) /* not configured (a test calling the code generator first) */
        snprintf(J.passes, sizeof J.passes, "%s", KERNEL_PASSES);
    if (*la) {
        static char buf[512];
        static const char *argv[16];
        int argc = 0;
        snprintf(buf, sizeof buf, "%s", la);
        argv[argc++] = "rlx";
        for (char *t = strtok(buf, " "); t && argc < 16; t = strtok(NULL, " "))
            argv[argc++] = t;
        LLVMParseCommandLineOptions(argc, argv, NULL);
    }
    double t0 = now();
    if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter()) {
        snprintf(J.init_msg, sizeof J.init_msg, "LLVM has no native target in this build");
        return;
    }
    J.triple = LLVMGetDefaultTargetTriple();
    J.cpu = LLVMGetHostCPUName();
    J.features = LLVMGetHostCPUFeatures();
    char *err = NULL;
    if (LLVMGetTargetFromTriple(J.triple, &J.target, &err)) {
        snprintf(J.init_msg, sizeof J.init_msg, "LLVM target %s: %s", J.triple, err);
        LLVMDisposeMessage(err);
        return;
    }
    /* the disk key's prefix: everything besides the kernel that changes
     * the object (knobs included, so a debugging run never pollutes it) */
    unsigned major, minor, patch;
    LLVMGetVersion(&major, &minor, &patch);
    /* (the build identity of librlx is prefixed by cg_disk.c) */
#define ENV_FMT "rlx kernel object\nLLVM %u.%u.%u\n%s\n%s\n%s\n%s\n%s\n"
    int n = snprintf(NULL, 0, ENV_FMT, major, minor, patch, J.triple, J.cpu, J.features, J.passes, la);
    if (n < 0 || !(J.env = malloc((size_t)n + 1))) {
        snprintf(J.init_msg, sizeof J.init_msg, "out of memory starting the JIT");
        return;
    }
    snprintf((char *)J.env, (size_t)n + 1, ENV_FMT, major, minor, patch, J.triple, J.cpu, J.features, J.passes, la);
    J.nenv = (size_t)n;
    J.env_h = hash128(J.env, J.nenv, (cg_hash128){0x726c786b65726e31ull, 0x6469736b63616368ull});
    double t1 = now();
    if (!(J.jit = make_jit(J.init_msg, sizeof J.init_msg)))
        return;
    /* the data layout depends on the triple only; compiles set it on their
     * modules (the compile's target machines are made when first needed,
     * so a process whose kernels all come from the disk cache makes none) */
    if (!(J.layout = strdup(LLVMOrcLLJITGetDataLayoutStr(J.jit)))) {
        snprintf(J.init_msg, sizeof J.init_msg, "out of memory starting the JIT");
        return;
    }
    J.init_status = RLX_OK;
    if (J.debug >= 2) /* (1 stays one line per kernel) */
        fprintf(stderr, "rlx: JIT started in %.2f ms (LLJIT %.2f)\n", 1e3 * (now() - t0), 1e3 * (now() - t1));
}

/* ------------------------------------------------------------ the cache */

/* Everything below runs under J.lock. */

static cache_ent *cache_find(cg_hash128 h, const uint64_t *key, size_t n)
{
    cache_ent *tab = J.tab.slots;
    if (!J.tab.cap)
        return NULL;
    for (size_t i = ir_table_home(&J.tab, ir_table_hash(h.lo)); tab[i].th; i = ir_table_next(&J.tab, i)) {
        cg_kernel *k = tab[i].k;
        if (k->h.lo == h.lo && k->h.hi == h.hi && k->nkey == n && memcmp(k->key, key, n * sizeof *key) == 0)
            return &tab[i];
    }
    return NULL;
}

/* Whether another key already has hash h (its symbol name is taken). */
static bool cache_has_hash(cg_hash128 h)
{
    const cache_ent *tab = J.tab.slots;
    if (!J.tab.cap)
        return false;
    for (size_t i = ir_table_home(&J.tab, ir_table_hash(h.lo)); tab[i].th; i = ir_table_next(&J.tab, i))
        if (tab[i].k->h.lo == h.lo && tab[i].k->h.hi == h.hi)
            return true;
    return false;
}

/* Room for one more function, made before its object is linked: a linked
 * kernel must be cached, since linking its symbol again would fail. */
static bool cache_reserve(void) { return ir_table_reserve(&J.tab, sizeof(cache_ent), 256); }

/* What a kernel costs: the JIT maps its code and its read-only data in
 * page-aligned segments of their own, so the object's size in pages plus
 * one page, and the key kept to find it. */
static size_t kernel_bytes(size_t nobj, size_t nkey)
{
    return (nobj + 4095) / 4096 * 4096 + 4096 + nkey * sizeof(uint64_t) + sizeof(cg_kernel);
}

static void idle_unlink(cg_kernel *k)
{
    *(k->newer ? &k->newer->older : &J.idle_new) = k->older;
    *(k->older ? &k->older->newer : &J.idle_old) = k->newer;
    k->newer = k->older = NULL;
}

static void idle_push(cg_kernel *k)
{
    k->older = J.idle_new;
    k->newer = NULL;
    *(J.idle_new ? &J.idle_new->newer : &J.idle_old) = k;
    J.idle_new = k;
}

static void acquire(cg_kernel *k)
{
    if (k->refs++ == 0 && k->cached)
        idle_unlink(k);
}

/* Unmaps k's code and data and frees it. */
static void destroy(cg_kernel *k)
{
    LLVMErrorRef err = LLVMOrcResourceTrackerRemove(k->rt);
    if (err)
        LLVMConsumeError(err);
    LLVMOrcReleaseResourceTracker(k->rt);
    ir_free(k->key);
    ir_free(k);
}

/* Takes k out of the table and the budget (it stays allocated). */
static void uncache(cg_kernel *k)
{
    cache_ent *tab = J.tab.slots;
    for (size_t i = ir_table_home(&J.tab, ir_table_hash(k->h.lo)); tab[i].th; i = ir_table_next(&J.tab, i))
        if (tab[i].k == k) {
            ir_table_remove(&J.tab, sizeof *tab, i);
            break;
        }
    if (k->refs == 0)
        idle_unlink(k);
    k->cached = false;
    J.bytes -= k->bytes;
}

/* Evicts idle kernels, the least recently used first, until the cache is
 * within its budget (kernels in use stay, whatever they cost). */
static void trim(void)
{
    while (J.bytes > J.budget && J.idle_old) {
        cg_kernel *k = J.idle_old;
        uncache(k);
        J.evictions++;
        destroy(k);
        /* The session's symbol-string pool keeps a name whose last user is
         * gone until it is told to drop the dead ones: every kernel has a
         * name of its own, so a long run leaked one name per eviction
         * (about 90 bytes; 8 MiB over rlx-soak's 120,000 evictions). A
         * sweep walks the whole pool, so once per 64 evictions. */
        if (J.evictions % 64 == 0)
            LLVMOrcSymbolStringPoolClearDeadEntries(
                LLVMOrcExecutionSessionGetSymbolStringPool(LLVMOrcLLJITGetExecutionSession(J.jit)));
#ifdef __GLIBC__
        /* A kernel's compile allocates on a compile thread's malloc arena
         * and its eviction frees there; glibc gives an arena's free pages
         * back only from its top, so over hours the resident set crept up
         * in free, fragmented chunks (rlx-soak: malloc's held bytes grew
         * 4.3 MiB in 25 minutes while its bytes in use grew 0.3). A trim
         * returns every whole free page of every arena; it walks them all,
         * so once per 256 evictions (each followed a compile of a
         * millisecond or more). */
        if (J.evictions % 256 == 0)
            malloc_trim(0);
#endif
    }
}

/* Caches a new kernel with one reference (the caller's); takes key and
 * rt; only after cache_reserve. NULL when out of memory (nothing taken). */
static cg_kernel *cache_put(cg_hash128 h, uint64_t *key, size_t n, cg_kernel_fn fn, LLVMOrcResourceTrackerRef rt,
                            size_t nobj)
{
    cg_kernel *k = ir_calloc(1, sizeof *k);
    if (!k)
        return NULL;
    *k = (cg_kernel){.h = h, .key = key, .nkey = n, .fn = fn, .bytes = kernel_bytes(nobj, n), .refs = 1, .rt = rt,
                     .cached = true, .generic = key[0] == SCHED_KEY_GENERIC};
    cache_ent *e = ir_table_claim(&J.tab, sizeof *e, ir_table_hash(h.lo));
    e->k = k;
    J.bytes += k->bytes;
    trim();
    return k;
}

void cg_kernel_retain(cg_kernel *k)
{
    if (!k)
        return;
    pthread_mutex_lock(&J.lock); /* (held: refs > 0, so it is on no idle list) */
    k->refs++;
    pthread_mutex_unlock(&J.lock);
}

void cg_kernel_release(cg_kernel *k)
{
    if (!k)
        return;
    pthread_mutex_lock(&J.lock);
    if (--k->refs == 0) {
        if (k->cached) {
            idle_push(k);
            trim();
        } else {
            destroy(k); /* dropped by a test reset while in use */
        }
    }
    pthread_mutex_unlock(&J.lock);
}

void cg_cache_set_budget(size_t bytes)
{
    pthread_mutex_lock(&J.lock);
    J.budget = bytes;
    trim();
    pthread_mutex_unlock(&J.lock);
}

void cg_cache_counts_get(cg_cache_counts *out)
{
    pthread_mutex_lock(&J.lock);
    *out = (cg_cache_counts){.bytes = J.bytes, .budget = J.budget, .entries = J.tab.count, .evictions = J.evictions};
    pthread_mutex_unlock(&J.lock);
}

void cg_cache_reset_for_tests(void)
{
    pthread_once(&J.once, jit_init);
    if (J.init_status != RLX_OK)
        return;
    pthread_mutex_lock(&J.lock);
    char msg[256];
    LLVMOrcLLJITRef jit = make_jit(msg, sizeof msg);
    LLVMOrcLLJITRef *r = jit ? ir_realloc(J.retired, (J.nretired + 1) * sizeof *r) : NULL;
    if (r) {
        /* a fresh JIT, so the same symbols can be defined again; the old
         * one keeps the code of the kernels still referenced, freed when
         * their last reference goes */
        J.retired = r;
        J.retired[J.nretired++] = J.jit;
        J.jit = jit;
        cache_ent *tab = J.tab.slots;
        for (size_t i = 0; i < J.tab.cap; i++) {
            cg_kernel *k = tab[i].th ? tab[i].k : NULL;
            if (!k)
                continue;
            if (k->refs == 0)
                idle_unlink(k);
            k->cached = false;
            J.bytes -= k->bytes;
            if (k->refs == 0)
                destroy(k);
        }
        ir_table_free(&J.tab);
        memset(J.seen, 0, sizeof J.seen); /* a fresh cache state: every structure unseen */
    } else if (jit) {
        LLVMOrcDisposeLLJIT(jit);
    }
    pthread_mutex_unlock(&J.lock);
}

/* -------------------------------------------------------------- compile */

/* RLX_DEBUG=1: one line per kernel compiled or loaded (2 adds the optimized
 * IR and the JIT start time, 3 the assembly). */
static void debug_kernel(const sched_kernel *k, const char *name, bool generic, bool loaded, double ms, double opt_ms,
                         double cg_ms)
{
    char shape[160] = "";
    size_t n = 0;
    for (int d = 0; d < k->rank && n < sizeof shape; d++)
        n += (size_t)snprintf(shape + n, sizeof shape - n, "%s%lld%s", d ? "," : "", (long long)k->shape[d],
                              (k->red_mask >> d & 1) ? "r" : "");
    if (loaded)
        fprintf(stderr, "rlx: loaded %s%s for %s [%s] (%s, %d args, %d instrs) from the disk cache in %.2f ms\n",
                generic ? "generic " : "", name, ir_ops[k->node->op].name, shape, ir_dtype_name(k->node->dtype),
                k->nargs, k->ninstr, ms);
    else
        fprintf(stderr,
                "rlx: compiled %s%s for %s [%s] (%s, %d args, %d instrs) in %.2f ms (optimizer %.2f, codegen %.2f)\n",
                generic ? "generic " : "", name, ir_ops[k->node->op].name, shape, ir_dtype_name(k->node->dtype),
                k->nargs, k->ninstr, ms, opt_ms, cg_ms);
}

/* LLVM's default diagnostic handler prints remarks and warnings (e.g. "loop
 * not vectorized") to stderr; a library must not print: they go to stderr
 * only from RLX_DEBUG=2 on (level 1 is librlx's own lines). Errors still
 * come back through the calls' results. */
static void diagnostic(LLVMDiagnosticInfoRef info, void *ctx)
{
    (void)ctx;
    if (J.debug < 2)
        return;
    char *text = LLVMGetDiagInfoDescription(info);
    fprintf(stderr, "rlx: llvm: %s\n", text);
    LLVMDisposeMessage(text);
}

/* RLX_DEBUG=3: the assembly of the optimized module, from a copy (code
 * generation rewrites the IR it runs on). */
static void debug_asm(LLVMTargetMachineRef tm, LLVMModuleRef mod)
{
    LLVMModuleRef copy = LLVMCloneModule(mod);
    LLVMMemoryBufferRef buf = NULL;
    char *err = NULL;
    if (!LLVMTargetMachineEmitToMemoryBuffer(tm, copy, LLVMAssemblyFile, &err, &buf)) {
        fprintf(stderr, "%.*s\n", (int)LLVMGetBufferSize(buf), LLVMGetBufferStart(buf));
        LLVMDisposeMemoryBuffer(buf);
    } else if (err) {
        fprintf(stderr, "rlx: no assembly: %s\n", err);
    }
    if (err)
        LLVMDisposeMessage(err);
    LLVMDisposeModule(copy);
}

/* The object file of kernel k, its function named name. Runs outside the
 * cache lock: the context and the target machine are this call's own. */
static rlx_status build_object(const sched_kernel *k, uint64_t knob_word, bool generic, const char *name, int inj,
                               LLVMMemoryBufferRef *obj, double *t_opt, double *t_cg, char *msg, size_t cap)
{
    LLVMTargetMachineRef tm = tm_take();
    if (!tm) {
        snprintf(msg, cap, "LLVM could not create a target machine for %s", J.triple);
        return RLX_E_JIT;
    }
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMContextSetDiagnosticHandler(ctx, diagnostic, NULL);
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext(name, ctx);
    LLVMSetTarget(mod, J.triple);
    LLVMSetDataLayout(mod, J.layout);
    cg_mod m;
    cg_mod_init(&m, ctx, mod);
    cg_kernel_knob_apply(&m, knob_word);
    m.generic = generic;
    if (inj == 3) /* f16 in integer operations, as on a host without F16C */
        m.f16c = false;
    rlx_status st = cg_emit_kernel(&m, k, name, msg, cap);
    if (st == RLX_OK && inj == 1) /* a block without terminator: must not pass the verifier */
        LLVMAppendBasicBlockInContext(ctx, LLVMGetNamedFunction(mod, name), "broken");
    char *verr = NULL;
    if (st == RLX_OK && LLVMVerifyModule(mod, LLVMReturnStatusAction, &verr)) {
        snprintf(msg, cap, "LLVM verifier rejected kernel %s: %s", name, verr ? verr : "");
        st = RLX_E_JIT;
    }
    if (verr)
        LLVMDisposeMessage(verr);
    if (st == RLX_OK) {
        /* KERNEL_PASSES inlines with always-inline only: every function
         * the emitter made besides the kernel (its noalias body, the math)
         * is inlined into it */
        unsigned ai = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
        for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
            if (LLVMGetLinkage(f) == LLVMInternalLinkage && !LLVMIsDeclaration(f) &&
                !LLVMGetEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, ai))
                LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, ai, 0));
        LLVMPassBuilderOptionsRef opt = LLVMCreatePassBuilderOptions();
        LLVMPassBuilderOptionsSetLoopVectorization(opt, 1);
        LLVMPassBuilderOptionsSetSLPVectorization(opt, 1);
        LLVMPassBuilderOptionsSetLoopInterleaving(opt, 1);
        /* no unroller: the vectorizer's interleaving already gives the
         * inner loop its ILP, and unrolling cost ~30% of compile time with
         * no measured gain on the bench workloads */
        LLVMPassBuilderOptionsSetLoopUnrolling(opt, 0);
        double t0 = now();
        LLVMErrorRef err = LLVMRunPasses(mod, J.passes, tm, opt);
        *t_opt = now() - t0;
        LLVMDisposePassBuilderOptions(opt);
        if (err)
            st = take_error(err, "optimizer", msg, cap);
    }
    if (st == RLX_OK && J.debug >= 2) {
        char *ir = LLVMPrintModuleToString(mod);
        fprintf(stderr, "%s\n", ir);
        LLVMDisposeMessage(ir);
        if (J.debug >= 3)
            debug_asm(tm, mod);
    }
    if (st == RLX_OK) {
        char *err = NULL;
        *t_cg = now();
        if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &err, obj)) {
            snprintf(msg, cap, "LLVM code generation of %s: %s", name, err ? err : "");
            st = RLX_E_JIT;
        }
        *t_cg = now() - *t_cg;
        if (err)
            LLVMDisposeMessage(err);
    }
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
    tm_give(tm);
    return st;
}

/* Links obj (taken) into the JIT and looks name up; a kernel found in the
 * cache meanwhile (another thread) wins. Takes key: cached or freed. *out:
 * the kernel, with a reference for the caller. */
static rlx_status publish(cg_hash128 h, uint64_t *key, size_t n, const char *name, LLVMMemoryBufferRef obj,
                          int inj, cg_kernel **out, char *msg, size_t cap)
{
    rlx_status st = RLX_OK;
    size_t nobj = LLVMGetBufferSize(obj);
    pthread_mutex_lock(&J.lock);
    cache_ent *e = cache_find(h, key, n);
    if (e) {
        acquire(e->k);
        *out = e->k;
        LLVMDisposeMemoryBuffer(obj);
        ir_free(key);
        pthread_mutex_unlock(&J.lock);
        return RLX_OK;
    }
    if (!cache_reserve()) {
        LLVMDisposeMemoryBuffer(obj);
        ir_free(key);
        pthread_mutex_unlock(&J.lock);
        snprintf(msg, cap, "out of memory caching kernel %s", name);
        return RLX_E_NOMEM;
    }
    /* a tracker per object: a failed link is removed again (the same
     * symbol can be defined by the next attempt), an evicted kernel's
     * memory is returned */
    LLVMOrcResourceTrackerRef rt = LLVMOrcJITDylibCreateResourceTracker(LLVMOrcLLJITGetMainJITDylib(J.jit));
    LLVMErrorRef err = LLVMOrcLLJITAddObjectFileWithRT(J.jit, rt, obj); /* takes obj */
    LLVMOrcExecutorAddress addr = 0;
    if (err) {
        st = take_error(err, "adding an object", msg, cap);
    } else if ((err = LLVMOrcLLJITLookup(J.jit, &addr, inj == 2 ? "rlx_no_such_kernel" : name))) { /* links now */
        st = take_error(err, "lookup", msg, cap);
    }
    if (st == RLX_OK && !(*out = cache_put(h, key, n, (cg_kernel_fn)(uintptr_t)addr, rt, nobj))) {
        snprintf(msg, cap, "out of memory caching kernel %s", name);
        st = RLX_E_NOMEM;
    }
    if (st != RLX_OK) {
        LLVMErrorRef e2 = LLVMOrcResourceTrackerRemove(rt);
        if (e2)
            LLVMConsumeError(e2);
        LLVMOrcReleaseResourceTracker(rt);
        ir_free(key);
    }
    pthread_mutex_unlock(&J.lock);
    return st;
}

/* One lookup that missed the in-memory cache: from disk, else compiled
 * (and stored); then linked. Takes key. unique: the hash's symbol name is
 * taken by another key, or a test fault is injected: no disk cache. */
typedef struct {
    bool loaded, compiled;
    double seconds;
} obtain_result;

static rlx_status obtain(const sched_kernel *k, uint64_t *key, size_t n, cg_hash128 h, bool unique, int inj,
                         cg_kernel **out, obtain_result *res, char *msg, size_t cap)
{
    double t0 = now(), t_opt = 0, t_cg = 0;
    bool generic = key[0] == SCHED_KEY_GENERIC;
    char name[64];
    int len = snprintf(name, sizeof name, "rlx_k%016llx%016llx", (unsigned long long)h.hi, (unsigned long long)h.lo);
    if (unique) {
        pthread_mutex_lock(&J.lock);
        snprintf(name + len, sizeof name - (size_t)len, "_%llu", J.next_id++);
        pthread_mutex_unlock(&J.lock);
    }
    uint8_t *dkey = NULL;
    size_t ndkey = J.nenv + n * sizeof *key;
    if (!unique && cg_disk_enabled() && (dkey = ir_alloc(ndkey))) {
        memcpy(dkey, J.env, J.nenv);
        memcpy(dkey + J.nenv, key, n * sizeof *key);
        uint8_t *file;
        const uint8_t *o;
        size_t no;
        if (cg_disk_load(h, dkey, ndkey, &file, &o, &no)) {
            LLVMMemoryBufferRef obj = LLVMCreateMemoryBufferWithMemoryRangeCopy((const char *)o, no, name);
            ir_free(file);
            uint64_t *kcopy = ir_alloc(n * sizeof *key);
            if (obj && kcopy) {
                memcpy(kcopy, key, n * sizeof *key);
                if (publish(h, kcopy, n, name, obj, inj, out, msg, cap) == RLX_OK) {
                    ir_free(key);
                    ir_free(dkey);
                    res->loaded = true;
                    res->seconds += now() - t0;
                    if (J.debug >= 1)
                        debug_kernel(k, name, generic, true, 1e3 * (now() - t0), 0, 0);
                    return RLX_OK;
                }
                /* an object that passed the checksum but does not link:
                 * compile it again, which also replaces the file */
            } else {
                ir_free(kcopy);
                if (obj)
                    LLVMDisposeMemoryBuffer(obj);
            }
        }
    }
    LLVMMemoryBufferRef obj = NULL;
    rlx_status st = build_object(k, key[n - 1], generic, name, inj, &obj, &t_opt, &t_cg, msg, cap);
    if (st == RLX_OK) {
        /* the JIT takes a copy; the file is written only once it linked */
        LLVMMemoryBufferRef mine = dkey ? obj : NULL;
        if (mine && !(obj = LLVMCreateMemoryBufferWithMemoryRangeCopy(LLVMGetBufferStart(mine),
                                                                        LLVMGetBufferSize(mine), name))) {
            obj = mine; /* no copy: link it without storing */
            mine = NULL;
        }
        st = publish(h, key, n, name, obj, inj, out, msg, cap);
        if (mine && st == RLX_OK)
            cg_disk_store(h, dkey, ndkey, LLVMGetBufferStart(mine), LLVMGetBufferSize(mine));
        if (mine)
            LLVMDisposeMemoryBuffer(mine);
    } else {
        ir_free(key);
    }
    ir_free(dkey);
    res->seconds += now() - t0;
    if (st == RLX_OK) {
        res->compiled = true;
        if (J.debug >= 1)
            debug_kernel(k, name, generic, false, 1e3 * (now() - t0), 1e3 * t_opt, 1e3 * t_cg);
    }
    return st;
}

/* A kernel's key words (ir_alloc'ed, the knob word last) and their hash. */
typedef struct {
    uint64_t *key;
    size_t n;
    cg_hash128 h;
} kkey;

/* The key of k's specialized or generic variant: RLX_OK, RLX_E_NOMEM, or
 * RLX_E_UNSUPPORTED when k has no generic key (sched_kernel_key). */
static rlx_status kernel_key(const sched_kernel *k, const knob_state *knobs, bool generic, kkey *out)
{
    *out = (kkey){0};
    size_t ns = sched_kernel_key(k, generic, NULL, 0);
    if (ns == SIZE_MAX)
        return RLX_E_UNSUPPORTED;
    uint64_t *key = ir_alloc((ns + 1) * sizeof *key);
    if (!key)
        return RLX_E_NOMEM;
    if (sched_kernel_key(k, generic, key, ns) != ns) { /* (the second plan failed) */
        ir_free(key);
        return RLX_E_UNSUPPORTED;
    }
    key[ns] = cg_kernel_knob_word(knobs, k); /* the vector width and interleave it is compiled with: last */
    *out = (kkey){key, ns + 1, hash128(key, (ns + 1) * sizeof *key, J.env_h)};
    return RLX_OK;
}

/* The policy's mode for k: generic as asked, or the knob when -1. */
static int kernel_mode(const sched_kernel *k, const knob_state *knobs, int generic)
{
    (void)k;
    return generic >= 0 ? generic : (int)knob_value(knobs, KNOB_GENERIC_KERNELS, KCLASS_ANY, -1);
}

/* A cached kernel of key kk, with a reference for the caller; NULL if none. */
static cg_kernel *find_take(const kkey *kk)
{
    pthread_mutex_lock(&J.lock);
    cache_ent *e = cache_find(kk->h, kk->key, kk->n);
    if (e)
        acquire(e->k);
    pthread_mutex_unlock(&J.lock);
    return e ? e->k : NULL;
}

/* Looks k's variant under mode up (cg_kernels_prepare_as): *hit a cached
 * kernel with a reference for the caller, else *chosen the key to obtain
 * and *unique whether its hash names another key already. The specialized
 * key first: a hit there needs no generic key (a row kernel's costs a
 * plan). RLX_E_NOMEM. */
static rlx_status select_kernel(const sched_kernel *k, const knob_state *knobs, int mode, kkey *chosen,
                                cg_kernel **hit, bool *unique)
{
    kkey sp = {0}, ge = {0};
    *chosen = (kkey){0};
    *hit = NULL;
    rlx_status st = RLX_OK;
    if (mode != 2) {
        if ((st = kernel_key(k, knobs, false, &sp)) != RLX_OK)
            return st;
        if ((*hit = find_take(&sp))) {
            ir_free(sp.key);
            return RLX_OK;
        }
    }
    if (mode != 0 && (st = kernel_key(k, knobs, true, &ge)) != RLX_OK) {
        if (st != RLX_E_UNSUPPORTED) {
            ir_free(sp.key);
            return st;
        }
        if (!sp.key && (st = kernel_key(k, knobs, false, &sp)) != RLX_OK) /* no generic variant: the specialized one */
            return st;
        mode = 0;
    }
    if (mode == 0) {
        *chosen = sp;
    } else if (mode == 2) {
        *chosen = ge;
    } else if ((*hit = find_take(&ge))) { /* auto: the generic kernel, in memory already */
        ir_free(sp.key);
        ir_free(ge.key);
        return RLX_OK;
    } else { /* auto: generic once the structure came with other numbers */
        pthread_mutex_lock(&J.lock);
        seen_ent *s = &J.seen[ge.h.lo % SEEN_SLOTS];
        bool known = s->g.lo == ge.h.lo && s->g.hi == ge.h.hi;
        bool gen = known && (s->s.lo != sp.h.lo || s->s.hi != sp.h.hi);
        if (!known)
            *s = (seen_ent){ge.h, sp.h};
        pthread_mutex_unlock(&J.lock);
        *chosen = gen ? ge : sp;
        ir_free(gen ? sp.key : ge.key);
    }
    if (mode == 2 && (*hit = find_take(chosen))) {
        ir_free(chosen->key);
        *chosen = (kkey){0};
        return RLX_OK;
    }
    pthread_mutex_lock(&J.lock);
    *unique = cache_has_hash(chosen->h);
    pthread_mutex_unlock(&J.lock);
    return RLX_OK;
}

static void add_result(cg_stats *st, const obtain_result *r, rlx_status s)
{
    st->seconds += r->seconds;
    if (r->loaded) {
        st->hits++;
        st->loaded++;
    } else {
        st->misses++;
        st->compiled += s == RLX_OK && r->compiled;
    }
}

rlx_status cg_kernel_get(const sched_kernel *k, const knob_state *knobs, cg_kernel **out, cg_stats *stats,
                         char *msg, size_t cap)
{
    *out = NULL;
    pthread_once(&J.once, jit_init);
    if (J.init_status != RLX_OK) {
        snprintf(msg, cap, "%s", J.init_msg);
        return J.init_status;
    }
    kkey kk;
    bool taken = false;
    if (select_kernel(k, knobs, kernel_mode(k, knobs, -1), &kk, out, &taken) != RLX_OK) {
        snprintf(msg, cap, "out of memory keying a kernel");
        return RLX_E_NOMEM;
    }
    if (*out) {
        stats->hits++;
        return RLX_OK;
    }
    int inj = atomic_exchange(&inject, 0);
    obtain_result r = {0};
    rlx_status st = obtain(k, kk.key, kk.n, kk.h, taken || inj, inj, out, &r, msg, cap);
    add_result(stats, &r, st);
    return st;
}

cg_kernel_fn cg_kernel_func(const cg_kernel *k) { return k ? k->fn : NULL; }
bool cg_kernel_is_generic(const cg_kernel *k) { return k && k->generic; }

/* ---------------------------------------------------- parallel prepare */

typedef struct {
    long idx;      /* in ks */
    long dup_of;   /* another item with the same key, or -1 */
    uint64_t *key; /* owned until obtain takes it */
    size_t n;
    cg_hash128 h;
    bool unique;
    int inj;
    rlx_status st;
    cg_kernel *k;
    obtain_result r;
    char msg[512];
} prep_item;

typedef struct prep_work {
    const sched_kernel *ks;
    prep_item *items;
    long count;
    atomic_long next;
    int want, joined, left; /* helper threads: asked for, in, done (C.lock) */
    struct prep_work *qnext;
} prep_work;

static void *prep_worker(void *arg)
{
    prep_work *w = arg;
    for (long i; (i = atomic_fetch_add(&w->next, 1)) < w->count;) {
        prep_item *it = &w->items[i];
        if (it->dup_of >= 0)
            continue;
        it->st = obtain(&w->ks[it->idx], it->key, it->n, it->h, it->unique, it->inj, &it->k, &it->r, it->msg,
                        sizeof it->msg);
        it->key = NULL;
    }
    return NULL;
}

/* Compile helpers are persistent threads, started on demand (up to the
 * most ever asked for) and never stopped: a thread per call would hand
 * LLVM's allocations to whichever glibc arena the new thread is given,
 * spreading freed memory over arenas that a long-lived process keeps
 * (issue 18's soak); a fixed set of threads keeps a fixed set of arenas.
 * Jobs queue FIFO; a helper joins the first job that still wants one. */
enum { COMPILE_MAX = 64 };

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    prep_work *head; /* jobs still wanting helpers */
    int nthreads, idle;
} C = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0};

static void unqueue(prep_work *w)
{
    for (prep_work **p = &C.head; *p; p = &(*p)->qnext)
        if (*p == w) {
            *p = w->qnext;
            return;
        }
}

static void *compile_helper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&C.lock);
    for (;;) {
        while (!C.head) {
            C.idle++;
            pthread_cond_wait(&C.wake, &C.lock);
            C.idle--;
        }
        prep_work *w = C.head;
        if (++w->joined == w->want)
            unqueue(w);
        pthread_mutex_unlock(&C.lock);
        prep_worker(w);
        pthread_mutex_lock(&C.lock);
        w->left++;
        pthread_cond_broadcast(&C.done);
    }
    return NULL;
}

/* Queues w for up to want helpers, starting threads if too few are idle;
 * with none it simply runs on the caller alone. */
static void compile_submit(prep_work *w, int want)
{
    pthread_mutex_lock(&C.lock);
    w->want = want;
    prep_work **p = &C.head;
    while (*p)
        p = &(*p)->qnext;
    *p = w;
    for (int need = want - C.idle; need > 0 && C.nthreads < COMPILE_MAX; need--) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &at, compile_helper, NULL);
        pthread_attr_destroy(&at);
        if (rc != 0)
            break; /* fewer helpers; the caller's share grows */
        C.nthreads++;
    }
    pthread_cond_broadcast(&C.wake);
    pthread_mutex_unlock(&C.lock);
}

/* After the caller's own share: no helper joins w any more, and those
 * that did have finished with it (w lives on the caller's stack). */
static void compile_retire(prep_work *w)
{
    pthread_mutex_lock(&C.lock);
    if (w->joined < w->want)
        unqueue(w);
    while (w->left < w->joined)
        pthread_cond_wait(&C.done, &C.lock);
    pthread_mutex_unlock(&C.lock);
}

void cg_kernels_release(cg_kernel **refs, long n)
{
    for (long i = 0; refs && i < n; i++) {
        cg_kernel_release(refs[i]);
        refs[i] = NULL;
    }
}

/* Compiles (or loads) the items not found in memory on up to nthreads
 * threads and adds their counters; the first failure's status. */
static rlx_status prep_run(const sched_kernel *ks, prep_item *items, long np, int nthreads, cg_stats *stats,
                           char *msg, size_t cap)
{
    prep_work w = {.ks = ks, .items = items, .count = np};
    int nt = nthreads < 1 ? 1 : nthreads;
    if (nt > np)
        nt = (int)np;
    if (nt > 1)
        compile_submit(&w, nt - 1);
    prep_worker(&w);
    if (nt > 1)
        compile_retire(&w);
    rlx_status st = RLX_OK;
    for (long j = 0; j < np; j++) {
        prep_item *it = &items[j];
        if (it->dup_of >= 0) {
            it->st = items[it->dup_of].st;
            if (it->st == RLX_OK) {
                stats->hits++;
                pthread_mutex_lock(&J.lock);
                acquire(items[it->dup_of].k);
                pthread_mutex_unlock(&J.lock);
                it->k = items[it->dup_of].k;
            }
            continue;
        }
        add_result(stats, &it->r, it->st);
        if (it->st != RLX_OK && st == RLX_OK) {
            st = it->st;
            snprintf(msg, cap, "%s", it->msg);
        }
    }
    return st;
}

rlx_status cg_kernels_prepare(const sched_kernel *ks, long n, int nthreads, const knob_state *knobs, cg_kernel **refs,
                              cg_stats *stats, char *msg, size_t cap)
{
    return cg_kernels_prepare_as(ks, n, nthreads, knobs, -1, refs, stats, msg, cap);
}

rlx_status cg_kernels_prepare_as(const sched_kernel *ks, long n, int nthreads, const knob_state *knobs, int generic,
                                 cg_kernel **refs, cg_stats *stats, char *msg, size_t cap)
{
    for (long i = 0; i < n; i++)
        refs[i] = NULL;
    pthread_once(&J.once, jit_init);
    if (J.init_status != RLX_OK) {
        snprintf(msg, cap, "%s", J.init_msg);
        return J.init_status;
    }
    prep_item *items = n > 0 ? ir_calloc((size_t)n, sizeof *items) : NULL;
    if (n > 0 && !items) {
        snprintf(msg, cap, "out of memory preparing kernels");
        return RLX_E_NOMEM;
    }
    long np = 0;
    rlx_status st = RLX_OK;
    for (long i = 0; i < n; i++) {
        if (ks[i].kind != SCHED_LOOP)
            continue;
        prep_item *it = &items[np];
        *it = (prep_item){.idx = i, .dup_of = -1};
        kkey kk;
        if (select_kernel(&ks[i], knobs, kernel_mode(&ks[i], knobs, generic), &kk, &refs[i], &it->unique) != RLX_OK) {
            snprintf(msg, cap, "out of memory keying a kernel");
            st = RLX_E_NOMEM;
            break;
        }
        if (refs[i]) {
            stats->hits++;
            continue;
        }
        it->key = kk.key;
        it->n = kk.n;
        it->h = kk.h;
        /* the same kernel twice: compiled once, the second is a hit */
        for (long j = 0; j < np; j++) {
            prep_item *o = &items[j];
            if (o->dup_of < 0 && o->h.lo == it->h.lo && o->h.hi == it->h.hi) {
                if (o->n == it->n && memcmp(o->key, it->key, it->n * sizeof *it->key) == 0) {
                    it->dup_of = j;
                    break;
                }
                it->unique = o->unique = true; /* same hash, another key: neither may use the name */
            }
        }
        if (it->dup_of < 0 && (it->inj = atomic_exchange(&inject, 0)))
            it->unique = true;
        np++;
    }
    if (st == RLX_OK && np > 0)
        st = prep_run(ks, items, np, nthreads, stats, msg, cap);
    for (long j = 0; j < np; j++) {
        if (items[j].dup_of >= 0 || st != RLX_OK)
            ir_free(items[j].key); /* obtain took the others' (NULL then) */
        refs[items[j].idx] = items[j].k;
    }
    ir_free(items);
    if (st != RLX_OK)
        cg_kernels_release(refs, n); /* all or nothing */
    return st;
}
