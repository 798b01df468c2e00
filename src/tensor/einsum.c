/*
 * einsum.c — rlx_einsum: NumPy's Einstein summation, lowered to views,
 * sums and (batched) matmuls.
 *
 * Labels: 'A'..'Z' are 0..25 and 'a'..'z' 26..51 (ASCII order, the order
 * of an implicit output); the dims an ellipsis covers are labels 52..59,
 * right-aligned across operands as broadcasting aligns them. Each operand
 * first loses its repeated labels (a diagonal: the axes moved last, merged
 * and read with a stride), its size-1 dims whose label is larger elsewhere
 * (NumPy's broadcasting: the value is constant along them) and the labels
 * no other operand or the output has (summed). Operands are then combined
 * left to right: labels both sides share and nothing later needs are
 * contracted by one matmul over [batch, M, K] @ [batch, K, N], so the
 * product never holds an output-times-contraction intermediate; a pair
 * with nothing to contract is a broadcast multiply (its result has the
 * size of the product anyway). Gradients come from these primitives.
 * Everything happens in the promoted dtype: integer sums and products are
 * cast back to it, so an i32 einsum wraps as NumPy's does.
 */
#include <stdio.h>
#include <string.h>

#include "ir/scratch.h"
#include "tensor/ts.h"

#define FN "rlx_einsum"
#define NLETTER 52
#define NLABEL (NLETTER + RLX_MAX_RANK)
#define ABSENT INT64_MIN /* a label's size when no operand has it (-1: dynamic) */

/* One operand's subscripts: its labels in axis order once the ellipsis is
 * known; ell is the count of letters before "..." (-1: none). */
typedef struct {
    int nl, ell, rank;
    int lab[RLX_MAX_RANK];
} term;

/* A tensor with one label per axis. */
typedef struct {
    rlx_tensor *t;
    int rank;
    int lab[RLX_MAX_RANK];
} lten;

static int letter(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    return -1;
}

static char label_char(int l) { return l < 26 ? (char)('A' + l) : (char)('a' + l - 26); }

/* Rules 1 and 2 only: einsum's merged dims are products of label sizes
 * (-1 when one is dynamic), which rule 3 would read as a dynamic dim kept. */
static bool einsum_rule(int rule) { return rule == 1 || rule == 2; }

/* Whether a program can rebuild reshape(x, shape) for bound sizes when x
 * has dynamic dims (ts_reshape_rule), applied to the source
 * ts_reshape_node really uses (a reshape of a reshape is one reshape). */
static bool reshape_follows(const ir_node *x, int rank, const int64_t *shape)
{
    if (ir_shape_eq(x->rank, x->shape, rank, shape))
        return true;
    int64_t known;
    return einsum_rule(ts_reshape_rule(ts_reshape_base(x), rank, shape, &known));
}

/* rlx_reshape, where dims of size -1 are dynamic (several may be): over a
 * dynamic x only a reshape a program can rebuild per binding is made, else
 * RLX_E_UNSUPPORTED naming the shapes. */
static rlx_tensor *reshape_to(rlx_tensor *t, int rank, const int64_t *shape)
{
    if (!t)
        return NULL;
    ir_node *x = ts_node(t);
    if (ir_node_numel(x) >= 0)
        return rlx_reshape(t, rank, shape);
    if (!reshape_follows(x, rank, shape)) {
        ts_error(RLX_E_UNSUPPORTED, FN, "merging or splitting dims with a dynamic size (%s to %s) cannot be resolved "
                 "per binding: more than one dynamic dim changes", ts_shape_str(x), ts_dims_str(rank, shape));
        return NULL;
    }
    return ts_wrap(ts_reshape_node(FN, x, rank, shape));
}

/* Parses one term from *p up to ',', '-' or the end into t (letters and
 * at most one "..."); false with an error recorded. */
