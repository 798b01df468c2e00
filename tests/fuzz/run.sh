#!/usr/bin/env bash
# Builds the libFuzzer targets of librlx into build-fuzz/ and runs each for
# FUZZ_SECONDS seconds (default 60), starting from the committed seeds in
# tests/fuzz/corpus/<name>/; new inputs go to build-fuzz/corpus/<name>/,
# crashes, leaks and timeouts to build-fuzz/artifacts/. Exits non-zero on
# the first fuzzer that finds something, after printing its report.
#   FUZZ_SECONDS=600 tests/fuzz/run.sh             # every fuzzer, 10 minutes each
#   FUZZ_SECONDS=60 tests/fuzz/run.sh fuzz_diff    # one of them
# Replay a saved input: build-fuzz/fuzz_api path/to/crash-...
# (FUZZ_VERBOSE=1 makes fuzz_diff print the graph it compares).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FUZZ_BUILD:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-60}
fuzzers=("$@")
if ((${#fuzzers[@]} == 0)); then # every tests/fuzz/fuzz_*.c
  for f in "$root"/tests/fuzz/fuzz_*.c; do fuzzers+=("$(basename "$f" .c)"); done
fi

cc=${FUZZ_CC:-clang-19}
if ! command -v "$cc" >/dev/null 2>&1 && [[ $cc == clang-19 && $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  echo "fuzz: installing clang-19 libclang-rt-19-dev"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-19 libclang-rt-19-dev >/dev/null
fi
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "fuzz: $cc not found; as root: apt-get install clang-19 libclang-rt-19-dev" >&2
  exit 1
fi
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$root/tests/fuzz" -B "$build" -DCMAKE_C_COMPILER="$cc" >/dev/null
fi
cmake --build "$build" -j"${JOBS:-$(nproc)}"

# allocator_may_return_null: a huge allocation the library tries must come
# back NULL (RLX_E_NOMEM), as in production, not abort the fuzzer.
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build/artifacts"
status=0
for f in "${fuzzers[@]}"; do
  name=${f#fuzz_}
  mkdir -p "$build/corpus/$name"
  log=$build/$f.log
  echo "== $f: ${seconds} s (log: $log)"
  rc=0
  "$build/$f" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=30 -max_len=2048 \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$f-" \
    "$build/corpus/$name" "$root/tests/fuzz/corpus/$name" >"$log" 2>&1 || rc=$?
  grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE)' "$log" | tail -n 1 || true
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" || true
  if ((rc != 0)); then
    echo "!! $f found a problem (exit $rc); the report:" >&2
    grep -v -E '^#[0-9]+[[:space:]]|^INFO:|^[[:space:]]+NEW_FUNC|^remark:' "$log" | tail -n 60 >&2
    status=$rc
    break
  fi
done
exit $status
