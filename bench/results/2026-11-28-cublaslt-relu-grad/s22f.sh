#!/usr/bin/env bash
# Session 22: where the 3-hidden-layer slice's GPU runs leave the CPU's: one epoch over the first k batches
# (train_limit = 128 k), GPU eager, compiled, compiled with SPRINTNET_SKINNY=0.
set -u
b=$build
cd $build_root
r() {  # k engine env...
  local k=$1 eng=$2; shift 2
  env "$@" $b/apps/sprintnet/sprintnet train .carry/empty.toml --quiet --set "data.dir=\"$build_root/data\"" --set "data.train_limit=$((k*128))" \
    --set 'data.test_limit=200' --set "model.hidden=[128, 96, 64]" --set train.epochs=1 --set 'device.name="cuda"' --set 'device.precision="fp32"' \
    --set "device.engine=\"$eng\"" --set "output.dir=\"$OUT/runs\"" --set 'output.name="r"' --set 'output.progress="none"' \
    --set 'checkpoint.every_epochs=0' > $OUT/r.log 2>&1 || tail -3 $OUT/r.log
  echo "$k $eng $*: $(grep -o '"train_loss":[ 0-9.e-]*' $OUT/runs/r/metrics.jsonl)"; rm -rf $OUT/runs
}
for k in 1 2 4 8 16 32 64 78; do
  r $k eager; r $k compiled; r $k compiled SPRINTNET_SKINNY=0
done