static bool parse_term(const char *eq, const char **p, term *t, const char *what)
{
    t->nl = 0;
    t->ell = -1;
    const char *s = *p;
    for (; *s && *s != ',' && *s != '-'; s++) {
        if (*s == ' ')
            continue;
        if (*s == '.') {
            if (s[1] != '.' || s[2] != '.' || t->ell >= 0) {
                ts_error(RLX_E_ARG, FN, "%s of \"%s\": '.' only as one \"...\" per term", what, eq);
                return false;
            }
            t->ell = t->nl;
            s += 2;
            continue;
        }
        int l = letter(*s);
        if (l < 0) {
            ts_error(RLX_E_ARG, FN, "%s of \"%s\": '%c' is not a letter, ',', \"...\" or \"->\"", what, eq, *s);
            return false;
        }
        if (t->nl == RLX_MAX_RANK) {
            ts_error(RLX_E_SHAPE, FN, "%s of \"%s\" has more than %d subscripts", what, eq, RLX_MAX_RANK);
            return false;
        }
        t->lab[t->nl++] = l;
    }
    *p = s;
    return true;
}

/* The labels of a term whose ellipsis covers ne dims, right-aligned
 * among the ell_max ellipsis labels. */
static void term_labels(const term *t, int ne, int ell_max, int *lab)
{
    int k = 0, before = t->ell < 0 ? t->nl : t->ell;
    for (int i = 0; i < before; i++)
        lab[k++] = t->lab[i];
    for (int i = 0; i < ne; i++)
        lab[k++] = NLETTER + ell_max - ne + i;
    for (int i = before; i < t->nl; i++)
        lab[k++] = t->lab[i];
}

/* Moves the axes of x to the order of the labels in `to` (a permutation
 * of x's labels, repeats included). */
static void permute_to(lten *x, int n, const int *to)
{
    int perm[RLX_MAX_RANK] = {0};
    bool same = true, used[RLX_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < x->rank; j++)
            if (x->lab[j] == to[i] && !used[j]) { /* a repeated label takes its axes in order */
                perm[i] = j;
                used[j] = true;
                break;
            }
        same = same && perm[i] == i;
    }
    if (!same)
        x->t = rlx_transpose(x->t, n, perm);
    memcpy(x->lab, to, (size_t)n * sizeof *to);
}

/* Sums the axes of x whose label is in drop (a label bit set), back in dt. */
static void sum_labels(lten *x, uint64_t drop, rlx_dtype dt)
{
    int axes[RLX_MAX_RANK], na = 0, k = 0;
    for (int i = 0; i < x->rank; i++) {
        if (drop >> x->lab[i] & 1)
            axes[na++] = i;
        else
            x->lab[k++] = x->lab[i];
    }
    if (!na)
        return;
    x->t = rlx_cast(rlx_sum(x->t, axes, na, false), dt);
    x->rank = k;
}

/* Replaces axis i of x and the next axis with its label (a dynamic size
 * n, so no strided view of [n*n] can say where the diagonal is) by their
 * diagonal: the elements whose positions along both are equal, the others
 * set to 0 by a where (never read, so inf/NaN off the diagonal stay out),
 * then summed over the second axis. */
static void dynamic_diagonal(lten *x, int i)
{
    int j = i + 1, rank = x->rank;
    while (x->lab[j] != x->lab[i])
        j++;
    int64_t si[RLX_MAX_RANK], sj[RLX_MAX_RANK];
    for (int d = 0; d < rank; d++)
        si[d] = sj[d] = 1;
    si[i] = sj[j] = -1;
    rlx_dtype dt = ts_node(x->t)->dtype;
    /* both position vectors span axis i: the where then joins axis j with
     * it, so the two bound to different sizes is an error, as NumPy's */
    rlx_tensor *pos = rlx_arange_of(x->t, i, RLX_I64);
    rlx_tensor *pi = rlx_reshape(pos, rank, si), *pj = rlx_reshape(pos, rank, sj);
    rlx_tensor *on = rlx_where(rlx_eq(pi, pj), x->t, rlx_scalar(dt, 0));
    x->t = rlx_cast(rlx_sum(on, &j, 1, false), dt);
    for (int d = j; d + 1 < rank; d++)
        x->lab[d] = x->lab[d + 1];
    x->rank = rank - 1;
}

