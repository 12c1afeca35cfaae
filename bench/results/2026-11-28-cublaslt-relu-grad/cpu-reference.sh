#!/usr/bin/env bash
# Session 22: the CPU (eager, fp32) runs that runs 5, 7 and 8 compare with, on the project's 2-core development
# machine: `bash cpu-reference.sh BUILD_DIR DATA_DIR OUT_DIR` (an empty TOML file is made in OUT_DIR).
set -u
b=$1 data=$2 out=$3
mkdir -p $out && printf '# defaults\n' > $out/empty.toml
r() {  # name hidden epochs train_limit test_limit extra-sets...
  local n=$1 hid=$2 e=$3 tl=$4 el=$5; shift 5
  local sets=(); for s in "$@"; do sets+=(--set "$s"); done
  $b/apps/sprintnet/sprintnet train $out/empty.toml --quiet --set "data.dir=\"$data\"" --set "data.train_limit=$tl" \
    --set "data.test_limit=$el" --set "model.hidden=[$hid]" --set train.epochs=$e --set 'device.name="cpu"' \
    --set 'device.precision="fp32"' --set 'device.engine="eager"' --set "output.dir=\"$out/runs\"" --set "output.name=\"r$RANDOM$RANDOM\"" \
    --set 'output.progress="none"' --set 'checkpoint.every_epochs=0' "${sets[@]}" > $out/r.log 2>&1 || tail -3 $out/r.log
  # A unique folder a run: \`sprintnet train\` draws curves.png in the background after it exits.
  echo "$n: $(grep -ho '"train_loss":[ 0-9.e-]*' $out/runs/*/metrics.jsonl | tr '\n' ' ')"; mv $out/runs $out/done-$RANDOM$RANDOM
}
echo "== as run 5 (3 epochs, 10000 / 2000 samples, shuffled, the default schedule)"
r cpu-2 "128, 64" 3 10000 2000
r cpu-3 "128, 96, 64" 3 10000 2000
r cpu-3b "128, 128, 128" 3 10000 2000
r cpu-4 "128, 96, 80, 64" 3 10000 2000
echo "== as run 7 (one epoch over the first k batches, shuffled)"
for k in 1 2 4 8 16 32 64 78; do r "$k cpu" "128, 96, 64" 1 $((k * 128)) 200; done
echo "== as run 8 (in order, constant rate)"
for k in 8 16 24 32 40 48 56 64 70 78; do r "$k cpu" "128, 96, 64" 1 $((k * 128)) 200 train.shuffle=false 'schedule.type="constant"'; done
