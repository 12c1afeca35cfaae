#!/usr/bin/env python3
"""JAX reference for bench/epoch_bench: time per epoch of an LxHxB MLP on MNIST,
the way an expert writes it in JAX (../shared/BASELINES.md): the data set on the
device as uint8, the whole epoch one jitted function -- a `lax.scan` over the
steps, each gathering its batch from the epoch's permutation, normalising it,
forward, softmax cross-entropy, `jax.grad`, SGD momentum 0.9 (each step's lr a scanned
input, for the schedules of bench/time_to_accuracy.py) -- with the
parameters and momentum donated, so the epoch runs with no host involvement.
bf16: products in bf16 with fp32 accumulation (`preferred_element_type`) and
fp32 master weights, as torch.autocast; fp32: everything in fp32. Time per
epoch = median over epochs 2..N (the first compiles), measured with
block_until_ready around each epoch; the permutation is drawn outside the timed
region, as in bench/torch_epoch_bench.py. One JSON line per (config, precision)
in that script's format.

Run it as its own process (bench/run does): JAX's allocator must not share a
process with PyTorch's. XLA_PYTHON_CLIENT_PREALLOCATE=false is set here."""
import argparse
import json
import os
import statistics
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from mnist_idx import MEAN, STD, find, read_idx  # noqa: E402
from time_to_accuracy import lr_at  # noqa: E402


def flops_per_step(layers, width, batch, inputs=784, classes=10):
    dims = [inputs] + [width] * (layers - 1) + [classes]
    return 6 * batch * sum(a * b for a, b in zip(dims[:-1], dims[1:]))


def load_mnist(data_dir):
    def images(name):
        x = read_idx(find(data_dir, name))
        return jnp.asarray(x.reshape(x.shape[0], -1))

    def labels(name):
        return jnp.asarray(read_idx(find(data_dir, name)).astype(np.int32))

    return (images("train-images-idx3-ubyte"), labels("train-labels-idx1-ubyte"),
            images("t10k-images-idx3-ubyte"), labels("t10k-labels-idx1-ubyte"))


def init_params(key, dims, bias):
    """PyTorch's nn.Linear initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)); weights stored [in, out]."""
    params = []
    for fan_in, fan_out in zip(dims[:-1], dims[1:]):
        key, kw, kb = jax.random.split(key, 3)
        bound = 1.0 / np.sqrt(fan_in)
        w = jax.random.uniform(kw, (fan_in, fan_out), jnp.float32, -bound, bound)
        b = jax.random.uniform(kb, (fan_out,), jnp.float32, -bound, bound) if bias else None
        params.append((w, b))
    return params


def make_functions(dims, batch, steps, precision, data, label_smoothing=0.0):
    train_x, train_y, test_x, test_y = data
    compute = jnp.bfloat16 if precision == "bf16" else jnp.float32
    scale, shift = 1.0 / (255.0 * STD), -MEAN / STD

    def forward(params, x):
        h = x.astype(compute)
        for i, (w, b) in enumerate(params):
            z = jnp.dot(h, w.astype(compute), preferred_element_type=jnp.float32)
            if b is not None:
                z = z + b
            h = jax.nn.relu(z).astype(compute) if i + 1 < len(params) else z
        return h  # fp32 logits

    def loss_fn(params, x, y):
        logp = jax.nn.log_softmax(forward(params, x))
        nll = -jnp.take_along_axis(logp, y[:, None], axis=1)[:, 0]
        # Label smoothing as PyTorch's cross_entropy: (1 - e) * nll + e * mean over classes of -log p.
        return jnp.mean((1.0 - label_smoothing) * nll - label_smoothing * jnp.mean(logp, axis=1))

    def step(carry, xs):
        idx, lr = xs
        params, momentum, loss_sum = carry
        x = train_x[idx].astype(jnp.float32) * scale + shift
        loss, grads = jax.value_and_grad(loss_fn)(params, x, train_y[idx])
        momentum = jax.tree_util.tree_map(lambda m, g: 0.9 * m + g, momentum, grads)
        params = jax.tree_util.tree_map(lambda p, m: p - lr * m, params, momentum)
        return (params, momentum, loss_sum + loss), None

    def epoch(params, momentum, perm, lrs):
        idx = perm[: steps * batch].reshape(steps, batch)
        (params, momentum, loss_sum), _ = jax.lax.scan(step, (params, momentum, jnp.float32(0)), (idx, lrs))
        return params, momentum, loss_sum / steps

    def accuracy(params):
        logits = forward(params, test_x.astype(jnp.float32) * scale + shift)
        return jnp.mean(jnp.argmax(logits, axis=1) == test_y)

    return jax.jit(epoch, donate_argnums=(0, 1)), jax.jit(accuracy)


