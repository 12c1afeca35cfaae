#!/usr/bin/env bash
# The final code of the fifth session (3f7fe50): the GPU suite, the sanitizers stage, synccheck on the kernels
# with barriers, and the compiled and fused epochs (bf16, fp16) of 4x784x128, the default model and softmax regression.
EXEC='cd $build_root;
for tool in synccheck; do timeout 240 compute-sanitizer --tool $tool --error-exitcode 99 $build/tests/ops/ops_gpu_test --gtest_filter="GpuOps.SumRows*:GpuOps.CrossEntropy*:GpuOps.Gather*:GpuOps.OutOfRange*:GpuStepKernels.*" > $out/sanitizer-$tool-ops.log 2>&1; echo "$tool rc=$? $(grep -E "ERROR SUMMARY" $out/sanitizer-$tool-ops.log | tail -n 1)"; done;
for e in compiled fused; do for p in bf16 fp16; do echo "$e $p $(timeout 120 $build/bench/epoch_bench --engine $e --precision $p --config 4x784x128 3x256x128 1x784x128 --epochs 5 --data $build_root/data 2>/dev/null | tee -a $out/epochs.jsonl | grep -o "\"config\":\"[^\"]*\"\|\"epoch_ms_median\":[0-9.]*\|\"mode\":\"[^\"]*\"\|\"test_accuracy\":[0-9.]*" | tr "\n" " ")"; done; done | tee $out/epochs.txt' \
  scripts/gpu-suite gpu-tests sanitize exec 2>&1 | grep -v "^$" | tail -n 45
