#include "sprintnet/sweep/sweep_plot.h"

#include <fmt/format.h>

#include "sprintnet/io/atomic_file.h"
#include "sprintnet/plot/python_job.h"

namespace sprintnet::sweep {
namespace {

constexpr const char* kScript = R"PY(#!/usr/bin/env python3
"""Draws a sprintnet sweep's pictures: python3 plot_sweep.py SWEEP_DIR (needs matplotlib)."""
import csv
import json
import os
import statistics
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

d = sys.argv[1]
runs = list(csv.DictReader(open(os.path.join(d, "summary.csv"))))
done = [r for r in runs if r["status"] == "done"]
values = {}
for r in done:
    pairs = dict(o.split("=", 1) for o in r["overrides"].split(";") if o)
    pairs.pop("seed", None)
    r["pairs"] = pairs
    for k, v in pairs.items():
        values.setdefault(k, set()).add(v)


def number(v):
    try:
        return float(v)
    except ValueError:
        return None


for key in sorted(values):
    fig, ax = plt.subplots(figsize=(6, 4))
    others = sorted({tuple(sorted((k, v) for k, v in r["pairs"].items() if k != key)) for r in done})
    for other in others:
        xs, means, stds = [], [], []
        for v in sorted(values[key], key=lambda v: (number(v) is None, number(v) or 0, v)):
            acc = [100 * float(r["final_test_accuracy"]) for r in done
                   if r["pairs"].get(key) == v and tuple(sorted((k, w) for k, w in r["pairs"].items() if k != key)) == other]
            if acc:
                xs.append(v)
                means.append(statistics.mean(acc))
                stds.append(statistics.stdev(acc) if len(acc) > 1 else 0.0)
        label = ", ".join(f"{k}={v}" for k, v in other) or None
        numeric = all(number(x) is not None for x in xs)
        ax.errorbar([number(x) for x in xs] if numeric else xs, means, yerr=stds, marker="o", capsize=3, label=label)
        if numeric and len(xs) > 2 and min(number(x) for x in xs) > 0 and max(number(x) for x in xs) / min(number(x) for x in xs) > 20:
            ax.set_xscale("log")
    ax.set_xlabel(key)
    ax.set_ylabel("test accuracy % (mean ± sd over seeds)")
    ax.grid(True, alpha=0.3)
    if len(others) > 1:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(d, f"accuracy_vs_{key}.png"), dpi=120)
    plt.close(fig)

best = sorted(done, key=lambda r: -float(r["final_test_accuracy"]))[:5]
fig, ax = plt.subplots(figsize=(6, 4))
for r in best:
    path = os.path.join(d, r["name"], "metrics.jsonl")
    if not os.path.exists(path):
        continue
    rows = [json.loads(line) for line in open(path) if line.strip()]
    ax.plot([x["epoch"] for x in rows], [x["train_loss"] for x in rows], marker=".",
            label=f"{r['name']} ({100 * float(r['final_test_accuracy']):.2f} %)")
ax.set_xlabel("epoch")
ax.set_ylabel("train loss")
ax.set_yscale("log")
ax.grid(True, alpha=0.3)
ax.legend(fontsize=6)
fig.tight_layout()
fig.savefig(os.path.join(d, "best_loss_curves.png"), dpi=120)
print("plots:", ", ".join(sorted(f for f in os.listdir(d) if f.endswith(".png"))))
)PY";

}  // namespace

std::string plot_sweep_in_background(const std::filesystem::path& dir) {
  const std::filesystem::path script = dir / "plot_sweep.py";
  write_text_file_atomically(script, kScript);
  if (!plot::start_matplotlib_in_background({script.string(), dir.string()})) return "no pictures: could not start sh";
  return fmt::format("pictures: {}/*.png (drawn in the background by matplotlib; if they do not appear, {}; then run "
                     "python3 {} {})",
                     dir.string(), plot::kInstallHint, script.string(), dir.string());
}

}  // namespace sprintnet::sweep
