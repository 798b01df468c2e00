/* test_slab.c — first-touch memory for a program's first run: the huge-page
 * slabs the buffer pool's small size classes come from (runtime/storage.c
 * rt_slab_take), and large pool blocks whose tail becomes a whole huge page
 * when that costs at most a quarter more (exec/bufpool.c huge_take).
 *
 * The tests run in the order of TEST_MAIN: the pool's and the slabs' state
 * is the process's, so the block sizes are checked on a fresh pool first
 * and the slab budget is spent last. */
#include <stdint.h>

#include "harness.h"
#include "runtime/exec/pool.h"

static uint64_t fresh(void) { return rt_bufpool_fresh_bytes(); }

/* The bytes a fresh pool block of `bytes` maps: a whole number of 2 MiB
 * pages when rounding up costs at most a quarter of the 4 KiB-rounded
 * size, else that size. Each request is larger than any block freed
 * before it (so none is reused) and is released at once. */
TEST(large_block_tail_rounding)
{
    const size_t MiB = (size_t)1 << 20, KiB = 1024;
    struct {
        size_t bytes, want;
    } cases[] = {
        {MiB + 1, MiB + 4 * KiB},                 /* 2 MiB would be +100%: 4 KiB pages */
        {MiB + 700 * KiB, 2 * MiB},               /* +20%: a whole huge page */
        {3 * MiB, 3 * MiB},                       /* +33%: the tail stays small pages */
        {7 * MiB + 512 * KiB, 8 * MiB},           /* +7% */
        {20 * MiB + 44 * KiB, 22 * MiB},          /* a W10a arena: 1.96 MiB more is under a quarter */
        {41 * MiB - 3, 42 * MiB},                 /* odd byte count */
        {64 * MiB + 4 * KiB, 66 * MiB},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t f0 = fresh();
        ir_storage *st = rt_bufpool_storage(cases[i].bytes);
        CHECK(st != NULL);
        if (!st)
            continue;
        CHECK_EQ_INT(st->bytes, cases[i].bytes);
        CHECK_EQ_INT(fresh() - f0, cases[i].want);
        CHECK((uintptr_t)st->data % (2 * MiB) == 0);
        /* the whole request is writable, its last byte included */
        ((volatile char *)st->data)[0] = 1;
        ((volatile char *)st->data)[cases[i].bytes - 1] = 2;
        ir_storage_release(st);
    }
    /* a released block serves the same request again: nothing new mapped */
    uint64_t f0 = fresh();
    ir_storage *st = rt_bufpool_storage(20 * MiB + 44 * KiB);
    CHECK(st != NULL);
    CHECK_EQ_INT(fresh(), f0);
    ir_storage_release(st);
}

TEST(slab_bad_requests)
{
    CHECK(rt_slab_take(0) == NULL);
    CHECK(rt_slab_take(100) == NULL); /* not a multiple of 64 */
    CHECK(rt_slab_take(RT_SLAB_ITEM_MAX + 64) == NULL);
    CHECK(!rt_slab_owns(NULL));
    int local = 0;
    CHECK(!rt_slab_owns(&local));
    void *heap = malloc(64);
    CHECK(!rt_slab_owns(heap));
    free(heap);
}

/* Small pool buffers come from the slabs, are reused once released, and
 * hold their values (buffers of classes up to 1 MiB, several of each
 * live at once: disjoint). */
TEST(small_buffers_from_slabs)
{
    enum { N = 48 };
    ir_storage *st[N];
    size_t bytes[N];
    for (int i = 0; i < N; i++) {
        bytes[i] = (size_t)4096 + (size_t)i * 20000 + (size_t)(i % 3); /* 4 KiB .. ~0.9 MiB, odd sizes too */
        st[i] = rt_bufpool_storage(bytes[i]);
        CHECK(st[i] != NULL);
        if (!st[i])
            return;
        CHECK((uintptr_t)st[i]->data % 64 == 0);
        CHECK(rt_slab_owns(st[i]->data));
        CHECK(rt_slab_owns((char *)st[i]->data + bytes[i] - 1));
        memset(st[i]->data, i + 1, bytes[i]);
    }
    for (int i = 0; i < N; i++) { /* no buffer overlaps another: each still holds its own byte */
        const unsigned char *p = st[i]->data;
        CHECK(p[0] == i + 1 && p[bytes[i] / 2] == i + 1 && p[bytes[i] - 1] == i + 1);
    }
    ir_storage *mib = rt_bufpool_storage((size_t)1 << 20); /* exactly 1 MiB: a size class, from a slab too */
    CHECK(mib && rt_slab_owns(mib->data) && rt_slab_owns((char *)mib->data + ((size_t)1 << 20) - 1));
    if (mib)
        memset(mib->data, 0x5a, (size_t)1 << 20);
    ir_storage_release(mib);
    void *first = st[0]->data;
    for (int i = 0; i < N; i++)
        ir_storage_release(st[i]);
    uint64_t f0 = fresh();
    ir_storage *again = rt_bufpool_storage(bytes[0]);
    CHECK(again && again->data == first); /* its class's free list */
    CHECK_EQ_INT(fresh(), f0);
    ir_storage_release(again);
}

/* Blocks that do not fit the current slab's rest start the next slab; once
 * the budget is spent rt_slab_take says NULL and the pool's small buffers
 * come from the heap, still reused. */
TEST(slab_budget_spent)
{
    const size_t item = (size_t)512 << 10;
    size_t taken = 0;
    char *prev = NULL;
    for (;;) {
        char *p = rt_slab_take(item);
        if (!p)
            break;
        CHECK(rt_slab_owns(p) && rt_slab_owns(p + item - 1));
        if (prev && p != prev + item) /* a new slab: 2 MiB-aligned */
            CHECK((uintptr_t)p % ((size_t)2 << 20) == 0);
        prev = p;
        taken += item;
        if (taken > RT_SLAB_BUDGET)
            break;
    }
    CHECK(taken <= RT_SLAB_BUDGET);
    CHECK(taken >= item); /* the earlier test used a dozen slabs, not all */
    CHECK(rt_slab_take(64) == NULL);
    /* (a 5 KiB class: none of the earlier tests' buffers is on its list) */
    ir_storage *st = rt_bufpool_storage(5000);
    CHECK(st != NULL);
    if (!st)
        return;
    CHECK(!rt_slab_owns(st->data));
    memset(st->data, 7, 5000);
    void *p = st->data;
    ir_storage_release(st);
    st = rt_bufpool_storage(5000);
    CHECK(st && st->data == p);
    ir_storage_release(st);
}

TEST_MAIN(T(large_block_tail_rounding), T(slab_bad_requests), T(small_buffers_from_slabs), T(slab_budget_spent))
