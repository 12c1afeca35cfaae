#!/usr/bin/env bash
# Issue 12 on the H100 host's CPU: the compiled CPU step before (the bundle's step_bench, c42fb31) and after
# (block-wise dW + update, gather prefetch) interleaved, then bench/run --cpu-only with the new step against PyTorch 2.11.
EXEC='mkdir -p /tmp/nb && tar -xJf .carry-extra/cpunew.tar.xz -C /tmp/nb && mkdir -p /tmp/nbb/bench && cp /tmp/nb/build-gpu/bench/step_bench /tmp/nbb/bench/;
lscpu | grep -E "Model name|^CPU\(s\)|L2|L3" > $out/lscpu.txt; cat $out/lscpu.txt;
for r in 1 2 3; do for v in old new; do b=$build/bench/step_bench; [ $v = new ] && b=/tmp/nbb/bench/step_bench; for t in 1 2; do echo "$v r$r t$t $($b --device cpu --threads $t --engine compiled --precision fp32 --config 4x784x128 3x256x128 --steps 50 --repeats 7 2>/dev/null | grep -o "\"config\":\"[^\"]*\"\|\"step_ms\":[0-9.]*" | tr "\n" " ")"; done; done; done | tee $out/ab.txt;
cd $build_root && timeout 420 python3 bench/run --cpu-only --build /tmp/nbb --out $out/cpu-bench --cpu-threads 1 2 --cpu-rounds 3 --no-gemm-table > $out/cpu-bench.log 2>&1; echo "bench rc=$?"; sed -n "/^CPU (same machine/,/^- target .*1-2 threads/p" $out/cpu-bench/report.md' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 40
