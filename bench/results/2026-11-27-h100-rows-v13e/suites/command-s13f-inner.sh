#!/usr/bin/env bash
# Thirteenth session, last run: the suites that run the rows kernel through auto, on the final code (v13e).
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for s in train/host_sync_gpu_test sweep/sweep_gpu_test train/train_gpu_test; do
  echo "== $s"
  timeout 240 "$build/tests/$s" > "$out/$(basename $s).log" 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/$(basename $s).log" | tail -n 6
done
