#!/usr/bin/env bash
# The session's final code (full bundle): ctest -L gpu, sanitizers on the fused kernels whose row loss
# changed (regression, cluster, grid), and the fused and compiled epochs of the issue's configs.
EXEC='cd $build_root; f=$build/tests/train/fused_engine_gpu_test;
for tool in memcheck racecheck synccheck; do SPRINTNET_FUSED_BLOCKS=16 timeout 280 compute-sanitizer --tool $tool --error-exitcode 99 $f --gtest_filter="*/softmax_regression_regression:*/partial_batch_regression:*/adam_regression:*/mse_regression:*/softmax_regression_cluster:*/relu_cluster:*/softmax_regression:*/label_smoothing" > $out/sanitizer-$tool-fused.log 2>&1; echo "$tool rc=$? $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $out/sanitizer-$tool-fused.log | tail -n 1) $(grep -E "tests? ran|PASSED|FAILED" $out/sanitizer-$tool-fused.log | tail -n 1)"; done;
for e in compiled fused; do echo "$e $(timeout 150 $build/bench/epoch_bench --engine $e --precision bf16 --config 1x784x128 3x256x128 4x784x128 4x128x128 --epochs 5 --data $build_root/data 2>/dev/null | tee -a $out/epochs.jsonl | grep -o "\"config\":\"[^\"]*\"\|\"epoch_ms_median\":[0-9.]*\|\"test_accuracy\":[0-9.]*" | tr "\n" " ")"; done | tee $out/epochs.txt' \
  scripts/gpu-suite gpu-tests exec 2>&1 | grep -v "^$" | tail -n 40
