#!/usr/bin/env bash
# Final GPU suite of the fourth session: the committed code's full bundle. compute-sanitizer on the fused plans (split
# and cluster kernels) and on the sweep's turns (sweep_gpu_test's default-width case), bench/sweep_bench with JAX,
# then ctest -L gpu.
EXEC='small="Fused/FusedFirstSteps.*/narrow_relu_split:Fused/FusedFirstSteps.*/relu_cluster";
fused_sanitizers final "(split and cluster kernels through the fused plan)" "$small" "memcheck racecheck synccheck";
echo "== compute-sanitizer memcheck sweep_gpu_test (default width, turns)"; timeout 240 compute-sanitizer --tool memcheck --error-exitcode 99 $build/tests/sweep/sweep_gpu_test --gtest_filter=SweepOnAGpu.AutoRunsOfTheDefaultWidthSharingTheGpuEqualTheRunsAloneBitForBit > $out/san-sweep.log 2>&1; echo "rc=$? $(grep -E "ERROR SUMMARY|PASSED|FAILED" $out/san-sweep.log | tr "\n" " ")";
cd $build_root && python3 bench/sweep_bench --build $build --data $build_root/data --out /tmp/sb --parallel 0 --repeat 3 > $out/sweep-bench.log 2>&1; echo "sweep_bench rc=$?"; tail -n 6 $out/sweep-bench.log; rm -rf /tmp/sb' \
  scripts/gpu-suite exec gpu-tests 2>&1 | grep -v "^$" | tail -n 45
