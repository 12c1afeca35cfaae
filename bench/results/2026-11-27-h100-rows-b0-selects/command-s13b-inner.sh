#!/usr/bin/env bash
# Thirteenth session, second run: the rows kernel's B0 without validity selects and X0 staged by 16-byte
# stores (old: d7f509d). Tests, A/B, the finer profile, sanitizers, then ncu's source view of the rows kernel.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (every case)"
timeout 300 "$t" > "$out/fused-all.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-all.log" | tail -n 12
echo "== host_sync_gpu_test"
timeout 200 "$build/tests/train/host_sync_gpu_test" > "$out/host_sync.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/host_sync.log" | tail -n 4
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'), r.get('train_loss', [None])[-1], r.get('test_accuracy'))" "$label"
}
echo "== A/B (old: d7f509d, new: B0 without selects, X0 by 16-byte stores)"
for round in 1 2 3; do
  for cfg in 4x128x128 3x128x128 2x128x128 4x64x128 5x128x128; do
    eb "old $cfg" "$build/bench/epoch_bench_old" --config $cfg
    eb "new $cfg" "$build/bench/epoch_bench" --config $cfg
  done
  eb "old adam 4x128x128" "$build/bench/epoch_bench_old" --config 4x128x128 --optimizer adam --lr 0.001
  eb "new adam 4x128x128" "$build/bench/epoch_bench" --config 4x128x128 --optimizer adam --lr 0.001
done
echo "== profile (new, 4x128x128: s0 is now the products alone)"
SPRINTNET_FUSED_PROFILE=1 timeout 120 "$build"/bench/epoch_bench --precision bf16 --data "$build_root/data" --engine fused --epochs 3 --config 4x128x128 > "$out/profile-new.log" 2>&1
grep "fused profile" "$out/profile-new.log" | tail -n 1
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
rows="${f}relu_rows:${f}partial_batch_rows:${f}one_hidden_rows:${f}adam_rows:${f}narrow_rows:${f}mse_rows"
for tool in memcheck racecheck synccheck; do
  echo "== compute-sanitizer $tool (rows cases)"
  SPRINTNET_FUSED_BLOCKS=16 timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$rows" > "$out/sanitizer-rows-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-rows-$tool.log" | tail -n 4
done
echo "== ncu (rows kernel, 4x128x128, one epoch)"
timeout 240 ncu --section SourceCounters --section WarpStateStats --section InstructionStats --section SchedulerStats -k regex:rows --launch-count 1 -o $out/rows "$build"/bench/epoch_bench --config 4x128x128 --engine fused --precision bf16 --epochs 2 --data "$build_root/data" > $out/ncu.log 2>&1; echo "ncu rc=$?"; tail -n 3 $out/ncu.log
ncu -i $out/rows.ncu-rep --page details > $out/ncu-details.txt 2>&1; grep -iE "stall|warp cycles|issued|eligible|Executed Instructions" $out/ncu-details.txt | head -30
ncu -i $out/rows.ncu-rep --page source --print-source sass --csv > $out/ncu-sass.csv 2>$out/ncu-sass.err; echo "sass rc=$? $(wc -l < $out/ncu-sass.csv)"
xz -T4 $out/*.csv; rm -f $out/rows.ncu-rep
