#!/usr/bin/env bash
# Seventeenth session, validation of v17e (the split kernel: slices taken as they land, the sample indices early,
# the batch sums in four chains, the gradient tiles an n-tile a warp, stamps inside stages): the whole
# fused_engine_gpu_test, host_sync, sweep and train_gpu suites; A/B against HEAD's 902839f; fused_compare.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (every case)"
timeout 420 "$t" > "$out/fused-all.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-all.log" | tail -n 12
grep -E "seed [0-9]: " "$out/fused-all.log" | head -n 20
for s in train/host_sync_gpu_test sweep/sweep_gpu_test train/train_gpu_test; do
  echo "== $s"
  timeout 300 "$build/tests/$s" > "$out/$(basename $s).log" 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/$(basename $s).log" | tail -n 6
done
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'), r.get('train_loss', [None])[-1], r.get('test_accuracy'))" "$label"
}
echo "== A/B (head: 902839f, new: v17e)"
for round in 1 2 3; do
  for cfg in 4x784x128 4x256x128 3x256x128 2x784x128; do
    eb "head $cfg" "$build/bench/epoch_bench_head" --config $cfg
    eb "new $cfg" "$build/bench/epoch_bench" --config $cfg
  done
done
for round in 1 2; do
  eb "head 4x784x32" "$build/bench/epoch_bench_head" --config 4x784x32
  eb "new 4x784x32" "$build/bench/epoch_bench" --config 4x784x32
  eb "head gelu 4x784x128" "$build/bench/epoch_bench_head" --config 4x784x128 --activation gelu
  eb "new gelu 4x784x128" "$build/bench/epoch_bench" --config 4x784x128 --activation gelu
  eb "head adam 4x784x128" "$build/bench/epoch_bench_head" --config 4x784x128 --optimizer adam --lr 0.001
  eb "new adam 4x784x128" "$build/bench/epoch_bench" --config 4x784x128 --optimizer adam --lr 0.001
done
echo "== fused_compare 4x784x128 4x256x128 (new)"
timeout 400 python3 bench/fused_compare --build "$build" --data "$build_root/data" --out "$out/fused-compare" --config 4x784x128 4x256x128 > "$out/fused-compare.log" 2>&1
echo "rc $?"; tail -n 14 "$out/fused-compare.log"
