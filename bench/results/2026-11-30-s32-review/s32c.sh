#!/usr/bin/env bash
# Session 32, part 2 of the gpu suite, on 2 H200s: the multigpu tests (data parallel through the CLI: the launcher's
# wait and rank variables changed), the sweep, out-of-memory and eval gpu tests; an fp16 CLI run stopped and resumed.
set -u
cd "$build" || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi -L
timeout 300 ctest -L '^multigpu$' --timeout 280 --output-on-failure > "$OUT/multigpu.log" 2>&1
echo "multigpu rc $?: $(grep -E 'tests passed|tests failed' "$OUT/multigpu.log")"
grep -E '^\s+[0-9]+ - ' "$OUT/multigpu.log" | head
timeout 200 ctest -L '^gpu$' -R 'OutOfDeviceMemory|SweepOnAGpu' -j 2 --timeout 190 --output-on-failure > "$OUT/gpu2.log" 2>&1
echo "gpu part 2 rc $?: $(grep -E 'tests passed|tests failed' "$OUT/gpu2.log")"
grep -E '^\s+[0-9]+ - ' "$OUT/gpu2.log" | head
gzip -f "$OUT/multigpu.log" "$OUT/gpu2.log"
