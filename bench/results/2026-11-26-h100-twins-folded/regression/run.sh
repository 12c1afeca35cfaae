#!/usr/bin/env bash
# The compiled step's 1x784x128 epoch: 9.6 ms here against 7.7 in earlier tables. Old (4cc8fbc's bundle) against
# new (the working tree) epoch_bench, interleaved, bf16, compiled, 3 rounds.
EXEC='mkdir -p /tmp/ebx && tar -xJf .carry-extra/ebx.tar.xz -C /tmp/ebx; cd $build_root;
for r in 1 2 3; do for v in old new; do echo "$v r$r $(timeout 120 /tmp/ebx/$v/epoch_bench --engine compiled --precision bf16 --config 1x784x128 4x784x128 --epochs 5 --data $build_root/data 2>/dev/null | grep -o "\"config\":\"[^\"]*\"\|\"epoch_ms_median\":[0-9.]*" | tr "\n" " ")"; done; done | tee $out/ab.txt;
SPRINTNET_VERBOSE=1 timeout 60 /tmp/ebx/new/epoch_bench --engine compiled --precision bf16 --config 1x784x128 --epochs 2 --data $build_root/data 2>&1 | tail -n 5' \
  scripts/gpu-suite exec 2>&1 | grep -v "^$" | tail -n 12
