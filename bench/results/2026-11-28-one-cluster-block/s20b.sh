#!/usr/bin/env bash
# Session 20: the merged code (OneClusterBlock + the robustness changes) on the GPU: the whole GPU suite,
# compute-sanitizer on the one-cluster kernels (racecheck in two parts: it is slow on 16-block clusters), timing.
set -u
b=$build
t=$b/tests/train
cd $build_root
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
echo "== ctest -L gpu"
(cd $b && timeout 250 ctest -L gpu --output-on-failure -j1 > $OUT/ctest-gpu.log 2>&1); echo "ctest rc $?"; grep -E 'tests passed|tests failed|\(Failed\)|Timeout' $OUT/ctest-gpu.log | head -10; grep 'Total Test time' $OUT/ctest-gpu.log
q='Fused/FusedFirstSteps.*/default_model_quads:Fused/FusedFirstSteps.*/partial_batch_quads:Fused/FusedFirstSteps.*/sgd_nesterov_decay_quads'
r='Fused/FusedFirstSteps.*/relu_rows:Fused/FusedFirstSteps.*/partial_batch_rows:Fused/FusedFirstSteps.*/softmax_regression_regression:Fused/FusedFirstSteps.*/no_bias_cluster'
san() {  # tool name filter seconds
  local blocks=""; [[ $1 == racecheck ]] && blocks=16
  SPRINTNET_FUSED_BLOCKS=$blocks timeout $4 compute-sanitizer --tool $1 --error-exitcode 99 $t/fused_engine_gpu_test --gtest_filter="$3" > $OUT/san-$1-$2.log 2>&1; echo "$1 $2 rc $?"
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $OUT/san-$1-$2.log | tail -3
}
san memcheck all "$q:$r" 100
san synccheck all "$q:$r" 100
san racecheck quads "$q" 170
san racecheck rows "$r" 150
run() { SPRINTNET_FUSED_KERNEL=$1 timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config $2 --engine fused --epochs 8 2>&1 | tail -1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print('$1 $2', r.get('epoch_ms_median'))"; }
for round in 1 2; do run split 3x256x128; run quads 3x256x128; run rows 4x128x128; done
