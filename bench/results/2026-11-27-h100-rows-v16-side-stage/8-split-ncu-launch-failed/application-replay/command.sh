#!/usr/bin/env bash
# Sixteenth session, measurement only: the split kernel's warp stalls and instructions per stage (ncu, one epoch
# launch each of 4x784x128 and the default model 784-256-256-10), with bench/lab/stage_stalls.py.
set -u
lab=$(cd "$(dirname "$0")" && pwd)
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
bin=$build/bench/epoch_bench_head
for spec in "4x784x128 98" "3x256x128 32"; do
  set -- $spec; cfg=$1; blocks=$2
  timeout 240 ncu --clock-control none --replay-mode application -k regex:split_epoch_kernel --launch-skip 1 --launch-count 1 --section SourceCounters \
    --section SchedulerStats -o "$out/split-$cfg" "$bin" --precision bf16 --data "$build_root/data" --engine fused \
    --epochs 2 --config $cfg > "$out/ncu-$cfg.log" 2>&1; echo "ncu $cfg rc $?"
  ncu -i "$out/split-$cfg.ncu-rep" --page details 2>/dev/null | grep -E "Issued Warp|Eligible Warps|No Eligible"
  ncu -i "$out/split-$cfg.ncu-rep" --page source --csv --print-source sass > "$out/source-$cfg.csv" 2>/dev/null
  python3 "$lab/stage_stalls.py" "$out/source-$cfg.csv" --warps $((blocks * 8)) --steps 468 > "$out/stages-split-$cfg.txt"
  cat "$out/stages-split-$cfg.txt"
  rm -f "$out/split-$cfg.ncu-rep" "$out/source-$cfg.csv"
done
