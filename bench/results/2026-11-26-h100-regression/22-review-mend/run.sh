#!/usr/bin/env bash
# Review mend: one progress-record writer and one double warp sum for the four fused kernels.
EXEC='cd "$build_root"; tar -xJf .carry-x/reg.tar.xz -C "$build_root"; f=$build/tests/train/fused_engine_gpu_test;
timeout 120 $build/tests/train/host_sync_gpu_test > $out/host-sync.log 2>&1; echo "host_sync rc=$? $(grep -E "PASSED|FAILED" $out/host-sync.log | tail -1)"; timeout 420 $f > $out/fused-all.log 2>&1; echo "fused_engine_gpu_test rc=$?"; grep -E "^\[  (FAILED|PASSED) |FAILED  \]|tests? ran" $out/fused-all.log | tail -4;
for tool in memcheck racecheck synccheck; do SPRINTNET_FUSED_BLOCKS=16 timeout 150 compute-sanitizer --tool $tool --error-exitcode 99 $f --gtest_filter="*/softmax_regression_regression:*/partial_batch_regression:*/relu_cluster:*/one_hidden_split:*/narrow_one_hidden_split:*/softmax_regression" > $out/san-$tool.log 2>&1; echo "$tool rc=$? $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $out/san-$tool.log | tail -1) $(grep -E "PASSED|FAILED" $out/san-$tool.log | tail -1)"; done' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 14
