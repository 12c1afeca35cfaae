#!/usr/bin/env bash
# The final code's full bundle: compute-sanitizer on the fused plans (split and cluster kernels), the compiled plan,
# the pinned record pool and the device data copy; bench/sweep_bench (16 runs, auto, 3 tries, no JAX); then
# ctest -L gpu and the start-up stage.
EXEC='small="Fused/FusedFirstSteps.*/narrow_relu_split:Fused/FusedFirstSteps.*/relu_cluster:Fused/FusedFirstSteps.*/softmax_regression_cluster:Fused/FusedFirstSteps.*/narrow_adam_split";
fused_sanitizers final "(split and cluster kernels through the fused plan)" "$small" "memcheck racecheck synccheck";
for t in memory/pinned_host_pool_gpu_test data/data_gpu_test "train/train_gpu_test --gtest_filter=CompiledStep.SoftmaxRegressionInFp32FollowsTheCpuRun:CompiledStep.AdamWTrainsInBf16"; do echo "== compute-sanitizer memcheck $t"; timeout 300 compute-sanitizer --tool memcheck --error-exitcode 99 $build/tests/$t > $out/san.log 2>&1; echo "rc=$? $(grep -E "ERROR SUMMARY|PASSED|FAILED" $out/san.log | tr "\n" " ")"; done;
cd $build_root && python3 bench/sweep_bench --build $build --data $build_root/data --out $out/sb --parallel 0 --repeat 3 --no-jax > $out/sweep-bench.log 2>&1; echo "sweep_bench rc=$?"; tail -n 6 $out/sweep-bench.log; rm -rf $out/sb' \
  scripts/gpu-suite exec gpu-tests startup 2>&1 | grep -v "^$" | tail -n 70
