#!/usr/bin/env bash
# The final ops_gpu_test (sum_rows' tolerances tightened to round-to-nearest's bound): all its tests, and memcheck.
EXEC='mkdir -p /tmp/of && tar -xJf .carry-extra/opsfinal.tar.xz -C /tmp/of; n=/tmp/of/build-gpu; cd $build_root;
for r in 1 2 3; do $n/tests/ops/ops_gpu_test --gtest_filter="GpuStepKernels.SumRows*:GpuOps.Gather*:GpuOps.OutOfRange*:GpuStepKernels.BatchGather*" > $out/sumrows-$r.log 2>&1; echo "sum_rows+gathers round $r rc=$? $(grep -E "^\[  (PASSED|FAILED) " $out/sumrows-$r.log | tr "\n" " ")"; done;
$n/tests/ops/ops_gpu_test > $out/ops_gpu_test.log 2>&1; echo "ops_gpu_test rc=$? $(grep -E "^\[  (PASSED|FAILED) " $out/ops_gpu_test.log | tr "\n" " ")";
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 99 $n/tests/ops/ops_gpu_test > $out/memcheck-ops.log 2>&1; echo "memcheck rc=$? $(grep -E "ERROR SUMMARY" $out/memcheck-ops.log)"' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 6
