#!/usr/bin/env bash
# Everything in tools/ that needs PyTorch, in one go, for a machine that has it (the GPU
# machine: no network needed). Run from the repository root; results go to $OUT:
#   golden/mlp_sgd_adamw.safetensors   -> commit as tests/parity/golden/mlp_sgd_adamw.safetensors
#   docs/parity_mnist.png              -> the sprintnet vs PyTorch curves, for docs/
#   runs/, *.log                       -> the evidence: metrics, weight comparisons, port tests
# sprintnet itself comes from .carry/gpu-bundle.tar.xz (scripts/gpu-bundle), as in
# scripts/gpu-suite, unless SPRINTNET names a binary. SHORT_DEVICES (default "cpu cuda") and
# FULL_DEVICE (default cuda) choose the devices; FULL_SET adds --set overrides to the full run.
set -uo pipefail
out=${OUT:-$PWD/parity-out}
mkdir -p "$out/golden" "$out/runs" "$out/docs"
status=0
step() { echo "== $*"; }
# check CMD...: runs it, remembering a failure. logged LOG CMD...: the same, output also in LOG.
check() { "$@" || { echo "FAILED: $*"; status=1; }; }
logged() {
  local log=$1
  shift
  "$@" 2>&1 | tee "$log"
  [[ ${PIPESTATUS[0]} == 0 ]] || { echo "FAILED: $*"; status=1; }
}

step "golden data for tests/parity"
logged "$out/make_golden.log" python3 tools/make_golden.py --out "$out/golden/"
step "the Python port against sprintnet's known answers"
logged "$out/test_sprintnet_port.log" python3 tools/test_sprintnet_port.py

sn=${SPRINTNET:-}
if [[ -z $sn ]]; then
  stage=$(mktemp -d)
  tar -xJf .carry/gpu-bundle.tar.xz -C "$stage"
  export LD_LIBRARY_PATH=$stage/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  sn=$stage/build-gpu/apps/sprintnet/sprintnet
  mkdir -p data/mnist
  for f in "$stage"/data/mnist/*; do [[ -e data/mnist/$(basename "$f") ]] || cp "$f" data/mnist/; done
fi

# Short runs (2048 samples, 2 epochs = 32 steps): final weights compared with PyTorch fp32 on
# the same device and with an fp64 CPU run, which shows which side left the exact path if the
# two fp32 runs part.
for dev in ${SHORT_DEVICES:-cpu cuda}; do
  run=$out/runs/short_$dev
  step "short run on $dev"
  check "$sn" train configs/mnist_mlp.toml -q --set data.train_limit=2048 --set train.epochs=2 \
    --set device.name="$dev" --set output.dir="$out/runs" --set output.name="short_$dev"
  # fp32 against fp32 informs; fp64 decides (two fp32 runs may part at a ReLU input rounded across zero).
  # A single switched ReLU in 32 steps leaves fp32 ~3e-4 from fp64 and a few leave ~2e-3
  # (tests/train/fp32_drift_test.cpp shows why): 3e-3 separates that from a wrong op (> 1e-2).
  python3 tools/torch_reference.py --config "$run/config.toml" --device "$dev" \
    --out "$run/reference.jsonl" --save-weights "$run/reference.safetensors" \
    --compare-weights "$run/model.safetensors" 2>&1 | tee "$run/compare_fp32.log"
  logged "$run/compare_fp64.log" python3 tools/torch_reference.py --config "$run/config.toml" --device cpu \
    --dtype fp64 --out "$run/reference_fp64.jsonl" --compare-weights "$run/model.safetensors" --tolerance 3e-3
done

# The full default run (configs/mnist_mlp.toml) by both, and the plot.
full=${FULL_DEVICE:-cuda}
run=$out/runs/mnist_$full
step "full run on $full"
# shellcheck disable=SC2086  # FULL_SET is a list of --set arguments
check "$sn" train configs/mnist_mlp.toml -q --set device.name="$full" --set output.dir="$out/runs" \
  --set output.name="mnist_$full" ${FULL_SET:-}
logged "$run/reference.log" python3 tools/torch_reference.py --config "$run/config.toml" --device "$full" \
  --out "$run/reference.jsonl" --step-losses "$run/reference_steps.jsonl"
check python3 tools/plot_loss_curves.py --out "$out/docs/parity_mnist.png" \
  --title "MNIST 784-256-256-10, SGD momentum, cosine: sprintnet vs PyTorch ($full)" \
  --run sprintnet="$run/metrics.jsonl" --run pytorch="$run/reference.jsonl" --steps pytorch="$run/reference_steps.jsonl"
# Checkpoints are large and not evidence of anything here.
rm -rf "$out"/runs/*/checkpoints
echo "parity_gpu_run: $([[ $status == 0 ]] && echo all steps passed || echo SOME STEPS FAILED), results in $out"
exit $status
