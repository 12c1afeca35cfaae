#!/usr/bin/env bash
# gpu-audit.sh: exercise sprintnet's GPU paths with unusual or bad input, one case at a time.
#
#   build=build-gpu OUT=/some/dir bash /work/keep/gpu-audit.sh        (from the repo root)
#
# Every case runs under `timeout 60`; its command, rc, stdout and stderr land in
# $OUT/gpu-audit/<case>/, its training run (if any) in $OUT/gpu-audit/<case>/run, and one line in
# $OUT/gpu-audit/summary.tsv:
#   case  rc  wall_s  last_stderr_line  test_acc  test_loss  train_loss  epochs  note  expected
# (test_acc/test_loss/train_loss/epochs: the last row of the run's metrics.jsonl; note: the engine
# line of the banner "(auto: ...)" / "(device.engine = ...)", or what a compound case found.)
# Nothing is written into the repository. One GPU at most; no clocks changed, no reset.
set -u
export LC_ALL=C

REPO=$(pwd)
build=${build:-build-gpu}
OUT=${OUT:-/tmp/gpu-audit-out}
case "$build" in /*) ;; *) build="$REPO/$build" ;; esac
case "$OUT" in /*) ;; *) OUT="$REPO/$OUT" ;; esac
BIN="$build/apps/sprintnet/sprintnet"
CFG="$REPO/configs/mnist_mlp.toml"
DATA="$REPO/data"
AUD="$OUT/gpu-audit"
SUMMARY="$AUD/summary.tsv"
SCRATCH=$(mktemp -d /tmp/gpu-audit-scratch.XXXXXX)
T_START=$(date +%s.%N)
export BIN CFG DATA AUD SCRATCH REPO

if [ ! -x "$BIN" ]; then
  echo "gpu-audit: $BIN is not an executable (build=$build)" >&2
  exit 2
fi
[ -d "$DATA/mnist" ] || echo "gpu-audit: warning: $DATA/mnist is missing; every training case will fail" >&2

mkdir -p "$AUD"
printf 'case\trc\twall_s\tlast_stderr_line\ttest_acc\ttest_loss\ttrain_loss\tepochs\tnote\texpected\n' > "$SUMMARY"

# Environment, for the record (not a case).
{
  echo "date: $(date -Is)"; echo "repo: $REPO"; echo "binary: $BIN"
  "$BIN" --version 2>&1 | head -n 3
  echo "--- nvidia-smi -L"; timeout 20 nvidia-smi -L 2>&1
  echo "--- nvidia-smi (start)"; timeout 20 nvidia-smi 2>&1
  echo "--- CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-<unset>}"
  echo "--- nproc: $(nproc)"; free -g 2>&1
} > "$AUD/env.txt" 2>&1

# ---------------------------------------------------------------------------------------------
# Helpers

# base DIR: sets the array A to a tiny GPU training command writing its run to DIR/run.
base() {
  A=(train "$CFG"
     --set "data.dir=\"$DATA\"" --set "output.dir=\"$1\"" --set output.name=run
     --set output.progress=plain --set device.name=cuda
     --set data.train_limit=2048 --set data.test_limit=1000 --set train.epochs=2)
}

# one field of a metrics.jsonl row: jfield ROW KEY
jfield() { sed -nE "s/.*\"$2\":([^,}]*).*/\1/p" <<<"$1"; }

