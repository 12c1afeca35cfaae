#!/usr/bin/env bash
# Session 31: the gpu tests the first bundle left out (sweep, host sync) and trainer_gpu_test after its bars for the
# chaotic second epoch changed, with the failing draw replayed, twice under ctest -j 4.
set -u
cd "$build" || exit 1
SPRINTNET_TEST_SEED=226639551608 timeout 60 tests/train/train_gpu_test --gtest_filter='Engines/TrainerGpuEngine.*' > "$OUT/replay.log" 2>&1
echo "replay rc $?: $(grep -E 'PASSED|FAILED|Failure' "$OUT/replay.log" | head -4 | tr '\n' ' ')"
for i in 1 2 3; do
  timeout 150 ctest -L '^gpu$' -R 'CompiledStep|TrainerGpu|Engines|Activations|HostSync|SweepOnAGpu' -j 4 --timeout 140 --output-on-failure > "$OUT/ct$i.log" 2>&1
  echo "round $i rc $?: $(grep -E 'tests passed|tests failed' "$OUT/ct$i.log")"
  grep -E '^\s+[0-9]+ - ' "$OUT/ct$i.log" | grep -v 'Not Run' | head
done
