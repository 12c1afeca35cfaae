#!/usr/bin/env bash
# Session 31: the full gpu-labelled suite after host-side checks landed in the compiled and fused plans (the spec
# checked as the config is, a step past the learning-rate table refused), Trainer(Config) validation, the ops'
# overlap checks and the optimizer counters' rule on resume; memcheck on the plans' first steps; a GPU train + eval.
set -u
cd "$build" || exit 1
nvidia-smi -L
timeout 330 ctest -L '^gpu$' -j 4 --timeout 300 > "$OUT/ctest-gpu.log" 2>&1; echo "ctest rc $?"
grep -E "tests passed|tests failed|\(Failed\)|Not Run|Timeout" "$OUT/ctest-gpu.log" | head -30
gzip -f "$OUT/ctest-gpu.log"
f_fused='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/relu_split:Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/*quads*'
timeout 100 compute-sanitizer --tool memcheck tests/train/fused_engine_gpu_test --gtest_filter="$f_fused" > "$OUT/memcheck-fused.log" 2>&1
echo "memcheck fused rc $?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED|tests ran' "$OUT/memcheck-fused.log" | tail -3 | tr '\n' ' ')"
cd "$build_root"
mkdir -p "$OUT/run"
timeout 60 "$build/apps/sprintnet/sprintnet" train configs/mnist_mlp.toml --set data.dir="\"$build_root/data\"" --set output.dir="\"$OUT/run\"" --set output.name=\"default\" > "$OUT/train.log" 2>&1
echo "train rc $?: $(grep -E 'fused|compiled' "$OUT/train.log" | head -2) $(tail -2 "$OUT/train.log")"
timeout 60 "$build/apps/sprintnet/sprintnet" eval "$OUT/run/default" > "$OUT/eval.log" 2>&1; echo "eval rc $?: $(grep -E '^loss|^data|accuracy' "$OUT/eval.log" | head -3)"