# run_case NAME EXPECTED CMD...: runs CMD under timeout 60 in a fresh $AUD/NAME (as CASE_DIR),
# records rc/stdout/stderr and appends a summary line.
run_case() {
  local name=$1 expect=$2; shift 2
  if [ -n "${CASES:-}" ] && [[ " $CASES " != *" $name "* ]]; then return 0; fi
  local dir="$AUD/$name"
  rm -rf "$dir"; mkdir -p "$dir"
  printf '%q ' "$@" > "$dir/cmd"; echo >> "$dir/cmd"
  printf '%s\n' "$expect" > "$dir/expected"
  printf '[%5.0fs] %-24s ' "$(awk -v a="$T_START" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" "$name" >&2
  local t0 t1 rc
  t0=$(date +%s.%N)
  CASE_DIR="$dir" timeout -k 5 60 "$@" > "$dir/stdout" 2> "$dir/stderr" < /dev/null
  rc=$?
  t1=$(date +%s.%N)
  echo "$rc" > "$dir/rc"
  local wall last acc="-" tloss="-" trloss="-" epochs="-" note="-" row eline
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
  last=$(grep -v '^[[:space:]]*$' "$dir/stderr" | tail -n 1 | tr '\t\r' '  ' | cut -c1-400)
  [ -n "$last" ] || last="-"
  if [ -s "$dir/run/metrics.jsonl" ]; then
    row=$(grep -v '^[[:space:]]*$' "$dir/run/metrics.jsonl" | tail -n 1)
    acc=$(jfield "$row" test_accuracy); tloss=$(jfield "$row" test_loss)
    trloss=$(jfield "$row" train_loss); epochs=$(jfield "$row" epoch)
    [ -n "$acc" ] || acc="-"; [ -n "$tloss" ] || tloss="-"; [ -n "$trloss" ] || trloss="-"; [ -n "$epochs" ] || epochs="-"
  fi
  if [ -s "$dir/note" ]; then
    note=$(tr '\t\n\r' '   ' < "$dir/note" | cut -c1-600)
  else
    # The banner's engine line: "<engine, precision ...> (<why>)".
    eline=$(grep -h -m 1 -E '\((auto:|device\.engine = )' "$dir/stdout" "$dir/stderr" 2>/dev/null | head -n 1)
    if [ -n "$eline" ]; then
      note="$(cut -c1-70 <<<"$eline" | tr '\t' ' ') ... $(grep -oE '\((auto:|device\.engine = ).*' <<<"$eline" | cut -c1-220 | tr '\t' ' ')"
    fi
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" "$wall" "$last" "$acc" "$tloss" "$trloss" \
    "$epochs" "$note" "$expect" >> "$SUMMARY"
  printf 'rc=%-3s %6ss  acc=%s  %s\n' "$rc" "$wall" "$acc" "$(cut -c1-110 <<<"$last")" >&2
}

# wait_for_checkpoint RUN PID SECONDS: 0 once RUN/checkpoints/latest exists (and PID lives).
wait_for_checkpoint() {
  local run=$1 pid=$2 n=$(( $3 * 5 ))
  while [ "$n" -gt 0 ]; do
    [ -s "$run/checkpoints/latest" ] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.2; n=$((n - 1))
  done
  return 1
}

# ckpt_epoch NAME: 5 for "epoch-0005", 0 for anything else.
ckpt_epoch() { local e; e=$(sed -nE 's/^epoch-0*([0-9]+)$/\1/p' <<<"$1"); echo "${e:-0}"; }

# epochs_of RUN: the epoch numbers of RUN/metrics.jsonl, space separated.
epochs_of() { sed -nE 's/.*"epoch":([0-9]+).*/\1/p' "$1/metrics.jsonl" 2>/dev/null | tr '\n' ' '; }

# metric_rows RUN: the losses and accuracies of every row (no timings), for comparing two runs.
metric_rows() {
  sed -nE 's/.*"epoch":([0-9]+),"train_loss":([^,]*),"test_loss":([^,]*),"test_accuracy":([^,]*),.*/\1 \2 \3 \4/p' \
    "$1/metrics.jsonl" 2>/dev/null
}

# A background training process that does not inherit the non-interactive shell's SIG_IGN for
# SIGINT (bash ignores SIGINT in background jobs without job control).
DEFSIG_STR=""
env --default-signal=INT true 2>/dev/null && DEFSIG_STR="env --default-signal=INT"
export DEFSIG_STR

# -- compound cases (run as `bash -c FN` so that timeout covers them whole) ---------------------

