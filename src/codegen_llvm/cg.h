/* cg.h — the code generator's interface to the rest of librlx. */
#ifndef RLX_CG_H
#define RLX_CG_H

#include <stddef.h>

/* Writes "LLVM 19.1.7, x86_64-pc-linux-gnu, cpu znver5, avx512f" to buf. */
int cg_host_describe(char *buf, size_t cap);

#endif
