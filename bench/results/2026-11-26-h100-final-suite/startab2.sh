# EXEC body: the default run, the CLI before this change (an old CLI, xz-compressed, carried beside the bundle) against after,
# interleaved, 6 rounds after a warm-up: wall s, "weights and optimizer state from the engine" s.
cd "$build_root"
new="$build"/apps/sprintnet/sprintnet; old=/tmp/sprintnet-old; xz -dc "$repo/an old CLI, xz-compressed, carried beside the bundle" > $old; chmod +x $old
"$new" train configs/mnist_mlp.toml --set 'output.dir="'$out'/ab"' --set 'output.progress="none"' >/dev/null 2>&1
for round in 0 1 2 3 4 5; do
  for which in old new; do
    bin=$new; [[ $which == old ]] && bin=$old
    s=$(date +%s.%N)
    "$bin" train -v configs/mnist_mlp.toml --set 'output.dir="'$out'/ab"' --set 'output.progress="none"' >"$out/ab.log" 2>&1
    e=$(date +%s.%N)
    echo "$which $(awk "BEGIN {printf \"%.3f\", $e - $s}") $(grep -E 'from the engine' "$out/ab.log" | awk '{print $(NF-1)}')"
  done
done | tee "$out/startab2.txt"
for w in old new; do echo "$w median wall $(grep "^$w " "$out/startab2.txt" | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {print (a[3]+a[4])/2}') store $(grep "^$w " "$out/startab2.txt" | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {print (a[3]+a[4])/2}')"; done
rm -rf "$out/ab"
