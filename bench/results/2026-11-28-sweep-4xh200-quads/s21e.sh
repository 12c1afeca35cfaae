#!/usr/bin/env bash
# Session 21: issue 11's multi-GPU sweep with the quads kernel on 4 H200s (16 runs on 1 GPU, 64 on 1, 64 on 4), three rounds.
set -u
b=$build
cd $build_root
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
sw() {  # visible runs
  local seeds; seeds=$(seq -s, 0 $(($2 / 4 - 1)))
  local start; start=$(date +%s.%N)
  CUDA_VISIBLE_DEVICES=$1 $b/apps/sprintnet/sprintnet sweep configs/mnist_mlp.toml --grid optim.lr=0.01,0.02,0.05,0.1 --seeds "$seeds" \
    --out $OUT/sw --set "data.dir=\"$build_root/data\"" > $OUT/sw.log 2>&1
  echo "$2 runs, GPUs $1: $(awk "BEGIN {printf \"%.2f\", $(date +%s.%N) - $start}") s; $(grep -m1 'at a time' $OUT/sw.log | cut -c1-120); mean acc $(awk -F, 'NR>1 && $0 ~ /done/ {n++} END {print n}' $OUT/sw/summary.csv) done"
  rm -rf $OUT/sw
}
for round in 1 2 3; do sw 0 16; sw 0 64; sw 0,1,2,3 64; done
