#!/usr/bin/env bash
# Fifteenth session, second run: the rows kernel's step-end variants, each binary one more change
# (a: HEAD + the timeline; b: optimizer scalars in G1's wait; c: + relaxed step-end arrival; d: + the next
# step's first-layer products issued before the arrival; e: + G1 through L2 by multicast).
# e's rows tests and sanitizers, every binary's timeline, then A/B/C/D/E rounds.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (rows cases, e)"
timeout 300 "$t" --gtest_filter='*rows*:*Rows*' > "$out/fused-rows.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-rows.log" | tail -n 8
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
rows="${f}relu_rows:${f}partial_batch_rows:${f}no_bias_rows:${f}adam_rows:${f}narrow_rows:${f}mse_rows:${f}one_hidden_rows"
for tool in memcheck racecheck synccheck; do
  echo "== compute-sanitizer $tool (rows cases, e)"
  SPRINTNET_FUSED_BLOCKS=16 timeout 240 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$rows" > "$out/sanitizer-rows-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-rows-$tool.log" | tail -n 4
done
bin_of() { if [[ $1 == e ]]; then echo "$build/bench/epoch_bench"; else echo "$build/bench/epoch_bench_$1"; fi; }
for v in a b c d e; do
  for cfg in "4x128x128" "4x128x128 --optimizer adam --lr 0.001"; do
    name=$v-$(echo $cfg | tr ' ' '_' | tr -d '-')
    # shellcheck disable=SC2086
    SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_PROFILE_BLOCK=all timeout 120 "$(bin_of $v)" --precision bf16 \
      --data "$build_root/data" --engine fused --epochs 3 --config $cfg > "$out/timeline-$name.log" 2>&1
    echo "== timeline $v $cfg (rc $?)"
    grep -A 17 "stage timeline" "$out/timeline-$name.log" | tail -n 17 | sed -n '1p;2p;16p;17p'
  done
done
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'), r.get('train_loss', [None])[-1], r.get('test_accuracy'))" "$label"
}
echo "== A/B/C/D/E"
for round in 1 2 3; do
  for cfg in 4x128x128 3x128x128 2x128x128 4x64x128; do
    for v in a b c d e; do eb "$v $cfg" "$(bin_of $v)" --config $cfg; done
  done
  for v in a b c d e; do eb "$v adam 4x128x128" "$(bin_of $v)" --config 4x128x128 --optimizer adam --lr 0.001; done
done