/* Replaces the axes of x that share a label by their diagonal. */
static void take_diagonals(lten *x)
{
    for (int i = 0; i < x->rank && x->t; i++) {
        int to[RLX_MAX_RANK], k = 0, c = 0, l = x->lab[i];
        for (int j = 0; j < x->rank; j++)
            if (x->lab[j] != l)
                to[k++] = x->lab[j];
        for (int j = 0; j < x->rank; j++)
            c += x->lab[j] == l;
        if (c == 1)
            continue;
        for (int j = 0; j < c; j++)
            to[k++] = l;
        int64_t n = ts_node(x->t)->shape[i]; /* the operand's own dim: it may broadcast */
        if (n < 0) {
            dynamic_diagonal(x, i);
            i = -1;
            continue;
        }
        permute_to(x, k, to);
        if (!x->t)
            return;
        /* [.., n, ..., n] -> [.., n^c]: element (m, ..., m) sits at
         * m * (1 + n + ... + n^(c-1)). */
        int64_t flat = 1, step = 0, shape[RLX_MAX_RANK];
        for (int j = 0; j < c; j++) {
            step += flat;
            flat *= n;
        }
        for (int j = 0; j < x->rank - c; j++)
            shape[j] = ts_node(x->t)->shape[j];
        shape[x->rank - c] = flat;
        x->t = reshape_to(x->t, x->rank - c + 1, shape);
        x->t = n > 1 ? rlx_slice(x->t, x->rank - c, 0, RLX_END, step) : x->t;
        x->rank = x->rank - c + 1;
        i = -1; /* the labels moved: scan again */
    }
}

/* Drops the size-1 axes of x whose label has a larger size elsewhere. */
static void drop_broadcast(lten *x, const int64_t *size)
{
    int64_t shape[RLX_MAX_RANK];
    int k = 0;
    if (!x->t)
        return;
    for (int i = 0; i < x->rank; i++) {
        int64_t d = ts_node(x->t)->shape[i];
        if (d == 1 && size[x->lab[i]] != 1)
            continue;
        shape[k] = d;
        x->lab[k++] = x->lab[i];
    }
    if (k != x->rank)
        x->t = reshape_to(x->t, k, shape);
    x->rank = k;
}

static uint64_t label_mask(const lten *x)
{
    uint64_t m = 0;
    for (int i = 0; i < x->rank; i++)
        m |= 1ull << x->lab[i];
    return m;
}

/* Appends the labels of mask (in the order they have in x) to out. */
static int pick(const lten *x, uint64_t mask, int *out, int k)
{
    for (int i = 0; i < x->rank; i++)
        if (mask >> x->lab[i] & 1)
            out[k++] = x->lab[i];
    return k;
}

/* The product of the labels' sizes (-1 when one is dynamic); with shape,
 * the sizes also go to shape[k..k+n). */
static int64_t dims_of(const int *lab, int n, const int64_t *size, int64_t *shape, int k)
{
    int64_t p = 1;
    bool dyn = false;
    for (int i = 0; i < n; i++) {
        dyn = dyn || size[lab[i]] < 0;
        p *= size[lab[i]] < 0 ? 1 : size[lab[i]];
        if (shape)
            shape[k + i] = size[lab[i]];
    }
    return dyn ? -1 : p;
}

/* a ⊗ b over [batch, M] and [batch, N] (the labels already in that order)
 * with nothing to contract: a broadcast multiply of [batch, M, 1s] by
 * [batch, 1s, N] that merges no dims, as a dynamic size needs. */
static bool outer(lten *a, lten *b, int nbat, int nm, int nn, const int64_t *size)
{
    int64_t sa[RLX_MAX_RANK], sb[RLX_MAX_RANK];
    for (int i = 0; i < nbat + nm + nn; i++) {
        int64_t d = i < nbat + nm ? size[a->lab[i]] : size[b->lab[i - nm]];
        sa[i] = i < nbat + nm ? d : 1;
        sb[i] = i < nbat || i >= nbat + nm ? d : 1;
    }
    rlx_tensor *ra = reshape_to(a->t, nbat + nm + nn, sa), *rb = ra ? reshape_to(b->t, nbat + nm + nn, sb) : NULL;
    if (!rb)
        return false;
    a->t = rlx_mul(ra, rb);
    memcpy(a->lab + nbat + nm, b->lab + nbat, (size_t)nn * sizeof *a->lab);
    a->rank = nbat + nm + nn;
    return true;
}

