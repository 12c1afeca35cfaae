#!/usr/bin/env bash
# Sixteenth session: v16 candidates. v5a = the conversion with fewer instructions; v5c = v5a + Wo's gradient a
# k-step a warp + the tiles' bias sums only where stepped. Tests and sanitizers on v5c, timelines, A/B vs HEAD.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (rows cases, v5c)"
timeout 300 "$t" --gtest_filter='*rows*:*Rows*' > "$out/fused-rows.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-rows.log" | tail -n 8
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
rows="${f}relu_rows:${f}partial_batch_rows:${f}no_bias_rows:${f}adam_rows:${f}narrow_rows:${f}mse_rows:${f}one_hidden_rows"
for tool in racecheck memcheck synccheck; do
  echo "== compute-sanitizer $tool (rows cases, v5c)"
  SPRINTNET_FUSED_BLOCKS=16 timeout 240 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$rows" > "$out/sanitizer-rows-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-rows-$tool.log" | tail -n 4
done
bin_of() { echo "$build/bench/epoch_bench_$1"; }
for v in v5a v5c; do
  for extra in "" "--optimizer adam --lr 0.001"; do
    tag=$v-4x128x128${extra:+-adam}
    SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_PROFILE_BLOCK=all timeout 120 "$(bin_of $v)" --precision bf16 \
      --data "$build_root/data" --engine fused --epochs 3 --config 4x128x128 $extra > "$out/timeline-$tag.log" 2>&1
    echo "== timeline $tag (rc $?)"
    grep -A 17 "stage timeline" "$out/timeline-$tag.log" | tail -n 17 | sed -n '1p;2p;6p;16p;17p'
  done
done
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'), r.get('train_loss', [None])[-1], r.get('test_accuracy'))" "$label"
}
echo "== A/B"
for round in 1 2 3; do
  for cfg in 4x128x128 3x128x128 2x128x128 4x64x128; do
    for v in head v5a v5c; do eb "$v $cfg" "$(bin_of $v)" --config $cfg; done
  done
  for v in head v5a v5c; do eb "$v adam" "$(bin_of $v)" --config 4x128x128 --optimizer adam --lr 0.001; done
done
