#!/usr/bin/env bash
# The rows kernel's operands through L2: its tests, A/B against the previous rows kernel, profile, sanitizers.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (rows cases)"
timeout 400 "$t" --gtest_filter='*_rows*:*Rows*' > "$out/fused-rows.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-rows.log" | tail -n 30
grep -E "seed [0-9]: rows" "$out/fused-rows.log"
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'))" "$label"
}
echo "== A/B (old: rows kernel with DSMEM operands, new: operands through L2)"
for round in 1 2; do
  for cfg in 4x128x128 3x128x128 2x128x128 4x64x128; do
    eb "old $cfg" "$build/bench/epoch_bench_old" --config $cfg
    eb "new $cfg" "$build/bench/epoch_bench" --config $cfg
  done
  eb "old adam 4x128x128" "$build/bench/epoch_bench_old" --config 4x128x128 --optimizer adam --lr 0.001
  eb "new adam 4x128x128" "$build/bench/epoch_bench" --config 4x128x128 --optimizer adam --lr 0.001
done
echo "== profile (new, 4x128x128)"
SPRINTNET_FUSED_PROFILE=1 timeout 120 "$build"/bench/epoch_bench --precision bf16 --data "$build_root/data" --engine fused --epochs 3 --config 4x128x128 > "$out/profile-new.log" 2>&1
grep "fused profile" "$out/profile-new.log" | tail -n 1
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
cases="${f}relu_rows:${f}partial_batch_rows:${f}one_hidden_rows:${f}adam_rows:${f}narrow_rows:${f}mse_rows"
for tool in memcheck racecheck synccheck; do
  echo "== compute-sanitizer $tool"
  SPRINTNET_FUSED_BLOCKS=16 timeout 300 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$cases" > "$out/sanitizer-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-$tool.log" | tail -n 4
done
