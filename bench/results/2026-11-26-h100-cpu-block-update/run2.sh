#!/usr/bin/env bash
# Issue 12 on the H100 host's CPU: old (the bundle's step_bench, c42fb31), v1 (dW and update block by block), v2 (dX's
# part too, so each block's weights come from memory once) with 256 / 512 / 1024 KB a thread, interleaved, 1 and 2
# threads; then bench/run --cpu-only with v2 (512 KB, the committed setting) against PyTorch 2.11.
EXEC='mkdir -p /tmp/c2 && tar -xJf .carry-extra/cpu2.tar.xz -C /tmp/c2 && cp $build/bench/step_bench /tmp/c2/bin/old;
for r in 1 2 3; do for v in old v1 v2_256 v2_512 v2_1024; do for t in 1 2; do echo "$v r$r t$t $(/tmp/c2/bin/$v --device cpu --threads $t --engine compiled --precision fp32 --config 4x784x128 3x256x128 --steps 50 --repeats 5 2>/dev/null | grep -o "\"config\":\"[^\"]*\"\|\"step_ms\":[0-9.]*" | tr "\n" " ")"; done; done; done > $out/ab.txt;
python3 - $out/ab.txt <<PY
import re, sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    v, r, t = line.split()[:3]
    for cfg, ms in re.findall(r"\"config\":\"([^\"]+)\" \"step_ms\":([0-9.]+)", line):
        rows.setdefault((cfg, t, v), []).append(float(ms))
for (cfg, t, v), x in sorted(rows.items()):
    print(f"{cfg} {t} {v:8s} median {st.median(x):7.3f}  {x}")
PY
mkdir -p /tmp/nbb/bench && cp /tmp/c2/bin/v2_512 /tmp/nbb/bench/step_bench;
cd $build_root && timeout 330 python3 bench/run --cpu-only --build /tmp/nbb --out $out/cpu-bench --cpu-threads 1 2 --cpu-rounds 3 --no-gemm-table > $out/cpu-bench.log 2>&1; echo "bench rc=$?"; sed -n "/^CPU (same machine/,/^- target .*1-2 threads/p" $out/cpu-bench/report.md' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 40
