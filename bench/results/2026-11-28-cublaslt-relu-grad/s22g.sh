#!/usr/bin/env bash
# Session 22: the same slice with train.shuffle=false and a constant rate, so the run over the first k batches is
# a prefix of the one over more: where compiled (skinny output kernels) and SPRINTNET_SKINNY=0 part.
set -u
b=$build
cd $build_root
r() {  # k engine env...
  local k=$1 eng=$2; shift 2
  env "$@" $b/apps/sprintnet/sprintnet train .carry/empty.toml --quiet --set "data.dir=\"$build_root/data\"" --set "data.train_limit=$((k*128))" \
    --set 'data.test_limit=200' --set "model.hidden=[128, 96, 64]" --set train.epochs=1 --set 'device.name="cuda"' --set 'device.precision="fp32"' \
    --set "device.engine=\"$eng\"" --set "output.dir=\"$OUT/runs\"" --set 'output.name="r"' --set 'output.progress="none"' \
    --set 'checkpoint.every_epochs=0' --set train.shuffle=false --set 'schedule.type="constant"' > $OUT/r.log 2>&1 || tail -3 $OUT/r.log
  echo "$k $eng $*: $(grep -o '"train_loss":[ 0-9.e-]*' $OUT/runs/r/metrics.jsonl) $(grep -m1 -o 'engine[^,]*' $OUT/r.log)"; rm -rf $OUT/runs
}
for k in 8 16 24 32 40 48 56 64 70 78; do
  r $k compiled; r $k compiled SPRINTNET_SKINNY=0
done
r 78 compiled; r 78 eager
