#!/usr/bin/env bash
# Fourteenth session, review run: the whole GPU suite (ctest -L gpu) on the committed code, then
# bench/fused_compare for the rows kernel's models beside PyTorch and JAX.
scripts/gpu-suite gpu-tests
FUSED_ARGS="--config 4x128x128 4x64x128" scripts/gpu-suite compare
