#!/usr/bin/env bash
# Session 30: the full gpu-labelled suite after the cross-entropy rewrite (loss from the gaps to the maximum in the
# eager/compiled, skinny and fused row losses), sanitizers on the changed kernels, the fused kernels' epoch times
# (no regression expected: one subtraction a class a row), and a GPU train whose curves.png is drawn by the new
# fork-based background job.
set -u
here=$PWD
cd "$build" || exit 1
nvidia-smi -L
timeout 300 ctest -L '^gpu$' -j 4 --timeout 280 > "$OUT/ctest-gpu.log" 2>&1; echo "ctest rc $?"
grep -E "tests passed|tests failed|\(Failed\)|Not Run|Timeout" "$OUT/ctest-gpu.log" | head -20
gzip -f "$OUT/ctest-gpu.log"
f_ops='GpuOps.CrossEntropy*:GpuOps.SkinnyOutputLayerMatchesTheCpu:GpuOps.FusedCrossEntropy*:SkinnyLayerModes.*'
f_fused='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/label_smoothing_rows:Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/*quads*'
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool tests/ops/ops_gpu_test --gtest_filter="$f_ops" > "$OUT/$tool-ops.log" 2>&1
  echo "$tool ops rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/$tool-ops.log" | tail -3 | tr '\n' ' ')"
  timeout 100 compute-sanitizer --tool $tool tests/train/fused_engine_gpu_test --gtest_filter="$f_fused" > "$OUT/$tool-fused.log" 2>&1
  echo "$tool fused rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED|tests ran' "$OUT/$tool-fused.log" | tail -3 | tr '\n' ' ')"
done
cd "$build_root"
timeout 150 python3 bench/fused_compare --build "$build" --data "$build_root/data" --out "$OUT/fused-compare" --quick --epochs 5 --config 4x128x128 3x256x128 4x784x128 > "$OUT/fused-compare.log" 2>&1
echo "fused_compare rc $?"; tail -12 "$OUT/fused-compare.log"
mkdir -p "$OUT/run"
timeout 60 "$build/apps/sprintnet/sprintnet" train configs/mnist_mlp.toml --set data.dir="\"$build_root/data\"" --set output.dir="\"$OUT/run\"" --set output.name=\"default\" -q > "$OUT/train.log" 2>&1
echo "train rc $?: $(tail -2 "$OUT/train.log")"
for i in $(seq 1 20); do [ -f "$OUT/run/default/curves.png" ] && break; sleep 0.5; done
ls -la "$OUT/run/default/" | grep -E 'curves|model'
timeout 60 "$build/apps/sprintnet/sprintnet" eval "$OUT/run/default" > "$OUT/eval.log" 2>&1; echo "eval rc $?: $(grep -E '^loss|^data' "$OUT/eval.log")"
