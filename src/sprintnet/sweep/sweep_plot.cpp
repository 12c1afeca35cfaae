#include "sprintnet/sweep/sweep_plot.h"

#include <fmt/format.h>

#include "sprintnet/io/atomic_file.h"
#include "sprintnet/io/shell_word.h"
#include "sprintnet/plot/python_job.h"

namespace sprintnet::sweep {
namespace {

constexpr const char* kScript = R"PY(#!/usr/bin/env python3
"""Draws a sprintnet sweep's pictures: python3 plot_sweep.py SWEEP_DIR (needs matplotlib)."""
import csv
import json
import os
import re
import statistics
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

# A "$" in a key or value is text, not a formula to fail on. Escaped where they are drawn: turning math text off
# (rcParams["text.parse_math"]) would print a log axis's ticks as "$\mathdefault{10^{-1}}$".
def text(s):
    return str(s).replace("$", r"\$")


d = sys.argv[1]
# summary.csv in the dialect sprintnet writes it (sweep/summary.cpp): fields split at ',', one that holds ',', '"'
# or a newline quoted with '"' (its '"' doubled), a row per line. newline="" keeps a quoted newline as written.
with open(os.path.join(d, "summary.csv"), newline="") as f:
    runs = list(csv.DictReader(f, delimiter=",", quotechar='"', doublequote=True, strict=True))
# Its overrides column joins a run's "key=value" overrides with ';', which a value may hold too (data.dir=/a;b, a
# string): sweep.json, written with it from the same records, keeps them apart. A run it lacks (a sweep.json lost)
# is split before each "key=".
try:
    with open(os.path.join(d, "sweep.json")) as f:
        listed = {r["name"]: r["overrides"] for r in json.load(f)["runs"]}
except (OSError, ValueError, KeyError, TypeError):
    listed = {}
done = [r for r in runs if r["status"] == "done"]
values = {}
for r in done:
    overrides = listed.get(r["name"])
    if overrides is None:
        overrides = re.split(r";(?=[A-Za-z_][\w.]*=)", r["overrides"]) if r["overrides"] else []
    pairs = dict(o.split("=", 1) for o in overrides)
    pairs.pop("seed", None)
    r["pairs"] = pairs
    for k, v in pairs.items():
        values.setdefault(k, set()).add(v)


def save(fig, name):
    # Into a temporary, then renamed: a picture is never seen half-written.
    path = os.path.join(d, name)
    tmp = f"{path}.{os.getpid()}.tmp.png"
    try:
        fig.savefig(tmp, dpi=120)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    plt.close(fig)


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
        label = text(", ".join(f"{k}={v}" for k, v in other)) or None
        numeric = all(number(x) is not None for x in xs)
        ax.errorbar([number(x) for x in xs] if numeric else [text(x) for x in xs], means, yerr=stds, marker="o", capsize=3, label=label)
        if numeric and len(xs) > 2 and min(number(x) for x in xs) > 0 and max(number(x) for x in xs) / min(number(x) for x in xs) > 20:
            ax.set_xscale("log")
    ax.set_xlabel(text(key))
    ax.set_ylabel("test accuracy % (mean ± sd over seeds)")
    ax.grid(True, alpha=0.3)
    if len(others) > 1:
        ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, f"accuracy_vs_{key}.png")

best = sorted(done, key=lambda r: -float(r["final_test_accuracy"]))[:5]
fig, ax = plt.subplots(figsize=(6, 4))
for r in best:
    path = os.path.join(d, r["name"], "metrics.jsonl")
    if not os.path.exists(path):
        continue
    rows = [json.loads(line) for line in open(path) if line.strip()]
    ax.plot([x["epoch"] for x in rows], [x["train_loss"] for x in rows], marker=".",
            label=text(f"{r['name']} ({100 * float(r['final_test_accuracy']):.2f} %)"))
ax.set_xlabel("epoch")
ax.set_ylabel("train loss")
ax.set_yscale("log")
ax.grid(True, alpha=0.3)
ax.legend(fontsize=6)
fig.tight_layout()
save(fig, "best_loss_curves.png")
print("plots:", ", ".join(sorted(f for f in os.listdir(d) if f.endswith(".png") and not f.endswith(".tmp.png"))))
)PY";

}  // namespace

std::filesystem::path write_plot_script(const std::filesystem::path& dir) {
  const std::filesystem::path script = dir / "plot_sweep.py";
  write_text_file_atomically(script, kScript);
  return script;
}

std::string plot_sweep_in_background(const std::filesystem::path& dir) {
  const std::filesystem::path script = write_plot_script(dir);
  const std::string not_started = plot::start_matplotlib_in_background({script.string(), dir.string()});
  // Pasted into a shell whatever the sweep's folder is called.
  const std::string redraw = fmt::format("python3 {} {}", shell_quoted(script.string()), shell_quoted(dir.string()));
  if (!not_started.empty()) return fmt::format("warning: no pictures: {}; then run {}", not_started, redraw);
  return fmt::format("pictures: {}/*.png (drawn in the background by matplotlib; if they do not appear, {}; then run "
                     "{})",
                     dir.string(), plot::kInstallHint, redraw);
}

}  // namespace sprintnet::sweep
