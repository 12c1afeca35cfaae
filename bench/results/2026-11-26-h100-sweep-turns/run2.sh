#!/usr/bin/env bash
# Device run 2: why a split-kernel run trains 30 % slower beside three others (0.140 s against 0.108 s alone).
# Per-stage profiles alone and side by side; training time against the number of runs at once.
EXEC='mkdir -p /tmp/new && tar -xJf .carry-extra/turns.tar.xz -C /tmp/new; cli=/tmp/new/build-gpu/apps/sprintnet/sprintnet; cd $build_root;
echo "== alone, profiled"; SPRINTNET_FUSED_PROFILE=1 $cli train configs/mnist_mlp.toml --set output.dir=\"$out/alone\" --set output.progress=\"none\" 2>&1 | grep -E "fused profile|epoch 10" | tail -n 2;
echo "== 4 side by side, profiled"; SPRINTNET_FUSED_PROFILE=1 $cli sweep configs/mnist_mlp.toml --grid optim.lr=0.01,0.02,0.05,0.1 --seeds 0 --parallel 4 --out $out/side4 2>&1 | grep -E "fused profile" | tail -n 4;
for p in 1 2 3 4; do echo "== 4 runs, $p at a time"; python3 bench/sweep_phases /tmp/new/build-gpu $out/conc-$p --runs 4 --repeat 2 --timeline --sweep-args "--parallel $p" > $out/conc-$p.txt 2>&1; python3 - $out/conc-$p.txt <<PY
import sys,re
t=open(sys.argv[1]).read()
rows=re.findall(r"^\| optim[^|]*\|[^|]*\|[^|]*\|[^|]*\|[^|]*\| ([0-9.]+) \| ([0-9.]+) \|", t, re.M)
print("training s:", " ".join(r[0] for r in rows), " evaluation s:", " ".join(r[1] for r in rows))
PY
done;
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 40
