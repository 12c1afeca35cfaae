#!/usr/bin/env bash
# ncu source counters of the cluster kernel (4x128x128, one epoch): per-line instructions and stall samples.
EXEC='cd "$build_root"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader;
timeout 400 ncu --section SourceCounters --section WarpStateStats --section InstructionStats --section SchedulerStats --import-source yes -k regex:cluster --launch-count 1 -o $out/cl $build/bench/epoch_bench --config 4x128x128 --engine fused --precision bf16 --epochs 2 --data $build_root/data > $out/ncu.log 2>&1; echo ncu rc=$?; tail -3 $out/ncu.log;
ncu -i $out/cl.ncu-rep --page details > $out/details.txt 2>&1; grep -iE "stall|warp cycles|issued|eligible|Executed Instructions" $out/details.txt | head -30;
ncu -i $out/cl.ncu-rep --page source --print-source sass --csv > $out/sass.csv 2>$out/sass.err; echo sass rc=$? $(wc -l < $out/sass.csv);
ncu -i $out/cl.ncu-rep --page source --print-source cuda --csv > $out/cuda.csv 2>$out/cuda.err; echo cuda rc=$? $(wc -l < $out/cuda.csv); head -c 300 $out/cuda.err;
ncu -i $out/cl.ncu-rep --page source --print-source cuda,sass --csv > $out/cudasass.csv 2>$out/cs.err; echo cs rc=$? $(wc -l < $out/cudasass.csv);
xz -T4 $out/*.csv; ls -la $out' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 60
