/* table.c — growing and removing in the one hash table (table.h). */
#include <string.h>

#include "ir/ir.h"
#include "ir/table.h"

bool ir_table_grow(ir_table *t, size_t esize, size_t min_cap)
{
    size_t cap = t->cap ? t->cap * 2 : min_cap;
    ir_table n = {ir_calloc(cap, esize), cap, 0};
    if (!n.slots)
        return false;
    for (size_t i = 0; i < t->cap; i++) {
        uint64_t h = ir_table_hash_at(t, esize, i);
        if (h)
            memcpy(ir_table_claim(&n, esize, h), (const char *)t->slots + i * esize, esize);
    }
    ir_free(t->slots);
    *t = n;
    return true;
}

void ir_table_remove(ir_table *t, size_t esize, size_t i)
{
    char *s = t->slots;
    for (size_t j = ir_table_next(t, i);; j = ir_table_next(t, j)) {
        uint64_t h = ir_table_hash_at(t, esize, j);
        if (!h)
            break;
        /* the entry at j may fill the hole at i unless its home lies
         * cyclically in (i, j]: then its probe never passes i */
        size_t home = ir_table_home(t, h);
        bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            memcpy(s + i * esize, s + j * esize, esize);
            i = j;
        }
    }
    memset(s + i * esize, 0, esize);
    t->count--;
}

void ir_table_free(ir_table *t)
{
    ir_free(t->slots);
    *t = (ir_table){NULL, 0, 0};
}
