#!/usr/bin/env bash
# Fifteenth session, last run: k (i2 with each exchange's copies issued after a warp barrier by the warps that
# stored the slices, no block barrier) against i2 (d1b2679): rows tests, sanitizers, timeline, A/B rounds.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (rows cases, k)"
timeout 300 "$t" --gtest_filter='*rows*:*Rows*' > "$out/fused-rows.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-rows.log" | tail -n 8
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
rows="${f}relu_rows:${f}partial_batch_rows:${f}no_bias_rows:${f}adam_rows:${f}narrow_rows:${f}mse_rows:${f}one_hidden_rows"
for tool in racecheck memcheck synccheck; do
  echo "== compute-sanitizer $tool (rows cases, k)"
  SPRINTNET_FUSED_BLOCKS=16 timeout 240 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$rows" > "$out/sanitizer-rows-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-rows-$tool.log" | tail -n 4
done
bin_of() { if [[ $1 == k ]]; then echo "$build/bench/epoch_bench"; else echo "$build/bench/epoch_bench_$1"; fi; }
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'), r.get('train_loss', [None])[-1], r.get('test_accuracy'))" "$label"
}
echo "== I2/K"
for round in 1 2 3; do
  for cfg in 4x128x128 3x128x128 2x128x128 4x64x128; do
    for v in i2 k; do eb "$v $cfg" "$(bin_of $v)" --config $cfg; done
  done
  for v in i2 k; do eb "$v adam" "$(bin_of $v)" --config 4x128x128 --optimizer adam --lr 0.001; done
done
for v in i2 k; do
  SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_PROFILE_BLOCK=all timeout 120 "$(bin_of $v)" --precision bf16 \
    --data "$build_root/data" --engine fused --epochs 3 --config 4x128x128 > "$out/timeline-$v-4x128x128.log" 2>&1
  echo "== timeline $v 4x128x128 (rc $?)"
  grep -A 17 "stage timeline" "$out/timeline-$v-4x128x128.log" | tail -n 17 | sed -n '1p;2p;16p;17p'
done
