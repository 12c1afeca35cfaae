#!/usr/bin/env python3
"""Loads a sprintnet run's model.safetensors into the equivalent torch.nn.Sequential with
load_state_dict(safetensors.torch.load_file(path), strict=True), evaluates it on the run's test
set with the run's normalisation, and compares the accuracy with the one sprintnet recorded in
metrics.jsonl. Exits 1 when they differ by more than --tolerance (default 0.01 %).

  python3 tools/check_checkpoint_in_pytorch.py RUN_DIR [--data-dir data] [--device cpu]
"""
import argparse
import json
import os
import sys

import numpy as np
import safetensors.torch
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sprintnet_config import load_config  # noqa: E402
from sprintnet_data import load_train_test, make_normalization  # noqa: E402

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "silu": nn.SiLU,
               "identity": nn.Identity}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run_dir")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--tolerance", type=float, default=1e-4, help="allowed accuracy difference (fraction)")
    a = p.parse_args()

    config = load_config(os.path.join(a.run_dir, "config.toml"))
    (train_x, _), (test_x, test_y), classes = load_train_test(config["data"], a.data_dir, config["model"].get("classes", 0))
    scale, shift = make_normalization(train_x, config["data"]["normalize"])

    widths = [train_x.shape[1]] + list(config["model"]["hidden"]) + [classes]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1], bias=config["model"]["bias"]))
        if i + 2 < len(widths):
            layers.append(ACTIVATIONS[config["model"]["activation"]]())
    model = nn.Sequential(*layers).to(a.device)
    model.load_state_dict(safetensors.torch.load_file(os.path.join(a.run_dir, "model.safetensors")), strict=True)
    model.eval()

    x = torch.from_numpy(test_x.astype(np.float32) * np.float32(scale) + np.float32(shift)).to(a.device)
    with torch.no_grad():
        predicted = model(x).argmax(dim=1).cpu().numpy()
    torch_accuracy = float((predicted == test_y).mean())

    with open(os.path.join(a.run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    sprintnet_accuracy = rows[-1]["test_accuracy"]
    diff = abs(torch_accuracy - sprintnet_accuracy)
    print(f"PyTorch {torch.__version__} load_state_dict(strict=True) on {a.device}: test accuracy "
          f"{100 * torch_accuracy:.2f} %; sprintnet recorded {100 * sprintnet_accuracy:.2f} %; "
          f"difference {100 * diff:.4f} % (tolerance {100 * a.tolerance:.2f} %)")
    return 0 if diff <= a.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
