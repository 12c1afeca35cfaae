#!/usr/bin/env bash
# v17f: the backward's slice tiles before X_{l-1}[:, span] (its group the newest), so the input gradient's
# first product does not wait for it; against v17e. Split tests, sanitizers on three split cases, profile.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (split cases, v17f)"
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
    eb "v17e $cfg" "$build/bench/epoch_bench_v17e" --config $cfg
    eb "v17f $cfg" "$build/bench/epoch_bench" --config $cfg
  done
done
SPRINTNET_FUSED_PROFILE=1 timeout 120 "$build/bench/epoch_bench" --precision bf16 --data "$build_root/data" --engine fused --epochs 3 --config 4x784x128 > "$out/profile-4x784x128.log" 2>&1
echo "4x784x128: $(grep 'fused profile' "$out/profile-4x784x128.log" | tail -n 1)"
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
split="${f}relu_split:${f}narrow_default_model_split:${f}adam_split"
for tool in racecheck synccheck memcheck; do
  echo "== compute-sanitizer $tool (split cases)"
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$split" > "$out/sanitizer-split-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-split-$tool.log" | tail -n 4
done
