# Session 23, run A (one H200): the whole GPU suite on the final code, sanitizers on the changed and the
# fused kernels, and the compiled step's epoch times after the update's wait moved.
b=$build
cd "$b"
echo "== ctest -L gpu"
timeout 300 ctest -L gpu --output-on-failure -j4 > $OUT/ctest-gpu.log 2>&1; echo "ctest gpu rc $?"
grep -E 'tests passed|tests failed|\(Failed\)|Timeout|Not Run' $OUT/ctest-gpu.log | head -20; grep 'Total Test time' $OUT/ctest-gpu.log
san() {  # san TOOL EXE FILTER NAME [env]
  local log=$OUT/san-$1-$4.log
  env ${5:-} timeout 200 compute-sanitizer --tool $1 --error-exitcode 99 $2 --gtest_filter="$3" > $log 2>&1
  echo "$1 $4 rc $? :: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|tests? ran|PASSED|FAILED' $log | tr '\n' ' ')"
}
san memcheck tests/ops/ops_gpu_test 'GpuStepKernels.*:*GpuActivation*' step-kernels
san racecheck tests/ops/ops_gpu_test 'GpuStepKernels.*' step-kernels
san memcheck tests/train/train_gpu_test 'CompiledStep.*:Engines/TrainerGpuEngine.*/1' compiled
f=tests/train/fused_engine_gpu_test
small='Fused/FusedFirstSteps.*/relu_split:Fused/FusedFirstSteps.*/narrow_default_model_split:Fused/FusedFirstSteps.*/adam_rows:Fused/FusedFirstSteps.*/narrow_rows:Fused/FusedFirstSteps.*/default_model_quads:Fused/FusedFirstSteps.*/partial_batch_quads:Fused/FusedFirstSteps.*/relu_cluster'
san memcheck $f "$small" fused
san racecheck $f "$small" fused SPRINTNET_FUSED_BLOCKS=16
san synccheck $f "$small" fused
echo "== compiled step epochs (bf16, median of epochs 2..6), 3 rounds"
for r in 1 2 3; do for c in 4x784x128 4x4096x4096 4x1024x512 3x256x128; do
  timeout 100 bench/epoch_bench --config $c --engine compiled --precision bf16 --epochs 6 --data $build_root/data 2>/dev/null | tail -n 1 \
   | python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); print('r$r', sys.argv[1], r.get('epoch_ms_median'), r.get('test_accuracy'))" $c
done; done
nvidia-smi --query-gpu=name,driver_version --format=csv
