#!/usr/bin/env bash
# Session 19, second device run: v18 (F0 unrolled, 16-byte sends, dW1 without I2F); correctness, speed, sanitizers.
set -u
b=$build
t=$b/tests/train
cd $build_root
echo "== first steps + rerun (quads)"
timeout 240 $t/fused_engine_gpu_test --gtest_filter='Fused/FusedFirstSteps.*quads*:FusedEngine.TheQuadsKernelGivesBitIdentical*' > /tmp/fs.log 2>&1; echo rc $?
grep -E 'tensor|FAILED' /tmp/fs.log | awk '{print $NF}' | sort -g | tail -3; grep -E 'PASSED|FAILED' /tmp/fs.log | tail -3
echo "== epochs (ms, median of epochs 2..6), default model 3x256x128"
for round in 1 2 3; do
  for k in quads split; do
    SPRINTNET_FUSED_KERNEL=$k timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config 3x256x128 --engine fused --epochs 6 2>&1 | tail -1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print('$k', r.get('epoch_ms_median'))"
  done
done
echo "== profile"
SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_KERNEL=quads timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config 3x256x128 --engine fused --epochs 3 2>&1 | grep -i 'profile' | tail -1
for blk in 5 15; do SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_PROFILE_BLOCK=$blk SPRINTNET_FUSED_KERNEL=quads timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config 3x256x128 --engine fused --epochs 3 2>&1 | grep -i 'profile' | tail -1; done
echo "== sanitizers"
for tool in memcheck racecheck synccheck; do
  blocks=""; [[ $tool == racecheck ]] && blocks=16
  SPRINTNET_FUSED_BLOCKS=$blocks timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 $t/fused_engine_gpu_test --gtest_filter='Fused/FusedFirstSteps.*/default_model_quads:Fused/FusedFirstSteps.*/partial_batch_quads' > $OUT/san-$tool.log 2>&1; echo "$tool rc $?"
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $OUT/san-$tool.log | tail -3
done
echo "== ten epochs against the compiled step"
timeout 200 $t/fused_engine_gpu_test --gtest_filter='FusedEngine.TheQuadsKernelsTenEpochs*' > /tmp/ten.log 2>&1; echo rc $?
grep -E '^seed|OK \]|FAILED|Failure|Expected|Which|epoch [0-9]+$' /tmp/ten.log | head -30
timeout 60 $t/host_sync_gpu_test --gtest_filter='*quads*' 2>&1 | grep -E 'OK|FAILED|PASSED'
