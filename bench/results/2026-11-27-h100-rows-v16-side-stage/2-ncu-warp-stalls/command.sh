#!/usr/bin/env bash
# Sixteenth session: where the rows kernel's warps stall (ncu warp states and PC sampling on one epoch launch
# of 4x128x128), and its SASS (the instruction-cache question: ~175 KB of code an instantiation).
set -u
cd "$build_root"
bin=$build/bench/epoch_bench_v1
which ncu cuobjdump nvdisasm
cuobjdump -sass "$bin" > "$out/all.sass" 2>"$out/cuobjdump.err"; echo "cuobjdump rc $?"
python3 - "$out/all.sass" > "$out/rows-sizes.txt" <<'PY'
import re,sys
name=None; counts={}
for line in open(sys.argv[1]):
    m=re.search(r'Function : (\S+)',line)
    if m: name=m.group(1); counts[name]=0; continue
    if name and re.match(r'\s+/\*[0-9a-f]{4,}\*/',line): counts[name]+=1
for k,v in sorted(counts.items(), key=lambda x:-x[1])[:40]: print(v,k)
PY
grep rows_epoch "$out/rows-sizes.txt" | head -n 4
python3 - "$out/all.sass" > "$out/rows-sgd-relu.sass" <<'PY'
import re,sys
keep=False
for line in open(sys.argv[1]):
    if 'Function :' in line: keep = 'rows_epoch_kernel' in line and 'UpdateFormE0ELNS0_14ActivationKindE1E' in line
    if keep: sys.stdout.write(line)
PY
rm -f "$out/all.sass"; wc -l "$out/rows-sgd-relu.sass"
timeout 300 ncu --clock-control none -k regex:rows_epoch_kernel --launch-skip 1 --launch-count 1 \
  --section WarpStateStats --section InstructionStats --section SchedulerStats --section SourceCounters --section LaunchStats \
  -o "$out/rows" "$bin" --precision bf16 --data "$build_root/data" --engine fused --epochs 2 --config 4x128x128 > "$out/ncu.log" 2>&1
echo "ncu rc $?"; tail -n 5 "$out/ncu.log"
ncu -i "$out/rows.ncu-rep" --page details > "$out/details.txt" 2>&1; echo "details rc $?"
cat "$out/details.txt" | head -n 150
ncu -i "$out/rows.ncu-rep" --page source --csv --print-source sass > "$out/source-sass.csv" 2>&1; echo "source rc $?"
rm -f "$out/rows.ncu-rep"; ls -la "$out"
