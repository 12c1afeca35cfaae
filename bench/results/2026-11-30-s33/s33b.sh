#!/usr/bin/env bash
# Session 33, part 1 of the gpu suite at HEAD (after the eval/predict, metrics/plot and schedule fixes; evaluate's
# loss sum now in fp64 on the device too): every gpu-labelled test of the train, fused-engine, host-sync, ops, data
# and memory binaries, then memcheck on the trainer's GPU tests that evaluate (eager and every engine).
set -u
cd "$build" || exit 1
S=$(date +%s)
nvidia-smi -L
timeout 450 ctest -L '^gpu$' -j 4 --output-on-failure --timeout 400 > "$OUT/ctest-gpu.log" 2>&1; echo "ctest rc $?"
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Total Test time" "$OUT/ctest-gpu.log" | head -30
echo "not run (binaries in part 2): $(grep -c 'Not Run' "$OUT/ctest-gpu.log")"
grep -E "Failure|seed" "$OUT/ctest-gpu.log" | grep -v '^sprintnet test seed' | head -20
echo "   (elapsed $(( $(date +%s) - S )) s)"
left=$(( 575 - ($(date +%s) - S) ))
if (( left > 40 )); then
  timeout $left compute-sanitizer --tool memcheck tests/train/trainer_gpu_test \
    --gtest_filter='TrainerGpu.EveryEngineEvaluatesAOneSampleTestSet:TrainerGpuEngine*' > "$OUT/memcheck-trainer.log" 2>&1
  echo "memcheck trainer rc $?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck-trainer.log" | tail -3 | tr '\n' ' ')"
fi
gzip -f "$OUT"/*.log
