#!/usr/bin/env bash
# Session 2026-11-26 (third): the full GPU suite of the 6c18804 bundle (HEAD's GPU code), the start-up stage,
# then 10 more default runs for a steadier median.
EXEC='cd "$build_root"; for i in 0 1 2 3 4 5 6 7 8 9 10; do /usr/bin/time -f "%e" -o $out/w.txt "$build"/apps/sprintnet/sprintnet train configs/mnist_mlp.toml --set output.dir=$out/x --set output.progress=none >/dev/null 2>&1; [[ $i -gt 0 ]] && cat $out/w.txt >> $out/extra-walls.txt; done; rm -rf $out/x; echo "extra walls: $(tr "\n" " " < $out/extra-walls.txt) median $(sort -n $out/extra-walls.txt | sed -n 5,6p | tr "\n" " ")"' \
  scripts/gpu-suite exec gpu-tests startup 2>&1 | grep -v "^$" | tail -n 60
