#!/usr/bin/env bash
# Session 22: the 3-hidden-layer slice's GPU runs against the CPU's (the first version of
# CompiledStep.ReluGradient... used it and failed at 1 % in epoch 2, both paths alike). .carry/empty.toml: "# defaults".
set -u
b=$build
cd $build_root
r() {  # name engine hidden env...
  local n=$1 eng=$2 hid=$3; shift 3
  env "$@" $b/apps/sprintnet/sprintnet train .carry/empty.toml --quiet --set "data.dir=\"$build_root/data\"" --set 'data.train_limit=10000' \
    --set 'data.test_limit=2000' --set "model.hidden=[$hid]" --set train.epochs=3 --set 'device.name="cuda"' --set 'device.precision="fp32"' \
    --set "device.engine=\"$eng\"" --set "output.dir=\"$OUT/runs\"" --set "output.name=\"$n\"" --set 'output.progress="none"' > $OUT/r.log 2>&1 || tail -3 $OUT/r.log
  echo "$n: $(grep -o '"train_loss":[ 0-9.e-]*' $OUT/runs/$n/metrics.jsonl | tr '\n' ' ')"
}
r eager-2 eager "128, 64"
r compiled-2 compiled "128, 64"
r eager-3 eager "128, 96, 64"
r compiled-3 compiled "128, 96, 64"
r compiled-3-drelu compiled "128, 96, 64" SPRINTNET_DRELU_EPILOGUE=1
r compiled-3-noskinny compiled "128, 96, 64" SPRINTNET_SKINNY=0
r compiled-3-serial compiled "128, 96, 64" SPRINTNET_WGRAD_SIDE=0
r eager-3b eager "128, 128, 128"
r compiled-3b compiled "128, 128, 128"
r eager-4 eager "128, 96, 80, 64"
r compiled-4 compiled "128, 96, 80, 64"
