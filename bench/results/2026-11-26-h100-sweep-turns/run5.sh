#!/usr/bin/env bash
# Device run 5: turns sized by the clusters the GPU holds at once (lanes) against turns of 32 SMs (turns) and HEAD (old).
EXEC='for v in turns lanes; do mkdir -p /tmp/$v && tar -xJf .carry-extra/$v.tar.xz -C /tmp/$v; done; cd $build_root;
/tmp/lanes/build-gpu/apps/sprintnet/sprintnet train configs/mnist_mlp.toml --set train.epochs=1 --set output.dir=\"/tmp/o\" 2>&1 | grep -io "fused engine.*" | head -n 1;
timeout 200 /tmp/lanes/build-gpu/tests/sweep/sweep_gpu_test > $out/sweep-gpu-test-lanes.log 2>&1; echo "lanes sweep_gpu_test rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" $out/sweep-gpu-test-lanes.log | tail -n 4;
train_s() { python3 - $1 <<PY
import sys,re
t=open(sys.argv[1]).read()
rows=re.findall(r"^\| optim[^|]*\|[^|]*\|[^|]*\|[^|]*\|[^|]*\| ([0-9.]+) \| ([0-9.]+) \|", t, re.M)
print("training s:", " ".join(r[0] for r in rows), " evaluation s:", " ".join(r[1] for r in rows))
PY
}
echo "== lanes: 4 runs, 4 workers"; python3 bench/sweep_phases /tmp/lanes/build-gpu $out/c4-lanes --runs 4 --repeat 2 --timeline --sweep-args "--parallel 4" > $out/c4-lanes.txt 2>&1; train_s $out/c4-lanes.txt; grep -A1 "runs training at once" $out/c4-lanes.txt | head -n 2;
for r in 1 2 3 4; do for v in old turns lanes; do b=/tmp/$v/build-gpu; [[ $v == old ]] && b=$build;
  python3 bench/sweep_phases $b $out/s16-$v-$r --runs 16 --repeat 1 --timeline > $out/s16-$v-$r.txt 2>&1; echo "$v round $r: $(grep -o "\"exit_s\": [0-9.]*" $out/s16-$v-$r.txt) $(grep -o "\"first_run_done_s\": [0-9.]*" $out/s16-$v-$r.txt)"; done; done;
grep -h -A1 "runs training at once" $out/s16-lanes-*.txt | grep -v "^--";
python3 bench/sweep_bench --build /tmp/lanes/build-gpu --data $build_root/data --out /tmp/sb --parallel 0 --repeat 3 --no-jax > $out/sweep-bench-lanes.log 2>&1; echo "sweep_bench rc=$?"; tail -n 5 $out/sweep-bench-lanes.log; rm -rf /tmp/sb' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 40