/* reshape_follows, true for a static x (any reshape). */
static bool merge_follows(const ir_node *x, int rank, const int64_t *shape)
{
    return ir_node_numel(x) >= 0 || reshape_follows(x, rank, shape);
}

/* Whether a program can rebuild a reshape from dims `from` to `to` (of a
 * node not made yet); true when they are static. */
static bool dims_follow(int rfrom, const int64_t *from, int rto, const int64_t *to)
{
    ir_node tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.rank = rfrom;
    memcpy(tmp.shape, from, (size_t)rfrom * sizeof *from);
    int64_t known; /* static dims: any reshape */
    return ir_numel(rfrom, from) >= 0 || ir_shape_eq(rfrom, from, rto, to) ||
           einsum_rule(ts_reshape_rule(&tmp, rto, to, &known));
}

/* a [batch, M, K] ⊗ b [batch, K, N] (labels in that order) when the
 * matmul's merges of dynamic dims cannot be rebuilt per binding: a
 * broadcast multiply over [batch, M, N, K] summed over K, which adds and
 * moves only 1s (the JIT fuses the sum into the multiply). */
static bool contract_broadcast(lten *a, lten *b, int nbat, int nm, int nk, int nn, const int64_t *size,
                               rlx_dtype dt)
{
    int r = nbat + nm + nn + nk;
    if (r > RLX_MAX_RANK) {
        ts_error(RLX_E_UNSUPPORTED, FN, "an intermediate product would have rank %d (more than %d)", r,
                 RLX_MAX_RANK);
        return false;
    }
    int lb[RLX_MAX_RANK], axes[RLX_MAX_RANK];
    memcpy(lb, b->lab, (size_t)nbat * sizeof *lb);
    memcpy(lb + nbat, b->lab + nbat + nk, (size_t)nn * sizeof *lb);
    memcpy(lb + nbat + nn, b->lab + nbat, (size_t)nk * sizeof *lb);
    permute_to(b, b->rank, lb); /* [batch, N, K] */
    int64_t sa[RLX_MAX_RANK], sb[RLX_MAX_RANK];
    for (int i = 0; i < r; i++) {
        bool in_m = i >= nbat && i < nbat + nm, in_n = i >= nbat + nm && i < nbat + nm + nn;
        int64_t d = in_n ? size[b->lab[i - nm]] : i < nbat + nm ? size[a->lab[i]] : size[a->lab[i - nn]];
        sa[i] = in_n ? 1 : d;
        sb[i] = in_m ? 1 : d;
    }
    for (int i = 0; i < nk; i++)
        axes[i] = nbat + nm + nn + i;
    rlx_tensor *ra = b->t ? reshape_to(a->t, r, sa) : NULL, *rb = ra ? reshape_to(b->t, r, sb) : NULL;
    if (!rb)
        return false;
    a->t = rlx_cast(rlx_sum(rlx_mul(ra, rb), axes, nk, false), dt);
    memcpy(a->lab + nbat + nm, lb + nbat, (size_t)nn * sizeof *a->lab);
    a->rank = nbat + nm + nn;
    return a->t != NULL;
}

/* A tensor of dt with the sizes of labels lab[0..n) (a, b hold them): the
 * positions of each dynamic one, broadcast together. Its values are never
 * read: a program takes the split of a matmul's result from its bound
 * dims (program.c, reshape_dims). */
