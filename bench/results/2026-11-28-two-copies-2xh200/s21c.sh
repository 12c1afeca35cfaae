#!/usr/bin/env bash
# Session 21: the merged code (oom advice, fused-kernel dedupe, the sweep's GPU gate): GPU suite, timing, sweeps on 2 GPUs.
set -u
b=$build
t=$b/tests/train
cd $build_root
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
echo "== ctest -L gpu"
(cd $b && CUDA_VISIBLE_DEVICES=0 timeout 330 ctest -L gpu --output-on-failure -j1 > $OUT/ctest-gpu.log 2>&1); echo "ctest rc $?"; grep -E 'tests passed|tests failed|Failed|\*\*\*' $OUT/ctest-gpu.log | head -20; grep 'Total Test time' $OUT/ctest-gpu.log
echo "== eval/predict out of device memory while loading"
(cd $b && CUDA_VISIBLE_DEVICES=0 timeout 60 tests/app/eval_predict_cli_test --gtest_filter='*OutOfDevice*' 2>&1 | grep -E '^\[  (FAILED|PASSED|SKIPPED|     OK) |Failure' | tail -4)
run() { CUDA_VISIBLE_DEVICES=0 SPRINTNET_FUSED_KERNEL=$1 timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config $2 --engine fused --epochs 8 2>&1 | tail -1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print('$1 $2', r.get('epoch_ms_median'))"; }
echo "== fused kernels, ms an epoch (bf16)"
for round in 1 2 3; do run split 3x256x128; run quads 3x256x128; run rows 4x128x128; run regression 1x784x128; done
echo "== sweeps (default config; s for the whole command)"
sw() {  # visible runs epochs parallel
  local seeds; seeds=$(seq -s, 0 $(($2 / 4 - 1)))
  local start; start=$(date +%s.%N)
  CUDA_VISIBLE_DEVICES=$1 $b/apps/sprintnet/sprintnet sweep configs/mnist_mlp.toml --grid optim.lr=0.01,0.02,0.05,0.1 --seeds "$seeds" \
    --out $OUT/sw --set "data.dir=\"$build_root/data\"" --set train.epochs=$3 --parallel $4 > $OUT/sw.log 2>&1
  echo "$2 runs x $3 epochs, GPUs $1, --parallel $4: $(awk "BEGIN {printf \"%.2f\", $(date +%s.%N) - $start}") s; $(grep -m1 'sweep: ' $OUT/sw.log | cut -c1-220)"
  rm -rf $OUT/sw
}
for round in 1 2; do
  sw 0 32 10 0; sw 0,1 32 10 0; sw 0,1 32 10 16
  sw 0 64 40 0; sw 0,1 64 40 0
done
