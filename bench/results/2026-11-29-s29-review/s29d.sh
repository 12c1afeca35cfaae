#!/usr/bin/env bash
# Session 29: the Trainer's changes (weights metadata, metrics before config.toml, the writer's errors) on a GPU:
# train_gpu_test and sweep_gpu_test, then a default run on the GPU whose weights eval reads without the data folder.
set -u
cd "$build" || exit 1
nvidia-smi -L
timeout 300 tests/train/train_gpu_test > "$OUT/train_gpu.log" 2>&1; echo "train_gpu_test rc $?"; tail -n 3 "$OUT/train_gpu.log"
timeout 200 tests/sweep/sweep_gpu_test > "$OUT/sweep_gpu.log" 2>&1; echo "sweep_gpu_test rc $?"; tail -n 3 "$OUT/sweep_gpu.log"
cd "$build_root" || exit 1
timeout 60 "$build/apps/sprintnet/sprintnet" train configs/mnist_mlp.toml --set output.dir=\"$OUT/runs\" --set output.name=\"gpu\" \
  --set output.progress=\"none\" > "$OUT/train.log" 2>&1; echo "train rc $?"; tail -n 2 "$OUT/train.log"
timeout 60 "$build/apps/sprintnet/sprintnet" eval "$OUT/runs/gpu" > "$OUT/eval.log" 2>&1; echo "eval rc $?"; head -n 3 "$OUT/eval.log"
timeout 60 "$build/apps/sprintnet/sprintnet" eval "$OUT/runs/gpu" --set data.train_limit=100 > "$OUT/eval-100.log" 2>&1
echo "eval with 100 training samples rc $?"; head -n 3 "$OUT/eval-100.log"
rm -rf "$OUT/runs"
