#!/usr/bin/env bash
# Session 19: v18c (dW1 from bf16 halves of X, the batch by a bulk copy a row); correctness, speed, profile.
set -u
b=$build
t=$b/tests/train
cd $build_root
timeout 240 $t/fused_engine_gpu_test --gtest_filter='Fused/FusedFirstSteps.*quads*:FusedEngine.TheQuadsKernelGivesBitIdentical*' > /tmp/fs.log 2>&1; echo "first steps rc $?"
grep -E 'tensor' /tmp/fs.log | awk '{print $NF}' | sort -g | tail -2; grep -E 'PASSED|FAILED' /tmp/fs.log | tail -4
run() { SPRINTNET_FUSED_KERNEL=$1 SPRINTNET_FUSED_LAB=${2:-0} timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config ${3:-3x256x128} --engine fused --epochs 6 2>&1 | tail -1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print('$1 ${3:-3x256x128} lab=${2:-0}', r.get('epoch_ms_median'))"; }
for round in 1 2 3; do run split; run quads; done; run rows 0 3x128x128; run quads 0 3x128x128
run quads 1
for blk in 0 7; do SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_PROFILE_BLOCK=$blk SPRINTNET_FUSED_KERNEL=quads timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config 3x256x128 --engine fused --epochs 3 2>&1 | grep -i 'profile' | tail -1; done
timeout 200 $t/fused_engine_gpu_test --gtest_filter='FusedEngine.TheQuadsKernelsTenEpochs*' > /tmp/ten.log 2>&1; echo "ten epochs rc $?"
grep -E '^seed|OK \]|FAILED|Failure' /tmp/ten.log | head -12
timeout 60 $t/host_sync_gpu_test --gtest_filter='*quads*' 2>&1 | grep -E 'OK|FAILED|PASSED'
