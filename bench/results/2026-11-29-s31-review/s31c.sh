#!/usr/bin/env bash
# Session 31: on 2 H200s, the multigpu tests after the compiled plan's host-side checks (the spec checked, a step past
# the learning-rate table refused, counted per rank) and the resume rule for optimizer counters; and the one gpu
# test the other bundles left out (out of device memory, through the CLI).
set -u
cd "$build" || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi -L
timeout 420 ctest -L '^multigpu$' --timeout 400 --output-on-failure > "$OUT/multigpu.log" 2>&1
echo "multigpu rc $?: $(grep -E 'tests passed|tests failed' "$OUT/multigpu.log")"
grep -E '^\s+[0-9]+ - ' "$OUT/multigpu.log" | head
timeout 100 ctest -L '^gpu$' -R 'OutOfDeviceMemory' --output-on-failure > "$OUT/oom.log" 2>&1
echo "oom rc $?: $(grep -E 'tests passed|tests failed' "$OUT/oom.log")"
