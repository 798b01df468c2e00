/*
 * grad.c — rlx_grad: reverse-mode differentiation over the DAG.
 *
 * The graph under loss is put in post-order (iteratively: graphs may be
 * 100,000 nodes deep). A forward sweep marks the nodes that need a
 * cotangent: float nodes with a wrt node below them through ops that pass
 * gradients (stop_gradient, comparisons, floor and the like, and every
 * non-float value cut the path). The backward sweep seeds loss with ones
 * and walks the order from the end, applying each node's VJP row of
 * ad_vjps (vjp.c) and adding the results into its sources' cotangents.
 * Cotangents are ordinary lazy nodes, so gradients realize with the
 * forward graph in one schedule, and can be differentiated again.
 */
#include <stdatomic.h>
#include <string.h>

#include "autodiff/ad.h"
#include "ir/scratch.h"

#define FN "rlx_grad"

static atomic_bool used[IR_OP_COUNT];

int ad_op_count(void) { return IR_OP_COUNT; }
const char *ad_op_name(int op) { return op >= 0 && op < IR_OP_COUNT ? ir_ops[op].name : NULL; }
int ad_vjp_kind(int op) { return op >= 0 && op < IR_OP_COUNT ? (int)ad_vjps[op].kind : -1; }
bool ad_vjp_used(int op) { return op >= 0 && op < IR_OP_COUNT && atomic_load(&used[op]); }
void ad_vjp_mark_used(ir_op op) { atomic_store(&used[op], true); }

typedef struct {
    long count;
    ir_node **order; /* post-order of the graph under loss; owns the array */
    ir_map pos;      /* node -> index in order */
    bool *needs;     /* a cotangent must reach this node */
    bool *keep;      /* a wrt node: its cotangent is kept to the end */
    ir_node **cot;   /* accumulated cotangents; owns one reference each */
} sweep;

static void sweep_free(sweep *s)
{
    for (long i = 0; s->cot && i < s->count; i++)
        ir_release(s->cot[i]);
    ir_free(s->cot);
    ir_free(s->needs);
    ir_free(s->keep);
    ir_free(s->order);
    ir_map_free(&s->pos);
}

static bool passes_gradient(const ir_node *n) { return ad_vjps[n->op].kind != AD_ZERO && ad_vjps[n->op].kind != AD_LEAF; }

/* Orders the graph and marks which nodes need a cotangent. */
static rlx_status sweep_init(sweep *s, ir_node *loss, ir_node *const *wrt, int n)
{
    s->count = ir_postorder(&loss, 1, NULL, NULL, &s->order);
    if (s->count < 0)
        goto oom;
    size_t c = (size_t)(s->count ? s->count : 1);
    if (!(s->needs = ir_calloc(c, sizeof *s->needs)) || !(s->keep = ir_calloc(c, sizeof *s->keep)) ||
        !(s->cot = ir_calloc(c, sizeof *s->cot)))
        goto oom;
    for (long i = 0; i < s->count; i++)
        if (ir_map_put(&s->pos, s->order[i], i) < 0)
            goto oom;
    for (int k = 0; k < n; k++) {
        long i = ir_map_get(&s->pos, wrt[k]);
        if (i >= 0)
            s->keep[i] = s->needs[i] = true;
    }
    for (long i = 0; i < s->count; i++) {
        ir_node *nd = s->order[i];
        if (s->needs[i] || !(ir_dtype_is_float(nd->dtype) || ir_dtype_is_complex(nd->dtype)) || !passes_gradient(nd))
            continue;
        for (int k = 0; k < nd->nsrc && !s->needs[i]; k++)
            s->needs[i] = s->needs[ir_map_get(&s->pos, nd->src[k])];
    }
    return RLX_OK;
oom:
    ts_error(RLX_E_NOMEM, FN, "out of memory ordering the graph");
    return RLX_E_NOMEM;
}

/* Checks a rule's result for source k of nd: present, with the source's
 * shape and dtype. */
