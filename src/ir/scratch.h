/*
 * scratch.h — stack-or-heap scratch: a caller's stack array serves the
 * common small case, and memory from ir_alloc (the fault-injection hook)
 * the rare large one, without a branch at every use and every free:
 *
 *     ir_node *few[16];
 *     ir_scratch mem = IR_SCRATCH(few);
 *     ir_node **v = ir_scratch_get(&mem, (size_t)n * sizeof *v);
 *     if (!v)
 *         ... out of memory ...
 *     ir_scratch_free(&mem);
 *
 * A scratch may grow again (ir_scratch_get keeps what it held); the stack
 * array must outlive it.
 */
#ifndef RLX_IR_SCRATCH_H
#define RLX_IR_SCRATCH_H

#include <string.h>

#include "ir/ir.h"

typedef struct {
    void *p;          /* the memory: stack, or owned */
    void *stack;      /* borrows: the caller's array */
    size_t cap;       /* bytes at p */
    size_t stack_cap; /* bytes at stack */
} ir_scratch;

/* A scratch over the array buf (an array, not a pointer: sizeof is used). */
#define IR_SCRATCH(buf) ((ir_scratch){(buf), (buf), sizeof(buf), sizeof(buf)})

/* Moves the scratch to the heap with room for bytes, keeping its contents. */
static inline void *ir_scratch_grow(ir_scratch *s, size_t bytes)
{
    void *p = ir_alloc(bytes);
    if (!p)
        return NULL; /* s unchanged */
    memcpy(p, s->p, s->cap);
    if (s->p != s->stack)
        ir_free(s->p);
    s->p = p;
    s->cap = bytes;
    return p;
}

/* At least bytes of memory, keeping what the scratch held; NULL when out
 * of memory (the scratch then keeps its old memory). */
static inline void *ir_scratch_get(ir_scratch *s, size_t bytes)
{
    return bytes <= s->cap ? s->p : ir_scratch_grow(s, bytes);
}

/* Frees heap memory, if any; the scratch is back on its stack array. */
static inline void ir_scratch_free(ir_scratch *s)
{
    if (s->p != s->stack)
        ir_free(s->p);
    s->p = s->stack;
    s->cap = s->stack_cap;
}

#endif
