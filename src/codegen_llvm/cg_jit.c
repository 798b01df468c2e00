/*
 * cg_jit.c — from a scheduled kernel to machine code: build the module
 * (cg_kernel.c), verify it, optimize it with the O3 pipeline for the host
 * CPU, compile it with ORC LLJIT, and remember the function in a cache
 * keyed by the kernel's structure (sched_kernel_key), so a training loop
 * compiles each kernel once per process.
 *
 * Every llvm-c/Orc.h and LLJIT.h call of librlx is in this file: the ORC
 * C API calls itself experimental, so it stays in one place. One LLJIT
 * instance serves the process; compiles are serialized by one lock (v1).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Support.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "codegen_llvm/cg_internal.h"

typedef struct {
    uint64_t hash;
    uint64_t *key; /* owns */
    size_t nkey;
    cg_kernel_fn fn;
} cache_ent;

static struct {
    pthread_once_t once;
    pthread_mutex_t lock;
    rlx_status init_status;
    char init_msg[512];
    LLVMOrcLLJITRef jit;      /* owns; lives until exit */
    LLVMTargetMachineRef tm;  /* owns: the target of the optimization passes */
    int debug;
    cache_ent *tab;
    size_t cap, count;
    unsigned long long next_id;
} J = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

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

static LLVMTargetMachineRef host_machine(char *msg, size_t cap)
{
    char *triple = LLVMGetDefaultTargetTriple(), *cpu = LLVMGetHostCPUName(), *feat = LLVMGetHostCPUFeatures();
    char *err = NULL;
    LLVMTargetRef target;
    LLVMTargetMachineRef tm = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &err)) {
        snprintf(msg, cap, "LLVM target %s: %s", triple, err);
        LLVMDisposeMessage(err);
    } else {
        tm = LLVMCreateTargetMachine(target, triple, cpu, feat, LLVMCodeGenLevelAggressive, LLVMRelocDefault,
                                     LLVMCodeModelJITDefault);
        if (!tm)
            snprintf(msg, cap, "LLVM could not create a target machine for %s", triple);
    }
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(feat);
    return tm;
}

static void jit_init(void)
{
    const char *d = getenv("RLX_DEBUG");
    J.debug = d ? atoi(d) : 0;
    J.init_status = RLX_E_JIT;
    /* RLX_LLVM_ARGS: LLVM command-line options, space separated (a debugging
     * knob, like RLX_JIT_PASSES: e.g. "-force-vector-interleave=2") */
    const char *la = getenv("RLX_LLVM_ARGS");
    if (la && *la) {
        static char buf[512];
        static const char *argv[16];
        int argc = 0;
        snprintf(buf, sizeof buf, "%s", la);
        argv[argc++] = "rlx";
        for (char *t = strtok(buf, " "); t && argc < 16; t = strtok(NULL, " "))
            argv[argc++] = t;
        LLVMParseCommandLineOptions(argc, argv, NULL);
    }
    if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter()) {
        snprintf(J.init_msg, sizeof J.init_msg, "LLVM has no native target in this build");
        return;
    }
    if (!(J.tm = host_machine(J.init_msg, sizeof J.init_msg)))
        return;
    LLVMTargetMachineRef tm2 = host_machine(J.init_msg, sizeof J.init_msg);
    if (!tm2)
        return;
    /* the JIT compiles for the same CPU and features, at -O3 */
    LLVMOrcLLJITBuilderRef b = LLVMOrcCreateLLJITBuilder();
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(b, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm2));
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&J.jit, b); /* consumes b */
    if (err) {
        take_error(err, "LLJIT", J.init_msg, sizeof J.init_msg);
        J.jit = NULL;
        return;
    }
    /* memset/memcpy that the optimizer may introduce resolve in the process */
    LLVMOrcDefinitionGeneratorRef gen;
    err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(J.jit), NULL, NULL);
    if (err) {
        take_error(err, "process symbols", J.init_msg, sizeof J.init_msg);
        return;
    }
    LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(J.jit), gen);
    J.init_status = RLX_OK;
}

/* ------------------------------------------------------------ the cache */