static bool check_dx(const ir_node *nd, int k, rlx_tensor *d)
{
    const ir_node *src = nd->src[k];
    if (!d) {
        if (rlx_last_status() == RLX_OK)
            ts_error(RLX_E_INTERNAL, FN, "the VJP of %s gave no gradient for source %d", ir_ops[nd->op].name, k);
        return false;
    }
    const ir_node *dn = ts_node(d);
    if (dn->dtype != src->dtype || !ir_shape_eq(dn->rank, dn->shape, src->rank, src->shape)) {
        ts_error(RLX_E_INTERNAL, FN, "the VJP of %s gave %s %s for source %d of %s %s", ir_ops[nd->op].name,
                 rlx_dtype_name(dn->dtype), ts_shape_str(dn), k, rlx_dtype_name(src->dtype), ts_shape_str(src));
        return false;
    }
    return true;
}

/* v in t's shape and dtype; dynamic dims follow t's when a program binds
 * them (ts_expand_like). */
static ir_node *const_like(ir_node *t, double v)
{
    if (ir_node_numel(t) >= 0)
        return ts_const_node(FN, t->dtype, t->rank, t->shape, v);
    ir_node *c = ts_const_node(FN, t->dtype, 0, NULL, v), *r = c ? ts_expand_like(FN, c, t) : NULL;
    ir_release(c);
    return r;
}

/* Applies the VJP of order[i] to its cotangent and adds the results into
 * the cotangents of its sources, inside one composite scope. */
static rlx_status backprop_node(sweep *s, long i)
{
    ir_node *nd = s->order[i];
    const ad_vjp *row = ad_vjp_of(nd); /* NULL: a complex gradient not written, refused below */
    if (row && (row->kind == AD_LEAF || row->kind == AD_ZERO))
        return RLX_OK;
    if (row && (row->kind != AD_RULE || !row->rule)) {
        ts_error(RLX_E_INTERNAL, FN, "no VJP rule for the primitive %s", ir_ops[nd->op].name);
        return RLX_E_INTERNAL;
    }
    bool need_buf[8];
    rlx_tensor *dx_buf[8];
    ir_scratch need_mem = IR_SCRATCH(need_buf), dx_mem = IR_SCRATCH(dx_buf);
    bool *need = ir_scratch_get(&need_mem, (size_t)nd->nsrc * sizeof *need);
    rlx_tensor **dx = ir_scratch_get(&dx_mem, (size_t)nd->nsrc * sizeof *dx);
    rlx_status st = RLX_OK;
    if (!need || !dx || !ts_open(FN)) {
        if (!need || !dx)
            ts_error(RLX_E_NOMEM, FN, "out of memory");
        st = rlx_last_status();
        goto out;
    }
    bool any = false;
    for (int k = 0; k < nd->nsrc; k++) {
        long j = ir_map_get(&s->pos, nd->src[k]);
        need[k] = s->needs[j];
        any |= need[k];
        dx[k] = NULL;
    }
    if (any && !row) {
        ts_error(RLX_E_UNSUPPORTED, FN, "the gradient through %s of %s is not supported (%s)", ir_ops[nd->op].name,
                 rlx_dtype_name(nd->dtype), ts_shape_str(nd));
        st = RLX_E_UNSUPPORTED;
        any = false;
    }
    if (any) {
        ad_vjp_mark_used(nd->op);
        row->rule(nd, (rlx_tensor *)s->cot[i], need, dx);
    }
    for (int k = 0; k < nd->nsrc && st == RLX_OK; k++) {
        if (!need[k])
            continue;
        if (!check_dx(nd, k, dx[k])) {
            st = rlx_last_status();
            break;
        }
        long j = ir_map_get(&s->pos, nd->src[k]);
        rlx_tensor *d = dx[k];
        /* A broadcast to dynamic dims can be one node for uses that bind
         * them differently (expands that trace alike are hash-consed:
         * [2, a, S] and [2, S, a] are both [2, -1, -1]), so their
         * cotangents cannot be added there; its VJP (a sum over the
         * broadcast dims) is linear: each use's cotangent goes through it
         * alone and they add up at its source. */
        while (d && !s->keep[j] && s->order[j]->op == IR_OP_EXPAND && ir_node_numel(s->order[j]) < 0) {
            ir_node *e = s->order[j];
            bool need1 = true;
            rlx_tensor *r = NULL;
            ad_vjp_mark_used(e->op);
            ad_vjp_of(e)->rule(e, d, &need1, &r);
            d = r;
            j = ir_map_get(&s->pos, e->src[0]);
        }
        rlx_tensor *acc = !d ? NULL : s->cot[j] ? rlx_add((rlx_tensor *)s->cot[j], d) : d;
        if (!acc) {
            st = rlx_last_status();
            break;
        }
        ir_release(s->cot[j]);
        s->cot[j] = ir_retain(ts_node(acc));
    }
    ts_close(NULL);
out:
    ir_scratch_free(&need_mem);
    ir_scratch_free(&dx_mem);
    return st;
}