# SIGKILL a GPU training run mid-way, then --resume it.
case_kill9() {
  local run="$CASE_DIR/run" pid rc1 latest e rc2 left
  base "$CASE_DIR"
  "$BIN" "${A[@]}" --set data.train_limit=0 --set train.epochs=400 --set device.engine=compiled \
    --set 'model.hidden=[1024,1024]' --set schedule.type=constant --set checkpoint.keep_last=2 \
    > "$CASE_DIR/train1.out" 2> "$CASE_DIR/train1.err" < /dev/null &
  pid=$!
  trap 'kill -9 $pid 2>/dev/null' EXIT; trap 'kill -9 $pid 2>/dev/null; exit 124' TERM
  wait_for_checkpoint "$run" "$pid" 30 || printf 'no checkpoint appeared (the run ended early, or took > 30 s); ' >> "$CASE_DIR/note"
  sleep 1.3
  kill -9 "$pid" 2>/dev/null; wait "$pid"; rc1=$?
  latest=$(cat "$run/checkpoints/latest" 2>/dev/null); e=$(ckpt_epoch "$latest")
  left=$(ls -A "$run/checkpoints" 2>/dev/null | tr '\n' ' ')
  echo "killed train rc=$rc1; latest=$latest; checkpoints/: $left; metrics epochs before resume: $(epochs_of "$run")" >&2
  timeout -k 5 35 "$BIN" train --resume "$run" --set "train.epochs=$((e + 2))" --set output.progress=plain < /dev/null
  rc2=$?
  printf 'SIGKILL: train rc=%s (137 expected), latest=%s, checkpoints/ held: %s| resume to %s epochs rc=%s, metrics epochs after: %s(expected 1..%s once each)\n' \
    "$rc1" "$latest" "$left" "$((e + 2))" "$rc2" "$(epochs_of "$run")" "$((e + 2))" >> "$CASE_DIR/note"
  return "$rc2"
}

