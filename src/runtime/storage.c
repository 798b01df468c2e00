/*
 * storage.c — payload memory: 64-byte aligned buffers from ir_alloc's hook,
 * and storages over user memory with the user's deleter.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime/exec/pool.h"
#include "runtime/rt.h"

static _Atomic uint64_t copied_bytes;

void rt_count_copy(uint64_t bytes) { atomic_fetch_add_explicit(&copied_bytes, bytes, memory_order_relaxed); }

uint64_t rt_copied_bytes(void) { return atomic_load_explicit(&copied_bytes, memory_order_relaxed); }

static void free_aligned(void *data, void *ctx)
{
    (void)ctx;
    free(data);
}

ir_storage *rt_storage_alloc(size_t bytes, bool zero)
{
    if (bytes > (size_t)IR_MAX_BYTES)
        return NULL;
    /* ir_alloc's hook decides failure; the aligned block itself comes from
     * aligned_alloc so AVX-512 loads of a whole line never straddle. */
    if (ir_alloc_injected_failure())
        return NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    void *data = aligned_alloc(64, rounded ? rounded : 64);
    if (!data)
        return NULL;
    if (zero)
        memset(data, 0, rounded);
    ir_storage *st = ir_storage_new(data, bytes, free_aligned, NULL);
    if (!st)
        free(data);
    return st;
}

bool rt_storage_private(const ir_storage *st) { return st->free_fn == free_aligned || rt_bufpool_made(st); }

typedef struct {
    void (*deleter)(void *);
    void *ctx;
} user_deleter;

static void free_user(void *data, void *ctx)
{
    (void)data;
    user_deleter *d = ctx;
    if (d->deleter)
        d->deleter(d->ctx);
    ir_free(d);
}

ir_storage *rt_storage_wrap(void *data, size_t bytes, void (*deleter)(void *), void *ctx)
{
    user_deleter *d = ir_alloc(sizeof *d);
    if (!d)
        return NULL;
    d->deleter = deleter;
    d->ctx = ctx;
    ir_storage *st = ir_storage_new(data, bytes, free_user, d);
    if (!st)
        ir_free(d);
    return st;
}

/* The slabs: 2 MiB-aligned mappings with MADV_HUGEPAGE, carved front to
 * back; a request that does not fit the current slab's rest starts the
 * next one (the rest, at most RT_SLAB_ITEM_MAX, stays unused). */
#define SLAB_SIZE ((size_t)2 << 20)
enum { NSLAB = (int)(RT_SLAB_BUDGET / SLAB_SIZE) };

static struct {
    pthread_mutex_t lock;
    char *base[NSLAB];
    _Atomic int n; /* slabs mapped; base[0..n) never change once set */
    size_t used;   /* of the last slab */
    bool failed;   /* a mapping failed: no more tries */
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static char *slab_map(void)
{
    /* over-map by a slab, keep the aligned middle */
    char *raw = mmap(NULL, 2 * SLAB_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *p = (char *)(((uintptr_t)raw + SLAB_SIZE - 1) & ~(uintptr_t)(SLAB_SIZE - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + 2 * SLAB_SIZE > p + SLAB_SIZE)
        munmap(p + SLAB_SIZE, (size_t)(raw + 2 * SLAB_SIZE - (p + SLAB_SIZE)));
#ifdef MADV_HUGEPAGE
    madvise(p, SLAB_SIZE, MADV_HUGEPAGE); /* advice only: small pages still serve */
#endif
    return p;
}

void *rt_slab_take(size_t size)
{
    if (size == 0 || size > RT_SLAB_ITEM_MAX || size % 64)
        return NULL;
    void *out = NULL;
    pthread_mutex_lock(&S.lock);
    int n = atomic_load_explicit(&S.n, memory_order_relaxed);
    if (n > 0 && S.used + size <= SLAB_SIZE) {
        out = S.base[n - 1] + S.used;
        S.used += size;
    } else if (n < NSLAB && !S.failed) {
        char *p = slab_map();
        if (p) {
            S.base[n] = p;
            S.used = size;
            out = p;
            atomic_store_explicit(&S.n, n + 1, memory_order_release);
        } else {
            S.failed = true;
        }
    }
    pthread_mutex_unlock(&S.lock);
    return out;
}

bool rt_slab_owns(const void *p)
{
    int n = atomic_load_explicit(&S.n, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if ((const char *)p >= S.base[i] && (const char *)p < S.base[i] + SLAB_SIZE)
            return true;
    return false;
}
