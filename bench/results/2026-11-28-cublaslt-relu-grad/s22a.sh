#!/usr/bin/env bash
# Session 22: cuBLASLt's first algorithm against the best of 16 (bench/lab/cublaslt_algo_probe.cu), and the
# compiled step's weight gradients beside the input gradients (side stream, today) or after them (SPRINTNET_WGRAD_SIDE=0).
set -u
b=$build
cd $build_root
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
echo "== probe"
nvcc -std=c++17 -O2 -gencode arch=compute_90a,code=sm_90a bench/lab/cublaslt_algo_probe.cu -lcublasLt -o /tmp/probe && /tmp/probe 4x8192x4096 4x4096x4096 4x8192x1024 --candidates 16 --reps 20
med() { python3 -c "import json,statistics,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]; print('%.2f' % (1e3*statistics.median([x['epoch_time_s'] for x in r[1:]])))" "$1"; }
small() {  # config engine side
  local L=${1%%x*}; local rest=${1#*x}; local W=${rest%%x*}; local B=${rest#*x}
  local hidden; hidden=$(python3 -c "print(', '.join(['$W']*($L-1)))")
  SPRINTNET_WGRAD_SIDE=$2 timeout 120 $b/apps/sprintnet/sprintnet train configs/mnist_mlp.toml --quiet --set "model.hidden=[$hidden]" \
    --set train.batch_size=$B --set train.epochs=6 --set "data.dir=\"$build_root/data\"" --set "output.dir=\"$OUT/runs\"" \
    --set 'output.name="r"' --set checkpoint.every_epochs=0 --set 'device.precision="bf16"' --set 'device.engine="compiled"' > /dev/null 2>&1
  echo "$1 side=$2: $(med $OUT/runs/r/metrics.jsonl) ms"; rm -rf $OUT/runs
}
for round in 1 2 3; do
  for side in 1 0; do
    ddp=--no-ddp; [[ $round == 1 && $side == 1 ]] && ddp=""
    echo "-- round $round, SPRINTNET_WGRAD_SIDE=$side"
    SPRINTNET_WGRAD_SIDE=$side timeout 200 python3 bench/scaling --build $b --data $build_root/data --out $OUT/sc --configs 4x8192x4096 4x4096x4096 4x8192x1024 4x784x4096 --gpus 1 --updates replicated --epochs 5 $ddp > $OUT/sc.log 2>&1
    grep -E "^\|" $OUT/sc/report.md | head -8; rm -rf $OUT/sc
    for c in 4x784x128 4x4096x128 4x1024x512; do small $c $side; done
  done
done