# SIGINT a GPU training run (fused engine) mid-way: how does it exit; is the checkpoint usable?
case_sigint() {
  local run="$CASE_DIR/run" pid rc1 latest e rc2 rc3 sig
  base "$CASE_DIR"
  # shellcheck disable=SC2086
  $DEFSIG_STR "$BIN" "${A[@]}" --set data.train_limit=0 --set train.epochs=3000 --set device.engine=fused \
    --set schedule.type=constant > "$CASE_DIR/train1.out" 2> "$CASE_DIR/train1.err" < /dev/null &
  pid=$!
  trap 'kill -9 $pid 2>/dev/null' EXIT; trap 'kill -9 $pid 2>/dev/null; exit 124' TERM
  wait_for_checkpoint "$run" "$pid" 30 || printf 'no checkpoint appeared (the run ended early, or took > 30 s); ' >> "$CASE_DIR/note"
  sleep 1.1
  sig=$(grep -E '^Sig(Ign|Cgt)' "/proc/$pid/status" 2>/dev/null | tr '\n\t' '  ')
  kill -INT "$pid" 2>/dev/null
  local n=100; while kill -0 "$pid" 2>/dev/null && [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
  if kill -0 "$pid" 2>/dev/null; then printf 'STILL RUNNING 10 s after SIGINT: killed -9; ' >> "$CASE_DIR/note"; kill -9 "$pid"; fi
  wait "$pid"; rc1=$?
  latest=$(cat "$run/checkpoints/latest" 2>/dev/null); e=$(ckpt_epoch "$latest")
  echo "SIGINT: train rc=$rc1, latest=$latest, checkpoints/: $(ls -A "$run/checkpoints" 2>/dev/null | tr '\n' ' ')" >&2
  timeout -k 5 20 "$BIN" eval "$run/checkpoints/$latest" --device cuda > "$CASE_DIR/eval.out" 2> "$CASE_DIR/eval.err" < /dev/null
  rc2=$?
  timeout -k 5 25 "$BIN" train --resume "$run" --set "train.epochs=$((e + 1))" --set output.progress=plain < /dev/null
  rc3=$?
  printf 'SIGINT: train rc=%s (130 = died of SIGINT; 0/1 with a message = handled) [%s], tail of its stderr: %s| latest=%s; eval of it rc=%s (%s); resume to %s epochs rc=%s, epochs: %s\n' \
    "$rc1" "$sig" "$(grep -v '^[[:space:]]*$' "$CASE_DIR/train1.err" | tail -n 1 | cut -c1-160)" "$latest" "$rc2" \
    "$(grep -m 1 '^loss' "$CASE_DIR/eval.out")" "$((e + 1))" "$rc3" "$(epochs_of "$run")" >> "$CASE_DIR/note"
  [ "$rc2" -eq 0 ] && return "$rc3"
  return "$rc2"
}

# Two training processes on the one GPU at once, same config: both finish, same numbers.
case_two_procs() {
  local pa pb ra rb same
  base "$CASE_DIR"
  local args=("${A[@]}" --set data.train_limit=20000 --set train.epochs=3 --set 'model.hidden=[784,784]'
              --set optim.type=adam --set optim.lr=1e-3)
  "$BIN" "${args[@]}" --set output.name=runA > "$CASE_DIR/a.out" 2> "$CASE_DIR/a.err" < /dev/null & pa=$!
  "$BIN" "${args[@]}" --set output.name=runB > "$CASE_DIR/b.out" 2> "$CASE_DIR/b.err" < /dev/null & pb=$!
  trap 'kill -9 $pa $pb 2>/dev/null' EXIT; trap 'kill -9 $pa $pb 2>/dev/null; exit 124' TERM
  wait "$pa"; ra=$?; wait "$pb"; rb=$?
  if [ ! -s "$CASE_DIR/runA/metrics.jsonl" ] || [ ! -s "$CASE_DIR/runB/metrics.jsonl" ]; then same="n/a (a run has no metrics)"
  elif [ "$(metric_rows "$CASE_DIR/runA")" = "$(metric_rows "$CASE_DIR/runB")" ]; then same=identical
  else same=DIFFERENT; fi
  mkdir -p "$CASE_DIR/run"; cp "$CASE_DIR/runA/metrics.jsonl" "$CASE_DIR/run/" 2>/dev/null
  printf 'A rc=%s, B rc=%s, metrics A vs B: %s; A: %s; B: %s; engine A: %s\n' "$ra" "$rb" "$same" \
    "$(grep -v '^$' "$CASE_DIR/a.err" | tail -n 1 | cut -c1-100)" "$(grep -v '^$' "$CASE_DIR/b.err" | tail -n 1 | cut -c1-100)" \
    "$(grep -m 1 -oE '\((auto:|device\.engine).*' "$CASE_DIR/a.out" | cut -c1-120)" >> "$CASE_DIR/note"
  cat "$CASE_DIR/a.err" "$CASE_DIR/b.err" >&2
  [ "$ra" -eq 0 ] && return "$rb"
  return "$ra"
}

# Resume a run trained elsewhere: copy SRC's run dir in, resume with device.name and epochs.
case_resume_copy() {  # $1: source case, $2: device.name, $3: train.epochs
  local src="$AUD/$1/run"
  if [ ! -s "$src/checkpoints/latest" ]; then echo "source run $src has no checkpoint (its case failed)" >&2; return 99; fi
  cp -a "$src" "$CASE_DIR/run"
  echo "epochs before resume: $(epochs_of "$CASE_DIR/run"); source: $src" >&2
  timeout -k 5 55 "$BIN" train --resume "$CASE_DIR/run" --set "device.name=\"$2\"" --set "train.epochs=$3" \
    --set output.progress=plain < /dev/null
  local rc=$?
  printf 'resume of %s on %s: rc=%s, epochs now: %s(expected 1..%s); banner: %s\n' "$1" "$2" "$rc" \
    "$(epochs_of "$CASE_DIR/run")" "$3" "$(grep -m 1 -oE '\((auto:|device\.engine).*' "$CASE_DIR/stdout" | cut -c1-150)" \
    >> "$CASE_DIR/note"
  return "$rc"
}

# eval --device cuda of a CPU-trained run, beside eval --device cpu of the same run.
case_eval_gpu() {
  local src="$AUD/$1/run" rc
  [ -s "$src/model.safetensors" ] || { echo "source run $src has no model.safetensors (its case failed)" >&2; return 99; }
  timeout -k 5 30 "$BIN" eval "$src" --device cuda --csv "$CASE_DIR/confusion.csv" < /dev/null; rc=$?
  timeout -k 5 25 "$BIN" eval "$src" --device cpu > "$CASE_DIR/cpu-eval.out" 2> "$CASE_DIR/cpu-eval.err" < /dev/null
  printf 'cuda: %s | cpu: %s | the run'"'"'s own last row: acc %s loss %s\n' \
    "$(grep -m 1 '^loss' "$CASE_DIR/stdout")" "$(grep -m 1 '^loss' "$CASE_DIR/cpu-eval.out")" \
    "$(jfield "$(tail -n 1 "$src/metrics.jsonl")" test_accuracy)" "$(jfield "$(tail -n 1 "$src/metrics.jsonl")" test_loss)" \
    >> "$CASE_DIR/note"
  return "$rc"
}

# predict --device cuda of a CPU-trained run on the 10000 test images, against predict --device cpu.
case_predict_gpu() {
  local src="$AUD/$1/run" rc diffs
  [ -s "$src/model.safetensors" ] || { echo "source run $src has no model.safetensors (its case failed)" >&2; return 99; }
  timeout -k 5 30 "$BIN" predict "$src" "$DATA/mnist/t10k-images-idx3-ubyte" --device cuda -k 2 < /dev/null; rc=$?
  timeout -k 5 25 "$BIN" predict "$src" "$DATA/mnist/t10k-images-idx3-ubyte" --device cpu -k 2 \
    > "$CASE_DIR/cpu-predict.out" 2> "$CASE_DIR/cpu-predict.err" < /dev/null
  diffs=$(paste -d '|' <(awk 'NR>1{print $2}' "$CASE_DIR/stdout") <(awk 'NR>1{print $2}' "$CASE_DIR/cpu-predict.out") \
          | awk -F'|' '$1!=$2{n++} END{print n+0}')
  [ -s "$CASE_DIR/stdout" ] && [ -s "$CASE_DIR/cpu-predict.out" ] || diffs="n/a"
  printf 'cuda lines=%s, cpu lines=%s, top-1 classes differing: %s, byte-identical outputs: %s\n' \
    "$(wc -l < "$CASE_DIR/stdout")" "$(wc -l < "$CASE_DIR/cpu-predict.out")" "$diffs" \
    "$(cmp -s "$CASE_DIR/stdout" "$CASE_DIR/cpu-predict.out" && echo yes || echo no)" >> "$CASE_DIR/note"
  return "$rc"
}

# A sweep on the GPU whose lr 1e8 diverges; the other runs must complete.
case_sweep() {
  local rc
  timeout -k 5 55 "$BIN" sweep "$CFG" --set "data.dir=\"$DATA\"" --set device.name=cuda \
    --set data.train_limit=2048 --set data.test_limit=1000 --set train.epochs=2 --set output.progress=none \
    --grid optim.lr=0.05,0.1,1e8 --out "$CASE_DIR/sweep" < /dev/null
  rc=$?
  printf 'sweep rc=%s; summary.csv statuses: %s| accuracies: %s\n' "$rc" \
    "$(awk -F, 'NR>1{print $1"="$3}' "$CASE_DIR/sweep/summary.csv" 2>/dev/null | tr '\n' ' ')" \
    "$(awk -F, 'NR>1{print $1"="$4}' "$CASE_DIR/sweep/summary.csv" 2>/dev/null | tr '\n' ' ')" >> "$CASE_DIR/note"
  return "$rc"
}

export -f base jfield ckpt_epoch wait_for_checkpoint epochs_of metric_rows case_kill9 case_sigint case_two_procs \
  case_resume_copy case_eval_gpu case_predict_gpu case_sweep

# ---------------------------------------------------------------------------------------------
# Cases. Each: run_case NAME "EXPECTED" CMD...

d() { echo "$AUD/$1"; }

# 1. Engines on one config (784-64-64-10 ReLU, SGD momentum, CE): compare the metrics columns.
CMP=(--set 'model.hidden=[64,64]' --set train.epochs=2 --set data.train_limit=4096)
base "$(d ref_cpu)"
run_case ref_cpu "rc 0; CPU fp32 reference for the cmp_* cases" \
  "$BIN" "${A[@]}" "${CMP[@]}" --set device.name=cpu
base "$(d cmp_eager_fp32)"
run_case cmp_eager_fp32 "rc 0; acc/loss ~= ref_cpu (fp32: loss within ~1e-3)" \
  "$BIN" "${A[@]}" "${CMP[@]}" --set device.engine=eager
base "$(d cmp_compiled_fp32)"
run_case cmp_compiled_fp32 "rc 0; acc/loss ~= ref_cpu (fp32: loss within ~1e-3)" \
  "$BIN" "${A[@]}" "${CMP[@]}" --set device.engine=compiled --set device.precision=fp32
base "$(d cmp_compiled_bf16)"
run_case cmp_compiled_bf16 "rc 0; acc within ~1-2 points of ref_cpu" \
  "$BIN" "${A[@]}" "${CMP[@]}" --set device.engine=compiled --set device.precision=bf16
base "$(d cmp_fused_bf16)"
run_case cmp_fused_bf16 "rc 0; acc within ~1-2 points of ref_cpu and cmp_compiled_bf16" \
  "$BIN" "${A[@]}" "${CMP[@]}" --set device.engine=fused --set device.precision=bf16
base "$(d cmp_auto)"
run_case cmp_auto "rc 0; banner: fused, rows kernel (auto: 1-3 hidden layers at most 128 wide); metrics = cmp_fused_bf16" \
  "$BIN" "${A[@]}" "${CMP[@]}" --set device.name=auto

# 2. Every activation on every engine. Per activation one config (optimizer, loss, bias, widths,
#    schedule, drop_last) shared by the three engines, which differ only in precision: compare the
#    three rows of an activation.
ACT_identity=(--set model.activation=identity --set optim.type=sgd --set optim.nesterov=true
  --set loss.label_smoothing=0.1 --set model.bias=false --set 'model.hidden=[33]' --set train.drop_last=false
  --set data.train_limit=1000)
ACT_gelu=(--set model.activation=gelu --set optim.type=adamw --set optim.lr=1e-3 --set optim.weight_decay=0.01
  --set 'model.hidden=[1000]' --set train.eval_batch_size=7)
ACT_tanh=(--set model.activation=tanh --set optim.type=adam --set optim.lr=1e-3 --set loss.type=mse
  --set 'model.hidden=[33,33,33,33]' --set train.drop_last=false --set data.train_limit=1000 --set schedule.type=onecycle)
ACT_sigmoid=(--set model.activation=sigmoid --set optim.lr=0.2 --set loss.label_smoothing=0.2 --set model.bias=false
  --set 'model.hidden=[1,33]' --set train.drop_last=false --set data.train_limit=1000)
ACT_silu=(--set model.activation=silu --set optim.momentum=0 --set optim.lr=0.1 --set loss.type=mse
  --set 'model.hidden=[1000,33]' --set schedule.type=step --set schedule.gamma=0.5 --set schedule.warmup_steps=5)
for act in identity gelu tanh sigmoid silu; do
  declare -n X="ACT_$act"
  case $act in
    identity) cp=fp16; fp=bf16 ;; gelu) cp=bf16; fp=fp16 ;; tanh) cp=tf32; fp=bf16 ;;
    sigmoid) cp=fp16; fp=fp16 ;; silu) cp=bf16; fp=bf16 ;;
  esac
  base "$(d "e_$act")"
  run_case "e_$act" "rc 0; finite losses, acc well above 0.1 (hidden [1..] bottlenecks lower); close to c_$act/f_$act" \
    "$BIN" "${A[@]}" "${X[@]}" --set device.engine=eager --set device.precision=fp32
  base "$(d "c_$act")"
  run_case "c_$act" "rc 0; compiled $cp; acc close to e_$act" \
    "$BIN" "${A[@]}" "${X[@]}" --set device.engine=compiled --set "device.precision=$cp"
  base "$(d "f_$act")"
  run_case "f_$act" "rc 0; fused $fp; acc close to e_$act" \
    "$BIN" "${A[@]}" "${X[@]}" --set device.engine=fused --set "device.precision=$fp"
  unset -n X