static rlx_tensor *dims_ref(const lten *a, const lten *b, const int *lab, int n, const int64_t *size, rlx_dtype dt)
{
    int64_t shape[RLX_MAX_RANK], col[RLX_MAX_RANK];
    for (int i = 0; i < n; i++)
        shape[i] = size[lab[i]] < 0 ? 1 : size[lab[i]];
    rlx_tensor *z = rlx_zeros(dt, n, shape);
    for (int i = 0; i < n && z; i++) {
        if (size[lab[i]] >= 0)
            continue;
        const lten *h = NULL;
        int ax = -1;
        for (int j = 0; j < a->rank && ax < 0; j++)
            if (a->lab[j] == lab[i])
                h = a, ax = j;
        for (int j = 0; j < b->rank && ax < 0; j++)
            if (b->lab[j] == lab[i])
                h = b, ax = j;
        for (int j = 0; j < n; j++)
            col[j] = j == i ? -1 : 1;
        z = h ? rlx_add(z, rlx_reshape(rlx_arange_of(h->t, ax, dt), n, col)) : NULL;
    }
    return z;
}

/* a ⊗ b contracting the labels both hold and keep lacks: one (batched)
 * matmul, or a broadcast multiply when nothing is contracted. */
static bool contract(lten *a, lten *b, uint64_t keep, const int64_t *size, rlx_dtype dt)
{
    uint64_t ma = label_mask(a), mb = label_mask(b), both = ma & mb;
    int bl[RLX_MAX_RANK], ml[RLX_MAX_RANK], kl[RLX_MAX_RANK], nl[RLX_MAX_RANK];
    int nbat = pick(a, both & keep, bl, 0), nm = pick(a, ma & ~mb, ml, 0), nk = pick(a, both & ~keep, kl, 0);
    int nn = pick(b, mb & ~ma, nl, 0);
    /* batch labels are merged into one dim unless one is dynamic: then
     * they stay apart (the matmul takes several batch dims) so that merging
     * them never needs a second dynamic dim resolved */
    int64_t B = dims_of(bl, nbat, size, NULL, 0);
    int nb = B < 0 ? nbat : 1;
    if (nbat + nm + nn > RLX_MAX_RANK || nb + 2 > RLX_MAX_RANK) {
        ts_error(RLX_E_UNSUPPORTED, FN, "an intermediate product would have rank %d (more than %d)",
                 nbat + nm + nn > nb + 2 ? nbat + nm + nn : nb + 2, RLX_MAX_RANK);
        return false;
    }
    int la[RLX_MAX_RANK], lb[RLX_MAX_RANK];
    memcpy(la, bl, sizeof bl);
    memcpy(la + nbat, ml, (size_t)nm * sizeof *ml);
    memcpy(la + nbat + nm, kl, (size_t)nk * sizeof *kl);
    memcpy(lb, bl, sizeof bl);
    memcpy(lb + nbat, kl, (size_t)nk * sizeof *kl);
    memcpy(lb + nbat + nk, nl, (size_t)nn * sizeof *nl);
    permute_to(a, a->rank, la);
    permute_to(b, b->rank, lb);
    if (!a->t || !b->t)
        return false;
    int64_t M = dims_of(ml, nm, size, NULL, 0), K = dims_of(kl, nk, size, NULL, 0), N = dims_of(nl, nn, size, NULL, 0);
    int64_t sa[RLX_MAX_RANK], sb[RLX_MAX_RANK], shape[RLX_MAX_RANK];
    if (!nk && (ir_node_numel(ts_node(a->t)) < 0 || ir_node_numel(ts_node(b->t)) < 0))
        return outer(a, b, nbat, nm, nn, size);
    if (B < 0)
        dims_of(bl, nbat, size, sa, 0);
    else
        sa[0] = B;
    memcpy(sb, sa, (size_t)nb * sizeof *sa);
    sa[nb] = M;
    sa[nb + 1] = sb[nb] = nk ? K : 1;
    sb[nb + 1] = N;
    dims_of(bl, nbat, size, shape, 0);
    dims_of(ml, nm, size, shape, nbat);
    dims_of(nl, nn, size, shape, nbat + nm);
    int64_t rs[RLX_MAX_RANK]; /* the matmul's result */
    memcpy(rs, sa, (size_t)(nb + 1) * sizeof *rs);
    rs[nb + 1] = N;
    /* a split no inferred dim rebuilds takes its dims from dims_ref */
    bool split = dims_follow(nb + 2, rs, nbat + nm + nn, shape);
    bool by_ref = !split && dims_follow(nbat + nm + nn, shape, nb + 2, rs) && dt != RLX_BOOL &&
                  !ir_dtype_is_complex(dt);
    if (!merge_follows(ts_node(a->t), nb + 2, sa) || !merge_follows(ts_node(b->t), nb + 2, sb) ||
        (!split && !by_ref))
        return contract_broadcast(a, b, nbat, nm, nk, nn, size, dt);
    int lo[RLX_MAX_RANK];
    memcpy(lo, bl, (size_t)nbat * sizeof *lo);
    memcpy(lo + nbat, ml, (size_t)nm * sizeof *lo);
    memcpy(lo + nbat + nm, nl, (size_t)nn * sizeof *lo);
    rlx_tensor *ref = by_ref ? reshape_to(dims_ref(a, b, lo, nbat + nm + nn, size, dt), nb + 2, rs) : NULL;
    if (by_ref && !ref)
        return false;
    rlx_tensor *ra = reshape_to(a->t, nb + 2, sa), *rb = ra ? reshape_to(b->t, nb + 2, sb) : NULL;
    if (!rb)
        return false;
    rlx_tensor *r = nk ? rlx_cast(rlx_matmul(ra, rb), dt) : rlx_mul(ra, rb);
    a->rank = nbat + nm + nn;
    if (by_ref) { /* reshape(where(true, r, reshape(ref dims))) */
        ir_node *w = r ? ts_expand_like(FN, ts_node(r), ts_node(ref)) : NULL;
        ir_node *t = w ? ts_reshape_node(FN, w, a->rank, shape) : NULL;
        ir_release(w);
        a->t = t ? ts_wrap(t) : NULL;
    } else {
        a->t = reshape_to(r, a->rank, shape);
    }
    if (!a->t)
        return false;
    memcpy(a->lab, bl, sizeof bl);
    memcpy(a->lab + nbat, ml, (size_t)nm * sizeof *ml);
    memcpy(a->lab + nbat + nm, nl, (size_t)nn * sizeof *nl);
    return true;
}

