#!/usr/bin/env bash
# Device run 1 (2026-11-26, fourth session): HEAD's GPU suite, racecheck on a split case, and the sweep with SM turns
# (new CLI from .carry-extra/turns.tar.xz) against HEAD's CLI, interleaved, with timelines.
EXEC='mkdir -p /tmp/new && tar -xJf .carry-extra/turns.tar.xz -C /tmp/new && ls /tmp/new/build-gpu/apps/sprintnet/;
/tmp/new/build-gpu/tests/train/sm_turns_test 2>&1 | tail -n 2;
timeout 200 /tmp/new/build-gpu/tests/sweep/sweep_gpu_test > $out/sweep-gpu-test-new.log 2>&1; echo "new sweep_gpu_test rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure|OK \]" $out/sweep-gpu-test-new.log | tail -n 8;
cd $build_root;
for r in 1 2 3; do for v in old new; do b=$build; [[ $v == new ]] && b=/tmp/new/build-gpu;
  echo "== sweep $v round $r"; python3 bench/sweep_phases $b $out/sp-$v-$r --runs 16 --repeat 1 --timeline --sweep-args "--set data.dir=\"$build_root/data\"" 2>&1 | tee $out/sweep-$v-$r.txt | head -c 300; echo; done; done;
for p in 4 12 16; do echo "== new --parallel $p"; python3 bench/sweep_phases /tmp/new/build-gpu $out/spp-$p --runs 16 --repeat 2 --timeline --sweep-args "--parallel $p --set data.dir=\"$build_root/data\"" > $out/sweep-new-p$p.txt 2>&1; grep -o "\"exit_s\": [0-9.]*" $out/sweep-new-p$p.txt | tr "\n" " "; echo; done;
python3 bench/sweep_bench --build /tmp/new/build-gpu --data $build_root/data --out $out/sb --parallel 0 --repeat 3 --no-jax > $out/sweep-bench-new.log 2>&1; echo "sweep_bench rc=$?"; tail -n 5 $out/sweep-bench-new.log; rm -rf $out/sb;
for v in old new; do grep -ho "\"exit_s\": [0-9.]*" $out/sweep-$v-*.txt | tr "\n" " " | sed "s/^/$v: /"; echo; done;
echo "== racecheck narrow_relu_split (HEAD, 32 blocks)"; SPRINTNET_FUSED_BLOCKS=32 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 99 $build/tests/train/fused_engine_gpu_test --gtest_filter="Fused/FusedFirstSteps.*/narrow_relu_split" > $out/race-split.log 2>&1; echo "rc=$?"; grep -E "RACECHECK SUMMARY|PASSED|FAILED|epoch" $out/race-split.log | tail -n 4' \
  scripts/gpu-suite exec gpu-tests 2>&1 | grep -v "^$" | tail -n 60
