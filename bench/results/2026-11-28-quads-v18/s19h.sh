#!/usr/bin/env bash
# Session 19, v18f: the next batch straight into x (no copy at the step's end); correctness, sanitizers, speed.
set -u
b=$build
t=$b/tests/train
cd $build_root
timeout 200 $t/fused_engine_gpu_test --gtest_filter='Fused/FusedFirstSteps.*quads*:FusedEngine.TheQuadsKernel*' > $OUT/quads-tests.log 2>&1; echo "quads tests rc $?"
grep -E 'tensor' $OUT/quads-tests.log | awk '{print $NF}' | sort -g | tail -1; grep -E '^seed|PASSED|FAILED' $OUT/quads-tests.log | tail -8
timeout 60 $t/host_sync_gpu_test --gtest_filter='*quads*' 2>&1 | grep -E 'OK \]|FAILED'
for tool in memcheck racecheck synccheck; do
  blocks=""; [[ $tool == racecheck ]] && blocks=16
  SPRINTNET_FUSED_BLOCKS=$blocks timeout 150 compute-sanitizer --tool $tool --error-exitcode 99 $t/fused_engine_gpu_test --gtest_filter='Fused/FusedFirstSteps.*/default_model_quads:Fused/FusedFirstSteps.*/partial_batch_quads:Fused/FusedFirstSteps.*/sgd_nesterov_decay_quads' > $OUT/san-$tool.log 2>&1; echo "$tool rc $?"
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san-$tool.log | tail -1
done
run() { SPRINTNET_FUSED_KERNEL=$1 timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config 3x256x128 --engine fused --epochs 8 2>&1 | tail -1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print('$1', r.get('epoch_ms_median'))"; }
for round in 1 2 3; do run split; run quads; done
SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_KERNEL=quads timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config 3x256x128 --engine fused --epochs 3 2>&1 | grep -i 'profile' | tail -1
