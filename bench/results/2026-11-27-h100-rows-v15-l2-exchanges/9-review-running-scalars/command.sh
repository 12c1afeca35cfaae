#!/usr/bin/env bash
# Fifteenth session, review: RunningScalars shared by the rows and regression kernels, one stamp fewer a
# rows step. The rows and regression tests, sanitizers on rows and regression cases, A/B against ae90a97.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (rows and regression cases)"
timeout 300 "$t" --gtest_filter='*rows*:*Rows*:*regression*:*Regression*' > "$out/fused-rows-regression.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-rows-regression.log" | tail -n 8
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
cases="${f}relu_rows:${f}adam_rows:${f}adam_regression"
for tool in racecheck memcheck synccheck; do
  echo "== compute-sanitizer $tool"
  SPRINTNET_FUSED_BLOCKS=16 timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$cases" > "$out/sanitizer-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-$tool.log" | tail -n 3
done
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'), r.get('train_loss', [None])[-1], r.get('test_accuracy'))" "$label"
}
for round in 1 2; do
  for v in head new; do
    bin=$build/bench/epoch_bench; [[ $v == head ]] && bin=$build/bench/epoch_bench_head
    eb "$v 4x128x128" "$bin" --config 4x128x128
    eb "$v adam" "$bin" --config 4x128x128 --optimizer adam --lr 0.001
    eb "$v regression adam" "$bin" --config 1x784x128 --optimizer adam --lr 0.001
  done
done
