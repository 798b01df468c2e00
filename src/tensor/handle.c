/*
 * handle.c — reference counting of handles and the thread-local scopes.
 *
 * A scope is a growable list of handles recorded on this thread; scopes
 * form a stack. Composites use the same stack through ts_open/ts_close,
 * which also name the composite in errors raised while it builds.
 *
 * rlx_scope_begin returns nothing, so a caller cannot tell that it failed
 * (out of memory growing the stack) and pairs it with rlx_scope_end all
 * the same, trusting the scope with every handle in between. A failed
 * begin is therefore counted (unopened) and poisons this thread until its
 * rlx_scope_end: no handle is handed out meanwhile (ts_wrap fails), since
 * nothing would release it. Before this, a soak round whose first
 * allocation failed leaked its whole graph.
 */
#include <string.h>

#include "tensor/ts.h"

typedef struct {
    rlx_tensor **items; /* owns one reference each */
    size_t count, cap;
    const char *fn;     /* composite name, NULL for a user scope */
} scope;

static _Thread_local scope *scopes;
static _Thread_local size_t nscopes, scopes_cap;
/* user scopes whose rlx_scope_begin failed and whose rlx_scope_end has not
 * come: they sit above every open scope (nothing opens while one waits) */
static _Thread_local size_t unopened;

const char *ts_fn(const char *fn)
{
    for (size_t i = 0; i < nscopes; i++)
        if (scopes[i].fn)
            return scopes[i].fn; /* the outermost composite is what the user called */
    return fn;
}

static bool scope_push(const char *fn)
{
    if (nscopes == scopes_cap) {
        size_t cap = scopes_cap ? scopes_cap * 2 : 8;
        scope *s = ir_realloc(scopes, cap * sizeof *s);
        if (!s)
            return false;
        scopes = s;
        scopes_cap = cap;
    }
    scopes[nscopes++] = (scope){NULL, 0, 0, fn};
    return true;
}

static bool scope_record(scope *s, rlx_tensor *t)
{
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        rlx_tensor **items = ir_realloc(s->items, cap * sizeof *items);
        if (!items)
            return false;
        s->items = items;
        s->cap = cap;
    }
    s->items[s->count++] = t;
    return true;
}

static void scope_pop(void)
{
    scope *s = &scopes[--nscopes];
    for (size_t i = s->count; i-- > 0;)
        ir_release(ts_node(s->items[i]));
    ir_free(s->items);
    if (nscopes == 0) {
        ir_free(scopes);
        scopes = NULL;
        scopes_cap = 0;
    }
}

/* A handle cannot be handed out under a scope that failed to open. */
static bool unopened_fail(const char *fn)
{
    if (!unopened)
        return false;
    ts_error(RLX_E_NOMEM, fn, "out of memory: rlx_scope_begin failed and its rlx_scope_end has not come");
    return true;
}

rlx_tensor *ts_wrap(ir_node *n)
{
    rlx_tensor *t = (rlx_tensor *)n;
    if (t && unopened_fail("rlx_scope")) {
        ir_release(n);
        return NULL;
    }
    if (t && nscopes && !scope_record(&scopes[nscopes - 1], t)) {
        ir_release(n);
        ts_error(RLX_E_NOMEM, "rlx_scope", "out of memory recording a handle in the scope");
        return NULL;
    }
    return t;
}

/* candidate fix: room for one more handle in the open scope, so that a
 * following ts_wrap cannot fail */
bool ts_scope_reserve(void)
{
    if (unopened)
        return false;
    if (!nscopes)
        return true;
    scope *s = &scopes[nscopes - 1];
    if (s->count < s->cap)
        return true;
    size_t cap = s->cap ? s->cap * 2 : 16;
    rlx_tensor **items = ir_realloc(s->items, cap * sizeof *items);
    if (!items)
        return false;
    s->items = items;
    s->cap = cap;
    return true;
}

rlx_tensor *rlx_retain(rlx_tensor *t) { return t ? ts_wrap(ir_retain(ts_node(t))) : NULL; }
void rlx_release(rlx_tensor *t) { ir_release(ts_node(t)); }

void rlx_scope_begin(void)
{
    if (unopened) { /* nested in one that failed: opening it would misplace the order */
        unopened++;
        ts_error(RLX_E_NOMEM, "rlx_scope_begin", "out of memory: an enclosing rlx_scope_begin failed");
    } else if (!scope_push(NULL)) {
        unopened++;
        ts_error(RLX_E_NOMEM, "rlx_scope_begin", "out of memory");
    }
}

void rlx_scope_end(void)
{
    if (unopened) { /* closes the innermost scope, which never opened */
        unopened--;
        return;
    }
    if (nscopes == 0 || scopes[nscopes - 1].fn) {
        ts_error(RLX_E_ARG, "rlx_scope_end", "no scope is open on this thread");
        return;
    }
    scope_pop();
}

/* Moves one occurrence of t from the innermost scope to the one below (or
 * to nobody). Returns 1 when moved, 0 when t was not recorded there, -1
 * when out of memory (t is then released). */
static int scope_escape(rlx_tensor *t)
{
    if (!t || nscopes == 0 || unopened) /* the innermost scope never opened: t is not in it */
        return 0;
    scope *s = &scopes[nscopes - 1];
    for (size_t i = s->count; i-- > 0;) {
        if (s->items[i] != t)
            continue;
        memmove(&s->items[i], &s->items[i + 1], (s->count - i - 1) * sizeof *s->items);
        s->count--;
        if (nscopes >= 2 && !scope_record(&scopes[nscopes - 2], t)) {
            ir_release(ts_node(t));
            ts_error(RLX_E_NOMEM, "rlx_escape", "out of memory");
            return -1;
        }
        return 1;
    }
    return 0;
}

rlx_tensor *rlx_escape(rlx_tensor *t)
{
    return scope_escape(t) < 0 ? NULL : t;
}

bool ts_open(const char *fn)
{
    if (unopened_fail(fn))
        return false;
    if (scope_push(fn))
        return true;
    ts_error(RLX_E_NOMEM, fn, "out of memory");
    return false;
}

rlx_tensor *ts_close(rlx_tensor *result)
{
    int moved = result ? scope_escape(result) : 1;
    if (moved < 0)
        result = NULL;
    else if (moved == 0) {
        /* The composite returned a borrowed handle (an input as it was):
         * the caller gets a new reference of its own. */
        ir_retain(ts_node(result));
        if (nscopes >= 2 && !scope_record(&scopes[nscopes - 2], result)) {
            ir_release(ts_node(result));
            ts_error(RLX_E_NOMEM, scopes[nscopes - 1].fn, "out of memory");
            result = NULL;
        }
    }
    scope_pop();
    return result;
}

rlx_tensor *ts_close_as(rlx_tensor *result, rlx_dtype dt)
{
    return ts_close(result && ts_node(result)->dtype != dt ? rlx_cast(result, dt) : result);
}
