#!/usr/bin/env bash
# Session 21: racecheck on the three cases s21f's 200 s did not reach.
set -u
t=$build/tests/train
cd $build_root
SPRINTNET_FUSED_BLOCKS=16 timeout 250 compute-sanitizer --tool racecheck --error-exitcode 99 $t/fused_engine_gpu_test --gtest_filter='Fused/FusedFirstSteps.*/default_model_quads:Fused/FusedFirstSteps.*/softmax_regression_regression:Fused/FusedFirstSteps.*/no_bias_cluster' > $OUT/san-racecheck-2.log 2>&1; echo "racecheck rc $?"
grep -E 'RACECHECK SUMMARY|tests? ran|PASSED|FAILED|OK \]' $OUT/san-racecheck-2.log | tail -6
