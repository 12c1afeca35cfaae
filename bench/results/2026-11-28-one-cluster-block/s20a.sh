#!/usr/bin/env bash
# Session 20: the one-cluster kernels' shared block (OneClusterBlock) and launch helpers; validate on the GPU.
set -u
b=$build
t=$b/tests/train
cd $build_root
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
# SASS of the changed kernels against HEAD's (the .o files built here), instruction counts a kernel.
for f in quads rows; do
  for v in before after; do
    xz -dc .carry/obj/${f}_$v.cubin.xz > /tmp/${f}_$v.cubin; cuobjdump -sass /tmp/${f}_$v.cubin 2>/dev/null | awk '/Function :/{fn=$3} /^ +\/\*[0-9a-f]+\*\//{n[fn]++} END{for(k in n) print n[k], k}' | sort -k2 > $OUT/sass-$f-$v.txt
  done
  echo "== $f: kernels whose SASS instruction count changed"; join -j2 $OUT/sass-$f-before.txt $OUT/sass-$f-after.txt | awk '$2!=$3{print $2, "->", $3, substr($1,1,90)}' | head -20
  echo "   ($(wc -l < $OUT/sass-$f-before.txt) kernels before, $(wc -l < $OUT/sass-$f-after.txt) after)"
done
echo "== ctest -L gpu"
(cd $b && timeout 300 ctest -L gpu --output-on-failure -j1 > $OUT/ctest-gpu.log 2>&1); echo "ctest rc $?"; grep -E 'tests passed|tests failed|Failed|\*\*\*' $OUT/ctest-gpu.log | head -20; grep 'Total Test time' $OUT/ctest-gpu.log
cases='Fused/FusedFirstSteps.*/default_model_quads:Fused/FusedFirstSteps.*/partial_batch_quads:Fused/FusedFirstSteps.*/sgd_nesterov_decay_quads:Fused/FusedFirstSteps.*/relu_rows:Fused/FusedFirstSteps.*/adam_rows:Fused/FusedFirstSteps.*/partial_batch_rows:Fused/FusedFirstSteps.*/softmax_regression_regression:Fused/FusedFirstSteps.*/no_bias_cluster'
for tool in memcheck racecheck synccheck; do
  blocks=""; [[ $tool == racecheck ]] && blocks=16
  SPRINTNET_FUSED_BLOCKS=$blocks timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 $t/fused_engine_gpu_test --gtest_filter="$cases" > $OUT/san-$tool.log 2>&1; echo "$tool rc $?"
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED' $OUT/san-$tool.log | tail -4
done
run() { SPRINTNET_FUSED_KERNEL=$1 timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config $2 --engine fused --epochs 8 2>&1 | tail -1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print('$1 $2', r.get('epoch_ms_median'))"; }
for round in 1 2 3; do run split 3x256x128; run quads 3x256x128; run rows 4x128x128; run regression 1x784x128; done
