#!/usr/bin/env bash
# Session 32, part 1 of the gpu suite: every gpu-labelled test of the train, fused-engine, host-sync, ops, data and
# memory binaries (the sprintnet CLI, sweep and out-of-memory CLI binaries are part 2); memcheck on the fp16 resume test.
set -u
cd "$build" || exit 1
nvidia-smi -L
timeout 420 ctest -L '^gpu$' -j 4 --timeout 400 > "$OUT/ctest-gpu.log" 2>&1; echo "ctest rc $?"
grep -E "tests passed|tests failed|\(Failed\)|Timeout" "$OUT/ctest-gpu.log" | head -30
echo "not run (binaries in part 2): $(grep -c 'Not Run' "$OUT/ctest-gpu.log")"
gzip -f "$OUT/ctest-gpu.log"
timeout 150 compute-sanitizer --tool memcheck tests/train/train_gpu_test --gtest_filter='*Fp16Run*' > "$OUT/memcheck-fp16.log" 2>&1
echo "memcheck fp16 resume rc $?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED|loss scale' "$OUT/memcheck-fp16.log" | tail -4 | tr '\n' ' ')"
