#!/usr/bin/env bash
# The eager gathers' checked index kept out of batch_sample (the compiled step's lone output layer inlines it:
# 9.8 -> 7.7 ms an epoch at 1x784x128): the op and compiled-step GPU tests from the working tree, memcheck,
# racecheck and synccheck on the gathers and step kernels, the compiled and fused epochs of 1x784x128 and 4x784x128.
EXEC='mkdir -p /tmp/rt && tar -xJf .carry-extra/roundto.tar.xz -C /tmp/rt; n=/tmp/rt/build-gpu; cd $build_root;
$n/tests/ops/ops_gpu_test > $out/ops_gpu_test.log 2>&1; echo "ops_gpu_test rc=$? $(grep -E "^\[  (PASSED|FAILED) " $out/ops_gpu_test.log | tr "\n" " ")";
$n/tests/train/train_gpu_test > $out/train_gpu_test.log 2>&1; echo "train_gpu_test rc=$? $(grep -E "^\[  (PASSED|FAILED) " $out/train_gpu_test.log | tr "\n" " ")";
for tool in memcheck racecheck synccheck; do timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 $n/tests/ops/ops_gpu_test --gtest_filter="GpuOps.Gather*:GpuOps.OutOfRange*:GpuOps.SumRows*:GpuOps.CrossEntropy*:GpuStepKernels.*" > $out/$tool-ops.log 2>&1; echo "$tool rc=$? $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $out/$tool-ops.log | tail -n 1)"; done;
for e in compiled fused; do echo "$e $(timeout 120 $n/bench/epoch_bench --engine $e --precision bf16 --config 1x784x128 4x784x128 3x256x128 --epochs 5 --data $build_root/data 2>/dev/null | tee -a $out/epochs.jsonl | grep -o "\"config\":\"[^\"]*\"\|\"epoch_ms_median\":[0-9.]*" | tr "\n" " ")"; done' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 10
