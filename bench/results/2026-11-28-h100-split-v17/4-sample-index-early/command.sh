#!/usr/bin/env bash
# v17b: the next batch's sample indices read at the output stage (their pixels' loads in B_1 no longer wait
# for them), against v17 (both with the stamps inside stages); profiles with the batch sums stamped.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'), r.get('train_loss', [None])[-1], r.get('test_accuracy'))" "$label"
}
for round in 1 2 3; do
  for cfg in 4x784x128 4x256x128 3x256x128; do
    eb "v17 $cfg" "$build/bench/epoch_bench_stamps" --config $cfg
    eb "v17b $cfg" "$build/bench/epoch_bench" --config $cfg
  done
done
eb "v17 4x784x32" "$build/bench/epoch_bench_stamps" --config 4x784x32
eb "v17b 4x784x32" "$build/bench/epoch_bench" --config 4x784x32
echo "== profiles"
for cfg in 4x784x128 4x256x128; do
  SPRINTNET_FUSED_PROFILE=1 timeout 120 "$build/bench/epoch_bench" --precision bf16 --data "$build_root/data" --engine fused --epochs 3 --config $cfg > "$out/profile-$cfg.log" 2>&1
  echo "$cfg: $(grep 'fused profile' "$out/profile-$cfg.log" | tail -n 1)"
done
