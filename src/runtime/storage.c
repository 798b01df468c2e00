/*
 * storage.c — payload memory: 64-byte aligned buffers from ir_alloc's hook,
 * and storages over user memory with the user's deleter.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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
