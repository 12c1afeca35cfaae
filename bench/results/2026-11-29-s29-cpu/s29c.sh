#!/usr/bin/env bash
# Session 29: the compiled CPU step at 1 and 2 threads, 8 interleaved rounds on this host (its VM moved
# 25 % between two rounds in s29b): the default blocks (512 KB a thread), each layer whole, the eager step,
# libgomp's active wait, and PyTorch 2.11's eager step; medians per variant.
set -u
cd "$build" || exit 1
sb=bench/step_bench
torch="python3 $build_root/bench/torch_step_bench.py"
ms() { grep -o '"config":"[^"]*"\|"step_ms":[0-9.]*' | paste -sd' ' | sed 's/"config"://g; s/"step_ms"://g'; }
for round in 1 2 3 4 5 6 7 8; do
  for t in 1 2; do
    echo "r$round t$t blocks512 $(SPRINTNET_CPU_BLOCK_KB=512 timeout 60 $sb --config 4x784x128 3x256x128 --device cpu --threads $t --engine compiled 2>&1 | ms)"
    echo "r$round t$t whole $(SPRINTNET_CPU_BLOCK_KB=100000 timeout 60 $sb --config 4x784x128 3x256x128 --device cpu --threads $t --engine compiled 2>&1 | ms)"
    echo "r$round t$t active $(OMP_WAIT_POLICY=active timeout 60 $sb --config 4x784x128 3x256x128 --device cpu --threads $t --engine compiled 2>&1 | ms)"
    echo "r$round t$t eager $(timeout 60 $sb --config 4x784x128 3x256x128 --device cpu --threads $t --engine eager 2>&1 | ms)"
    echo "r$round t$t torch $(cd "$build_root" && timeout 90 $torch --device cpu --threads $t --precision fp32 --config 4x784x128 3x256x128 2>&1 | ms)"
  done
done | tee "$OUT/rounds.txt"
python3 - "$OUT/rounds.txt" <<'PY'
import sys, statistics, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 7: continue
    t, name = f[1], f[2]
    for cfg, ms in zip(f[3::2], f[4::2]):
        v[(cfg.strip('"'), t, name)].append(float(ms))
for key in sorted(v):
    xs = v[key]
    print(f"{key[0]:10s} {key[1]} {key[2]:9s} median {statistics.median(xs):7.3f} ms  min {min(xs):7.3f}  max {max(xs):7.3f}  n={len(xs)}")
PY
