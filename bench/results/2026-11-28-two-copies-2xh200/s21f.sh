#!/usr/bin/env bash
# Session 21, final code: compute-sanitizer on the one-cluster fused kernels (memcheck, racecheck, synccheck) and the GPU op tests (memcheck).
set -u
b=$build
t=$b/tests/train
cd $build_root
nvidia-smi --query-gpu=name --format=csv
cases='Fused/FusedFirstSteps.*/default_model_quads:Fused/FusedFirstSteps.*/partial_batch_quads:Fused/FusedFirstSteps.*/sgd_nesterov_decay_quads:Fused/FusedFirstSteps.*/relu_rows:Fused/FusedFirstSteps.*/adam_rows:Fused/FusedFirstSteps.*/partial_batch_rows:Fused/FusedFirstSteps.*/softmax_regression_regression:Fused/FusedFirstSteps.*/no_bias_cluster'
for tool in memcheck synccheck racecheck; do
  blocks=""; [[ $tool == racecheck ]] && blocks=16
  SPRINTNET_FUSED_BLOCKS=$blocks timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 $t/fused_engine_gpu_test --gtest_filter="$cases" > $OUT/san-$tool.log 2>&1; echo "$tool rc $?"
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED' $OUT/san-$tool.log | tail -4
done
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 $b/tests/ops/ops_gpu_test > $OUT/san-ops-memcheck.log 2>&1; echo "ops memcheck rc $?"
grep -E 'ERROR SUMMARY|tests? ran|PASSED|FAILED' $OUT/san-ops-memcheck.log | tail -3
