#!/usr/bin/env bash
# Session 19, v18e: correctness, sanitizers, speed against the split kernel (the SM clock sampled), the sweep.
set -u
b=$build
t=$b/tests/train
cd $build_root
timeout 240 $t/fused_engine_gpu_test --gtest_filter='Fused/FusedFirstSteps.*quads*:FusedEngine.TheQuadsKernel*' > $OUT/quads-tests.log 2>&1; echo "quads tests rc $?"
grep -E 'tensor' $OUT/quads-tests.log | awk '{print $NF}' | sort -g | tail -2; grep -E '^seed|PASSED|FAILED' $OUT/quads-tests.log | tail -12
timeout 60 $t/host_sync_gpu_test --gtest_filter='*quads*' 2>&1 | grep -E 'OK \]|FAILED'
for tool in memcheck racecheck synccheck; do
  blocks=""; [[ $tool == racecheck ]] && blocks=16
  SPRINTNET_FUSED_BLOCKS=$blocks timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 $t/fused_engine_gpu_test --gtest_filter='Fused/FusedFirstSteps.*/default_model_quads:Fused/FusedFirstSteps.*/partial_batch_quads:Fused/FusedFirstSteps.*/sgd_nesterov_decay_quads' > $OUT/san-$tool.log 2>&1; echo "$tool rc $?"
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $OUT/san-$tool.log | tail -2
done
run() { SPRINTNET_FUSED_KERNEL=$1 timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config ${2:-3x256x128} --engine fused --epochs 8 2>&1 | tail -1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print('$1 ${2:-3x256x128}', r.get('epoch_ms_median'))"; }
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw --format=csv -lms 200 > $OUT/clocks.csv 2>&1 &
smi=$!
for round in 1 2 3; do run split; run quads; done
kill $smi
sort $OUT/clocks.csv | uniq -c | sort -rn | head -5
SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_KERNEL=quads timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config 3x256x128 --engine fused --epochs 3 2>&1 | grep -i 'profile' | tail -1
echo "== sweep test"
timeout 240 $b/tests/sweep/sweep_gpu_test > $OUT/sweep-test.log 2>&1; echo "sweep test rc $?"; grep -E 'OK \]|FAILED|Failure|Expected|Which|actual' $OUT/sweep-test.log | head -12
echo "== sweep bench"
timeout 280 python3 bench/sweep_bench --build $b --data $build_root/data --out $OUT/sweep-bench --parallel 0 --repeat 1 > $OUT/sweep-bench.log 2>&1; echo "sweep bench rc $?"; tail -16 $OUT/sweep-bench.log
rm -rf $OUT/sweep-bench/*/