done

# 3. Batch edge cases.
B1=(--set train.batch_size=1 --set data.train_limit=512 --set optim.type=adam --set optim.lr=1e-3
    --set 'model.hidden=[64]' --set train.epochs=1 --set train.log_every=100)
base "$(d b1_compiled)"
run_case b1_compiled "rc 0; batch 1 (512 steps) on the compiled step; acc close to b1_fused" \
  "$BIN" "${A[@]}" "${B1[@]}" --set device.engine=compiled
base "$(d b1_fused)"
run_case b1_fused "rc 0; batch 1 on the fused engine; acc close to b1_compiled" \
  "$BIN" "${A[@]}" "${B1[@]}" --set device.engine=fused
base "$(d bigbatch_fused)"
run_case bigbatch_fused "rc 0; batch 4096 > 1000 samples, drop_last=false: one partial step an epoch (grid kernel, fp16)" \
  "$BIN" "${A[@]}" --set train.batch_size=4096 --set data.train_limit=1000 --set train.drop_last=false \
  --set device.engine=fused --set device.precision=fp16 --set optim.lr=0.1
base "$(d small_limit_droplast)"
run_case small_limit_droplast "rc 1; one line: 'mnist/train' has 50 samples, fewer than one batch of 128 (with drop_last)" \
  "$BIN" "${A[@]}" --set data.train_limit=50 --set device.engine=fused
