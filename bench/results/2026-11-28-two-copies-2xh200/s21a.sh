#!/usr/bin/env bash
# Session 21: two compute copies of the weights (the update no longer waits for the input gradient).
set -u
b=$build
cd $build_root
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
echo "== CompiledStep tests (one GPU)"
CUDA_VISIBLE_DEVICES=0 timeout 200 $b/tests/train/train_gpu_test --gtest_filter='CompiledStep.*' > $OUT/compiled-step.log 2>&1; echo "rc $?"
grep -E '^\[  (FAILED|PASSED|SKIPPED|     OK) |Failure|tests ran' $OUT/compiled-step.log | tail -12
echo "== multigpu tests"
timeout 240 $b/tests/dist/data_parallel_gpu_test > $OUT/multigpu.log 2>&1; echo "rc $?"
grep -E '^\[  (FAILED|PASSED|SKIPPED|     OK) |Failure|tests ran' $OUT/multigpu.log | tail -14
echo "== scaling, one copy (0) and two copies (1), interleaved"
cfg="--configs 4x8192x4096 4x4096x4096 --gpus 1 2 --updates sharded --epochs 5"
for round in 1 2; do
  for dc in 0 1; do
    ddp=--no-ddp; [[ $round == 1 && $dc == 0 ]] && ddp=""
    SPRINTNET_DOUBLE_COPY=$dc timeout 200 python3 bench/scaling --build $b --data $build_root/data --out $OUT/scaling-$dc-$round $cfg $ddp > $OUT/scaling-$dc-$round.log 2>&1
    echo "-- copies=$dc round $round rc $?"; grep -E "^\|" $OUT/scaling-$dc-$round/report.md | head -12
  done
done
tar -C $OUT -czf $OUT/scaling.tgz scaling-0-1 scaling-1-1 scaling-0-2 scaling-1-2 2>/dev/null; rm -rf $OUT/scaling-?-?
