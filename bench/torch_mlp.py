"""The LxHxB MLP of BASELINES.md as torch.nn.Sequential, and its FLOPs per training
step: shared by the PyTorch references in bench/."""
import torch.nn as nn


def build(layers, width, inputs=784, classes=10):
    mods, w = [], inputs
    for _ in range(layers - 1):
        mods += [nn.Linear(w, width), nn.ReLU()]
        w = width
    mods.append(nn.Linear(w, classes))
    return nn.Sequential(*mods)


def flops_per_step(layers, width, batch, inputs=784, classes=10):
    """Forward, input gradients (not for the first layer) and weight gradients."""
    widths = [inputs] + [width] * (layers - 1) + [classes]
    return sum(2.0 * batch * widths[i] * widths[i + 1] * (2 if i == 0 else 3) for i in range(layers))