base "$(d small_limit_nodrop)"
run_case small_limit_nodrop "rc 0; train_limit 50 < batch, drop_last=false, test_limit 1: acc is 0 or 1, finite loss" \
  "$BIN" "${A[@]}" --set data.train_limit=50 --set train.drop_last=false --set data.test_limit=1 --set device.engine=compiled

# 4. auto engine choices (device.name left at auto too): check the banner's engine and reason.
base "$(d auto_default)"
run_case auto_default "rc 0; device auto picks cuda:0; banner: fused quads kernel (auto: two hidden layers at most 256 wide trained by SGD)" \
  "$BIN" "${A[@]}" --set device.name=auto
base "$(d auto_adam_split)"
run_case auto_adam_split "rc 0; banner: fused split kernel (auto: 1 to 3 hidden layers all 784 or all 256 wide), bf16" \
  "$BIN" "${A[@]}" --set optim.type=adam --set optim.lr=1e-3
base "$(d auto_regression)"
run_case auto_regression "rc 0; hidden=[]: banner: fused regression kernel (auto: models without a hidden layer); acc ~0.8+" \
  "$BIN" "${A[@]}" --set 'model.hidden=[]' --set optim.lr=0.1
base "$(d auto_bigbatch_eager)"
run_case auto_bigbatch_eager "rc 0; batch 70000 > 60000 samples, drop_last=false: eager fp32 (auto: ... a batch of more than 65535 samples)" \
  "$BIN" "${A[@]}" --set train.batch_size=70000 --set data.train_limit=0 --set train.drop_last=false --set train.epochs=1

