#!/usr/bin/env bash
# Session 22: ReLU's gradient by an elementwise kernel (the new default) on 2 H200s: the compiled step's GPU tests,
# the data-parallel tests, then bench/scaling at 1 and 2 GPUs against DDP, and with SPRINTNET_DRELU_EPILOGUE=1 beside it.
set -u
b=$build
cd $build_root
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
t() { local name=$1; shift; timeout $1 "${@:2}" > $OUT/$name.log 2>&1; echo "== $name rc $?"; grep -E '^\[  (FAILED|PASSED|SKIPPED) |Failure|tests ran' $OUT/$name.log | tail -8; }
t train_gpu 150 env CUDA_VISIBLE_DEVICES=0 $b/tests/train/train_gpu_test
t host_sync 45 env CUDA_VISIBLE_DEVICES=0 $b/tests/train/host_sync_gpu_test --gtest_filter='*Compiled*'
t data_parallel 150 $b/tests/dist/data_parallel_gpu_test
t memcheck 90 env CUDA_VISIBLE_DEVICES=0 compute-sanitizer --tool memcheck $b/tests/train/train_gpu_test --gtest_filter='CompiledStep.ReluGradient*'
grep -E "ERROR SUMMARY" $OUT/memcheck.log
cfg="--configs 4x8192x4096 4x4096x4096 --gpus 1 2 --updates sharded --epochs 4"
for v in 0 1; do
  ddp=--no-ddp; [[ $v == 0 ]] && ddp=""
  echo "-- SPRINTNET_DRELU_EPILOGUE=$v"
  SPRINTNET_DRELU_EPILOGUE=$v timeout 200 python3 bench/scaling --build $b --data $build_root/data --out $OUT/scaling-$v $cfg $ddp > $OUT/scaling-$v.log 2>&1
  echo "rc $?"; grep -E "^\|" $OUT/scaling-$v/report.md | head -8
done
