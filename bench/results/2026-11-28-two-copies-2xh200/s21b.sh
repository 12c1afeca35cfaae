#!/usr/bin/env bash
# Session 21: the backward's products planned for fewer SMs (SPRINTNET_BACKWARD_SMS), with one or two copies.
set -u
b=$build
cd $build_root
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
echo "== CompiledStep tests with SPRINTNET_BACKWARD_SMS=100 (one GPU)"
SPRINTNET_BACKWARD_SMS=100 CUDA_VISIBLE_DEVICES=0 timeout 100 $b/tests/train/train_gpu_test --gtest_filter='CompiledStep.*' > $OUT/compiled-step.log 2>&1; echo "rc $?"
grep -E '^\[  (FAILED|PASSED) |Failure' $OUT/compiled-step.log | tail -4
cfg="--configs 4x8192x4096 --gpus 1 2 --updates sharded --epochs 5 --no-ddp"
for round in 1 2; do
  for v in 1:0 2:0 1:116 2:116 1:100 2:100 2:84; do
    dc=$((${v%%:*} - 1)); sms=${v##*:}
    SPRINTNET_DOUBLE_COPY=$dc SPRINTNET_BACKWARD_SMS=$sms timeout 100 python3 bench/scaling --build $b --data $build_root/data --out $OUT/s-$v-$round $cfg > $OUT/s.log 2>&1
    echo "copies=${v%%:*} sms=$sms round $round: $(grep -E '^\| 4x' $OUT/s-$v-$round/report.md | awk -F'|' '{printf "%s GPUs %s %s; ", $3, $4, $5}')"
  done
done
tar -C $OUT -czf $OUT/scaling.tgz s-* 2>/dev/null; rm -rf $OUT/s-*
