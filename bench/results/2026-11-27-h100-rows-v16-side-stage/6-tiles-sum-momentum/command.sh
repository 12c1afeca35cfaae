#!/usr/bin/env bash
# Sixteenth session, speed of v16c against v16b (0ee1470): timelines and the ncu stage table, A/B rounds on the
# rows kernel's models and the split kernel's (the update_form change), then fused_compare on v16c.
set -u
lab=$(cd "$(dirname "$0")" && pwd)
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
bin_of() { if [[ $1 == new ]]; then echo "$build/bench/epoch_bench"; else echo "$build/bench/epoch_bench_$1"; fi; }
v=new
SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_PROFILE_BLOCK=all timeout 120 "$(bin_of $v)" --precision bf16 \
  --data "$build_root/data" --engine fused --epochs 3 --config 4x128x128 > "$out/timeline-$v-4x128x128.log" 2>&1
echo "== timeline $v (rc $?)"
grep -A 17 "stage timeline" "$out/timeline-$v-4x128x128.log" | tail -n 17 | sed -n '1p;2p;6p;16p;17p'
timeout 200 ncu --clock-control none -k regex:rows_epoch_kernel --launch-skip 1 --launch-count 1 --section SourceCounters \
  -o "$out/rows-$v" "$(bin_of $v)" --precision bf16 --data "$build_root/data" --engine fused \
  --epochs 2 --config 4x128x128 > "$out/ncu-$v.log" 2>&1; echo "ncu rc $?"
ncu -i "$out/rows-$v.ncu-rep" --page source --csv --print-source sass > "$out/source-$v.csv" 2>/dev/null
python3 "$lab/stage_stalls.py" "$out/source-$v.csv" --warps 128 --steps 468 --step-us 11.0 > "$out/stages-$v.txt"; cat "$out/stages-$v.txt"
rm -f "$out/rows-$v.ncu-rep" "$out/source-$v.csv"
eb() {
  local label=$1 bin=$2; shift 2
  timeout 120 "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print(sys.argv[1], r.get('epoch_ms_median'), r.get('train_loss', [None])[-1], r.get('test_accuracy'))" "$label"
}
echo "== A/B"
for round in 1 2 3; do
  for cfg in 4x128x128 3x128x128 2x128x128 4x64x128; do
    for v in head new; do eb "$v $cfg" "$(bin_of $v)" --config $cfg; done
  done
  for v in head new; do eb "$v adam" "$(bin_of $v)" --config 4x128x128 --optimizer adam --lr 0.001; done
  if [[ $round != 3 ]]; then
    for cfg in 4x784x128 3x256x128; do
      for v in head new; do eb "$v $cfg" "$(bin_of $v)" --config $cfg; done
    done
  fi
done
echo "== fused_compare 4x128x128 (new)"
timeout 300 python3 bench/fused_compare --build "$build" --data "$build_root/data" --out "$out/fused-compare" --config 4x128x128 > "$out/fused-compare.log" 2>&1
echo "rc $?"; tail -n 14 "$out/fused-compare.log"