static uint64_t key_hash(const uint64_t *w, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (size_t i = 0; i < n; i++) {
        h ^= w[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 0xff51afd7ed558ccdull;
    }
    return h ^ (h >> 33);
}

static cache_ent *cache_find(uint64_t h, const uint64_t *key, size_t n)
{
    if (!J.cap)
        return NULL;
    for (size_t i = h & (J.cap - 1);; i = (i + 1) & (J.cap - 1)) {
        cache_ent *e = &J.tab[i];
        if (!e->key)
            return NULL;
        if (e->hash == h && e->nkey == n && memcmp(e->key, key, n * sizeof *key) == 0)
            return e;
    }
}

/* Takes ownership of key on success. */
static bool cache_put(uint64_t h, uint64_t *key, size_t n, cg_kernel_fn fn)
{
    if ((J.count + 1) * 2 > J.cap) {
        size_t cap = J.cap ? J.cap * 2 : 256;
        cache_ent *t = calloc(cap, sizeof *t);
        if (!t)
            return false;
        for (size_t i = 0; i < J.cap; i++) {
            if (!J.tab[i].key)
                continue;
            size_t j = J.tab[i].hash & (cap - 1);
            while (t[j].key)
                j = (j + 1) & (cap - 1);
            t[j] = J.tab[i];
        }
        free(J.tab);
        J.tab = t;
        J.cap = cap;
    }
    size_t i = h & (J.cap - 1);
    while (J.tab[i].key)
        i = (i + 1) & (J.cap - 1);
    J.tab[i] = (cache_ent){h, key, n, fn};
    J.count++;
    return true;
}

/* -------------------------------------------------------------- compile */

/* RLX_DEBUG=1: one line per compiled kernel; 2: also its optimized IR. */
static void debug_kernel(const sched_kernel *k, const char *name, double ms, double opt_ms)
{
    char shape[160] = "";
    size_t n = 0;
    for (int d = 0; d < k->rank && n < sizeof shape; d++)
        n += (size_t)snprintf(shape + n, sizeof shape - n, "%s%lld%s", d ? "," : "", (long long)k->shape[d],
                              (k->red_mask >> d & 1) ? "r" : "");
    fprintf(stderr, "rlx: compiled %s for %s [%s] (%s, %d args, %d instrs) in %.2f ms (optimizer %.2f)\n", name,
            ir_ops[k->node->op].name, shape, rlx_dtype_name(k->node->dtype), k->nargs, k->ninstr, ms, opt_ms);
}

/* LLVM's default diagnostic handler prints remarks and warnings (e.g. "loop
 * not vectorized") to stderr; a library must not print: they go to stderr
 * only under RLX_DEBUG. Errors still come back through the calls' results. */
static void diagnostic(LLVMDiagnosticInfoRef info, void *ctx)
{
    (void)ctx;
    if (!J.debug)
        return;
    char *text = LLVMGetDiagInfoDescription(info);
    fprintf(stderr, "rlx: llvm: %s\n", text);
    LLVMDisposeMessage(text);
}

static rlx_status compile(const sched_kernel *k, cg_kernel_fn *fn, char *msg, size_t cap)
{
    char name[48];
    snprintf(name, sizeof name, "rlx_k%llu", J.next_id++);
    int inj = atomic_exchange(&inject, 0);
    double t0 = now(), t_opt = 0;
    LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
    LLVMContextRef ctx = LLVMOrcThreadSafeContextGetContext(tsc);
    LLVMContextSetDiagnosticHandler(ctx, diagnostic, NULL);
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext(name, ctx);
    LLVMSetTarget(mod, LLVMOrcLLJITGetTripleString(J.jit));
    LLVMSetDataLayout(mod, LLVMOrcLLJITGetDataLayoutStr(J.jit));
    cg_mod m;
    cg_mod_init(&m, ctx, mod);
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
        LLVMPassBuilderOptionsRef opt = LLVMCreatePassBuilderOptions();
        LLVMPassBuilderOptionsSetLoopVectorization(opt, 1);
        LLVMPassBuilderOptionsSetSLPVectorization(opt, 1);
        LLVMPassBuilderOptionsSetLoopInterleaving(opt, 1);
        /* no unroller: the vectorizer's interleaving already gives the
         * inner loop its ILP, and unrolling cost ~30% of compile time with
         * no measured gain on the bench workloads */
        LLVMPassBuilderOptionsSetLoopUnrolling(opt, 0);
        t_opt = now();
        /* RLX_JIT_PASSES overrides the pipeline (a debugging knob) */
        const char *pipe = getenv("RLX_JIT_PASSES");
        LLVMErrorRef err = LLVMRunPasses(mod, pipe && *pipe ? pipe : "default<O3>", J.tm, opt);
        t_opt = now() - t_opt;
        LLVMDisposePassBuilderOptions(opt);
        if (err)
            st = take_error(err, "optimizer", msg, cap);
    }
    if (st != RLX_OK) {
        LLVMDisposeModule(mod);
        LLVMOrcDisposeThreadSafeContext(tsc);
        return st;
    }
    if (J.debug >= 2) {
        char *ir = LLVMPrintModuleToString(mod);
        fprintf(stderr, "%s\n", ir);
        LLVMDisposeMessage(ir);
    }
    LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(mod, tsc); /* takes mod */
    LLVMOrcDisposeThreadSafeContext(tsc); /* the module keeps its context alive */
    LLVMErrorRef err = LLVMOrcLLJITAddLLVMIRModule(J.jit, LLVMOrcLLJITGetMainJITDylib(J.jit), tsm); /* takes tsm */
    if (err)
        return take_error(err, "adding a module", msg, cap);
    LLVMOrcExecutorAddress addr = 0;
    err = LLVMOrcLLJITLookup(J.jit, &addr, inj == 2 ? "rlx_no_such_kernel" : name); /* compiles now */
    if (err)
        return take_error(err, "lookup", msg, cap);
    *fn = (cg_kernel_fn)(uintptr_t)addr;
    if (J.debug >= 1)
        debug_kernel(k, name, 1e3 * (now() - t0), 1e3 * t_opt);
    return RLX_OK;
}

rlx_status cg_kernel_get(const sched_kernel *k, cg_kernel_fn *fn, cg_stats *stats, char *msg, size_t cap)
{
    pthread_once(&J.once, jit_init);
    if (J.init_status != RLX_OK) {
        snprintf(msg, cap, "%s", J.init_msg);
        return J.init_status;
    }
    size_t n = sched_kernel_key(k, NULL, 0);
    uint64_t *key = malloc(n * sizeof *key);
    if (!key) {
        snprintf(msg, cap, "out of memory keying a kernel");
        return RLX_E_NOMEM;
    }
    sched_kernel_key(k, key, n);
    uint64_t h = key_hash(key, n);
    pthread_mutex_lock(&J.lock);
    cache_ent *e = cache_find(h, key, n);
    rlx_status st = RLX_OK;
    if (e) {
        *fn = e->fn;
        stats->hits++;
        free(key);
    } else {
        stats->misses++;
        double t0 = now();
        st = compile(k, fn, msg, cap);
        stats->seconds += now() - t0;
        if (st == RLX_OK) {
            stats->compiled++;
            if (!cache_put(h, key, n, *fn))
                free(key); /* still usable, just not cached */
        } else {
            free(key);
        }
    }
    pthread_mutex_unlock(&J.lock);
    return st;
}
