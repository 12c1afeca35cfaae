# EXEC body: the split kernel before (old CLI, .carry-mini/sprintnet-old) and after this change (the bundle's
# CLI), same machine, interleaved: epoch ms (median of epochs 2..) and a hash of the final weights'
# and the last checkpoint's tensor bytes (bit-identical expected).
cd "$build_root"
new="$build"/apps/sprintnet/sprintnet
old=/tmp/sprintnet-old; xz -dc "$repo/.carry-mini/sprintnet-old.xz" > "$old"
chmod +x "$old"
data_hash() { python3 - "$@" <<'PY'
import sys, struct, hashlib
h = hashlib.sha256()
for f in sys.argv[1:]:
    b = open(f, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h.update(b[8 + n:])
print(h.hexdigest()[:16])
PY
}
n=0
one() {  # label binary epochs overrides...
  local label=$1 bin=$2 epochs=$3; shift 3
  local sets=()
  for o in "$@"; do sets+=(--set "$o"); done
  n=$((n + 1)); local dir=$out/cmp/$n  # a folder a run: matplotlib may still write the last one's curves.png
  "$bin" train configs/mnist_mlp.toml --set train.epochs=$epochs --set 'output.dir="'$dir'"' --set 'output.name="r"' \
    --set 'output.progress="none"' "${sets[@]}" >"$out/cmp.log" 2>&1 || { echo "$label FAILED"; tail -3 "$out/cmp.log"; return; }
  local ms=$(python3 -c "import json,statistics as s;r=[json.loads(l) for l in open('$dir/r/metrics.jsonl')];print(round(1000*s.median([x['epoch_time_s'] for x in r[1:]]),2), round(100*r[-1]['test_accuracy'],2))")
  echo "$label ms,acc: $ms weights $(data_hash "$dir"/r/model.safetensors) state $(data_hash "$dir"/r/checkpoints/epoch-*/state.safetensors) $(grep -o '([0-9]* barriers a step)' "$out/cmp.log")"
}
for round in 0 1; do
  while IFS='|' read -r name epochs sets; do
    for which in old new; do
      bin=$new; [[ $which == old ]] && bin=$old
      # shellcheck disable=SC2086
      one "$name $which r$round" "$bin" "$epochs" $sets
    done
  done <<'MODELS'
default-3x256x128|5|
4x256x128|5|model.hidden=[256,256,256]
2x256x128|5|model.hidden=[256]
4x784x128|5|model.hidden=[784,784,784]
2x784x128|5|model.hidden=[784]
4x784x128-gelu|4|model.hidden=[784,784,784] model.activation="gelu"
4x784x128-tanh|4|model.hidden=[784,784,784] model.activation="tanh"
4x784x128-adam|4|model.hidden=[784,784,784] optim.type="adam" optim.lr=0.001
4x784x32|3|model.hidden=[784,784,784] train.batch_size=32
MODELS
done