/* Parses the inputs' subscripts into terms[n]; *arrow points at "->" or
 * the end; ell_max is the most dims an ellipsis covers. */
static bool parse_inputs(const char *eq, rlx_tensor *const *xs, int n, term *terms, const char **arrow,
                         int *ell_max)
{
    const char *p = eq;
    int k = 0;
    *ell_max = 0;
    for (;; k++) {
        char what[32];
        snprintf(what, sizeof what, "term %d", k);
        term tmp;
        if (!parse_term(eq, &p, k < n ? &terms[k] : &tmp, what))
            return false;
        if (*p != ',')
            break;
        p++;
    }
    if (*p == '-' && p[1] != '>') {
        ts_error(RLX_E_ARG, FN, "\"%s\": '-' only as \"->\"", eq);
        return false;
    }
    if (k + 1 != n) {
        ts_error(RLX_E_ARG, FN, "\"%s\" has %d operand terms, %d tensors given", eq, k + 1, n);
        return false;
    }
    for (int i = 0; i < n; i++) {
        ir_node *x = ts_node(xs[i]);
        terms[i].rank = x->rank;
        int ne = x->rank - terms[i].nl;
        if (terms[i].ell < 0 ? ne != 0 : ne < 0) {
            ts_error(RLX_E_SHAPE, FN, "term %d of \"%s\" has %d subscripts%s, operand %d is %s", i, eq,
                     terms[i].nl, terms[i].ell < 0 ? "" : " and \"...\"", i, ts_shape_str(x));
            return false;
        }
        *ell_max = ne > *ell_max ? ne : *ell_max;
    }
    *arrow = p;
    return true;
}

