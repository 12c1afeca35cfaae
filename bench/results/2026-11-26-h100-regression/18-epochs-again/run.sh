#!/usr/bin/env bash
EXEC='cd $build_root; for r in 1 2 3; do for k in regression cluster; do echo "$k $(SPRINTNET_FUSED_KERNEL=$k timeout 60 $build/bench/epoch_bench --engine fused --precision bf16 --config 1x784x128 --epochs 8 --data $build_root/data 2>/dev/null | grep -o "\"epoch_ms\":\[[^]]*\]")"; done; done;
timeout 60 $build/bench/epoch_bench --engine fused --precision bf16 --config 1x784x128 3x256x128 --epochs 8 --data $build_root/data 2>/dev/null | grep -o "\"config\":\"[^\"]*\"\|\"epoch_ms\":\[[^]]*\]"; nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 14
