/*
 * bufpool.c — large payload buffers for the JIT's kernel outputs.
 *
 * Fresh memory is expensive: the first touch of each 4 KiB page faults
 * (~12 µs a page here, 200 ms for a fresh 64 MiB buffer). Buffers of at
 * least RT_BUFPOOL_MIN bytes are therefore 2 MiB-aligned mmap blocks
 * (rounded up to 4 KiB: huge pages where a whole 2 MiB fits, small ones
 * in the tail, so a 1 MiB buffer zeroes 1 MiB, not 2) with MADV_HUGEPAGE,
 * and when the storage that owns
 * one dies the block goes back to a free list here, not to the OS: the
 * next realization of the same schedule takes the same blocks again, so a
 * training loop maps nothing new after its first step.
 *
 * Best fit: the smallest free block that holds the request and is at most
 * twice its size. Free blocks beyond CACHE_MAX bytes go back to the OS,
 * oldest first. One mutex guards the list; its work is a few compares.
 *
 * Up to HUGE_MIN, buffers are size classes (four per octave, so at most
 * 25% over the request) from huge-page slabs (storage.c) or the heap, and a dead one goes on its class's
 * free list, not back to malloc: glibc returns freed memory to the OS
 * (munmap of mmapped chunks, trimming the heap top, shrinking thread
 * heaps), and a training step's many outputs of 4 KiB - 1 MiB then fault
 * their pages in again on every step. Free small buffers beyond
 * SMALL_CACHE_MAX bytes go back to malloc.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime/exec/pool.h"

enum { FREE_MAX = 64 };
#define HUGE_PAGE ((size_t)2 << 20)
#define SMALL_PAGE ((size_t)4 << 10)
#define CACHE_MAX ((size_t)1 << 30)
#define HUGE_MIN ((size_t)1 << 20)
#define SMALL_CACHE_MAX ((size_t)256 << 20)
/* classes: 4 KiB << o times (4 + s) / 4 for octave o, step s, below HUGE_MIN */
enum { CLASS_STEPS = 4, NCLASS = 8 * CLASS_STEPS + 1 };

typedef struct small_free {
    struct small_free *next; /* kept in the free buffer itself */
} small_free;

typedef struct {
    void *p;
    size_t size;
    uint64_t age; /* when it was freed: the oldest goes first */
} block;

static struct {
    pthread_mutex_t lock;
    block free[FREE_MAX];
    int nfree;
    size_t cached;
    uint64_t clock;
    small_free *small[NCLASS]; /* per class, last freed first */
    size_t small_cached;
    rt_bufpool_counts n;
} B = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The class of a request up to HUGE_MIN and its size. */
static int small_class(size_t bytes, size_t *size)
{
    size_t base = RT_BUFPOOL_MIN;
    int o = 0;
    while (o < NCLASS / CLASS_STEPS - 1 && bytes > 2 * base) {
        base *= 2;
        o++;
    }
    size_t step = base / CLASS_STEPS;
    size_t k = bytes <= base ? 0 : (bytes - base + step - 1) / step; /* 0..CLASS_STEPS */
    *size = base + k * step;
    return o * CLASS_STEPS + (int)k;
}

