"""The LxHxB MLP of BASELINES.md as torch.nn.Sequential, and its FLOPs per training
step: shared by the PyTorch references in bench/ and bench/run."""


def build(layers, width, inputs=784, classes=10, bias=True):
    import torch.nn as nn  # here, so flops_per_step works without PyTorch (bench/run on a CPU machine)

    mods, w = [], inputs
    for _ in range(layers - 1):
        mods += [nn.Linear(w, width, bias=bias), nn.ReLU()]
        w = width
    mods.append(nn.Linear(w, classes, bias=bias))
    return nn.Sequential(*mods)


def flops_per_step(layers, width, batch, inputs=784, classes=10):
    """Forward, input gradients (not for the first layer) and weight gradients."""
    widths = [inputs] + [width] * (layers - 1) + [classes]
    return sum(2.0 * batch * widths[i] * widths[i + 1] * (2 if i == 0 else 3) for i in range(layers))
