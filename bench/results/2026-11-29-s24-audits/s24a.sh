# Session 24, run A (one H200): ctest -L gpu, then the GPU bad-input audit (.carry/gpu-audit.sh).
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 ctest --test-dir "$build" -L gpu -j 4 --output-on-failure > $OUT/ctest-gpu.log 2>&1
echo "ctest rc $?"; grep -E 'tests passed|tests failed|\(Failed\)|Timeout|Total Test time' $OUT/ctest-gpu.log | head -20
build=$build OUT=$OUT timeout 330 bash .carry/gpu-audit.sh > $OUT/gpu-audit.log 2>&1
echo "audit rc $?"
cd $OUT && tar czf gpu-audit.tgz gpu-audit 2>/dev/null; rm -rf $OUT/gpu-audit/*/run
tail -c 2500 $OUT/gpu-audit.log
