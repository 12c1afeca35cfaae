# Session 24, run B (one H200): the GPU suite after the audits' fixes, memcheck on the GPU ops the session
# touched, TensorBoard's own reader on a run resumed after a kill between a metrics row and its checkpoint
# (the purge), and the GPU bad-input audit again.
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 ctest --test-dir "$build" -L gpu -j 4 --output-on-failure > $OUT/ctest-gpu.log 2>&1
echo "ctest rc $?"; grep -E 'tests passed|tests failed|\(Failed\)|Timeout|Total Test time' $OUT/ctest-gpu.log | head -20
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 "$build"/tests/ops/ops_gpu_test \
  --gtest_filter='GpuMemory.*:GpuOps.GatherLabels*:GpuOps.CountCorrect*' > $OUT/san-memcheck-ops.log 2>&1
echo "memcheck ops rc $? :: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/san-memcheck-ops.log | tr '\n' ' ')"
# TensorBoard purge: 3 epochs, then the state of a run killed after logging epoch 3 but before checkpointing it.
tb=$(mktemp -d)
"$build"/apps/sprintnet/sprintnet train configs/mnist_mlp.toml --set 'data.dir="data"' --set data.train_limit=2000 \
  --set data.test_limit=500 --set train.epochs=3 --set "output.dir=\"$tb\"" --set output.name=run --set output.progress=none > $OUT/tb-train.log 2>&1
echo "tb train rc $?"
rm -rf $tb/run/checkpoints/epoch-0003 && echo epoch-0002 > $tb/run/checkpoints/latest
"$build"/apps/sprintnet/sprintnet train --resume $tb/run --set output.progress=none >> $OUT/tb-train.log 2>&1
echo "tb resume rc $?; event files: $(ls $tb/run | grep -c tfevents); metrics rows: $(wc -l < $tb/run/metrics.jsonl)"
python3 scripts/check-tensorboard $tb/run 2>&1 | tee $OUT/tb-check.log | tail -8
build=$build OUT=$OUT timeout 300 bash .carry/gpu-audit.sh > $OUT/gpu-audit.log 2>&1
echo "audit rc $?"
rm -rf $OUT/gpu-audit/*/run
cut -f1-4 $OUT/gpu-audit/summary.tsv | cut -c1-150
