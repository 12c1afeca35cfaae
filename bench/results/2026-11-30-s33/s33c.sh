#!/usr/bin/env bash
# Session 33, part 2 of the gpu suite, on 2 H200s: the multigpu tests (the CLI's stop and curves paths changed), the
# sweep and out-of-memory gpu tests, then one default GPU run through train, eval (the loss summed in fp64 on the
# device; the activation in the weights), predict from a pipe and plot to stdout.
set -u
cd "$build" || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi -L
timeout 300 ctest -L '^multigpu$' --timeout 280 --output-on-failure > "$OUT/multigpu.log" 2>&1
echo "multigpu rc $?: $(grep -E 'tests passed|tests failed' "$OUT/multigpu.log")"
grep -E '^\s+[0-9]+ - ' "$OUT/multigpu.log" | head
timeout 200 ctest -L '^gpu$' -R 'OutOfDeviceMemory|SweepOnAGpu' -j 2 --timeout 190 --output-on-failure > "$OUT/gpu2.log" 2>&1
echo "gpu part 2 rc $?: $(grep -E 'tests passed|tests failed' "$OUT/gpu2.log")"
grep -E '^\s+[0-9]+ - ' "$OUT/gpu2.log" | head
B="$build/apps/sprintnet/sprintnet"; D="$build_root/data"; R="$OUT/run"
cd "$build_root"
timeout 60 "$B" train configs/mnist_mlp.toml --set data.dir="\"$D\"" --set output.dir="\"$R\"" --set output.name=\"default\" -q > "$OUT/train.log" 2>&1
echo "train rc $?: $(tail -1 "$OUT/train.log")"
timeout 60 "$B" eval "$R/default" > "$OUT/eval.log" 2>&1; echo "eval rc $?: $(grep -E '^loss|^model' "$OUT/eval.log" | tr '\n' ' ')"
timeout 60 "$B" eval "$R/default" --set model.activation=\"tanh\" > "$OUT/eval-tanh.log" 2>&1; echo "eval tanh rc $? (1 expected): $(tail -1 "$OUT/eval-tanh.log" | cut -c1-200)"
timeout 60 bash -c "\"$B\" predict \"$R/default\" <(cat \"$build_root/.carry/ten.idx\") --json" > "$OUT/predict.log" 2>&1; echo "predict pipe rc $?: $(head -c 300 "$OUT/predict.log")"
timeout 60 "$B" plot "$R/default" -o /dev/stdout > "$OUT/plot.png" 2> "$OUT/plot.err"; echo "plot rc $?: $(head -c 8 "$OUT/plot.png" | od -c | head -1) $(cat "$OUT/plot.err")"
gzip -f "$OUT/multigpu.log" "$OUT/gpu2.log"
