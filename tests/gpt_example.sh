#!/bin/bash
# gpt_example.sh RLX_GPT: examples/gpt.c at a tiny size. Training 6 steps
# in one run and 3 + 3 steps resumed from the step-3 checkpoint print the
# same step-6 loss (parameters, Adam state, step and data stream restored);
# the resumed run samples through the KV cache. --bf16 (mixed precision)
# trains and samples too, its step-6 loss within 0.05 of f32's.
set -euo pipefail
gpt=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
small=(--width 32 --layers 1 --heads 2 --seq 16 --batch 4 --print-every 1)
"$gpt" "${small[@]}" --steps 6 --sample 0 >"$dir/whole.txt"
"$gpt" "${small[@]}" --steps 3 --sample 0 --save-every 3 --save "$dir/ck.safetensors" >"$dir/first.txt"
"$gpt" "${small[@]}" --steps 3 --sample 20 --resume "$dir/ck.safetensors" >"$dir/resumed.txt"
want=$(grep -E '^step +6 ' "$dir/whole.txt" | awk '{print $4}')
got=$(grep -E '^step +6 ' "$dir/resumed.txt" | awk '{print $4}')
grep -q 'resuming at step 4' "$dir/resumed.txt"
grep -q -- '--- sample (20 bytes' "$dir/resumed.txt"
if [ -z "$want" ] || [ "$want" != "$got" ]; then
    echo "step-6 loss: uninterrupted '$want', resumed '$got'" >&2
    cat "$dir/whole.txt" "$dir/resumed.txt" >&2
    exit 1
fi
"$gpt" "${small[@]}" --steps 6 --sample 10 --bf16 >"$dir/bf16.txt"
grep -q -- '--- sample (10 bytes' "$dir/bf16.txt"
half=$(grep -E '^step +6 ' "$dir/bf16.txt" | awk '{print $4}')
if ! awk -v a="$half" -v b="$want" 'BEGIN { d = a - b; exit !(a != "" && d < 0.05 && d > -0.05) }'; then
    echo "step-6 loss: f32 '$want', bf16 '$half'" >&2
    exit 1
fi
echo "ok: step-6 loss $got both ways; bf16 $half"