/* Each label's size (size-1 dims broadcast, as NumPy); -1 when absent. */
static bool label_sizes(const char *eq, rlx_tensor *const *xs, int n, const term *terms, int ell_max,
                        int64_t *size, int *from)
{
    for (int l = 0; l < NLABEL; l++)
        size[l] = ABSENT;
    for (int i = 0; i < n; i++) {
        ir_node *x = ts_node(xs[i]);
        int lab[RLX_MAX_RANK];
        term_labels(&terms[i], x->rank - terms[i].nl, ell_max, lab);
        for (int j = 0; j < x->rank; j++) {
            int l = lab[j];
            int64_t d = x->shape[j];
            for (int q = 0; q < j; q++) /* a diagonal needs equal dims (NumPy: no broadcasting) */
                if (lab[q] == l && x->shape[q] != d) {
                    ts_error(RLX_E_SHAPE, FN, "index '%c' of \"%s\" has sizes %lld and %lld within operand %d %s",
                             label_char(l), eq, (long long)x->shape[q], (long long)d, i, ts_shape_str(x));
                    return false;
                }
            if (size[l] == ABSENT || size[l] == 1) { /* (d may be dynamic: -1) */
                size[l] = d;
                from[l] = i;
            } else if (d != 1 && d != size[l]) {
                if (l < NLETTER)
                    ts_error(RLX_E_SHAPE, FN, "index '%c' of \"%s\" has size %lld in operand %d and %lld in operand %d",
                             label_char(l), eq, (long long)size[l], from[l], (long long)d, i);
                else
                    ts_error(RLX_E_SHAPE, FN, "the \"...\" dims of \"%s\" do not broadcast: %lld in operand %d, %lld "
                             "in operand %d", eq, (long long)size[l], from[l], (long long)d, i);
                return false;
            }
        }
    }
    return true;
}

/* The output's labels: explicit after "->", else the ellipsis dims then
 * the letters used exactly once, in ASCII order (NumPy). */
static bool output_labels(const char *eq, const char *arrow, int n, const term *terms, int ell_max,
                          const int64_t *size, int *out, int *nout)
{
    int count[NLABEL] = {0};
    for (int i = 0; i < n; i++)
        for (int j = 0; j < terms[i].nl; j++)
            count[terms[i].lab[j]]++;
    *nout = 0;
    if (!*arrow) {
        for (int l = NLETTER; l < NLETTER + ell_max; l++)
            out[(*nout)++] = l;
        for (int l = 0; l < NLETTER; l++) {
            if (count[l] == 1 && *nout == RLX_MAX_RANK) {
                ts_error(RLX_E_SHAPE, FN, "the output of \"%s\" has more than %d dims", eq, RLX_MAX_RANK);
                return false;
            }
            if (count[l] == 1)
                out[(*nout)++] = l;
        }
        return true;
    }
    const char *p = arrow + 2;
    term t;
    if (!parse_term(eq, &p, &t, "the output"))
        return false;
    if (*p) {
        ts_error(RLX_E_ARG, FN, "\"%s\": unexpected '%c' in the output", eq, *p);
        return false;
    }
    if (t.ell < 0 && ell_max > 0) {
        ts_error(RLX_E_ARG, FN, "\"%s\": the operands' \"...\" dims need a \"...\" in the output (NumPy)", eq);
        return false;
    }
    for (int j = 0; j < t.nl; j++) {
        int l = t.lab[j];
        bool twice = false;
        for (int q = 0; q < j; q++)
            twice = twice || t.lab[q] == l;
        if (twice || size[l] == ABSENT) {
            ts_error(RLX_E_ARG, FN, "\"%s\": output index '%c' %s", eq, label_char(l),
                     twice ? "appears twice" : "is in no operand");
            return false;
        }
    }
    if (t.nl + (t.ell < 0 ? 0 : ell_max) > RLX_MAX_RANK) {
        ts_error(RLX_E_SHAPE, FN, "the output of \"%s\" has more than %d dims", eq, RLX_MAX_RANK);
        return false;
    }
    term_labels(&t, t.ell < 0 ? 0 : ell_max, ell_max, out);
    *nout = t.nl + (t.ell < 0 ? 0 : ell_max);
    return true;
}

