/*
 * verify.c — the passes' shared failure record (sched_fail), the checks the
 * pipeline runs after a pass when its options say verify, and the dumps of
 * RLX_DEBUG >= 4.
 *
 * sched_verify checks what the executor and the code generator index with
 * and never re-check: a wrong index there is memory corruption, not an
 * error message. Every failure is RLX_E_INTERNAL naming the pass whose
 * output is wrong.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "passes/passes.h"

rlx_status sched_fail(sched_ctx *c, rlx_status st, const char *fmt, ...)
{
    if (c->status == RLX_OK) {
        c->status = st;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->msg, sizeof c->msg, fmt, ap);
        va_end(ap);
    }
    return c->status;
}

rlx_status sched_verify_graph(sched_ctx *c, const char *pass, ir_node *const *roots, int nroots)
{
    char err[300];
    rlx_status st = ir_verify_roots(roots, nroots, err, sizeof err);
    return st == RLX_OK ? RLX_OK : sched_fail(c, st, "verify after %s: %s", pass, err);
}

static int instr_nsrc(const sched_instr *in) { return sched_instr_nsrc(in); }

/* The check of LOOP kernel k (index i); NULL when it holds, else why. */
static const char *check_loop(const sched_kernel *k, int *at)
{
    *at = -1;
    if (k->rank < 0 || k->rank > SCHED_MAX_LOOP)
        return "loop rank out of range";
    if (k->nargs < 1 || !k->args || k->args[0] != k->node)
        return "args[0] is not the kernel's value";
    if (k->ninstr < 1 || !k->instr || k->nconsts < 0)
        return "no instructions";
    for (int j = 0; j < k->ninstr; j++) {
        const sched_instr *in = &k->instr[j];
        *at = j;
        if ((unsigned)in->kind > SCHED_I_GUARD)
            return "instruction kind out of range";
        if ((in->kind == SCHED_I_OP || in->kind == SCHED_I_REDUCE) && (unsigned)in->op >= IR_OP_COUNT)
            return "op out of range";
        for (int s = 0; s < instr_nsrc(in); s++)
            if (in->src[s] < 0 || in->src[s] >= j)
                return "source is not an earlier instruction";
        if (in->kind == SCHED_I_LOAD && (in->arg < 1 || in->arg >= k->nargs || !k->args[in->arg]))
            return "load of an arg out of range";
        if (in->kind == SCHED_I_CONST && (in->arg < 0 || in->arg >= k->nconsts))
            return "CONST slot out of range";
        if (in->kind == SCHED_I_LOAD && in->guarded && k->instr[in->src[0]].dtype != RLX_BOOL)
            return "a load guarded by a value that is not bool";
    }
    *at = -1;
    return NULL;
}

/* The kernel computing n (through views for a REF kernel's sources), or -1. */
static long producer_of(const ir_map *prod, const ir_node *n, bool through_views)
{
    long q;
    while ((q = ir_map_get(prod, n)) < 0 && through_views && ir_ops[n->op].cls == IR_CLS_MOVEMENT &&
           !ir_node_storage(n))
        n = n->src[0];
    return q;
}

