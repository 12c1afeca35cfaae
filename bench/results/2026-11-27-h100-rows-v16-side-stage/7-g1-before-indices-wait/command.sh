#!/usr/bin/env bash
# Sixteenth session: v16d = v16c with G1 sent before the wait for the next sample indices (one block barrier fewer on
# G1's path: send_side's barrier orders the indices).
# Rows tests and sanitizers on v16d (called v6 below), timelines, ncu stage table, A/B against v16c (3417bc6).
set -u
lab=$(cd "$(dirname "$0")" && pwd)
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (rows cases, v16d)"
timeout 300 "$t" --gtest_filter='*rows*:*Rows*' > "$out/fused-rows.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-rows.log" | tail -n 8
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
rows="${f}relu_rows:${f}partial_batch_rows:${f}no_bias_rows:${f}adam_rows:${f}narrow_rows:${f}mse_rows:${f}one_hidden_rows"
for tool in racecheck memcheck synccheck; do
  echo "== compute-sanitizer $tool (rows cases, v16d)"
  SPRINTNET_FUSED_BLOCKS=16 timeout 240 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$rows" > "$out/sanitizer-rows-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-rows-$tool.log" | tail -n 4
done
bin_of() { if [[ $1 == v6 ]]; then echo "$build/bench/epoch_bench"; else echo "$build/bench/epoch_bench_$1"; fi; }
for v in head v6; do
  tag=$v-4x128x128
  SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_PROFILE_BLOCK=all timeout 120 "$(bin_of $v)" --precision bf16 \
    --data "$build_root/data" --engine fused --epochs 3 --config 4x128x128 > "$out/timeline-$tag.log" 2>&1
  echo "== timeline $tag (rc $?)"
  grep -A 17 "stage timeline" "$out/timeline-$tag.log" | tail -n 17 | sed -n '1p;2p;6p;16p;17p'
  timeout 200 ncu --clock-control none -k regex:rows_epoch_kernel --launch-skip 1 --launch-count 1 --section SourceCounters \
    --section SchedulerStats -o "$out/rows-$v" "$(bin_of $v)" --precision bf16 --data "$build_root/data" --engine fused \
    --epochs 2 --config 4x128x128 > "$out/ncu-$v.log" 2>&1; echo "ncu rc $?"
  ncu -i "$out/rows-$v.ncu-rep" --page source --csv --print-source sass > "$out/source-$v.csv" 2>/dev/null
  ncu -i "$out/rows-$v.ncu-rep" --page details 2>/dev/null | grep -E "Issued Warp|Eligible Warps" 
  python3 "$lab/stage_stalls.py" "$out/source-$v.csv" --warps 128 --steps 468 --step-us 10.8 > "$out/stages-$v.txt"; cat "$out/stages-$v.txt"
  rm -f "$out/rows-$v.ncu-rep" "$out/source-$v.csv"
done
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'), r.get('train_loss', [None])[-1], r.get('test_accuracy'))" "$label"
}
echo "== A/B"
for round in 1 2 3; do
  for cfg in 4x128x128 3x128x128 2x128x128 4x64x128; do
    for v in head v6; do eb "$v $cfg" "$(bin_of $v)" --config $cfg; done
  done
  for v in head v6; do eb "$v adam" "$(bin_of $v)" --config 4x128x128 --optimizer adam --lr 0.001; done
done
