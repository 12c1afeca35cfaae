#!/usr/bin/env bash
# Fourteenth session, final run: v14 as committed (wgmma first-layer products, conflict-free staging with a
# barrier before the conversion, the partials' products waited for after the cluster barrier) against HEAD
# ee22f8a. Every fused test and the suites that run the rows kernel, A/B, per-block profiles, sanitizers.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (every case)"
timeout 420 "$t" > "$out/fused-all.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-all.log" | tail -n 12
grep -E "seed [0-9]: rows" "$out/fused-all.log"
for s in train/host_sync_gpu_test sweep/sweep_gpu_test train/train_gpu_test; do
  echo "== $s"
  timeout 300 "$build/tests/$s" > "$out/$(basename $s).log" 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/$(basename $s).log" | tail -n 6
done
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
rows="${f}relu_rows:${f}partial_batch_rows:${f}no_bias_rows:${f}adam_rows:${f}narrow_rows:${f}mse_rows:${f}one_hidden_rows"
for tool in memcheck racecheck synccheck; do
  echo "== compute-sanitizer $tool (rows cases)"
  SPRINTNET_FUSED_BLOCKS=16 timeout 240 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$rows" > "$out/sanitizer-rows-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-rows-$tool.log" | tail -n 4
done
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'), r.get('train_loss', [None])[-1], r.get('test_accuracy'))" "$label"
}
echo "== A/B (old: ee22f8a, new: v14)"
for round in 1 2 3; do
  for cfg in 4x128x128 3x128x128 2x128x128 4x64x128; do
    eb "old $cfg" "$build/bench/epoch_bench_old" --config $cfg
    eb "new $cfg" "$build/bench/epoch_bench" --config $cfg
  done
  eb "old adam 4x128x128" "$build/bench/epoch_bench_old" --config 4x128x128 --optimizer adam --lr 0.001
  eb "new adam 4x128x128" "$build/bench/epoch_bench" --config 4x128x128 --optimizer adam --lr 0.001
done
echo "== per-block profiles (4x128x128)"
for v in old new; do
  bin=$build/bench/epoch_bench; [[ $v == old ]] && bin=$build/bench/epoch_bench_old
  for b in 0 2 14; do
    SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_PROFILE_BLOCK=$b timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 3 --config 4x128x128 > "$out/profile-$v-block$b.log" 2>&1
    echo "$v block $b: $(grep "fused profile" "$out/profile-$v-block$b.log" | tail -n 1 | sed 's/.*per step: //')"
  done
done
