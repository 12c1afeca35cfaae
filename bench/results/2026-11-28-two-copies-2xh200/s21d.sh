#!/usr/bin/env bash
# Session 21: the quads kernel before (b79c280) and after the helper's shared mma loops (49da389), interleaved.
set -u
b=$build
cd $build_root
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
run() { SPRINTNET_FUSED_KERNEL=$2 timeout 60 $b/bench/$1 --precision bf16 --data $build_root/data --config 3x256x128 --engine fused --epochs 10 2>&1 | tail -1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print('$1 $2', r.get('epoch_ms_median'))"; }
for round in 1 2 3 4 5; do run epoch_bench_old quads; run epoch_bench quads; run epoch_bench split; done
