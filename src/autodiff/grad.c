/*
 * grad.c — reverse-mode differentiation (rlx_grad). The VJP table lands
 * with the autodiff issue; until then the entry point validates its
 * arguments and answers RLX_E_UNSUPPORTED, as API.md allows.
 */
#include "tensor/ts.h"

rlx_status rlx_grad(rlx_tensor *loss, rlx_tensor *const *wrt, int n, rlx_tensor **grads)
{
    const char *fn = "rlx_grad";
    if (ts_null(fn, "loss", loss))
        return rlx_last_status();
    if (n < 0 || (n > 0 && (!wrt || !grads))) {
        ts_error(RLX_E_ARG, fn, "n = %d with wrt %s and grads %s", n, wrt ? "set" : "NULL", grads ? "set" : "NULL");
        return RLX_E_ARG;
    }
    for (int i = 0; i < n; i++)
        grads[i] = NULL;
    ts_error(RLX_E_UNSUPPORTED, fn, "automatic differentiation is not available in this build yet");
    return RLX_E_UNSUPPORTED;
}
