#!/usr/bin/env bash
# Issue 9's twins folded (gather.cu into batch_gather.cu, column_sum.cu into sum_rows.cu, the row softmax of
# cross_entropy.cu and fused_cross_entropy.cu into row_softmax.cuh): the GPU suite, the sanitizers' stage,
# synccheck on the kernels with barriers, and the compiled step's epoch (bf16, 4x784x128, the default model,
# fp16 for the unfused bias gradient) against docs/PERFORMANCE.md's numbers.
EXEC='cd $build_root;
for tool in synccheck; do timeout 240 compute-sanitizer --tool $tool --error-exitcode 99 $build/tests/ops/ops_gpu_test --gtest_filter="GpuOps.SumRows*:GpuOps.CrossEntropy*:GpuOps.Gather*:GpuOps.OutOfRange*:GpuStepKernels.*" > $out/sanitizer-$tool-ops.log 2>&1; echo "$tool rc=$? $(grep -E "ERROR SUMMARY" $out/sanitizer-$tool-ops.log | tail -n 1)"; done;
for e in compiled fused; do for p in bf16 fp16; do echo "$e $p $(timeout 120 $build/bench/epoch_bench --engine $e --precision $p --config 4x784x128 3x256x128 --epochs 5 --data $build_root/data 2>/dev/null | tee -a $out/epochs.jsonl | grep -o "\"config\":\"[^\"]*\"\|\"epoch_ms_median\":[0-9.]*\|\"mode\":\"[^\"]*\"\|\"test_accuracy\":[0-9.]*" | tr "\n" " ")"; done; done | tee $out/epochs.txt' \
  scripts/gpu-suite gpu-tests sanitize exec 2>&1 | grep -v "^$" | tail -n 45
