#!/usr/bin/env bash
# The evaluation on every block when a run is alone, and the data copy beside the model: the GPU tests they touch,
# then the default run A/B on one machine, interleaved 8 rounds: 6c18804 (old) against the working tree (new2).
EXEC='mkdir -p /tmp/new2 && tar -xJf $repo/.carry-extra/new2.tar.xz -C /tmp/new2; cd $build_root; : > $out/tests.txt;
for t in train/fused_engine_gpu_test train/train_gpu_test train/host_sync_gpu_test sweep/sweep_gpu_test data/data_gpu_test; do timeout 400 /tmp/new2/tests/$t > $out/$(basename $t).log 2>&1; echo "$t rc=$? $(grep -E "^\[  (PASSED|FAILED) " $out/$(basename $t).log | tr "\n" " ")" >> $out/tests.txt; done;
one() { /usr/bin/time -f "wall %e" $2 train configs/mnist_mlp.toml -v --set output.dir=$out/x --set output.progress=none > $out/one.log 2>&1; echo "$1 $(grep -h "^wall" $out/one.log | cut -d" " -f2) $(grep -h "^  evaluation" $out/one.log | awk "{print \$2}") $(grep -h "^  loaders" $out/one.log | awk "{print \$8}") $(grep -h "^  model and" $out/one.log | awk "{print \$4}") $(grep -h "phases of the" $out/one.log | awk "{print \$4}") $(grep -h "^sprintnet: 10 epochs" $out/one.log | grep -o "accuracy [0-9.]* %, test loss [0-9.]*" | tr " " _)" >> $out/ab.txt; }
one warm /tmp/new2/apps/sprintnet/sprintnet; : > $out/ab.txt; for r in 1 2 3 4 5 6 7 8; do one old $build/apps/sprintnet/sprintnet; one new2 /tmp/new2/apps/sprintnet/sprintnet; done; rm -rf $out/x;
cat $out/tests.txt; python3 -c "
import statistics as s, collections as c
d=c.defaultdict(list)
for l in open(\"$out/ab.txt\"): p=l.split(); d[p[0]].append(p[1:])
for k,v in d.items(): print(k, \"wall %.3f eval %.3f loaders %.3f model %.3f inproc %.3f\" % tuple(s.median(float(x[i]) for x in v) for i in range(5)), sorted(set(x[5] for x in v)), [x[0] for x in v])
"' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 9
