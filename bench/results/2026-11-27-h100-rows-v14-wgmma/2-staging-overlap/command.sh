#!/usr/bin/env bash
# Fourteenth session, second run: v14b (staging stores conflict-free) and v14c (the partial products waited
# for after the cluster barrier) against HEAD ee22f8a. Rows tests, A/B/C, profiles, sanitizers (v14c).
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (rows cases)"
timeout 300 "$t" --gtest_filter='*_rows*:*Rows*' > "$out/fused-rows.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-rows.log" | tail -n 12
grep -E "seed [0-9]: rows" "$out/fused-rows.log"
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'), r.get('train_loss', [None])[-1], r.get('test_accuracy'))" "$label"
}
echo "== A/B/C (old: ee22f8a, v14b, new: v14c)"
for round in 1 2 3; do
  for cfg in 4x128x128 3x128x128 2x128x128 4x64x128; do
    eb "old $cfg" "$build/bench/epoch_bench_old" --config $cfg
    eb "v14b $cfg" "$build/bench/epoch_bench_v14b" --config $cfg
    eb "new $cfg" "$build/bench/epoch_bench" --config $cfg
  done
  eb "old adam 4x128x128" "$build/bench/epoch_bench_old" --config 4x128x128 --optimizer adam --lr 0.001
  eb "v14b adam 4x128x128" "$build/bench/epoch_bench_v14b" --config 4x128x128 --optimizer adam --lr 0.001
  eb "new adam 4x128x128" "$build/bench/epoch_bench" --config 4x128x128 --optimizer adam --lr 0.001
done
echo "== profiles (4x128x128, block 0)"
for v in old v14b new; do
  bin=$build/bench/epoch_bench; [[ $v == old ]] && bin=$build/bench/epoch_bench_old; [[ $v == v14b ]] && bin=$build/bench/epoch_bench_v14b
  SPRINTNET_FUSED_PROFILE=1 timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 3 --config 4x128x128 > "$out/profile-$v.log" 2>&1
  echo "$v: $(grep "fused profile" "$out/profile-$v.log" | tail -n 1)"
done
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
rows="${f}relu_rows:${f}partial_batch_rows:${f}no_bias_rows:${f}adam_rows:${f}narrow_rows:${f}mse_rows"
for tool in memcheck racecheck synccheck; do
  echo "== compute-sanitizer $tool (rows cases)"
  SPRINTNET_FUSED_BLOCKS=16 timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$rows" > "$out/sanitizer-rows-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-rows-$tool.log" | tail -n 4
done
