#!/usr/bin/env bash
# The Adam fast-step test's fix (its failing seed, then 40 fresh seeds, then the whole ops_gpu_test), and issue 11's
# 16-run sweep measurement at the current code (bench/sweep_bench: 16 single runs vs the sweep vs JAX vmap).
EXEC='tar -xJf $repo/.carry-extra/ops_gpu_test.tar.xz -C $build; T=$build/tests/ops/ops_gpu_test; F=--gtest_filter=*AdamFastStep*;
SPRINTNET_TEST_SEED=45117601596 $T $F 2>&1 | grep -E "^\[  (PASSED|FAILED)"; fails=0; for i in $(seq 40); do $T $F > $out/adam-$i.log 2>&1 || fails=$((fails+1)); done; echo "adam fast step: 40 fresh seeds, $fails failed";
$T > $out/ops-gpu.log 2>&1; echo "ops_gpu_test rc=$?"; grep -E "^\[  (PASSED|FAILED)" $out/ops-gpu.log | head -5;
cd $build_root && python3 bench/sweep_bench --build $build --data $build_root/data --out $out/sb --parallel 4,8,0 --repeat 2 > $out/sweep-bench.log 2>&1; echo "sweep_bench rc=$?"; tail -n 30 $out/sweep-bench.log; rm -rf $out/sb/*/' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 50
