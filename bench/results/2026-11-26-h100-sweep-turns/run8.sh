#!/usr/bin/env bash
# After the review mends (shares of the GPU, phase timestamps): the turns' sweep test, the fused engine's and the
# trainer's GPU tests from the new build, memcheck on the turns, and a 16-run sweep with its timeline.
EXEC='mkdir -p /tmp/final && tar -xJf .carry-extra/final.tar.xz -C /tmp/final; nb=/tmp/final/build-gpu; cd $build_root;
for t in sweep/sweep_gpu_test train/fused_engine_gpu_test train/train_gpu_test; do timeout 300 $nb/tests/$t > $out/$(basename $t).log 2>&1; echo "$t rc=$? $(grep -E "^\[  (PASSED|FAILED) " $out/$(basename $t).log | tr "\n" " ")"; grep -E "^\[  FAILED  \]" $out/$(basename $t).log | head -n 5; done;
echo "== memcheck sweep turns"; timeout 240 compute-sanitizer --tool memcheck --error-exitcode 99 $nb/tests/sweep/sweep_gpu_test --gtest_filter=SweepOnAGpu.AutoRunsOfTheDefaultWidthSharingTheGpuEqualTheRunsAloneBitForBit > $out/san.log 2>&1; echo "rc=$? $(grep -E "ERROR SUMMARY|PASSED|FAILED" $out/san.log | tr "\n" " ")";
python3 bench/sweep_phases $nb $out/s16 --runs 16 --repeat 2 --timeline > $out/s16.txt 2>&1; grep -o "\"exit_s\": [0-9.]*\|\"first_run_done_s\": [0-9.]*" $out/s16.txt | tr "\n" " "; echo; grep -A1 "runs training at once" $out/s16.txt' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 25
