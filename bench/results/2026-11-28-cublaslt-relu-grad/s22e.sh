#!/usr/bin/env bash
# Session 22: the final code's compiled-step tests, the fused kernels' ten-epoch comparisons with the compiled step,
# the sweep tests (one GPU), and memcheck on the new test.
set -u
b=$build
cd $build_root
export CUDA_VISIBLE_DEVICES=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
t() { local name=$1; shift; timeout $1 "${@:2}" > $OUT/$name.log 2>&1; echo "== $name rc $?"; grep -E '^\[  (FAILED|PASSED|SKIPPED) |Failure|tests ran' $OUT/$name.log | tail -8; }
t train_gpu 150 $b/tests/train/train_gpu_test
t fused_vs_compiled 200 $b/tests/train/fused_engine_gpu_test --gtest_filter='*MatchTheCompiledStep*'
t sweep_gpu 100 $b/tests/sweep/sweep_gpu_test
t memcheck 90 compute-sanitizer --tool memcheck $b/tests/train/train_gpu_test --gtest_filter='CompiledStep.ReluGradient*:TrainerGpuEngine.*'
grep -E "ERROR SUMMARY" $OUT/memcheck.log
