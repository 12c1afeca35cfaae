#!/usr/bin/env bash
# Session 33: memcheck on the trainer's GPU tests that evaluate on the device (evaluate's loss sum now fp64).
set -u
cd "$build" || exit 1
timeout 400 compute-sanitizer --tool memcheck tests/train/train_gpu_test \
  --gtest_filter='TrainerGpu.EveryEngineEvaluatesAOneSampleTestSet:*TrainerGpuEngine*' > "$OUT/memcheck-trainer.log" 2>&1
echo "memcheck trainer rc $?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED|tests ran' "$OUT/memcheck-trainer.log" | tail -4 | tr '\n' ' ')"
gzip -f "$OUT"/*.log
