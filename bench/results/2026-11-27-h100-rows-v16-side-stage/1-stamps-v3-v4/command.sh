#!/usr/bin/env bash
# Sixteenth session, first run: the tiles' stage broken down (v1: five more stamps), v3 (the tiles' fence,
# barrier and copies after the step-end arrival), v4 (v3 + the tiled layers' chains in one k loop) against HEAD.
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
bin_of() { echo "$build/bench/epoch_bench_$1"; }
for v in v1 v3 v4; do
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
    for v in head v3 v4; do eb "$v $cfg" "$(bin_of $v)" --config $cfg; done
  done
  for v in head v3 v4; do eb "$v adam" "$(bin_of $v)" --config 4x128x128 --optimizer adam --lr 0.001; done
done
