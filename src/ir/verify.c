/* verify.c — re-checks every node under a root against its op's rule. */
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

static bool check_node(const ir_node *n, char *err, size_t errcap)
{
    const ir_op_info *info = &ir_ops[n->op];
    if (!ir_dtype_valid((int)n->dtype) || n->rank < 0 || n->rank > IR_MAX_RANK) {
        snprintf(err, errcap, "%s: bad type", info->name);
        return false;
    }
    if (info->cls == IR_CLS_LEAF)
        return n->nsrc == 0 && (n->op != IR_OP_BUFFER || ir_node_storage(n) != NULL);
    rlx_dtype dt;
    int rank;
    int64_t shape[IR_MAX_RANK];
    char why[160];
    if (!ir_infer(n->op, n->nsrc, n->src, &n->attr, &dt, &rank, shape, why, sizeof why)) {
        snprintf(err, errcap, "%s: %s", info->name, why);
        return false;
    }
    if (dt != n->dtype || !ir_shape_eq(rank, shape, n->rank, n->shape)) {
        snprintf(err, errcap, "%s: stored type differs from its rule", info->name);
        return false;
    }
    return true;
}

bool ir_verify(ir_node *root, char *err, size_t errcap)
{
    ir_node **order;
    long n = ir_postorder(&root, 1, NULL, NULL, &order);
    if (n < 0) {
        snprintf(err, errcap, "out of memory");
        return false;
    }
    bool ok = true;
    for (long i = 0; i < n && ok; i++)
        ok = check_node(order[i], err, errcap);
    ir_free(order);
    return ok;
}
