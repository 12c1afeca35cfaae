#!/usr/bin/env bash
# Session 30: the data-parallel fault tests after the launcher's change (SIGKILL only to unreaped ranks, after a
# reaping wait), and the rest of the multigpu tests.
set -u
cd "$build" || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 400 tests/dist/data_parallel_gpu_test > "$OUT/multigpu-tests.log" 2>&1
echo "multigpu rc $?"; grep -E "seed|^\[  (FAILED|PASSED|SKIPPED) |Failure|exit=|OK \] DataParallel.A" "$OUT/multigpu-tests.log"
