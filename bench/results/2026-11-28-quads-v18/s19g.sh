#!/usr/bin/env bash
# Session 19, the final numbers: make train's whole process (the quads kernel), the 16-run sweep twice.
set -u
b=$build
cd $build_root
for i in 1 2 3 4; do
  /usr/bin/time -f "wall %e s" $b/apps/sprintnet/sprintnet train configs/mnist_mlp.toml --set output.progress=\"none\" --set output.dir=\"/tmp/runs\" 2>&1 | grep -E 'fused engine|test accuracy|wall|quads' | tail -3
done
timeout 300 python3 bench/sweep_bench --build $b --data $build_root/data --out $OUT/sweep-bench --parallel 8,0 --repeat 2 > $OUT/sweep-bench.log 2>&1; echo "sweep bench rc $?"; tail -9 $OUT/sweep-bench.log
rm -rf $OUT/sweep-bench/*/
timeout 120 $build/tests/train/fused_engine_gpu_test --gtest_filter='FusedEngine.TheBannerSaysWhichEngineRunsAndWhy:FusedEngine.TheClusterKernelRunsWhereItCanAndAutoTakesEveryModelItFits' 2>&1 | grep -E 'OK \]|FAILED|Failure|Expected|actual' | head
