# Session 24, run C (one H200): the final code (the review's fixes: run lock a Trainer member, optimizer state
# checked on restore, the training-data fingerprint, the launcher's guards): ctest -L gpu, memcheck on the
# compiled step's resume, the TensorBoard purge through TensorBoard's reader, the GPU bad-input audit.
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 ctest --test-dir "$build" -L gpu -j 4 --output-on-failure > $OUT/ctest-gpu.log 2>&1
echo "ctest rc $?"; grep -E 'tests passed|tests failed|\(Failed\)|Timeout|Total Test time' $OUT/ctest-gpu.log | head -20
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 "$build"/tests/train/train_gpu_test \
  --gtest_filter='CompiledStep.ResumedRun*:TrainerGpu.EveryEngine*' > $OUT/san-memcheck-resume.log 2>&1
echo "memcheck resume rc $? :: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/san-memcheck-resume.log | tr '\n' ' ')"
tb=$(mktemp -d)
"$build"/apps/sprintnet/sprintnet train configs/mnist_mlp.toml --set 'data.dir="data"' --set data.train_limit=2000 \
  --set data.test_limit=500 --set train.epochs=3 --set "output.dir=\"$tb\"" --set output.name=run --set output.progress=none > $OUT/tb-train.log 2>&1
rm -rf $tb/run/checkpoints/epoch-0003 && echo epoch-0002 > $tb/run/checkpoints/latest
"$build"/apps/sprintnet/sprintnet train --resume $tb/run --set output.progress=none >> $OUT/tb-train.log 2>&1
echo "tb resume rc $?"; python3 scripts/check-tensorboard $tb/run 2>&1 | tail -1
build=$build OUT=$OUT timeout 300 bash .carry/gpu-audit.sh > $OUT/gpu-audit.log 2>&1
echo "audit rc $?"
rm -rf $OUT/gpu-audit/*/run
cut -f1-4 $OUT/gpu-audit/summary.tsv | cut -c1-140
