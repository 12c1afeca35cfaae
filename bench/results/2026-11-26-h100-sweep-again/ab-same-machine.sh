#!/usr/bin/env bash
# Same machine, interleaved: the old CLI (6c18804) against the new (device data cache, pinned record pool) on the
# default run (8 rounds), and 16-run sweeps (auto) old / new / new with the evaluation on 4, 8 or 16 blocks
# (SPRINTNET_FUSED_BLOCKS), 3 rounds.
EXEC='mkdir -p $out/new && tar -xJf $repo/.carry-extra/new.tar.xz -C $out/new; OLD=$build/apps/sprintnet/sprintnet; NEW=$out/new/apps/sprintnet/sprintnet; cd $build_root;
one() { /usr/bin/time -f "%e" -o $out/w.txt env $3 $2 train configs/mnist_mlp.toml --set output.dir=$out/x --set output.progress=none >/dev/null 2>&1; echo "$1 $(cat $out/w.txt)" >> $out/ab.txt; }
sw() { rm -rf $out/sw; /usr/bin/time -f "%e" -o $out/w.txt env $3 $2 sweep configs/mnist_mlp.toml --grid optim.lr=0.01,0.02,0.05,0.1 --seeds 0,1,2,3 --out $out/sw --set output.progress=\"none\" >/dev/null 2>&1; echo "$1 $(cat $out/w.txt) $(python3 -c "import json,statistics as s; r=json.load(open(\"$out/sw/sweep.json\"))[\"runs\"]; print(len([x for x in r if x[\"status\"]==\"done\"]), \"done\")")" >> $out/sw.txt; }
one warm $NEW X=1; : > $out/ab.txt; for r in 1 2 3 4 5 6 7 8; do one old $OLD X=1; one new $NEW X=1; done;
sw warm $NEW X=1; : > $out/sw.txt; for r in 1 2 3; do sw old $OLD X=1; sw new $NEW X=1; sw newB4 $NEW SPRINTNET_FUSED_BLOCKS=4; sw newB8 $NEW SPRINTNET_FUSED_BLOCKS=8; sw newB16 $NEW SPRINTNET_FUSED_BLOCKS=16; done; rm -rf $out/x $out/sw;
for f in ab sw; do python3 -c "
import statistics as s, collections as c
d=c.defaultdict(list)
for l in open(\"$out/$f.txt\"): p=l.split(); d[p[0]].append(float(p[1]))
for k,v in d.items(): print(\"$f\", k, \"median %.3f\" % s.median(v), \"all\", v)
"; done; tail -3 $out/sw.txt' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 16
