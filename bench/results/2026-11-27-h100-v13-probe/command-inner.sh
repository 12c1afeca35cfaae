#!/usr/bin/env bash
# v13 probe on the device: variants (knobs), the cluster kernel (v11b, HEAD) in the same command; sanitizers.
set -u
probe=$PWD/.carry-mini/row_split_probe
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
eb() {
  timeout 120 "$build/bench/epoch_bench" --precision bf16 --data "$build_root/data" --engine fused --epochs 6 "$@" 2>>"$out/eb.err" \
    | tail -n 1 | tee -a "$out/eb.jsonl" \
    | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print('cluster v11b', sys.argv[1], r.get('epoch_ms_median'))" "$*"
}
for round in 1 2; do
  echo "== round $round"
  for knobs in 0 4 8 12 1 2 3; do
    timeout 120 "$probe" 7 $knobs > "$out/probe-$knobs-$round.log" 2>&1; echo "probe knobs $knobs rc $?"
    grep -E "check:|epoch \(|stages" "$out/probe-$knobs-$round.log"
  done
  grep -E "loss:|change" "$out/probe-8-$round.log"
  eb --config 4x128x128
done
for knobs in 0 8; do
  for tool in memcheck racecheck synccheck; do
    echo "== compute-sanitizer $tool knobs $knobs"
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 "$probe" 0 $knobs > "$out/sanitizer-$tool-$knobs.log" 2>&1
    echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|check:" "$out/sanitizer-$tool-$knobs.log" | tail -n 3
  done
done
