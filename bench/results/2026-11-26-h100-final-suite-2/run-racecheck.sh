#!/usr/bin/env bash
# racecheck on the fused plan's cluster and split kernels, one case each, the evaluation's grid kernel held to the
# training kernel's block count (SPRINTNET_FUSED_BLOCKS) as before 20a3b43: on all 132 blocks racecheck did not end
# in 300 s.
EXEC='export SPRINTNET_FUSED_BLOCKS=16; fused_sanitizers race-cluster "(cluster kernel)" "Fused/FusedFirstSteps.*/relu_cluster" racecheck; export SPRINTNET_FUSED_BLOCKS=32; fused_sanitizers race-split "(split kernel, 256 wide)" "Fused/FusedFirstSteps.*/narrow_relu_split" racecheck' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 12
