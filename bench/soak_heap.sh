#!/usr/bin/env bash
# Whether rlx-soak's live heap grows with rounds (issue 18): runs the soak
# under heaptrack for a short and a long time with one seed and prints, for
# each, the rounds done and the allocations still live at exit (the soak
# frees nothing at exit, so that is the live heap: caches, tables, LLVM's
# statics). Growth per round between the two is a leak or an unbounded
# structure; malloc's own "in use" figure (mallinfo2, in the soak's CSV)
# also counts chunks parked in thread caches and cannot tell them apart.
#   bench/soak_heap.sh build/bench/rlx-soak [short s (90)] [long s (400)] [seed (23)]
# Needs heaptrack (apt-get install heaptrack).
set -euo pipefail
bin=${1:?usage: soak_heap.sh path/to/rlx-soak [short] [long] [seed]}
short=${2:-90}
long=${3:-400}
seed=${4:-23}
dir=$(mktemp -d /tmp/soakheap.XXXXXX)
trap 'rm -rf "$dir"' EXIT
for s in "$short" "$long"; do
  RLX_CACHE_DIR= RLX_KERNEL_CACHE_BYTES=${RLX_KERNEL_CACHE_BYTES:-4194304} \
    heaptrack -o "$dir/h$s" "$bin" "$s" "$dir/s$s.csv" "$seed" >"$dir/log$s" 2>&1
  rounds=$(sed -n 's/^rounds \([0-9]*\),.*/\1/p' "$dir/log$s")
  live=$(sed -n 's/^[[:space:]]*leaked allocations:[[:space:]]*\([0-9]*\)/\1/p' "$dir/log$s")
  bytes=$(heaptrack_print -f "$dir/h$s.zst" --print-leaks 0 --print-peaks 0 --print-allocators 0 \
            --print-temporary 0 2>/dev/null |
          sed -n 's/^total memory leaked: //p')
  echo "$s s: $rounds rounds, $live allocations live at exit, $bytes"
done
