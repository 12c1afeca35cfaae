#!/usr/bin/env bash
# Session 30 on 4 H200s: the Adam/AdamW comparisons with kAdamBounds on the seeds where Adam parted from one GPU
# past 1e-4 (4, 5, 39842231778) and two more, every epoch printed.
set -u
cd "$build" || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for seed in 4 5 39842231778 7 8; do
  SPRINTNET_TEST_SEED=$seed timeout 90 tests/dist/data_parallel_gpu_test --gtest_filter='DataParallel/FollowsOneGpu.Adam*' > "$OUT/adam-$seed.log" 2>&1
  echo "seed $seed rc $?"; grep -E 'GPUs epoch|without the decay|FAILED  \]|PASSED' "$OUT/adam-$seed.log"
done
