#!/usr/bin/env bash
# Session 19, first device run: the quads kernel's correctness, then its speed against the split kernel.
set -u
b=$build
t=$b/tests/train
cd $build_root
echo "== first steps + reruns + host sync (quads)"
timeout 240 $t/fused_engine_gpu_test --gtest_filter='Fused/FusedFirstSteps.*quads*:FusedEngine.TheQuadsKernelGivesBitIdentical*' 2>&1 | grep -E 'tensor|OK \]|FAILED|Failure|Expected|Which is|differs|error|what|describe|fused engine' | head -150
timeout 60 $t/host_sync_gpu_test --gtest_filter='*quads*' 2>&1 | tail -5
echo "== epochs (ms, median of epochs 2..6), default model 3x256x128"
for round in 1 2; do
  for k in quads split; do
    SPRINTNET_FUSED_KERNEL=$k timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config 3x256x128 --engine fused --epochs 6 2>&1 | tail -1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print('$k', r.get('epoch_ms_median'), r.get('test_accuracy', r.get('accuracy')))"
  done
done
echo "== profile"
SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_KERNEL=quads timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config 3x256x128 --engine fused --epochs 3 2>&1 | grep -i 'profile' | tail -2
echo "== ten epochs against the compiled step"
timeout 200 $t/fused_engine_gpu_test --gtest_filter='FusedEngine.TheQuadsKernelsTenEpochs*' 2>&1 | grep -E 'seed|OK \]|FAILED|Failure|epoch|Expected|Which' | head -30
