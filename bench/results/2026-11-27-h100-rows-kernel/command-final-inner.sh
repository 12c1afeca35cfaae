#!/usr/bin/env bash
# Final validation of the rows kernel: every fused test, the other GPU suites that run it, sanitizers, peers.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (every case)"
timeout 480 "$t" > "$out/fused-all.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-all.log" | tail -n 12
grep -E "seed [0-9]: rows" "$out/fused-all.log"
for s in train/host_sync_gpu_test sweep/sweep_gpu_test train/train_gpu_test; do
  echo "== $s"
  timeout 300 "$build/tests/$s" > "$out/$(basename $s).log" 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/$(basename $s).log" | tail -n 6
done
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
cases="${f}relu_rows:${f}partial_batch_rows:${f}one_hidden_rows:${f}adam_rows:${f}narrow_rows:${f}mse_rows"
for tool in memcheck racecheck synccheck; do
  echo "== compute-sanitizer $tool (rows cases)"
  SPRINTNET_FUSED_BLOCKS=16 timeout 300 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$cases" > "$out/sanitizer-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-$tool.log" | tail -n 4
done
echo "== profile (rows, 4x128x128)"
SPRINTNET_FUSED_PROFILE=1 timeout 120 "$build"/bench/epoch_bench --precision bf16 --data "$build_root/data" --engine fused --epochs 3 --config 4x128x128 > "$out/profile.log" 2>&1
grep "fused profile" "$out/profile.log" | tail -n 1
echo "== fused_compare (PyTorch, JAX)"
( cd "$build_root" && timeout 420 python3 bench/fused_compare --build "$build" --data "$build_root/data" --out "$out/fused-compare" --config 4x128x128 ) > "$out/fused-compare.log" 2>&1
echo "rc $?"; tail -n 8 "$out/fused-compare.log"
