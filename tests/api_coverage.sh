#!/usr/bin/env bash
# Fails when a public function of include/rlx.h is called by no C test:
# every function needs value and bad-input tests, so at least one reference (a call or a table entry).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
names=$(grep -oE '^RLX_API [^;]*\brlx_[a-z0-9_]+\(' "$root/include/rlx.h" | grep -oE 'rlx_[a-z0-9_]+\($' | tr -d '(' | sort -u)
missing=0
total=0
for n in $names; do
  total=$((total + 1))
  if ! grep -qE "\\b$n\\b" "$root"/tests/test_*.c; then
    echo "untested public function: $n"
    missing=$((missing + 1))
  fi
done
echo "api coverage: $((total - missing)) of $total public functions referenced by tests"
[ "$missing" -eq 0 ]
