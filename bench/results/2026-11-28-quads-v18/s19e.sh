#!/usr/bin/env bash
set -u
b=$build
cd $build_root
SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_KERNEL=quads timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config 3x256x128 --engine fused --epochs 3 2>&1 | grep -i 'profile' | tail -1
SPRINTNET_FUSED_PROFILE=1 SPRINTNET_FUSED_KERNEL=quads SPRINTNET_FUSED_PROFILE_BLOCK=6 timeout 60 $b/bench/epoch_bench --precision bf16 --data $build_root/data --config 3x256x128 --engine fused --epochs 3 2>&1 | grep -i 'profile' | tail -1
