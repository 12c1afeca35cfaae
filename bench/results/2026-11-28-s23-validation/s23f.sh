# Session 23, run F (one H200): the GPU test executables the last review touched (ops, train, memory), whole.
b=$build
cd "$b"
for t in tests/ops/ops_gpu_test tests/train/train_gpu_test tests/memory/memory_gpu_test; do
  timeout 200 $t > $OUT/$(basename $t).log 2>&1; echo "$t rc $? :: $(grep -E '^\[  (PASSED|FAILED)  \]|tests ran' $OUT/$(basename $t).log | tr '\n' ' ')"
done
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 99 tests/train/train_gpu_test --gtest_filter='CompiledStep.*' > $OUT/san.log 2>&1
echo "memcheck compiled rc $? :: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/san.log | tr '\n' ' ')"
nvidia-smi --query-gpu=name --format=csv,noheader
