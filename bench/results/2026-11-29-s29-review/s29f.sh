#!/usr/bin/env bash
# Session 29's last code (ee3fef7): every test labelled gpu on one GPU, then compute-sanitizer memcheck on the
# GEMM epilogue tests (gemm.cpp's argument checks moved).
set -u
cd "$build" || exit 1
nvidia-smi -L
timeout 330 ctest -L '^gpu$' -j 4 --timeout 300 > "$OUT/ctest-gpu.log" 2>&1; echo "ctest rc $?"
grep -E "tests passed|tests failed|\(Failed\)|Not Run|Timeout" "$OUT/ctest-gpu.log" | head -20
timeout 45 compute-sanitizer --tool memcheck tests/ops/ops_gpu_test --gtest_filter='GemmEpilogues.*' > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
