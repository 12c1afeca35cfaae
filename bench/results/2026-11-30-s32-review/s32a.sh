#!/usr/bin/env bash
# Session 32: fp16's loss scaling kept in checkpoints (the compiled CUDA step and the fused engine): the new resume
# test, then the train and fused gpu tests whole; an fp16 CLI run killed by a stop request and resumed.
set -u
cd "$build" || exit 1
nvidia-smi -L
timeout 200 tests/train/train_gpu_test --gtest_filter='*Fp16*' > "$OUT/fp16-resume.log" 2>&1; echo "fp16 resume rc $?"
grep -E "loss scale|OK|FAILED|Failure|error|Expected|Which is|relative" "$OUT/fp16-resume.log" | head -30
timeout 330 ctest -L '^gpu$' -R 'CompiledStep|TrainerGpu|Fused|Train' -j 3 --timeout 300 > "$OUT/ctest-gpu.log" 2>&1; echo "ctest rc $?"
grep -E "tests passed|tests failed|\(Failed\)|Not Run|Timeout" "$OUT/ctest-gpu.log" | head -30
gzip -f "$OUT/ctest-gpu.log"
cd "$build_root"
mkdir -p "$OUT/run"
S="--set data.dir=\"$build_root/data\" --set output.dir=\"$OUT/run\" --set output.name=\"fp16\" --set device.precision=\"fp16\" --set train.epochs=3 --set optim.lr=0.2"
eval timeout 60 "$build/apps/sprintnet/sprintnet" train configs/mnist_mlp.toml $S > "$OUT/train-fp16.log" 2>&1
echo "train rc $?"; grep -E "^epoch|engine|fused|compiled" "$OUT/train-fp16.log" | head -6
grep -o '"loss_scale[^,]*' "$OUT"/run/fp16/checkpoints/epoch-0003/state.safetensors | head -3
