#!/usr/bin/env python3
"""Side-by-side table of bench/epoch_bench and bench/torch_epoch_bench.py rows
(JSON lines, any order, from one run): for each config, sprintnet's time per
epoch, PyTorch's best mode in the same run, the ratio, and the floor from
../shared/BASELINES.md where it gives one. Prints Markdown."""
import json
import sys

# Matrix products alone, bf16, one cuBLAS call each, in a CUDA graph (BASELINES.md), ms per epoch.
FLOORS_MS = {"4x784x128": 21.0, "4x4096x128": 63.0, "1x784x128": 5.8}


def main(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    rows.append(json.loads(line))
    configs = []
    for r in rows:
        if r["config"] not in configs:
            configs.append(r["config"])
    print("| config | sprintnet (mode, precision) ms/epoch | PyTorch best in the same run | ratio | "
          "PyTorch graph bf16 | floor (products only) |")
    print("|---|---|---|---|---|---|")
    for config in configs:
        ours = [r for r in rows if r["config"] == config and r["system"] == "sprintnet"]
        theirs = [r for r in rows if r["config"] == config and r["system"] == "pytorch"]
        if not ours or not theirs:
            continue
        best_ours = min(ours, key=lambda r: r["epoch_ms_median"])
        best_theirs = min(theirs, key=lambda r: r["epoch_ms_median"])
        graph_bf16 = [r for r in theirs if r["mode"] == "graph" and r["precision"] == "bf16"]
        ratio = best_theirs["epoch_ms_median"] / best_ours["epoch_ms_median"]
        floor = FLOORS_MS.get(config)
        graph = f"{graph_bf16[0]['epoch_ms_median']:.1f}" if graph_bf16 else "—"
        floor_text = f"{floor:.1f}" if floor else "—"
        print(f"| {config} | {best_ours['epoch_ms_median']:.1f} ({best_ours['mode']}, {best_ours['precision']}) | "
              f"{best_theirs['epoch_ms_median']:.1f} ({best_theirs['mode']}, {best_theirs['precision']}) | "
              f"**{ratio:.2f}×** | {graph} | {floor_text} |")

if __name__ == "__main__":
    main(sys.argv[1:])
