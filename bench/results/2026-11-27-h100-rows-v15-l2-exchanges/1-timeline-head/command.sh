#!/usr/bin/env bash
# Fifteenth session, first run: the rows kernel's timeline (every block's stamps against one clock) on
# HEAD's kernel, to see which block the others wait for at each exchange.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for cfg in "4x128x128" "3x128x128" "2x128x128" "4x64x128" "4x128x128 --optimizer adam --lr 0.001"; do
  name=$(echo $cfg | tr ' ' '_' | tr -d '-')
  echo "== timeline $cfg"
  # shellcheck disable=SC2086
  SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_PROFILE_BLOCK=all timeout 120 "$build/bench/epoch_bench" --precision bf16 \
    --data "$build_root/data" --engine fused --epochs 3 --config $cfg > "$out/timeline-$name.log" 2>&1
  echo "rc $?"
  grep -A 17 "stage timeline" "$out/timeline-$name.log" | tail -n 18
done
for cfg in 4x128x128 3x128x128; do
  timeout 120 "$build/bench/epoch_bench" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 --config $cfg \
    2>>"$out/eb.err" | tail -n 1 | tee -a "$out/eb.jsonl" | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(r.get('config'), r.get('epoch_ms_median'))"
done
