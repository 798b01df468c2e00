#!/usr/bin/env bash
# rlx-bench's command line: each bad use exits 2 with a message naming the
# problem on stderr; --list and a quick sweep and tune run (exit 0).
set -u
bench=$1
fail=0
expect_bad() { # message-pattern args...
  local pat=$1; shift
  local err rc
  err=$("$bench" "$@" 2>&1 >/dev/null); rc=$?
  if [[ $rc -ne 2 ]] || ! grep -q -- "$pat" <<<"$err"; then
    echo "FAIL: rlx-bench $* -> exit $rc, stderr: $err (want 2 and '$pat')"; fail=1
  fi
}
expect_bad "unknown argument '--bogus'" --bogus
expect_bad "missing value after '--threads'" --threads
expect_bad "--threads wants an integer" --threads 0
expect_bad "--threads wants an integer" --threads 2x
expect_bad "--repeat wants an integer" --repeat -1
expect_bad "unknown workload 'W99'" --filter W1,W99
expect_bad "--backend wants jit or ref" --backend gpu
expect_bad "unknown option 'nosuch'" --quick --filter W1 --sweep nosuch=1
expect_bad "unroll must be an integer in 0..16" --quick --filter W1 --sweep unroll=1,99
expect_bad "vector_width must be" --quick --filter W1 --sweep vector_width=3
expect_bad "--sweep wants KNOB=v1" --quick --sweep unroll
expect_bad "exclusive" --tune --sweep unroll=1
out=$("$bench" --list) && grep -q "^W2 " <<<"$out" && grep -q "reduce_accumulators" <<<"$out" || { echo "FAIL: --list"; fail=1; }
out=$("$bench" --quick --json --filter W2 --sweep unroll=1,8) || { echo "FAIL: quick sweep exit $?"; fail=1; }
[[ $(grep -c '"setting":"unroll=' <<<"$out") -eq 2 ]] || { echo "FAIL: sweep rows: $out"; fail=1; }
tmp=$(mktemp -d)
out=$("$bench" --quick --json --filter W2,W4a --tune --budget 30 --tuning-file "$tmp/t.txt") || { echo "FAIL: quick tune exit $?: $out"; fail=1; }
head -3 "$tmp/t.txt" | grep -q "^rlx-tuning 1" || { echo "FAIL: tuning file header"; cat "$tmp/t.txt"; fail=1; }
grep -q '"type":"tuning_file"' <<<"$out" || { echo "FAIL: tune output: $out"; fail=1; }
rm -rf "$tmp"
[[ $fail -eq 0 ]] && echo "rlx-bench usage: ok"
exit $fail
