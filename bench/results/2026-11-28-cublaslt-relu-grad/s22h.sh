#!/usr/bin/env bash
# Session 22: the bias gradient by cuBLASLt's BGRADB epilogue (default) or by a column-sum kernel after a plain
# weight-gradient product (SPRINTNET_BGRAD_EPILOGUE=0): the probe's dW variants, then the compiled step, two rounds.
set -u
b=$build
cd $build_root
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
nvcc -std=c++17 -O2 -gencode arch=compute_90a,code=sm_90a bench/lab/cublaslt_algo_probe.cu -lcublasLt -o /tmp/probe && /tmp/probe 4x8192x4096 4x4096x4096 --candidates 4 --reps 20 --variants | grep -E "dW|products"
res() { python3 -c "import json,statistics,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]; print('%.2f ms, loss %.9f' % (1e3*statistics.median([x['epoch_time_s'] for x in r[1:]]), r[-1]['train_loss']))" "$1"; }
one() {  # config variant-env...
  local c=$1; shift
  local L=${c%%x*}; local rest=${c#*x}; local W=${rest%%x*}; local B=${rest#*x}
  local hidden; hidden=$(python3 -c "print(', '.join(['$W']*($L-1)))")
  env "$@" timeout 120 $b/apps/sprintnet/sprintnet train configs/mnist_mlp.toml --quiet --set "model.hidden=[$hidden]" \
    --set train.batch_size=$B --set train.epochs=4 --set "data.dir=\"$build_root/data\"" --set "output.dir=\"$OUT/runs\"" \
    --set 'output.name="r"' --set checkpoint.every_epochs=0 --set 'device.precision="bf16"' --set 'device.engine="compiled"' \
    --set 'schedule.type="constant"' --set optim.lr=0.05 > $OUT/one.log 2>&1 || tail -3 $OUT/one.log
  echo "$c $*: $(res $OUT/runs/r/metrics.jsonl)"; rm -rf $OUT/runs
}
for round in 1 2; do
  echo "-- round $round"
  for c in 4x8192x4096 4x4096x4096 4x8192x1024 4x784x128 4x1024x512; do
    one $c SPRINTNET_BGRAD_EPILOGUE=1
    one $c SPRINTNET_BGRAD_EPILOGUE=0
  done
done
