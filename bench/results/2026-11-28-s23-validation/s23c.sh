# Session 23, run D (one H200): the GPU suite after Tensor::numel() changed for undefined tensors (every
# executable rebuilt), with the new one-sample evaluation test, and memcheck on it.
b=$build
cd "$b"
echo "== ctest -L gpu"
timeout 300 ctest -L gpu --output-on-failure -j4 > $OUT/ctest-gpu.log 2>&1; echo "ctest gpu rc $?"
grep -E 'tests passed|tests failed|\(Failed\)|Timeout' $OUT/ctest-gpu.log | head -20; grep 'Total Test time' $OUT/ctest-gpu.log
grep -E 'EveryEngineEvaluatesAOneSample' $OUT/ctest-gpu.log
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 99 tests/train/train_gpu_test \
  --gtest_filter='TrainerGpu.EveryEngineEvaluatesAOneSampleTestSet' > $OUT/san-memcheck-one-sample.log 2>&1
echo "memcheck one-sample rc $? :: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/san-memcheck-one-sample.log | tr '\n' ' ')"
nvidia-smi --query-gpu=name,driver_version --format=csv
