#!/usr/bin/env bash
# Builds librlx, installs it into a temporary prefix, and checks that a
# consumer program builds and runs against the installed copy through
# pkg-config and through find_package(rlx); also checks that the shared
# library exports only rlx_* symbols. Prints "install check: OK" on success.
#   KEEP_TMP=1   keep the temporary directory (its path is printed)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlx-install-check.XXXXXX")
if [[ ${KEEP_TMP:-0} == 1 ]]; then
  echo "install check: working in $tmp"
else
  trap 'rm -rf "$tmp"' EXIT
fi
prefix=$tmp/prefix
log=$tmp/log.txt

fail() { echo "install check: FAILED: $*" >&2; exit 1; }
# Run a step quietly; show its output when it fails.
step() {
  local what=$1; shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    fail "$what"
  fi
}

# 1. Build and install.
step "configure" cmake -S "$root" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release \
  -DRLX_BUILD_TESTS=OFF -DRLX_BUILD_EXAMPLES=OFF
step "build" cmake --build "$tmp/build" -j"$(nproc 2>/dev/null || echo 2)"
step "install" cmake --install "$tmp/build" --prefix "$prefix"

so=$(find "$prefix" -name librlx.so -print -quit)
[[ -n $so ]] || fail "librlx.so not installed under $prefix"
libdir=$(dirname "$so")
[[ -f $prefix/include/rlx.h ]] || fail "rlx.h not installed in $prefix/include"
[[ -f $libdir/librlx.a ]] || fail "librlx.a not installed in $libdir"
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[[ -n $soname && -e $libdir/$soname ]] || fail "soname link '$soname' missing in $libdir"

# 2. Exported symbols: all must start with rlx_ (besides the markers the
#    linker defines in every shared object, and symbol-version nodes).
bad=$(nm -D --defined-only "$so" | awk 'NF >= 3 && $2 != "A" { print $3 }' |
  grep -Ev '^(rlx_|(__bss_start|_edata|_end|_init|_fini)$)' || true)
if [[ -n $bad ]]; then
  echo "symbols exported by $(basename "$so") without the rlx_ prefix:" >&2
  printf '  %s\n' $bad >&2
  fail "foreign exported symbols"
fi

# 3. A consumer program.
mkdir -p "$tmp/app"
cat >"$tmp/app/main.c" <<'C'
#include <rlx.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  const char *v = rlx_version();
  if (v == NULL || strcmp(v, RLX_VERSION_STRING) != 0) {
    fprintf(stderr, "rlx_version() is \"%s\", header says \"%s\"\n", v ? v : "(null)",
            RLX_VERSION_STRING);
    return 1;
  }
  const int64_t shape[2] = {2, 3};
  rlx_tensor *t = rlx_zeros(RLX_F32, 2, shape);
  if (t == NULL) {
    fprintf(stderr, "rlx_zeros failed: %s\n", rlx_last_error());
    return 1;
  }
  if (rlx_rank(t) != 2 || rlx_numel(t) != 6 || rlx_dtype_of(t) != RLX_F32) {
    fprintf(stderr, "rlx_zeros([2,3]) has the wrong rank/numel/dtype\n");
    rlx_release(t);
    return 1;
  }
  rlx_release(t);
  printf("librlx %s\n", v);
  return 0;
}
C
cat >"$tmp/app/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(rlx_consumer C)
find_package(rlx 0.1 REQUIRED)
add_executable(app main.c)
target_link_libraries(app rlx::rlx)
add_executable(app_static main.c)
target_link_libraries(app_static rlx::rlx_static)
CMAKE

# Run a consumer binary; it must use the installed librlx (if it is dynamic).
run_app() {
  local bin=$1 out
  out=$(LD_LIBRARY_PATH="$libdir" "$bin" 2>&1) || { echo "$out" >&2; fail "$(basename "$bin") failed"; }
  if LD_LIBRARY_PATH="$libdir" ldd "$bin" | grep -q 'librlx\.so'; then
    LD_LIBRARY_PATH="$libdir" ldd "$bin" | grep 'librlx\.so' | grep -qF "$libdir/" ||
      fail "$(basename "$bin") does not load librlx from $libdir"
  fi
  echo "  $(basename "$bin"): $out"
}

# 3a. pkg-config.
export PKG_CONFIG_PATH=$libdir/pkgconfig
pcv=$(pkg-config --modversion rlx) || fail "pkg-config does not find rlx in $PKG_CONFIG_PATH"
step "pkg-config build" sh -c "${CC:-cc} -std=c11 -Wall -Wextra -Werror -o '$tmp/app_pc' '$tmp/app/main.c' \
  \$(pkg-config --cflags --libs rlx)"
echo "install check: pkg-config rlx $pcv"
run_app "$tmp/app_pc"

# 3b. find_package(rlx), shared and static.
step "find_package configure" cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$prefix"
step "find_package build" cmake --build "$tmp/app/build"
echo "install check: find_package(rlx)"
run_app "$tmp/app/build/app"
run_app "$tmp/app/build/app_static"

echo "install check: OK"