# 5. Errors that must be one clear line, rc 1, no crash.
base "$(d fused_too_big)"
run_case fused_too_big "rc 1; 'device.engine = \"fused\" cannot run this model: the model needs N MiB resident ..., more than <L2 limit>'" \
  "$BIN" "${A[@]}" --set 'model.hidden=[4096,4096,4096]' --set device.engine=fused
base "$(d cuda3)"
run_case cuda3 "rc 1; 'device.name = \"cuda:3\": only 1 CUDA device(s)'" \
  "$BIN" "${A[@]}" --set 'device.name="cuda:3"'
base "$(d gpus2)"
run_case gpus2 "rc 1; '--gpus 2: this machine has 1 GPU(s)' before any rank starts" \
  "$BIN" "${A[@]}" --gpus 2
base "$(d oom)"
run_case oom "rc 1; out of device memory (bytes, cuda:0), 2nd line names the config and keys (batch_size, model.hidden) to lower; no abort/segfault" \
  "$BIN" "${A[@]}" --set 'model.hidden=[200000,200000]' --set train.batch_size=60000 --set data.train_limit=0 \
  --set train.drop_last=false --set train.epochs=1
mkdir -p "$SCRATCH/nan"
printf '[data]\ndir = "%s"\n\n[optim]\nlr = nan\n' "$DATA" > "$SCRATCH/nan/nan.toml"
run_case nan_config "rc 1; names nan.toml, line 5, optim.lr: must be a finite number" \
  "$BIN" train "$SCRATCH/nan/nan.toml" --set device.name=cuda --set "output.dir=\"$(d nan_config)\"" --set output.name=run

