#!/usr/bin/env bash
# Session 29: the GEMM epilogue refusals (named epilogues, arguments checked before planning), then
# the CPU section on this machine's host with the oneDNN sgemm column in the library table.
set -u
here=$PWD
cd "$build" || exit 1
nvidia-smi -L > "$OUT/gpu.txt"; lscpu > "$OUT/lscpu.txt"
timeout 150 tests/ops/ops_gpu_test --gtest_filter='GemmEpilogues.*:EveryPrecision/*' > "$OUT/gemm.log" 2>&1; echo "gemm rc $?"
grep -E "^\[  (FAILED|PASSED)|NOTE" "$OUT/gemm.log" | head -20
cd "$build_root" || exit 1
echo "== two-lane backward probe (2 threads)"; timeout 60 "$here/.carry/lanes" 2>&1 | tee "$OUT/lanes.log"
timeout 480 python3 bench/run --cpu-only --build "$build" --out "$OUT/cpu-bench" --cpu-rounds 3 > "$OUT/cpu-bench.log" 2>&1
echo "bench rc $?"
sed -n '/^CPU (same machine/,/^- target .*1-2 threads/p' "$OUT/cpu-bench/report.md"
head -3 "$OUT/cpu-bench/gemm.md"; grep "all products" "$OUT/cpu-bench/gemm.md"
