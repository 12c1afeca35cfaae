#!/usr/bin/env bash
# Thirteenth session, final validation of the committed rows kernel (v13c + v13d's unrolled products) and
# the split kernel's v7h: every fused test, the suites that run the fused engine through auto, sanitizers.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (every case)"
timeout 300 "$t" > "$out/fused-all.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-all.log" | tail -n 12
grep -E "seed [0-9]: rows" "$out/fused-all.log"
for s in train/host_sync_gpu_test sweep/sweep_gpu_test train/train_gpu_test; do
  echo "== $s"
  timeout 240 "$build/tests/$s" > "$out/$(basename $s).log" 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/$(basename $s).log" | tail -n 6
done
eb() {
  local label=$1; shift
  timeout 120 "$build/bench/epoch_bench" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'), r.get('train_loss', [None])[-1], r.get('test_accuracy'))" "$label"
}
echo "== epoch times (final code)"
for round in 1 2; do
  for cfg in 4x128x128 3x128x128 2x128x128 4x64x128 4x784x128; do eb "$cfg" --config $cfg; done
  eb "adam 4x128x128" --config 4x128x128 --optimizer adam --lr 0.001
done
echo "== per-block profiles (4x128x128): who sets the pace"
for b in 0 1 2 3 4 13 14 15; do
  SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_PROFILE_BLOCK=$b timeout 120 "$build"/bench/epoch_bench --precision bf16 --data "$build_root/data" --engine fused --epochs 3 --config 4x128x128 > "$out/profile-block$b.log" 2>&1
  grep "fused profile" "$out/profile-block$b.log" | tail -n 1
done
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
rows="${f}relu_rows:${f}partial_batch_rows:${f}one_hidden_rows:${f}adam_rows:${f}narrow_rows:${f}mse_rows"
for tool in memcheck racecheck synccheck; do
  echo "== compute-sanitizer $tool (rows cases)"
  SPRINTNET_FUSED_BLOCKS=16 timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$rows" > "$out/sanitizer-rows-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-rows-$tool.log" | tail -n 4
done
