/*
 * table.h — the one hash table of librlx: open addressing with linear
 * probing over a power-of-two array of entries whose type the caller
 * defines. Every entry type begins with a uint64_t hash word, and 0 marks
 * a free slot (ir_table_hash keeps real hashes off 0).
 *
 * Because each entry carries its hash, growing and removing need nothing
 * from the caller (no callbacks). A lookup is the caller's own loop, with
 * its equality written inline, so no lookup pays an indirect call:
 *
 *     my_ent *tab = t->slots;
 *     for (size_t i = ir_table_home(t, h); t->cap && tab[i].h; i = ir_table_next(t, i))
 *         if (tab[i].h == h && same(&tab[i], key))
 *             return &tab[i];
 *
 * (ir_table_home is 0 for an empty table, and an empty table's loop must
 * not read slots: hence the cap test, or an early return.) The load stays
 * at most one half while the table can grow, and below one with a free
 * slot always left, so every probe ends.
 *
 * No locking: each owner guards its table as it did before.
 *
 * Users: the cons table (node.c), ir_set and ir_map (visit.c), the
 * scheduler's lowering memo, the JIT's kernel cache (cg_jit.c). Bounded
 * caches evicted in LRU order (the FFT plans, the plan cache) stay small
 * arrays scanned in place: a few entries and a recency order to keep.
 */
#ifndef RLX_IR_TABLE_H
#define RLX_IR_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    void *slots; /* owns: cap entries of the owner's type, or NULL */
    size_t cap, count;
} ir_table;

/* A hash as the table stores it: never 0 (the free mark). */
static inline uint64_t ir_table_hash(uint64_t h) { return h ? h : 0x9e3779b97f4a7c15ull; }

/* The first slot of h's probe sequence. Mixed with a multiply, so keys
 * whose low bits repeat (pointers, sums) still spread over the table. */
static inline size_t ir_table_home(const ir_table *t, uint64_t h)
{
    return t->cap ? (size_t)((h * 0x9e3779b97f4a7c15ull) >> 28) & (t->cap - 1) : 0;
}
static inline size_t ir_table_next(const ir_table *t, size_t i) { return (i + 1) & (t->cap - 1); }

static inline uint64_t ir_table_hash_at(const ir_table *t, size_t esize, size_t i)
{
    return *(const uint64_t *)(const void *)((const char *)t->slots + i * esize);
}

/* Doubles the table (first to min_cap, a power of two), moving every
 * entry; false when out of memory, the table unchanged. */
bool ir_table_grow(ir_table *t, size_t esize, size_t min_cap);

/* Room for one more entry at a load of at most one half; false when the
 * table had to grow and could not. */
static inline bool ir_table_reserve(ir_table *t, size_t esize, size_t min_cap)
{
    return (t->count + 1) * 2 <= t->cap || ir_table_grow(t, esize, min_cap);
}

/* Whether one more entry fits while leaving a free slot (a table that
 * could not grow may still take entries, with longer probes). */
static inline bool ir_table_has_room(const ir_table *t) { return t->count + 1 < t->cap; }

/* The free slot on h's probe sequence (h from ir_table_hash), with its
 * hash word set and counted; the caller fills in the rest. Only when
 * ir_table_has_room. */
static inline void *ir_table_claim(ir_table *t, size_t esize, uint64_t h)
{
    size_t i = ir_table_home(t, h);
    while (ir_table_hash_at(t, esize, i))
        i = ir_table_next(t, i);
    char *e = (char *)t->slots + i * esize;
    *(uint64_t *)(void *)e = h;
    t->count++;
    return e;
}

/* Frees slot i, moving later entries of its run back so that no probe
 * sequence is broken (no tombstones). */
void ir_table_remove(ir_table *t, size_t esize, size_t i);

/* Frees the slots (the entries' own memory is the owner's) and empties t. */
void ir_table_free(ir_table *t);

#endif
