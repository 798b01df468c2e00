/*
 * dot.c — rlx_dump_dot: the graph of a tensor as Graphviz dot, with the
 * nodes of each kernel drawn as one cluster. On the JIT backend the
 * kernels are the scheduler's (passes/schedule.c): a fused kernel holds
 * every node it computes in its loop; on the reference backend each
 * primitive is its own kernel.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "passes/passes.h"
#include "tensor/control.h"
#include "tensor/ts.h"

enum { UNASSIGNED = -2, REALIZED = -1 };

/* kernel[i] = the position in order of the output of the kernel that
 * computes order[i] (the first such kernel: views and leaves may be
 * recomputed by later ones), REALIZED for values that already exist. */
static bool assign_kernels(ir_node **order, long n, const ir_map *ids, long *kernel)
{
    bool jit = ts_backend_is_jit() && n > 0;
    for (long i = 0; i < n; i++)
        kernel[i] = ir_node_storage(order[i]) ? REALIZED : jit ? UNASSIGNED : i;
    if (!jit)
        return true;
    ir_node *root = order[n - 1];
    sched_schedule s;
    knob_opts o; /* the fusion knobs a realization would schedule under */
    ts_options_take(&o);
    sched_ctx c = {.opts = &o};
    rlx_status st = sched_build(&c, &root, 1, &s);
    ts_options_drop(&o);
    if (st != RLX_OK)
        return false;
    long *stack = ir_alloc((size_t)n * sizeof *stack);
    unsigned char *seen = ir_alloc((size_t)n);
    bool ok = stack && seen;
    for (long k = 0; ok && k < s.count; k++) {
        const sched_kernel *kk = &s.k[k];
        long top = 0, at = ir_map_get(ids, kk->node);
        if (at < 0 || kernel[at] == REALIZED)
            continue;
        kernel[at] = at;
        if (kk->kind != SCHED_LOOP)
            continue; /* one node */
        memset(seen, 0, (size_t)n);
        stack[top++] = at;
        while (top > 0) { /* the nodes between the kernel's output and its inputs */
            const ir_node *nd = order[stack[--top]];
            for (int q = 0; q < nd->nsrc; q++) {
                long j = ir_map_get(ids, nd->src[q]);
                bool input = j < 0 || seen[j] || kernel[j] == REALIZED;
                for (int a = 1; a < kk->nargs && !input; a++)
                    input = kk->args[a] == nd->src[q];
                if (input)
                    continue;
                seen[j] = 1;
                if (kernel[j] == UNASSIGNED)
                    kernel[j] = at;
                stack[top++] = j;
            }
        }
    }
    for (long i = 0; i < n; i++) /* (none expected) */
        if (kernel[i] == UNASSIGNED)
            kernel[i] = i;
    ir_free(stack);
    ir_free(seen);
    sched_free(&s);
    return ok;
}

rlx_status rlx_dump_dot(rlx_tensor *t, const char *path)
{
    const char *fn = "rlx_dump_dot";
    if (ts_null(fn, "t", t))
        return rlx_last_status();
    if (!path || !*path) {
        ts_error(RLX_E_ARG, fn, "path is NULL or empty");
        return RLX_E_ARG;
    }
    ir_node *root = ts_node(t), **order;
    long n = ir_postorder(&root, 1, NULL, NULL, &order);
    if (n < 0) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return RLX_E_NOMEM;
    }
    ir_map ids = {0};
    long *kernel = ir_alloc((size_t)(n ? n : 1) * sizeof *kernel);
    rlx_status st = RLX_OK;
    for (long i = 0; kernel && i < n; i++)
        if (ir_map_put(&ids, order[i], i) < 0) {
            st = RLX_E_NOMEM;
            break;
        }
    if (!kernel || st || !assign_kernels(order, n, &ids, kernel)) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        st = RLX_E_NOMEM;
        goto out;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        ts_error(RLX_E_IO, fn, "cannot open '%s': %s", path, strerror(errno));
        st = RLX_E_IO;
        goto out;
    }
    fprintf(f, "digraph rlx {\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\"];\n");
    for (long i = 0; i < n; i++) { /* one cluster per kernel, named by its output node */
        if (kernel[i] != i)
            continue;
        fprintf(f, "  subgraph cluster_%ld {\n    label=\"kernel %s\";\n", i, ir_ops[order[i]->op].name);
        for (long j = 0; j <= i; j++)
            if (kernel[j] == i)
                fprintf(f, "    n%ld [label=\"%s\\n%s %s\"];\n", j, ir_ops[order[j]->op].name,
                        rlx_dtype_name(order[j]->dtype), ts_shape_str(order[j]));
        fprintf(f, "  }\n");
    }
    for (long i = 0; i < n; i++) {
        if (kernel[i] == REALIZED)
            fprintf(f, "  n%ld [label=\"%s\\n%s %s\\nrealized\", style=filled, fillcolor=lightgrey];\n", i,
                    ir_ops[order[i]->op].name, rlx_dtype_name(order[i]->dtype), ts_shape_str(order[i]));
        for (int s = 0; s < order[i]->nsrc; s++)
            fprintf(f, "  n%ld -> n%ld;\n", ir_map_get(&ids, order[i]->src[s]), i);
    }
    fprintf(f, "}\n");
    if (fclose(f) != 0) {
        ts_error(RLX_E_IO, fn, "cannot write '%s': %s", path, strerror(errno));
        st = RLX_E_IO;
    }
out:
    ir_free(kernel);
    ir_map_free(&ids);
    ir_free(order);
    return st;
}
