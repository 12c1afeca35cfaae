#!/usr/bin/env bash
# Review mend: the rows kernel's multicast offsets from the layout, the lab switches parsed by one helper.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (rows cases)"
timeout 200 "$t" --gtest_filter='*_rows*:*Rows*' > "$out/fused-rows.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-rows.log" | tail -n 6
eb() { timeout 60 "$build/bench/epoch_bench" --precision bf16 --data "$build_root/data" --engine fused --epochs 3 --config 4x128x128 "$@"; }
echo "== 4x128x128 (v13e gave train loss 0.037119507969458565, accuracy 0.9796 at 6 epochs)"
eb --epochs 6 2>/dev/null | tail -n 1 | cut -c1-400
echo "== knobs"
SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_PROFILE_BLOCK=5 eb 2>&1 | grep -E "fused profile|error" | tail -n 1
SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_PROFILE_BLOCK=5x eb 2>&1 | grep -iE "error|whole" | tail -n 1
SPRINTNET_FUSED_BLOCKS=40 eb 2>&1 | grep -iE "error|epoch_ms_median" | tail -n 1 | cut -c1-200
SPRINTNET_FUSED_BLOCKS=9999 eb 2>&1 | grep -iE "error|blocks at once" | tail -n 1
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
echo "== compute-sanitizer memcheck (rows cases)"
SPRINTNET_FUSED_BLOCKS=16 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 "$t" --gtest_filter="${f}relu_rows:${f}one_hidden_rows:${f}narrow_rows" > "$out/sanitizer-memcheck.log" 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/sanitizer-memcheck.log" | tail -n 3
