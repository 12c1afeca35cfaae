#!/usr/bin/env bash
# Session 30 on 4 H200s, beside `scripts/gpu-suite multigpu` (the data-parallel tests and 2 "nodes" x 2 GPUs, the
# NNODES path train_command.cpp now reads as a number): NNODES=01 (one node: must train in one process) and
# --gpus 4 -v (the ranks get -v).
set -u
here=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd "$build_root"
cli=$build/apps/sprintnet/sprintnet
common=(--set "data.dir=\"$build_root/data\"" --set "output.dir=\"$OUT/runs\"" --set train.epochs=2)
NNODES=01 timeout 60 "$cli" train configs/mnist_mlp.toml "${common[@]}" --set output.name=\"nnodes01\" -q > "$OUT/nnodes01.log" 2>&1
echo "NNODES=01 rc $?: $(tail -2 "$OUT/nnodes01.log")"
timeout 90 "$cli" train configs/mnist_mlp.toml --gpus 4 -v "${common[@]}" --set output.name=\"gpus4v\" -q > "$OUT/gpus4-v.log" 2>&1
echo "--gpus 4 -v rc $?:"; tail -14 "$OUT/gpus4-v.log"
timeout 60 "$build/tests/app/train_cli_test" --gtest_filter='*Nnodes*' 2>&1 | tail -3
