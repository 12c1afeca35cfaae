#!/usr/bin/env bash
# racecheck on the split kernel through the fused plan (the default model's shape), the evaluation's grid kernel on
# the training kernel's 32 blocks, with a longer limit than gpu-suite's 300 s.
EXEC='export SPRINTNET_FUSED_BLOCKS=32; timeout 560 compute-sanitizer --tool racecheck --error-exitcode 99 $build/tests/train/fused_engine_gpu_test --gtest_filter="Fused/FusedFirstSteps.*/narrow_default_model_split" > $out/race-split.log 2>&1; echo "rc=$?"; grep -E "RACECHECK SUMMARY|PASSED|FAILED|epoch" $out/race-split.log' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 8