/* Validates the operands; their promoted dtype in *dt. */
static bool check_operands(rlx_tensor *const *xs, int n, rlx_dtype *dt)
{
    for (int i = 0; i < n; i++)
        if (ts_null(FN, "operand", xs[i]))
            return false;
    *dt = ts_node(xs[0])->dtype;
    for (int i = 0; i < n; i++) {
        rlx_dtype d = ts_node(xs[i])->dtype;
        if (d == RLX_BOOL) {
            ts_error(RLX_E_DTYPE, FN, "operand %d is bool (as rlx_matmul, bool is not supported)", i);
            return false;
        }
        *dt = ir_promote(*dt, d);
    }
    return true;
}

/* Reduces operand x alone: diagonals, broadcast size-1 dims, labels no one
 * else needs (others: the labels of the other operands and the output). */
static void prepare(lten *x, const int64_t *size, uint64_t others, rlx_dtype dt)
{
    take_diagonals(x);
    drop_broadcast(x, size);
    sum_labels(x, label_mask(x) & ~others, dt);
}

static rlx_tensor *einsum_body(rlx_tensor *const *xs, int n, const term *terms, int ell_max, const int64_t *size,
                               const int *out, int nout, rlx_dtype dt, uint64_t *masks)
{
    uint64_t outm = 0;
    for (int j = 0; j < nout; j++)
        outm |= 1ull << out[j];
    for (int i = 0; i < n; i++) {
        int lab[RLX_MAX_RANK];
        masks[i] = 0;
        term_labels(&terms[i], terms[i].rank - terms[i].nl, ell_max, lab);
        for (int j = 0; j < terms[i].rank; j++)
            masks[i] |= 1ull << lab[j];
    }
    lten acc = {NULL, 0, {0}};
    for (int i = 0; i < n; i++) {
        lten x = {rlx_cast(xs[i], dt), terms[i].rank, {0}};
        term_labels(&terms[i], terms[i].rank - terms[i].nl, ell_max, x.lab);
        uint64_t others = outm, later = outm;
        for (int j = 0; j < n; j++)
            others |= j != i ? masks[j] : 0;
        for (int j = i + 1; j < n; j++)
            later |= masks[j];
        prepare(&x, size, others, dt);
        if (i == 0) {
            acc = x;
            continue;
        }
        sum_labels(&acc, label_mask(&acc) & ~(label_mask(&x) | later), dt);
        if (!contract(&acc, &x, later, size, dt))
            return NULL;
    }
    sum_labels(&acc, label_mask(&acc) & ~outm, dt);
    if (acc.rank != nout) { /* every output label has an operand of its size */
        ts_error(RLX_E_INTERNAL, FN, "result rank %d, output rank %d", acc.rank, nout);
        return NULL;
    }
    permute_to(&acc, nout, out);
    return acc.t;
}

rlx_tensor *rlx_einsum(const char *equation, rlx_tensor *const *xs, int n)
{
    if (!equation || n < 1 || !xs) {
        ts_error(RLX_E_ARG, FN, "needs an equation and n >= 1 operands, got %s, n %d, xs %s",
                 equation ? "one" : "NULL", n, xs ? "given" : "NULL");
        return NULL;
    }
    rlx_dtype dt;
    if (!check_operands(xs, n, &dt))
        return NULL;
    term few[8];
    uint64_t few_masks[8];
    ir_scratch mem = IR_SCRATCH(few), mask_mem = IR_SCRATCH(few_masks);
    term *terms = ir_scratch_get(&mem, (size_t)n * sizeof *terms);
    uint64_t *masks = ir_scratch_get(&mask_mem, (size_t)n * sizeof *masks);
    rlx_tensor *y = NULL;
    const char *arrow;
    int ell_max, from[NLABEL] = {0}, out[RLX_MAX_RANK], nout;
    int64_t size[NLABEL];
    if (!terms || !masks)
        ts_error(RLX_E_NOMEM, FN, "out of memory for %d operands", n);
    else if (parse_inputs(equation, xs, n, terms, &arrow, &ell_max) &&
             label_sizes(equation, xs, n, terms, ell_max, size, from) &&
             output_labels(equation, arrow, n, terms, ell_max, size, out, &nout) && ts_open(FN))
        y = ts_close(einsum_body(xs, n, terms, ell_max, size, out, nout, dt, masks));
    ir_scratch_free(&mem);
    ir_scratch_free(&mask_mem);
    return y;
}