def run(config, precision, data, epochs, lr=0.05, bias=True, eval_every_epoch=False, schedule="constant",
        label_smoothing=0.0):
    layers, width, batch = (int(v) for v in config.split("x"))
    n = data[0].shape[0]
    steps = n // batch
    dims = [data[0].shape[1]] + [width] * (layers - 1) + [10]
    params = init_params(jax.random.PRNGKey(0), dims, bias)
    momentum = jax.tree_util.tree_map(jnp.zeros_like, params)
    epoch_fn, accuracy_fn = make_functions(dims, batch, steps, precision, data, label_smoothing)
    # Each step's lr, a scanned input (bench/time_to_accuracy.py; constant: all the same).
    lr_table = np.array([lr_at(lr, schedule, s, epochs * steps) for s in range(epochs * steps)], np.float32)
    key = jax.random.PRNGKey(1)
    times, losses, accuracies, compile_s = [], [], [], None
    for e in range(epochs):
        key, sub = jax.random.split(key)
        perm = jax.random.permutation(sub, n).block_until_ready()
        lrs = jnp.asarray(lr_table[e * steps:(e + 1) * steps]).block_until_ready()
        start = time.perf_counter()
        params, momentum, loss = epoch_fn(params, momentum, perm, lrs)
        loss = float(loss.block_until_ready())
        elapsed = time.perf_counter() - start
        if e == 0:
            compile_s = elapsed
        times.append(elapsed)
        losses.append(loss)
        last = e + 1 == epochs
        accuracies.append(round(float(accuracy_fn(params)), 5) if eval_every_epoch or last else None)
    median = statistics.median(times[1:]) if len(times) > 1 else times[0]
    return {
        "system": "jax", "version": jax.__version__, "mode": "scan", "precision": precision,
        "config": config, "batch": batch, "steps_per_epoch": steps, "epochs": epochs,
        "epoch_ms": [round(1e3 * t, 3) for t in times], "epoch_ms_median": round(1e3 * median, 3),
        "samples_per_s": round(steps * batch / median, 1),
        "tflops": round(flops_per_step(layers, width, batch) * steps / median / 1e12, 2),
        "train_loss": [round(v, 5) for v in losses], "test_accuracy": accuracies[-1],
        "epoch_test_accuracy": accuracies, "bias": bias, "lr": lr, "schedule": schedule,
        "label_smoothing": label_smoothing, "compile_s": round(compile_s, 2), "compile_mode": "jit(lax.scan)",
        "peak_mem_mb": None, "gpu": jax.devices()[0].device_kind,
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", nargs="+", default=["4x784x128"])
    p.add_argument("--precision", nargs="+", default=["bf16"], choices=["fp32", "bf16"])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--schedule", default="constant", choices=["constant", "cosine"])
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--data", default="data/mnist")
    p.add_argument("--no-bias", action="store_true")
    p.add_argument("--eval-every-epoch", action="store_true")
    a = p.parse_args()
    data = load_mnist(a.data)
    for config in a.config:
        for precision in a.precision:
            row = run(config, precision, data, a.epochs, a.lr, not a.no_bias, a.eval_every_epoch, a.schedule,
                      a.label_smoothing)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