# 6. Divergence in 16-bit: a clear 'training diverged' error, rc 1, metrics so far kept.
base "$(d diverge_fp16)"
run_case diverge_fp16 "rc 1; 'training diverged: the train loss of epoch 1 is nan at a learning rate of 10000 (try a lower optim.lr)' (fused fp16)" \
  "$BIN" "${A[@]}" --set optim.lr=1e4 --set schedule.type=constant --set device.engine=fused --set device.precision=fp16
base "$(d diverge_bf16)"
run_case diverge_bf16 "rc 1; 'training diverged ... learning rate of 10000' (compiled bf16)" \
  "$BIN" "${A[@]}" --set optim.lr=1e4 --set schedule.type=constant --set device.engine=compiled --set device.precision=bf16

# 7. Checkpoints across devices (sources: ref_cpu trained on the CPU, cmp_auto on the fused engine).
run_case xdev_resume_gpu "rc 0; CPU checkpoint resumed on cuda: epochs 1 2 3, epoch 3 acc >= ~epoch 2's" \
  bash -c 'case_resume_copy ref_cpu cuda 3'
run_case xdev_resume_cpu "rc 0; fused-GPU (bf16) checkpoint resumed on the CPU (fp32): epochs 1 2 3" \
  bash -c 'case_resume_copy cmp_auto cpu 3'
run_case xdev_eval_gpu "rc 0; eval --device cuda of the CPU run: same loss/accuracy as --device cpu and as its metrics" \
  bash -c 'case_eval_gpu ref_cpu'
run_case xdev_predict_gpu "rc 0; predict --device cuda of the CPU run, 10000 images: 0 top-1 classes differ from --device cpu" \
  bash -c 'case_predict_gpu ref_cpu'

# 8. Sweep, kills, two processes.
run_case sweep_diverge "rc 1 ('1 of 3 runs failed'); summary.csv: lr 0.05 and 0.1 done, lr 1e8 failed with 'training diverged'" \
  bash -c case_sweep
run_case kill9_resume "rc 0 (the resume); killed rc 137; latest names a whole checkpoint; resume writes each epoch once" \
  bash -c case_kill9
run_case sigint_resume "rc 0; train rc 130 (no SIGINT handler) or clean 1 with a message; latest checkpoint evaluates and resumes" \
  bash -c case_sigint
run_case two_procs "rc 0; two processes at once on one GPU both finish (split kernel 784), metrics identical" \
  bash -c case_two_procs

# ---------------------------------------------------------------------------------------------
{
  echo "--- nvidia-smi (end)"; timeout 20 nvidia-smi 2>&1
  echo "--- compute apps still on the GPU (should be none)"
  timeout 20 nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv 2>&1
} >> "$AUD/env.txt" 2>&1
rm -rf "$SCRATCH"

total=$(awk -v a="$T_START" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f", b-a}')
echo
echo "gpu-audit: $(($(wc -l < "$SUMMARY") - 1)) cases in ${total} s; summary: $SUMMARY"
awk -F'\t' '{ printf "%-22s %-3s %7s  %-8s %-8s %-8s %s\n", $1, $2, $3, substr($5,1,8), substr($6,1,8), $8, substr($4,1,150) }' "$SUMMARY"
echo
echo "notes (engine / compound findings):"
awk -F'\t' 'NR>1 && $9 != "-" { printf "%-22s %s\n", $1, substr($9,1,400) }' "$SUMMARY"
