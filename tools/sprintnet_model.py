"""sprintnet's MLP in numpy terms: a port of nn/mlp.cpp make_mlp and nn/linear.cpp
reset_parameters (the initial weights, drawn from the C++ Generator's stream).

Layer i of the nn.Sequential is Linear, activation, Linear, ..., so parameter
names are "0.weight", "0.bias", "2.weight", ... in both frameworks.
"""

import math

import numpy as np

from sprintnet_random import Generator


def layer_widths(inputs, hidden, outputs):
    return [inputs] + list(hidden) + [outputs]


def parameter_shapes(widths, bias=True):
    """[(name, shape)] in sprintnet's parameter order (each Linear: weight, then bias)."""
    shapes = []
    for i in range(len(widths) - 1):
        shapes.append((f"{2 * i}.weight", (widths[i + 1], widths[i])))
        if bias:
            shapes.append((f"{2 * i}.bias", (widths[i + 1],)))
    return shapes


def initial_weights(widths, bias, init, seed, stream, dtype):
    """The weights make_mlp draws from Generator(seed, stream): per layer the weight
    (row-major), then the bias, each value computed in double and rounded to `dtype`."""
    gen = Generator(seed, stream)
    weights = {}
    for i in range(len(widths) - 1):
        fan_in, fan_out = float(widths[i]), float(widths[i + 1])
        w_shape, count = (widths[i + 1], widths[i]), widths[i + 1] * widths[i]
        b = np.zeros(widths[i + 1])
        if init == "pytorch":
            bound = 1.0 / math.sqrt(fan_in)
            w = gen.uniform(count, -bound, bound)
            if bias:
                b = gen.uniform(widths[i + 1], -bound, bound)
        elif init == "xavier_uniform":
            bound = math.sqrt(6.0 / (fan_in + fan_out))
            w = gen.uniform(count, -bound, bound)
        elif init == "xavier_normal":
            w = 0.0 + math.sqrt(2.0 / (fan_in + fan_out)) * gen.normal(count)
        elif init == "kaiming_uniform":
            bound = math.sqrt(6.0 / fan_in)
            w = gen.uniform(count, -bound, bound)
        elif init == "kaiming_normal":
            w = 0.0 + math.sqrt(2.0 / fan_in) * gen.normal(count)
        else:
            raise ValueError(f"model.init = {init!r} is not known")
        weights[f"{2 * i}.weight"] = w.reshape(w_shape).astype(dtype)
        if bias:
            weights[f"{2 * i}.bias"] = b.astype(dtype)
    return weights
