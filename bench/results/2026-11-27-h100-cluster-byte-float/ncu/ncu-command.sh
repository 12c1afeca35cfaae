#!/usr/bin/env bash
# ncu on the final cluster kernel (4x128x128, bf16 SGD ReLU, one epoch): warp states, scheduler, instructions.
export EXEC='cd "$build_root"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader;
timeout 400 ncu --section SourceCounters --section WarpStateStats --section InstructionStats --section SchedulerStats --section LaunchStats --section Occupancy -k regex:cluster --launch-count 1 -o $out/cl $build/bench/epoch_bench --config 4x128x128 --engine fused --precision bf16 --epochs 2 --data $build_root/data > $out/ncu.log 2>&1; echo ncu rc=$?; tail -3 $out/ncu.log;
ncu -i $out/cl.ncu-rep --page details > $out/details.txt 2>&1; grep -iE "stall|warp cycles|issued|eligible|Executed Instructions|Registers|Local" $out/details.txt | head -40;
ncu -i $out/cl.ncu-rep --page raw --csv > $out/raw.csv 2>&1; echo raw rc=$? $(wc -c < $out/raw.csv);
ncu -i $out/cl.ncu-rep --page source --print-source cuda --csv > $out/cuda.csv 2>$out/cuda.err; echo cuda rc=$? $(wc -l < $out/cuda.csv);
xz -T4 $out/*.csv; rm -f $out/cl.ncu-rep; ls -la $out'
scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 60
