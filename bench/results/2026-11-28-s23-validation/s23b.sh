# Session 23, run B (one H200): racecheck on the fused kernels' cases, three groups side by side
# (the 7 cases in one process ran past 200 s in run A).
f=$build/tests/train/fused_engine_gpu_test
g1='Fused/FusedFirstSteps.*/relu_split:Fused/FusedFirstSteps.*/narrow_default_model_split'
g2='Fused/FusedFirstSteps.*/adam_rows:Fused/FusedFirstSteps.*/narrow_rows'
g3='Fused/FusedFirstSteps.*/default_model_quads:Fused/FusedFirstSteps.*/partial_batch_quads:Fused/FusedFirstSteps.*/relu_cluster'
i=0
for g in "$g1" "$g2" "$g3"; do
  i=$((i+1))
  ( SPRINTNET_FUSED_BLOCKS=16 timeout 500 compute-sanitizer --tool racecheck --error-exitcode 99 $f --gtest_filter="$g" > $OUT/san-racecheck-fused-$i.log 2>&1
    echo "racecheck group $i rc $? :: $(grep -E 'RACECHECK SUMMARY|tests? ran|PASSED|FAILED' $OUT/san-racecheck-fused-$i.log | tr '\n' ' ')" ) &
done
wait