rlx_status sched_verify(sched_ctx *c, const sched_schedule *s)
{
    ir_map prod = {0};
    for (long i = 0; i < s->count; i++) {
        const sched_kernel *k = &s->k[i];
        if (k->node && k->kind != SCHED_VIEW && ir_map_get(&prod, k->node) < 0 && ir_map_put(&prod, k->node, i) < 0) {
            ir_map_free(&prod);
            return sched_fail(c, RLX_E_NOMEM, "out of memory verifying the schedule");
        }
    }
    const char *why = NULL;
    long i = 0;
    int at = -1;
    for (; i < s->count && !why; i++) {
        const sched_kernel *k = &s->k[i];
        if ((unsigned)k->kind > SCHED_VIEW || !k->node)
            why = "kind or value missing";
        else if (k->kind == SCHED_LOOP)
            why = check_loop(k, &at);
        for (int a = 1; !why && k->kind == SCHED_LOOP && a < k->nargs; a++)
            if (producer_of(&prod, k->args[a], false) >= i)
                why = "reads a value computed later";
        for (int a = 0; !why && k->kind == SCHED_REF && a < k->node->nsrc; a++)
            if (producer_of(&prod, k->node->src[a], true) >= i)
                why = "reads a value computed later";
    }
    ir_map_free(&prod);
    if (!why)
        return RLX_OK;
    const sched_kernel *k = &s->k[i - 1];
    const char *op = k->node && (unsigned)k->node->op < IR_OP_COUNT ? ir_ops[k->node->op].name : "?";
    if (at >= 0)
        return sched_fail(c, RLX_E_INTERNAL, "verify after schedule: kernel %ld (%s), instruction %d: %s", i - 1, op,
                          at, why);
    return sched_fail(c, RLX_E_INTERNAL, "verify after schedule: kernel %ld (%s): %s", i - 1, op, why);
}

/* ---------------------------------------------------------------- dumps */

static void dims(FILE *f, int rank, const int64_t *shape)
{
    fputc('[', f);
    for (int d = 0; d < rank; d++)
        fprintf(f, "%s%lld", d ? "," : "", (long long)shape[d]);
    fputc(']', f);
}

void sched_dump_graph(FILE *f, const char *pass, ir_node *const *roots, int nroots)
{
    ir_node **order;
    long n = ir_postorder(roots, nroots, NULL, NULL, &order);
    fprintf(f, "rlx: graph after %s (%ld nodes)\n", pass, n);
    for (long i = 0; i < n; i++) {
        const ir_node *x = order[i];
        fprintf(f, "rlx:   %p %s%s ", (const void *)x, ir_ops[x->op].name, ir_node_storage(x) ? " (realized)" : "");
        dims(f, x->rank, x->shape);
        for (int s = 0; s < x->nsrc; s++)
            fprintf(f, " %p", (const void *)x->src[s]);
        fputc('\n', f);
    }
    ir_free(order);
}

static const char *const kind_names[] = {"loop", "ref", "view"};
static const char *const instr_names[] = {"load", "const", "iota", "op", "reduce", "guard"};

void sched_dump(FILE *f, const sched_schedule *s)
{
    fprintf(f, "rlx: schedule (%ld kernels)\n", s->count);
    for (long i = 0; i < s->count; i++) {
        const sched_kernel *k = &s->k[i];
        fprintf(f, "rlx:   k%ld %s %s ", i, kind_names[k->kind], ir_ops[k->node->op].name);
        dims(f, k->kind == SCHED_LOOP ? k->rank : k->node->rank, k->kind == SCHED_LOOP ? k->shape : k->node->shape);
        if (k->kind == SCHED_LOOP)
            fprintf(f, " red_mask %#x, %d args, %d consts", (unsigned)k->red_mask, k->nargs, k->nconsts);
        fputc('\n', f);
        for (int a = 0; k->kind == SCHED_LOOP && a < k->nargs; a++) {
            fprintf(f, "rlx:     #%d %s ", a, ir_ops[k->args[a]->op].name);
            dims(f, k->args[a]->rank, k->args[a]->shape);
            fputc('\n', f);
        }
        for (int j = 0; k->kind == SCHED_LOOP && j < k->ninstr; j++) {
            const sched_instr *in = &k->instr[j];
            fprintf(f, "rlx:     %d: %s", j, instr_names[in->kind]);
            if (in->kind == SCHED_I_OP || in->kind == SCHED_I_REDUCE)
                fprintf(f, " %s", ir_ops[in->op].name);
            for (int x = 0; x < instr_nsrc(in); x++)
                fprintf(f, " %%%d", in->src[x]);
            if (in->kind == SCHED_I_LOAD || in->kind == SCHED_I_CONST)
                fprintf(f, " #%d", in->arg);
            if (in->kind == SCHED_I_GUARD)
                fprintf(f, " in [%lld, %lld)", (long long)in->lo, (long long)in->hi);
            fputc('\n', f);
        }
    }
}
