#!/usr/bin/env bash
# Sixteenth session, validation of v16c (v16b + the tiles' loads stepped, the partials' sum unrolled, SGD's
# momentum factor as one select a step in update_form.cuh, which every fused kernel uses): the whole
# fused_engine_gpu_test, host_sync, sweep and train_gpu suites; compute-sanitizer on rows, split, cluster
# and regression cases.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (every case)"
timeout 420 "$t" > "$out/fused-all.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-all.log" | tail -n 12
grep -E "seed [0-9]: " "$out/fused-all.log" | head -n 20
for s in train/host_sync_gpu_test sweep/sweep_gpu_test train/train_gpu_test; do
  echo "== $s"
  timeout 300 "$build/tests/$s" > "$out/$(basename $s).log" 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/$(basename $s).log" | tail -n 6
done
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
rows="${f}relu_rows:${f}partial_batch_rows:${f}no_bias_rows:${f}adam_rows:${f}narrow_rows:${f}mse_rows:${f}one_hidden_rows"
others="${f}relu_split:${f}narrow_default_model_split:${f}relu_cluster:${f}sgd_plain_regression"
for tool in racecheck memcheck synccheck; do
  echo "== compute-sanitizer $tool (rows cases)"
  SPRINTNET_FUSED_BLOCKS=16 timeout 240 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$rows" > "$out/sanitizer-rows-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-rows-$tool.log" | tail -n 4
  echo "== compute-sanitizer $tool (split, cluster, regression: SGD's plain form)"
  timeout 300 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$others" > "$out/sanitizer-others-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-others-$tool.log" | tail -n 4
done
