#!/usr/bin/env bash
# Session 30: racecheck on the fused kernels whose row loss changed (s30a's racecheck over 16 cases ran past its
# 100 s): label smoothing (the gaps' term) on the grid, rows and quads kernels, and the default model.
set -u
cd "$build" || exit 1
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/label_smoothing:Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/label_smoothing_rows:Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/label_smoothing_quads:Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/default_model_quads:Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/softmax_regression_grid'
timeout 500 compute-sanitizer --tool racecheck tests/train/fused_engine_gpu_test --gtest_filter="$f" > "$OUT/racecheck-fused.log" 2>&1
echo "racecheck fused rc $?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED|tests ran|^\[       OK' "$OUT/racecheck-fused.log" | tr '\n' ' ')"
