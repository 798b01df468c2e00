# Convenience wrapper around CMake. `make` builds into build/; see `make help`.
PREFIX ?= /usr/local
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
TEST_TIMEOUT ?= 900
VALGRIND_LABELS ?= unit
VALGRIND_OPTIONS ?= --leak-check=full --error-exitcode=1 --errors-for-leak-kinds=definite,indirect

ASAN_ENV = ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 \
           UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

SHELL := /bin/bash
.DEFAULT_GOAL := build
.PHONY: help deps build demo bench test test-asan test-valgrind test-tsan fuzz install clean

help:
	@echo "targets: deps build (default) demo bench [BENCH_ARGS=...] test test-asan test-valgrind test-tsan fuzz [FUZZ_SECONDS=$(FUZZ_SECONDS)] install [PREFIX=$(PREFIX)] clean"

deps:
	@bash scripts/install-deps.sh

build: deps
	@test -f build/CMakeCache.txt || cmake -S . -B build
	cmake --build build -j$(JOBS)

# The expression tour, then the main job: training an MLP with autodiff on
# the JIT, printing each fused kernel as it is compiled or loaded from the
# disk cache (RLX_DEBUG=1); then the character-level GPT (400 steps on
# GPL-3, a checkpoint at step 200, a KV-cache sample), which fails when its
# final loss is above 2.5 (README "GPT example").
demo: build
	./build/examples/rlx-demo
	RLX_DEBUG=1 ./build/examples/rlx-train
	./build/examples/rlx-gpt --steps 400 --print-every 50 --save-every 200 --save build/gpt-demo.safetensors --sample 200 --max-loss 2.5

# rlx-bench (bench/rlx_bench.c): every workload beside this machine's
# limits; e.g. BENCH_ARGS="--filter W1,W2 --threads 2", "--json", "--quick",
# "--sweep unroll=0,1,4,8", "--tune". bench/compare.py adds NumPy/PyTorch.
BENCH_ARGS ?=
bench: build
	cmake --build build -j$(JOBS) --target rlx-bench
	./build/bench/rlx-bench $(BENCH_ARGS)

# ctest hides the output of passing tests: the pytest summary is echoed
# from ctest's log, then ctest's own summary closes the run.
test: build
	@cd build && set -o pipefail && ctest --output-on-failure -j2 --timeout $(TEST_TIMEOUT) | tee ctest-output.txt; rc=$$?; \
	  echo "pytest: $$(grep -h -E '^[0-9]+ passed' Testing/Temporary/LastTest.log | tail -1)"; \
	  grep -E 'tests passed|tests failed' ctest-output.txt | tail -1; exit $$rc

# The Python suite is left out: an ASan-built library cannot load into an
# interpreter that was not started with the ASan runtime.
test-asan: deps
	@test -f build-asan/CMakeCache.txt || \
	  cmake -S . -B build-asan -DRLX_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build build-asan -j$(JOBS)
	cd build-asan && $(ASAN_ENV) ctest --output-on-failure -j2 --timeout $(TEST_TIMEOUT) -LE python

# CMakeLists uses enable_testing(), not include(CTest), so the memcheck
# settings are given to ctest directly instead of through DartConfiguration.tcl.
# test_jit and rlx-bench's bench_* are left out: LLVM's compiles under valgrind take an hour; the
# JIT's memory is checked by test-asan instead.
test-valgrind: build
	cd build && OPENBLAS_NUM_THREADS=1 ctest -T memcheck --output-on-failure -E 'test_jit|bench_' \
	  $(if $(VALGRIND_LABELS),-L '$(VALGRIND_LABELS)') \
	  --overwrite MemoryCheckCommand=$$(command -v valgrind) \
	  --overwrite 'MemoryCheckCommandOptions=$(VALGRIND_OPTIONS)'

# ThreadSanitizer (GCC's) over the C unit tests; tests/test_stress.c is the
# concurrency test. Python is left out for the reason given at test-asan.
# OpenBLAS runs on one thread: its own threads are not instrumented.
# tests/tsan.supp silences reports inside libLLVM (not instrumented; why there).
TSAN_ENV = TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp \
           OPENBLAS_NUM_THREADS=1
test-tsan: deps
	@test -f build-tsan/CMakeCache.txt || \
	  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRLX_BUILD_BENCH=OFF \
	    -DCMAKE_C_FLAGS='-fsanitize=thread -fno-omit-frame-pointer' \
	    -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread
	cmake --build build-tsan -j$(JOBS)
	cd build-tsan && $(TSAN_ENV) ctest --output-on-failure -j2 --timeout $(TEST_TIMEOUT) -L unit

# libFuzzer targets (clang-19, libclang-rt-19-dev): builds build-fuzz/ and
# runs each fuzzer FUZZ_SECONDS seconds from the seeds in tests/fuzz/corpus.
FUZZ_SECONDS ?= 60
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) bash tests/fuzz/run.sh

install: build
	cmake --install build --prefix '$(PREFIX)'

clean:
	rm -rf build build-asan