static void *map_block(size_t size)
{
    /* over-map by one huge page, then trim to a 2 MiB-aligned block */
    size_t len = size + HUGE_PAGE;
    char *raw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uintptr_t a = ((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    char *p = (char *)a;
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    size_t tail = (size_t)(raw + len - (p + size));
    if (tail)
        munmap(p + size, tail);
#ifdef MADV_HUGEPAGE
    madvise(p, size, MADV_HUGEPAGE); /* advice only: failure is harmless */
#endif
    return p;
}

/* Unmaps the oldest free blocks until the cache fits (lock held). */
static void trim(size_t limit)
{
    while (B.cached > limit && B.nfree > 0) {
        int o = 0;
        for (int i = 1; i < B.nfree; i++)
            if (B.free[i].age < B.free[o].age)
                o = i;
        munmap(B.free[o].p, B.free[o].size);
        B.cached -= B.free[o].size;
        B.n.unmapped++;
        B.free[o] = B.free[--B.nfree];
    }
}

static void give_back(void *data, void *ctx)
{
    size_t size = (size_t)(uintptr_t)ctx & ~(size_t)1;
    bool heap = (uintptr_t)ctx & 1;
    pthread_mutex_lock(&B.lock);
    B.n.live_bytes -= size;
    if (heap) {
        if (B.small_cached + size > SMALL_CACHE_MAX && !rt_slab_owns(data)) { /* (slab blocks stay listed) */
            B.n.unmapped++;
            pthread_mutex_unlock(&B.lock);
            free(data);
            return;
        }
        size_t s;
        int c = small_class(size, &s);
        small_free *f = data;
        f->next = B.small[c];
        B.small[c] = f;
        B.small_cached += size;
    } else if (size > CACHE_MAX) {
        munmap(data, size);
        B.n.unmapped++;
    } else {
        trim(CACHE_MAX - size);
        if (B.nfree == FREE_MAX)
            trim(B.cached - B.free[0].size); /* make room: drops the oldest */
        B.free[B.nfree++] = (block){data, size, ++B.clock};
        B.cached += size;
    }
    pthread_mutex_unlock(&B.lock);
}

/* Frees every cached small buffer. */
static void small_drain(void)
{
    pthread_mutex_lock(&B.lock);
    B.small_cached = 0;
    for (int c = 0; c < NCLASS; c++) {
        small_free *keep = NULL; /* slab blocks (rt_slab_take) are never freed */
        size_t size = (RT_BUFPOOL_MIN << (c / CLASS_STEPS)) / CLASS_STEPS * (size_t)(CLASS_STEPS + c % CLASS_STEPS);
        while (B.small[c]) {
            small_free *f = B.small[c];
            B.small[c] = f->next;
            if (rt_slab_owns(f)) {
                f->next = keep;
                keep = f;
                B.small_cached += size;
                continue;
            }
            free(f);
            B.n.unmapped++;
        }
        B.small[c] = keep;
    }
    pthread_mutex_unlock(&B.lock);
}

/* A buffer of a size class: a freed one of its class, else the heap's. */
static void *small_take(size_t bytes, size_t *size)
{
    int c = small_class(bytes, size);
    pthread_mutex_lock(&B.lock);
    small_free *f = B.small[c];
    if (f) {
        B.small[c] = f->next;
        B.small_cached -= *size;
        B.n.reused++;
    }
    pthread_mutex_unlock(&B.lock);
    if (f)
        return f;
    void *p = rt_slab_take(*size); /* huge pages: the first run faults in far fewer */
    if (!p)
        p = aligned_alloc(64, *size); /* a multiple of 1 KiB: valid for aligned_alloc */
    if (!p) { /* the cache may be what fills memory */
        small_drain();
        p = aligned_alloc(64, *size);
    }
    if (p) {
        pthread_mutex_lock(&B.lock);
        B.n.mapped++;
        B.n.mapped_bytes += *size;
        pthread_mutex_unlock(&B.lock);
    }
    return p;
}

/* A 2 MiB-aligned block: a free one that fits, else a fresh mapping. */
static void *huge_take(size_t bytes, size_t *out_size)
{
    size_t size = (bytes + SMALL_PAGE - 1) & ~(SMALL_PAGE - 1);
    /* the tail a huge page too when that costs at most a quarter more
     * memory: a small page's first touch costs ~40 us in a VM, a huge
     * page's about five small ones' (a 20 MiB arena's 1.6 MiB tail: 16 ms) */
    size_t whole = (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    if (whole - size <= size / 4)
        size = whole;
    void *p = NULL;
    pthread_mutex_lock(&B.lock);
    int best = -1;
    for (int i = 0; i < B.nfree; i++) {
        size_t s = B.free[i].size;
        if (s >= size && s / 2 <= size && (best < 0 || s < B.free[best].size))
            best = i;
    }
    if (best >= 0) {
        p = B.free[best].p;
        size = B.free[best].size;
        B.cached -= size;
        B.free[best] = B.free[--B.nfree];
        B.n.reused++;
    }
    pthread_mutex_unlock(&B.lock);
    if (!p) {
        if (!(p = map_block(size))) {
            pthread_mutex_lock(&B.lock); /* the cache may be what fills memory */
            trim(0);
            pthread_mutex_unlock(&B.lock);
            if (!(p = map_block(size)))
                return NULL;
        }
        pthread_mutex_lock(&B.lock);
        B.n.mapped++;
        B.n.mapped_bytes += size;
        pthread_mutex_unlock(&B.lock);
    }
    *out_size = size;
    return p;
}

ir_storage *rt_bufpool_storage(size_t bytes)
{
    if (bytes > (size_t)IR_MAX_BYTES)
        return NULL;
    void *probe = ir_alloc(1); /* the allocation hook decides failure, as for every storage */
    if (!probe)
        return NULL;
    ir_free(probe);
    size_t size;
    /* (exactly 1 MiB too: two fill a huge-page slab, W10b's many 1 MiB
     * weights' buffers otherwise fault in 256 small pages each) */
    void *p = bytes <= HUGE_MIN ? small_take(bytes, &size) : huge_take(bytes, &size);
    if (!p)
        return NULL;
    /* the deleter's context: the size, its low bit set for a heap buffer
     * (sizes are multiples of 1 KiB; a 1 MiB class is not a mapped block) */
    void *tag = (void *)(uintptr_t)(size | (bytes <= HUGE_MIN));
    ir_storage *st = ir_storage_new(p, bytes, give_back, tag);
    pthread_mutex_lock(&B.lock);
    B.n.live_bytes += size;
    pthread_mutex_unlock(&B.lock);
    if (!st)
        give_back(p, tag);
    return st;
}

bool rt_bufpool_made(const ir_storage *st) { return st->free_fn == give_back; }

void rt_bufpool_counts_get(rt_bufpool_counts *out)
{
    pthread_mutex_lock(&B.lock);
    *out = B.n;
    out->cached_bytes = B.cached + B.small_cached;
    pthread_mutex_unlock(&B.lock);
}

uint64_t rt_bufpool_fresh_bytes(void)
{
    pthread_mutex_lock(&B.lock);
    uint64_t b = B.n.mapped_bytes;
    pthread_mutex_unlock(&B.lock);
    return b;
}
