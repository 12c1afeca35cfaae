# Session 24, run D (one H200): after the run lock went back into fit() (run C's one failure): ctest -L gpu whole,
# memcheck on the compiled step's resume, and the GPU audit's resume cases.
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 ctest --test-dir "$build" -L gpu -j 4 --output-on-failure > $OUT/ctest-gpu.log 2>&1
echo "ctest rc $?"; grep -E 'tests passed|tests failed|\(Failed\)|Timeout|Total Test time' $OUT/ctest-gpu.log | head -20
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 "$build"/tests/train/train_gpu_test \
  --gtest_filter='CompiledStep.ResumedRun*:TrainerGpu.EveryEngine*' > $OUT/san-memcheck-resume.log 2>&1
echo "memcheck resume rc $? :: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/san-memcheck-resume.log | tr '\n' ' ')"
CASES="ref_cpu cmp_auto xdev_resume_gpu xdev_resume_cpu sweep_diverge kill9_resume sigint_resume two_procs" \
  build=$build OUT=$OUT timeout 200 bash .carry/gpu-audit.sh > $OUT/gpu-audit.log 2>&1
echo "audit rc $?"; rm -rf $OUT/gpu-audit/*/run
cut -f1-4 $OUT/gpu-audit/summary.tsv | cut -c1-140
