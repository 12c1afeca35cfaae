#!/usr/bin/env bash
# A/B/C of the default run, interleaved, 9 rounds after a warm-up: base; SN_LAB_NO_PRELOAD=1 (no cuBLASLt dlopen
# beside the context); CUDA_DEVICE_MAX_CONNECTIONS=1. Wall (s) and the device start-up phase (s), medians.
EXEC='cd "$build_root"; run() { env $2 /usr/bin/time -f "wall %e" "$build"/apps/sprintnet/sprintnet train configs/mnist_mlp.toml -v --set output.dir=$out/x --set output.progress=none > $out/one.log 2>&1; echo "$1 $(grep -h "^wall" $out/one.log | cut -d" " -f2) $(grep -h "device start-up" $out/one.log | awk "{print \$3}") $(grep -h "model and optimizer" $out/one.log | awk "{print \$4}") $(grep -h "phases of the" $out/one.log | awk "{print \$4}")" >> $out/ab.txt; }
run warm X=1; : > $out/ab.txt
for r in 1 2 3 4 5 6 7 8 9; do run base X=1; run nopre SN_LAB_NO_PRELOAD=1; run conn1 CUDA_DEVICE_MAX_CONNECTIONS=1; done
rm -rf $out/x; for v in base nopre conn1; do grep "^$v " $out/ab.txt | awk -v v=$v "{w[NR]=\$2; d[NR]=\$3; m[NR]=\$4; p[NR]=\$5} END {n=asort(w); asort(d); asort(m); asort(p); printf \"%s n=%d wall median %s (min %s max %s) device %s model %s inproc %s\n\", v, n, w[5], w[1], w[n], d[5], m[5], p[5]}"; done; cat $out/ab.txt | tr "\n" ";"' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 12
