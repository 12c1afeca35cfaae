#!/usr/bin/env python3
"""Lays loss curves of several runs over each other in one PNG (for docs/):
left, the train loss (the epoch's mean, at mid-epoch; every step's loss,
faint, where a step-loss file is given) and the test loss (dotted, after each
evaluated epoch); right, the test accuracy. The first run is drawn solid, the
others dashed with hollow markers, so curves that coincide stay visible.

    python3 tools/plot_loss_curves.py --out docs/parity_mnist.png \\
        --run sprintnet=runs/NAME/metrics.jsonl --run pytorch=runs/NAME/reference.jsonl \\
        --steps pytorch=runs/NAME/reference_steps.jsonl

Each --run is LABEL=PATH of a metrics.jsonl (sprintnet's, or tools/torch_reference.py's,
which writes the same keys); each --steps is LABEL=PATH of {step, epoch, loss} lines.
"""

import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def labelled(text):
    label, sep, path = text.partition("=")
    if not sep or not label or not path:
        raise argparse.ArgumentTypeError(f"{text!r}: expected LABEL=PATH")
    return label, path


def series(rows, key):
    """(epochs, values) of the rows where `key` has a value."""
    pairs = [(r["epoch"], r[key]) for r in rows if r.get(key) is not None]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def plot(runs, steps, out, title):
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    labels = list(dict.fromkeys(label for label, _ in runs + steps))
    color_of = {label: colors[i % len(colors)] for i, label in enumerate(labels)}
    for label, path in steps:
        rows = read_jsonl(path)
        # Step s of an epoch of n steps sits at epoch - 1 + s/n, so it lines up with the per-epoch points.
        per_epoch = {}
        for r in rows:
            per_epoch.setdefault(r["epoch"], []).append(r)
        xs, ys = [], []
        for epoch, epoch_rows in sorted(per_epoch.items()):
            for i, r in enumerate(epoch_rows):
                xs.append(epoch - 1 + (i + 1) / len(epoch_rows))
                ys.append(r["loss"])
        loss_ax.plot(xs, ys, color=color_of[label], alpha=0.3, linewidth=0.6, label=f"{label} (each step)")
    for i, (label, path) in enumerate(runs):
        rows = read_jsonl(path)
        # Runs after the first: dashed, with hollow markers, so a curve lying exactly on another stays visible.
        style = {"color": color_of[label], "markersize": 3 + 3 * min(i, 1), "linewidth": 1.5,
                 "markerfacecolor": "none" if i else None, "linestyle": "--" if i else "-"}
        # The train loss is the mean over an epoch: drawn at the epoch's middle; the test loss after it.
        epochs, train_loss = series(rows, "train_loss")
        loss_ax.plot([e - 0.5 for e in epochs], train_loss, marker="o", label=f"{label} train (epoch mean)", **style)
        epochs, test_loss = series(rows, "test_loss")
        if test_loss:
            loss_ax.plot(epochs, test_loss, marker="s", label=f"{label} test", **dict(style, linestyle=":"))
        epochs, accuracy = series(rows, "test_accuracy")
        if accuracy:
            acc_ax.plot(epochs, [100 * a for a in accuracy], marker="o", label=label, **style)
    loss_ax.set(xlabel="epoch", ylabel="loss", yscale="log", title="loss")
    acc_ax.set(xlabel="epoch", ylabel="test accuracy (%)", title="test accuracy")
    for ax in (loss_ax, acc_ax):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=labelled, action="append", required=True, help="LABEL=metrics.jsonl")
    parser.add_argument("--steps", type=labelled, action="append", default=[], help="LABEL=step-losses.jsonl")
    parser.add_argument("--out", required=True, help="PNG to write")
    parser.add_argument("--title", default="", help="figure title")
    args = parser.parse_args()
    plot(args.run, args.steps, args.out, args.title)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
