#!/usr/bin/env python3
"""JAX reference for bench/sweep_bench: a sweep of M models of the default config
(784-256-256-10, ReLU, SGD momentum 0.9, cosine schedule, batch 128, 10 epochs,
a test-set evaluation after every epoch) over learning rates x seeds, the way an
expert writes it in JAX: the M models stacked on a leading axis and trained
together under `jax.vmap`, the whole epoch one jitted `lax.scan` over the steps
(each model with its own learning rate, initialisation and shuffle), bf16
products with fp32 accumulation and fp32 master weights, the parameters and
momentum donated. Timed: the whole process (what a user waits for, imports and
compilation included) and the part after the data is on the device.

Prints one JSON line. Run it as its own process; XLA_PYTHON_CLIENT_PREALLOCATE=false."""
import time

PROCESS_START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jax_epoch_bench import init_params, load_mnist  # noqa: E402
from mnist_idx import MEAN, STD  # noqa: E402


def make_sweep(dims, batch, steps, total_steps, data):
    train_x, train_y, test_x, test_y = data
    scale, shift = 1.0 / (255.0 * STD), -MEAN / STD

    def forward(params, x):
        h = x.astype(jnp.bfloat16)
        for i, (w, b) in enumerate(params):
            z = jnp.dot(h, w.astype(jnp.bfloat16), preferred_element_type=jnp.float32) + b
            h = jax.nn.relu(z).astype(jnp.bfloat16) if i + 1 < len(params) else z
        return h

    def loss_fn(params, x, y):
        logits = forward(params, x)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    def one_step(params, momentum, lr, idx, step):
        # sprintnet's cosine schedule: the last step of the run gets lr 0 (schedule.min_lr).
        t = jnp.minimum(step / max(total_steps - 1, 1), 1.0)
        lr_t = lr * (1.0 + jnp.cos(jnp.pi * t)) / 2.0
        x = train_x[idx].astype(jnp.float32) * scale + shift
        loss, grads = jax.value_and_grad(loss_fn)(params, x, train_y[idx])
        momentum = jax.tree_util.tree_map(lambda m, g: 0.9 * m + g, momentum, grads)
        params = jax.tree_util.tree_map(lambda p, m: p - lr_t * m, params, momentum)
        return params, momentum, loss

    models_step = jax.vmap(one_step, in_axes=(0, 0, 0, 0, None))

    def epoch(params, momentum, lrs, perms, first_step):
        idx = perms[:, : steps * batch].reshape(perms.shape[0], steps, batch).transpose(1, 0, 2)

        def body(carry, xs):
            params, momentum, loss_sum = carry
            step_idx, step = xs
            params, momentum, loss = models_step(params, momentum, lrs, step_idx, step)
            return (params, momentum, loss_sum + loss), None

        steps_in = first_step + jnp.arange(steps, dtype=jnp.float32)
        (params, momentum, loss_sum), _ = jax.lax.scan(
            body, (params, momentum, jnp.zeros(perms.shape[0], jnp.float32)), (idx, steps_in))
        return params, momentum, loss_sum / steps

    def accuracy(params):
        logits = forward(params, test_x.astype(jnp.float32) * scale + shift)
        return jnp.mean(jnp.argmax(logits, axis=1) == test_y)

    return jax.jit(epoch, donate_argnums=(0, 1)), jax.jit(jax.vmap(accuracy))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lrs", default="0.01,0.02,0.05,0.1")
    p.add_argument("--seeds", default="0,1,2,3")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--hidden", default="256,256")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--data", default="data/mnist")
    a = p.parse_args()
    lrs = [float(v) for v in a.lrs.split(",")]
    seeds = [int(v) for v in a.seeds.split(",")]
    grid = [(lr, seed) for lr in lrs for seed in seeds]
    data = load_mnist(a.data)
    data_on_device = time.perf_counter()
    n = data[0].shape[0]
    steps = n // a.batch
    dims = [data[0].shape[1]] + [int(w) for w in a.hidden.split(",")] + [10]
    models = [init_params(jax.random.PRNGKey(seed), dims, True) for _, seed in grid]
    params = jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *models)
    momentum = jax.tree_util.tree_map(jnp.zeros_like, params)
    lr_vec = jnp.asarray([lr for lr, _ in grid], jnp.float32)
    keys = jnp.stack([jax.random.PRNGKey(1000 + seed) for _, seed in grid])
    epoch_fn, accuracy_fn = make_sweep(dims, a.batch, steps, steps * a.epochs, data)
    times, accuracies = [], []
    for e in range(a.epochs):
        keys, subs = jnp.split(jax.vmap(jax.random.split)(keys), 2, axis=1)
        keys, subs = keys[:, 0], subs[:, 0]
        perms = jax.vmap(lambda k: jax.random.permutation(k, n))(subs)
        start = time.perf_counter()
        params, momentum, loss = epoch_fn(params, momentum, lr_vec, perms, jnp.float32(e * steps))
        acc = accuracy_fn(params)  # every epoch, as sprintnet's eval_every = 1
        accuracies = [float(v) for v in np.asarray(acc)]
        times.append(time.perf_counter() - start)
    end = time.perf_counter()
    print(json.dumps({
        "system": "jax", "version": jax.__version__, "mode": "vmap(lax.scan) epoch", "models": len(grid),
        "epochs": a.epochs, "batch": a.batch, "hidden": a.hidden, "precision": "bf16",
        "process_s": round(end - PROCESS_START, 3), "after_data_s": round(end - data_on_device, 3),
        "first_epoch_s": round(times[0], 3), "epoch_ms_median": round(1e3 * statistics.median(times[1:]), 3),
        "test_accuracy": {f"lr={lr},seed={seed}": round(acc, 5) for (lr, seed), acc in zip(grid, accuracies)},
        "mean_test_accuracy": round(statistics.mean(accuracies), 5), "gpu": jax.devices()[0].device_kind,
    }), flush=True)


if __name__ == "__main__":
    main()
