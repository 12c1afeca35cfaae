#!/usr/bin/env bash
# Device run 4: which between-epoch kernels slow four split-kernel runs at once: the epoch's device sort
# (train.shuffle=false removes it) or the evaluation (train.eval_every=0: only after the last epoch).
EXEC='mkdir -p /tmp/turns && tar -xJf .carry-extra/turns.tar.xz -C /tmp/turns; cd $build_root;
train_s() { python3 - $1 <<PY
import sys,re
t=open(sys.argv[1]).read()
rows=re.findall(r"^\| optim[^|]*\|[^|]*\|[^|]*\|[^|]*\|[^|]*\| ([0-9.]+) \| ([0-9.]+) \|", t, re.M)
print("training s:", " ".join(r[0] for r in rows), " evaluation s:", " ".join(r[1] for r in rows))
PY
}
for p in 1 4; do for v in "" "--set train.shuffle=false" "--set train.eval_every=0" "--set train.shuffle=false --set train.eval_every=0"; do
  n=$(echo "$p$v" | tr -dc "a-z0-9"); echo "== $p at a time: ${v:-as configured}"; python3 bench/sweep_phases /tmp/turns/build-gpu $out/x-$n --runs 4 --repeat 2 --timeline --sweep-args "--parallel $p $v" > $out/x-$n.txt 2>&1; train_s $out/x-$n.txt; done; done' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 20
