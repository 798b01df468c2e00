# Convenience wrapper around CMake. `make` builds into build/; see `make help`.
PREFIX ?= /usr/local
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
VALGRIND_LABELS ?= unit
VALGRIND_OPTIONS ?= --leak-check=full --error-exitcode=1 --errors-for-leak-kinds=definite,indirect

ASAN_ENV = ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 \
           UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.DEFAULT_GOAL := build
.PHONY: help deps build demo test test-asan test-valgrind install clean

help:
	@echo "targets: deps build (default) demo test test-asan test-valgrind install [PREFIX=$(PREFIX)] clean"

deps:
	@bash scripts/install-deps.sh

build: deps
	@test -f build/CMakeCache.txt || cmake -S . -B build
	cmake --build build -j$(JOBS)

demo: build
	./build/examples/rlx-demo

test: build
	cd build && ctest --output-on-failure -j2

test-asan: deps
	@test -f build-asan/CMakeCache.txt || \
	  cmake -S . -B build-asan -DRLX_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build build-asan -j$(JOBS)
	cd build-asan && $(ASAN_ENV) ctest --output-on-failure -j2

# CMakeLists uses enable_testing(), not include(CTest), so the memcheck
# settings are given to ctest directly instead of through DartConfiguration.tcl.
test-valgrind: build
	cd build && OPENBLAS_NUM_THREADS=1 ctest -T memcheck --output-on-failure \
	  $(if $(VALGRIND_LABELS),-L '$(VALGRIND_LABELS)') \
	  --overwrite MemoryCheckCommand=$$(command -v valgrind) \
	  --overwrite 'MemoryCheckCommandOptions=$(VALGRIND_OPTIONS)'

install: build
	cmake --install build --prefix '$(PREFIX)'

clean:
	rm -rf build build-asan
