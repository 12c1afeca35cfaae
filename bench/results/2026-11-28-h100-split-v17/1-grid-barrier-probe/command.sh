#!/usr/bin/env bash
# The slice's load after the grid barrier, by cp.async, bulk copies or loads (bench/lab/grid_barrier_probe.cu).
set -u
cd "$build_root"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 .carry-mini/grid_barrier_probe 20000 2>&1 | tee "$out/grid-barrier-probe.log"
