/*
 * cg_host.c — what LLVM knows about the host: version, target triple, CPU
 * name and its vector features, i.e. the target the JIT compiles for.
 * Only src/codegen_llvm includes llvm-c.
 */
#include <stdio.h>
#include <string.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "codegen_llvm/cg.h"

int cg_host_describe(char *buf, size_t cap)
{
    char *cpu = LLVMGetHostCPUName();
    char *features = LLVMGetHostCPUFeatures();
    char *triple = LLVMGetDefaultTargetTriple();
    unsigned major, minor, patch;
    LLVMGetVersion(&major, &minor, &patch);
    const char *vec = strstr(features, "+avx512f") ? "avx512f" : strstr(features, "+avx2") ? "avx2" : "sse";
    int n = snprintf(buf, cap, "LLVM %u.%u.%u, %s, cpu %s, %s", major, minor, patch, triple, cpu, vec);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
    LLVMDisposeMessage(triple);
    return n;
}
