#!/usr/bin/env bash
# Session 33: the ops and fused-engine gpu tests at HEAD with the flat optimizer's test hunted for its one failure
# (12 loops of fresh processes, each a fresh seed, beside the suite's load), then racecheck and synccheck on one
# case of each fused kernel and on the flat optimizer.
set -u
cd "$build" || exit 1
S=$(date +%s); el() { echo "   (elapsed $(( $(date +%s) - S )) s)"; }
nvidia-smi -L
mkdir -p "$OUT/hunt"
hunt() {  # loop $1: fresh processes until the deadline; keep the log of any failure
  local n=0 f=0
  while (( $(date +%s) < S + 190 )); do
    n=$((n+1))
    if ! tests/ops/ops_gpu_test --gtest_filter='GpuStepKernels.Flat*' > "$OUT/hunt/l$1.log" 2>&1; then
      f=$((f+1)); cp "$OUT/hunt/l$1.log" "$OUT/hunt/fail-l$1-$n.log"
    fi
  done
  echo "$n $f" > "$OUT/hunt/count-$1"
}
for l in $(seq 1 12); do hunt $l & done
timeout 185 tests/ops/ops_gpu_test --gtest_brief=1 > "$OUT/ops-gpu.log" 2>&1 &
op=$!
timeout 185 tests/train/fused_engine_gpu_test --gtest_brief=1 > "$OUT/fused-gpu.log" 2>&1 &
fp=$!
wait $op; echo "ops_gpu_test rc $?: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/ops-gpu.log" | head -8 | tr '\n' ' ')"
wait $fp; echo "fused_engine_gpu_test rc $?: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/fused-gpu.log" | head -8 | tr '\n' ' ')"
wait
tot=0; fails=0; for c in "$OUT"/hunt/count-*; do read n f < "$c"; tot=$((tot+n)); fails=$((fails+f)); done
echo "flat optimizer hunt: $tot processes, $fails failed"; ls "$OUT/hunt" | grep fail | head
for f in "$OUT"/hunt/fail-*; do [ -f "$f" ] && grep -E 'seed|Failure|change of|Expected|Which is|tolerance' "$f" | head -12; done
rm -f "$OUT"/hunt/l*.log; el
P='Fused/FusedFirstSteps.MatchTheCpuFp32ReferencePerTensor/'
cases="${P}relu_rows:${P}default_model_quads:${P}narrow_default_model_split:${P}relu_cluster:${P}sgd_plain_regression"
left() { echo $(( 575 - ($(date +%s) - S) )); }
t=$(left); (( t > 200 )) && t=200
timeout $t compute-sanitizer --tool racecheck tests/train/fused_engine_gpu_test --gtest_filter="$cases" > "$OUT/racecheck-fused.log" 2>&1
echo "racecheck fused rc $?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED|^\[       OK' "$OUT/racecheck-fused.log" | tr '\n' ' ')"; el
t=$(left); (( t > 130 )) && t=130
timeout $t compute-sanitizer --tool synccheck tests/train/fused_engine_gpu_test --gtest_filter="$cases" > "$OUT/synccheck-fused.log" 2>&1
echo "synccheck fused rc $?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED|^\[       OK' "$OUT/synccheck-fused.log" | tr '\n' ' ')"; el
t=$(left); (( t > 60 )) && t=60
timeout $t compute-sanitizer --tool racecheck tests/ops/ops_gpu_test --gtest_filter='GpuStepKernels.Flat*' > "$OUT/racecheck-flat.log" 2>&1
echo "racecheck flat rc $?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$OUT/racecheck-flat.log" | tr '\n' ' ')"; el
gzip -f "$OUT"/*.log
