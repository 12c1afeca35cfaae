#!/usr/bin/env bash
# The device data cache and the pinned record pool: the GPU tests they touch, then bench/sweep_bench (16 runs)
# and 10 default runs (the single run).
EXEC='tar -xJf $repo/.carry-extra/new.tar.xz -C $build; for t in data/data_gpu_test memory/pinned_host_pool_gpu_test train/fused_engine_gpu_test train/train_gpu_test train/host_sync_gpu_test sweep/sweep_gpu_test; do timeout 400 $build/tests/$t > $out/$(basename $t).log 2>&1; echo "$t rc=$? $(grep -E "^\[  (PASSED|FAILED) " $out/$(basename $t).log | tr "\n" " ")"; done;
cd $build_root && python3 bench/sweep_bench --build $build --data $build_root/data --out $out/sb --parallel 4,8,0 --repeat 2 --no-jax > $out/sweep-bench.log 2>&1; echo "sweep_bench rc=$?"; tail -n 18 $out/sweep-bench.log; rm -rf $out/sb/*/;
for i in 0 1 2 3 4 5 6 7 8 9 10; do /usr/bin/time -f "%e" -o $out/w.txt "$build"/apps/sprintnet/sprintnet train configs/mnist_mlp.toml --set output.dir=$out/x --set output.progress=none >/dev/null 2>&1; [[ $i -gt 0 ]] && cat $out/w.txt >> $out/walls.txt; done; rm -rf $out/x; echo "default run walls: $(tr "\n" " " < $out/walls.txt)"' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 45
