#!/usr/bin/env bash
# v17c (the output stage's batch sums in four interleaved chains) and v17d (+ the next weights' prefetch
# issued after the own columns' stores) against v17b; split tests on v17c; profiles.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (split cases, v17c)"
timeout 300 "$t" --gtest_filter='*split*:*Split*' > "$out/fused-split.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-split.log" | tail -n 12
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'), r.get('train_loss', [None])[-1], r.get('test_accuracy'))" "$label"
}
for round in 1 2 3; do
  for cfg in 4x784x128 4x256x128 3x256x128; do
    eb "v17b $cfg" "$build/bench/epoch_bench_v17b" --config $cfg
    eb "v17c $cfg" "$build/bench/epoch_bench_v17c" --config $cfg
    eb "v17d $cfg" "$build/bench/epoch_bench" --config $cfg
  done
done
echo "== profiles"
for bin in epoch_bench_v17c epoch_bench; do
  for cfg in 4x784x128 4x256x128; do
    SPRINTNET_FUSED_PROFILE=1 timeout 120 "$build/bench/$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 3 --config $cfg > "$out/profile-$bin-$cfg.log" 2>&1
    echo "$bin $cfg: $(grep 'fused profile' "$out/profile-$bin-$cfg.log" | tail -n 1)"
  done
done