static rlx_status check_args(rlx_tensor *loss, rlx_tensor *const *wrt, int n, rlx_tensor **grads)
{
    for (int i = 0; grads && i < n; i++)
        grads[i] = NULL;
    if (n < 0 || (n > 0 && (!wrt || !grads))) {
        ts_error(RLX_E_ARG, FN, "n = %d with wrt %s and grads %s", n, wrt ? "set" : "NULL", grads ? "set" : "NULL");
        return RLX_E_ARG;
    }
    if (ts_null(FN, "loss", loss))
        return rlx_last_status();
    if (ir_dtype_is_complex(ts_node(loss)->dtype)) { /* PyTorch: grad is implicitly created only for real outputs */
        ts_error(RLX_E_DTYPE, FN, "loss must be real, got %s (take rlx_real, rlx_imag or rlx_abs of it first)",
                 rlx_dtype_name(ts_node(loss)->dtype));
        return RLX_E_DTYPE;
    }
    if (!ir_dtype_is_float(ts_node(loss)->dtype)) {
        ts_error(RLX_E_DTYPE, FN, "loss must be a float (f32, f64, f16, bf16), got %s",
                 rlx_dtype_name(ts_node(loss)->dtype));
        return RLX_E_DTYPE;
    }
    for (int i = 0; i < n; i++) {
        if (!wrt[i]) {
            if (rlx_last_status() == RLX_OK)
                ts_error(RLX_E_ARG, FN, "wrt[%d] is NULL", i);
            return rlx_last_status();
        }
        if (!ir_dtype_is_float(ts_node(wrt[i])->dtype) && !ir_dtype_is_complex(ts_node(wrt[i])->dtype)) {
            ts_error(RLX_E_DTYPE, FN, "wrt[%d] must be a float (f32, f64, f16, bf16) or complex, got %s", i,
                     rlx_dtype_name(ts_node(wrt[i])->dtype));
            return RLX_E_DTYPE;
        }
    }
    return RLX_OK;
}

rlx_status rlx_grad(rlx_tensor *loss, rlx_tensor *const *wrt, int n, rlx_tensor **grads)
{
    rlx_status st = check_args(loss, wrt, n, grads);
    if (st != RLX_OK)
        return st;
    sweep s;
    memset(&s, 0, sizeof s);
    ir_node *root = ts_node(loss);
    if ((st = sweep_init(&s, root, (ir_node *const *)wrt, n)) != RLX_OK)
        goto out;
    /* d sum(loss) / d loss = ones. */
    long last = s.count - 1;
    if (s.needs[last] && !(s.cot[last] = const_like(root, 1))) {
        st = rlx_last_status();
        goto out;
    }
    for (long i = last; i >= 0; i--) {
        if (!s.cot[i])
            continue;
        if ((st = backprop_node(&s, i)) != RLX_OK)
            goto out;
        if (!s.keep[i]) { /* done with it: only wrt cotangents live to the end */
            ir_release(s.cot[i]);
            s.cot[i] = NULL;
        }
    }
    /* A wrt that loss does not depend on gets zeros of its shape. */
    ir_node **made = (ir_node **)grads;
    for (int k = 0; k < n; k++) {
        ir_node *w = ts_node(wrt[k]);
        long i = ir_map_get(&s.pos, w);
        made[k] = i >= 0 && s.cot[i] ? ir_retain(s.cot[i]) : const_like(w, 0);
        if (!made[k]) {
            for (int j = 0; j < k; j++) {
                ir_release(made[j]);
                made[j] = NULL;
            }
            st = rlx_last_status();
            goto out;
        }
    }
    /* Handing out: when recording a handle in the open scope fails, the
     * handles already recorded stay with the scope (which frees them) and
     * the caller gets no gradient at all. */
    for (int k = 0; k < n; k++) {
        if (!(grads[k] = ts_wrap(made[k]))) {
            for (int j = k + 1; j < n; j++)
                ir_release(made[j]);
            for (int j = 0; j < n; j++)
                grads[j] = NULL;
            st = rlx_last_status();
            break;
        }
    }
out:
    sweep_free(&s);
    return st;
}
