#!/usr/bin/env bash
# Issue 12 on the GPU machine's host CPU: the compiled CPU step's tests, then bench/run's CPU section (1, 2, 4, 16
# threads, sprintnet and PyTorch interleaved, 3 rounds, no GEMM table).
BENCH_ARGS="--no-gemm-table --cpu-rounds 3" scripts/gpu-suite cpu 2>&1 | grep -v "^$" | tail -n 30
