#!/usr/bin/env bash
# v17e: a hidden layer's weight-gradient tiles an n-tile a warp (X_{l-1}'s fragments loaded once), against
# v17c; split tests and sanitizers on v17e; profiles.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (split cases, v17e)"
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
    eb "v17c $cfg" "$build/bench/epoch_bench_v17c" --config $cfg
    eb "v17e $cfg" "$build/bench/epoch_bench" --config $cfg
  done
done
eb "v17c adam 4x784x128" "$build/bench/epoch_bench_v17c" --config 4x784x128 --optimizer adam --lr 0.001
eb "v17e adam 4x784x128" "$build/bench/epoch_bench" --config 4x784x128 --optimizer adam --lr 0.001
echo "== profiles"
for cfg in 4x784x128 4x256x128; do
  SPRINTNET_FUSED_PROFILE=1 timeout 120 "$build/bench/epoch_bench" --precision bf16 --data "$build_root/data" --engine fused --epochs 3 --config $cfg > "$out/profile-$cfg.log" 2>&1
  echo "$cfg: $(grep 'fused profile' "$out/profile-$cfg.log" | tail -n 1)"
done
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
split="${f}relu_split:${f}narrow_default_model_split:${f}adam_split:${f}one_hidden_split:${f}partial_batch_split:${f}gelu_split"
for tool in racecheck memcheck synccheck; do
  echo "== compute-sanitizer $tool (split cases)"
  timeout 240 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$split" > "$out/sanitizer-split-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-split-$tool.log" | tail -n 4
done
