#!/usr/bin/env bash
# v17 with stamps inside the split kernel's stages: where each stage's time goes (block 0's warp 0).
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'), r.get('train_loss', [None])[-1], r.get('test_accuracy'))" "$label"
}
for cfg in 4x784x128 4x256x128; do
  eb "head $cfg" "$build/bench/epoch_bench_head" --config $cfg
  eb "stamps (profile off) $cfg" "$build/bench/epoch_bench" --config $cfg
done
echo "== profiles"
for cfg in 4x784x128 4x256x128 3x256x128 4x784x32; do
  SPRINTNET_FUSED_PROFILE=1 timeout 120 "$build/bench/epoch_bench" --precision bf16 --data "$build_root/data" --engine fused --epochs 3 --config $cfg > "$out/profile-$cfg.log" 2>&1
  echo "$cfg: $(grep 'fused profile' "$out/profile-$cfg.log" | tail -n 1)"
done
SPRINTNET_FUSED_PROFILE=1 timeout 120 "$build/bench/epoch_bench" --precision bf16 --data "$build_root/data" --engine fused --epochs 3 --config 4x784x128 --optimizer adam --lr 0.001 > "$out/profile-adam-4x784x128.log" 2>&1
echo "adam 4x784x128: $(grep 'fused profile' "$out/profile-adam-4x784x128.log" | tail -n 1)"
