#!/usr/bin/env bash
# The other GPU tests that run the cluster kernel (sweeps side by side, the trainer's engines).
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in sweep/sweep_gpu_test train/train_gpu_test; do
  echo "== $t"
  timeout 250 "$build/tests/$t" > "$out/$(basename $t).log" 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran" "$out/$(basename $t).log" | tail -n 6
done
