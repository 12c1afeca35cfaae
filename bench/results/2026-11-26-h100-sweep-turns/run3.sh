#!/usr/bin/env bash
# Device run 3: the evaluation launched in the training kernel's clusters beside other runs (ceval), against SM turns
# alone (turns) and HEAD (old): training time at 4 runs at once, then 16-run sweeps interleaved, then sweep_bench.
EXEC='for v in turns ceval; do mkdir -p /tmp/$v && tar -xJf .carry-extra/$v.tar.xz -C /tmp/$v; done; cd $build_root;
timeout 200 /tmp/ceval/build-gpu/tests/sweep/sweep_gpu_test > $out/sweep-gpu-test-ceval.log 2>&1; echo "ceval sweep_gpu_test rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" $out/sweep-gpu-test-ceval.log | tail -n 4;
train_s() { python3 - $1 <<PY
import sys,re
t=open(sys.argv[1]).read()
rows=re.findall(r"^\| optim[^|]*\|[^|]*\|[^|]*\|[^|]*\|[^|]*\| ([0-9.]+) \| ([0-9.]+) \|", t, re.M)
print("training s:", " ".join(r[0] for r in rows), " evaluation s:", " ".join(r[1] for r in rows))
PY
}
for v in turns ceval; do echo "== $v: 4 runs, 4 at a time"; python3 bench/sweep_phases /tmp/$v/build-gpu $out/c4-$v --runs 4 --repeat 2 --timeline --sweep-args "--parallel 4" > $out/c4-$v.txt 2>&1; train_s $out/c4-$v.txt; done;
for r in 1 2 3; do for v in old turns ceval; do b=/tmp/$v/build-gpu; [[ $v == old ]] && b=$build;
  python3 bench/sweep_phases $b $out/s16-$v-$r --runs 16 --repeat 1 --timeline > $out/s16-$v-$r.txt 2>&1; echo "$v round $r: $(grep -o "\"exit_s\": [0-9.]*" $out/s16-$v-$r.txt)"; done; done;
grep -h -A1 "runs training at once" $out/s16-ceval-*.txt | grep -v "^--";
python3 bench/sweep_bench --build /tmp/ceval/build-gpu --data $build_root/data --out $out/sb --parallel 0 --repeat 3 --no-jax > $out/sweep-bench-ceval.log 2>&1; echo "sweep_bench rc=$?"; tail -n 5 $out/sweep-bench-ceval.log; rm -rf $out/sb' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 40
