#!/usr/bin/env bash
# The cluster kernel's changes on the device: the fused tests, A/B/C against earlier epoch_bench binaries, sanitizers.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$build/tests/train/fused_engine_gpu_test
echo "== fused_engine_gpu_test (every case)"
timeout 420 "$t" > "$out/fused-cluster.log" 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$out/fused-cluster.log" | tail -n 12
grep -E "wide_first.*tensor|cluster.*accuracy|mean" "$out/fused-cluster.log" | head -40
echo "== host_sync"
timeout 120 "$build"/tests/train/host_sync_gpu_test > "$out/host-sync.log" 2>&1; echo "rc $?"; tail -n 3 "$out/host-sync.log"
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'))" "$label"
}
echo "== A/B/C (old: 9c4b403, v11b: 1faf162, new: byte_as_float)"
for round in 1 2 3; do
  for cfg in 4x128x128 3x128x128 2x128x128 4x64x128; do
    eb "old $cfg" "$build/bench/epoch_bench_old" --config $cfg
    eb "v11b $cfg" "$build/bench/epoch_bench_v11b" --config $cfg
    eb "new $cfg" "$build/bench/epoch_bench" --config $cfg
  done
  eb "old adam 4x128x128" "$build/bench/epoch_bench_old" --config 4x128x128 --optimizer adam --lr 0.001
  eb "v11b adam 4x128x128" "$build/bench/epoch_bench_v11b" --config 4x128x128 --optimizer adam --lr 0.001
  eb "new adam 4x128x128" "$build/bench/epoch_bench" --config 4x128x128 --optimizer adam --lr 0.001
done
echo "== profile (new, 4x128x128)"
SPRINTNET_FUSED_PROFILE=1 timeout 120 "$build"/bench/epoch_bench --precision bf16 --data "$build_root/data" --engine fused --epochs 3 --config 4x128x128 > "$out/profile-new.log" 2>&1
SPRINTNET_FUSED_PROFILE=1 timeout 120 "$build"/bench/epoch_bench_v11b --precision bf16 --data "$build_root/data" --engine fused --epochs 3 --config 4x128x128 > "$out/profile-old.log" 2>&1
grep "fused profile" "$out/profile-new.log" | tail -n 1
grep "fused profile" "$out/profile-old.log" | tail -n 1
f='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
cases="${f}wide_first_cluster:${f}wide_first_adam_cluster:${f}wide_first_one_hidden_cluster:${f}wide_first_partial_batch_cluster:${f}relu_cluster"
for tool in memcheck racecheck synccheck; do
  echo "== compute-sanitizer $tool"
  SPRINTNET_FUSED_BLOCKS=16 timeout 300 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --gtest_filter="$cases" > "$out/sanitizer-$tool.log" 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED" "$out/sanitizer-$tool.log" | tail -n 4
done
echo "== fused_compare 4x128x128 (this build, PyTorch, JAX)"
( cd "$build_root" && timeout 400 python3 bench/fused_compare --build "$build" --data "$build_root/data" --out "$out/fused-compare" --config 4x128x128 ) > "$out/fused-compare.log" 2>&1
echo "rc $?"; tail -n 20 "$out/fused-compare.log"
