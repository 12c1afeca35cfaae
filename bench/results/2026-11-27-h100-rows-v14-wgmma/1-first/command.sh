#!/usr/bin/env bash
# Fourteenth session, first run: v14 (the rows kernel's first-layer products by wgmma; old: HEAD ee22f8a).
# The lab probe, the rows tests, A/B, a profile, sanitizers.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== bench/lab/wgmma_probe"
nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -O3 -lineinfo -I"$build_root/src" "$build_root/bench/lab/wgmma_probe.cu" -o /tmp/wgmma_probe && /tmp/wgmma_probe | tee "$out/wgmma-probe.log" | grep -v "^dW0"
echo "rc ${PIPESTATUS[0]}"
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
echo "== A/B (old: ee22f8a, new: v14)"
for round in 1 2 3; do
  for cfg in 4x128x128 3x128x128 2x128x128 4x64x128; do
    eb "old $cfg" "$build/bench/epoch_bench_old" --config $cfg
    eb "new $cfg" "$build/bench/epoch_bench" --config $cfg
  done
  eb "old adam 4x128x128" "$build/bench/epoch_bench_old" --config 4x128x128 --optimizer adam --lr 0.001
  eb "new adam 4x128x128" "$build/bench/epoch_bench" --config 4x128x128 --optimizer adam --lr 0.001
done
echo "== profiles (4x128x128, block 0)"
for v in old new; do
  bin=$build/bench/epoch_bench; [[ $v == old ]] && bin=$build/bench/epoch_bench_old
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
