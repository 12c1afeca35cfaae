#!/usr/bin/env bash
# Session 19, lab run: where the quads kernel's step goes (stamps, and parts left out).
set -u
b=$build
cd $build_root
run() { SPRINTNET_FUSED_KERNEL=$1 SPRINTNET_FUSED_LAB=$2 timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config 3x256x128 --engine fused --epochs 6 2>&1 | tail -1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print('$1 lab=$2', r.get('epoch_ms_median'))"; }
for round in 1 2; do
  run split 0
  for lab in 0 1 2 4 3; do run quads $lab; done
done
for lab in 0 1 2 4; do
  echo "profile lab=$lab"; SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_LAB=$lab SPRINTNET_FUSED_KERNEL=quads timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config 3x256x128 --engine fused --epochs 3 2>&1 | grep -i 'profile' | tail -1
done
