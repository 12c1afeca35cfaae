#!/usr/bin/env bash
# Fifteenth session, final run: i (v15 g with the next batch copied and converted by the same thread, the
# conversion folded into the tiles' stage: two block barriers fewer) against g (55d5a1b, committed):
# i's whole fused_engine_gpu_test, host_sync, sweep and train_gpu suites, sanitizers on the rows cases,
# timelines, A/B rounds; then fused_compare (PyTorch, JAX) on whichever is faster.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (every case, i)"
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
  echo "== compute-sanitizer $tool (rows cases, i)"
  SPRINTNET_FUSED_BLOCKS=16 timeout 240 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$rows" > "$out/sanitizer-rows-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-rows-$tool.log" | tail -n 4
done
bin_of() { if [[ $1 == i ]]; then echo "$build/bench/epoch_bench"; else echo "$build/bench/epoch_bench_$1"; fi; }
for v in g i; do
  SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_PROFILE_BLOCK=all timeout 120 "$(bin_of $v)" --precision bf16 \
    --data "$build_root/data" --engine fused --epochs 3 --config 4x128x128 > "$out/timeline-$v-4x128x128.log" 2>&1
  echo "== timeline $v 4x128x128 (rc $?)"
  grep -A 17 "stage timeline" "$out/timeline-$v-4x128x128.log" | tail -n 17 | sed -n '1p;2p;16p;17p'
done
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'), r.get('train_loss', [None])[-1], r.get('test_accuracy'))" "$label" | tee -a "$out/ab.txt"
}
echo "== G/I"
for round in 1 2 3; do
  for cfg in 4x128x128 3x128x128 2x128x128 4x64x128; do
    for v in g i; do eb "$v $cfg" "$(bin_of $v)" --config $cfg; done
  done
  for v in g i; do eb "$v adam" "$(bin_of $v)" --config 4x128x128 --optimizer adam --lr 0.001; done
done
winner=$(python3 - "$out/ab.txt" <<'PY'
import sys, statistics
t = {}
for line in open(sys.argv[1]):
    v, *_, ms, loss, acc = line.split()
    t.setdefault(v, []).append(float(ms))
print("i" if sum(t["i"]) < sum(t["g"]) else "g")
PY
)
echo "== faster in sum: $winner"
[[ $winner == g ]] && cp "$build/bench/epoch_bench_g" "$build/bench/epoch_bench"
echo "== bench/fused_compare ($winner)"
( cd "$build_root" && python3 bench/fused_compare --build "$build" --data "$build_root/data" --out "$out/fused-compare" \
    --config 4x128x128 4x64x128 ) > "$out/fused-compare.log" 2>&1
echo "rc $?"; tail -n 14 "$out/fused-compare.log"
