#!/usr/bin/env bash
# Turns admitting a run when at least half its clusters fit (half: 4 default runs at once on an H100) against exact
# fits (final: 3 at once): 16-run sweeps interleaved, then bench/sweep_bench with half.
EXEC='for v in final half; do mkdir -p /tmp/$v && tar -xJf .carry-extra/$v.tar.xz -C /tmp/$v; done; cd $build_root;
timeout 300 /tmp/half/build-gpu/tests/sweep/sweep_gpu_test > $out/sweep-gpu-test-half.log 2>&1; echo "half sweep_gpu_test rc=$? $(grep -E "^\[  (PASSED|FAILED) " $out/sweep-gpu-test-half.log | tr "\n" " ")";
for r in 1 2 3 4; do for v in final half; do python3 bench/sweep_phases /tmp/$v/build-gpu $out/s16-$v-$r --runs 16 --repeat 1 --timeline > $out/s16-$v-$r.txt 2>&1; echo "$v round $r: $(grep -o "\"exit_s\": [0-9.]*\|\"first_run_done_s\": [0-9.]*" $out/s16-$v-$r.txt | tr "\n" " ")"; done; done;
grep -h -A1 "runs training at once" $out/s16-half-1.txt | tail -n 1;
python3 bench/sweep_bench --build /tmp/half/build-gpu --data $build_root/data --out /tmp/sb --parallel 0 --repeat 3 --no-jax > $out/sweep-bench-half.log 2>&1; echo "sweep_bench rc=$?"; tail -n 4 $out/sweep-bench-half.log; rm -rf /tmp/sb' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 20
