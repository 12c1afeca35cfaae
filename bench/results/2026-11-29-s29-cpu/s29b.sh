#!/usr/bin/env bash
# Session 29: where the compiled CPU step's time goes at 2-4 threads on this host (its step took 9.3 ms
# at 2 threads against 5.4-5.8 ms of whole products in gemm_bench): block sizes (SPRINTNET_CPU_BLOCK_KB;
# 100000 = each layer whole), OpenMP placement, and oneDNN's own timing of each product inside the step.
set -u
cd "$build" || exit 1
sb=bench/step_bench
ms() { grep -o '"config":"[^"]*"\|"step_ms":[0-9.]*' | paste -sd' ' | sed 's/"config"://g; s/"step_ms"://g'; }
for round in 1 2; do
  for t in 1 2 4; do
    for kb in 512 100000 256 2048; do
      echo "round $round threads $t block_kb $kb compiled: $(SPRINTNET_CPU_BLOCK_KB=$kb timeout 60 $sb --config 4x784x128 3x256x128 --device cpu --threads $t --engine compiled 2>&1 | ms)"
    done
    echo "round $round threads $t eager: $(timeout 60 $sb --config 4x784x128 3x256x128 --device cpu --threads $t --engine eager 2>&1 | ms)"
    for env in OMP_PROC_BIND=close OMP_WAIT_POLICY=active "OMP_PROC_BIND=close OMP_WAIT_POLICY=active"; do
      echo "round $round threads $t $env compiled: $(env $env timeout 60 $sb --config 4x784x128 3x256x128 --device cpu --threads $t --engine compiled 2>&1 | ms)"
    done
  done
done
agg() { grep '^onednn_verbose,exec' | tail -n +400 | awk -F, '{t=$NF; line=$0; sub(/,[^,]*$/,"",line); n=split(line,f,","); key=f[5] " " f[n]; s[key]+=t; c[key]++} END {for (k in s) printf "  %-32s n=%d avg=%.3f ms\n", k, c[k], s[k]/c[k]}' | sort; }
for t in 1 2 4; do
  for kb in 512 100000; do
    echo "== oneDNN's times inside the step, 4x784x128, $t threads, block_kb $kb (50 steps)"
    ONEDNN_VERBOSE=1 SPRINTNET_CPU_BLOCK_KB=$kb timeout 60 $sb --config 4x784x128 --device cpu --threads $t --engine compiled \
      --steps 25 --repeats 2 --warmup 10 2>&1 | agg
  done
done
