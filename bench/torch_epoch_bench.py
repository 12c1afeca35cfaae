#!/usr/bin/env python3
"""PyTorch reference for bench/epoch_bench: time per epoch of an LxHxB MLP on
MNIST, the way an expert would run it on one GPU (../shared/BASELINES.md):

  eager    the usual loop: zero_grad, forward, cross_entropy, backward, step
  graph    the whole step (batch gather, forward, loss, backward, SGD update)
           captured once in a CUDA graph and replayed
  compile  torch.compile(mode="max-autotune", fullgraph=True) of model + loss
           (compile time reported separately, not in the epoch time)

Each in fp32 and bf16 (autocast; fp32 master weights); fp16 (autocast with a
GradScaler) in eager mode only. The data set lives on the
GPU as uint8 and batches are gathered there from a per-epoch permutation. SGD
momentum 0.9, constant lr. Time per epoch = median over epochs 2..N, measured
with a synchronize around each epoch. One JSON line per (config, mode, precision)."""
import argparse
import json
import os
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

from mnist_idx import MEAN, STD, find, read_idx  # noqa: F401  (MEAN, STD: used by bench/run)
from time_to_accuracy import lr_at
from torch_mlp import build, flops_per_step


def load_mnist(data_dir, device):
    def images(name):
        x = read_idx(find(data_dir, name))
        return torch.from_numpy(x.reshape(x.shape[0], -1).copy()).to(device)

    def labels(name):
        return torch.from_numpy(read_idx(find(data_dir, name)).astype(np.int64)).to(device)

    return (images("train-images-idx3-ubyte"), labels("train-labels-idx1-ubyte"),
            images("t10k-images-idx3-ubyte"), labels("t10k-labels-idx1-ubyte"))


def evaluate(model, test_x, test_y, scale, shift, dtype):
    with torch.no_grad(), torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
        logits = model(test_x.float() * scale + shift)
        return (logits.argmax(1) == test_y).float().mean().item()


def run(config, mode, precision, data, epochs, lr, bias=True, eval_every_epoch=False, compile_mode="max-autotune",
        schedule="constant", label_smoothing=0.0):
    layers, width, batch = (int(v) for v in config.split("x"))
    train_x, train_y, test_x, test_y = data
    dev = train_x.device
    torch.manual_seed(0)
    model = build(layers, width, bias=bias).to(dev)
    steps = train_x.shape[0] // batch
    # A schedule (bench/time_to_accuracy.py) keeps the lr in a device tensor that each step's copy from the
    # table updates, so the captured graph reads it: PyTorch's fused SGD takes a tensor lr.
    lr_table = None
    if schedule != "constant":
        lr_table = torch.tensor([lr_at(lr, schedule, s, epochs * steps) for s in range(epochs * steps)],
                                dtype=torch.float32, device=dev)
        opt = torch.optim.SGD(model.parameters(), lr=lr_table[0].clone(), momentum=0.9, fused=True)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    scale, shift = 1.0 / (255.0 * STD), -MEAN / STD
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    if precision == "fp16" and mode == "graph":
        raise ValueError("fp16 (GradScaler) runs in eager mode only here")
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")

    def loss_of(xb, yb):
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None, cache_enabled=False):
            return F.cross_entropy(model(xb), yb, label_smoothing=label_smoothing)

    compile_s = None
    forward_loss = loss_of
    if mode == "compile":
        forward_loss = torch.compile(loss_of, mode=compile_mode, fullgraph=True)
    else:
        compile_mode = None

    idx = torch.zeros(batch, dtype=torch.long, device=dev)

    def step():
        if mode == "compile":
            # max-autotune replays its own CUDA graphs: mark the step so the last one's outputs may be reused.
            torch.compiler.cudagraph_mark_step_begin()
        xb = train_x[idx].float() * scale + shift
        yb = train_y[idx]
        opt.zero_grad(set_to_none=False)
        loss = forward_loss(xb, yb)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.detach().clone() if mode == "compile" else loss

    def warm_up():
        # On a side stream for the whole-step graph (as PyTorch's CUDA-graph recipe does); on the
        # default stream for torch.compile, whose own CUDA graphs expect it.
        side = torch.cuda.Stream() if mode == "graph" else torch.cuda.current_stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                idx.copy_(torch.randint(0, train_x.shape[0], (batch,), device=dev))
                step()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()

    t0 = time.perf_counter()
    warm_up()
    if mode == "compile":
        compile_s = time.perf_counter() - t0

    graph = None
    if mode == "graph":
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_loss = step()

    times, losses, accuracies = [], [], []
    for epoch in range(epochs):
        perm = torch.randperm(train_x.shape[0], device=dev)
        loss_sum = torch.zeros((), device=dev)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for b in range(steps):
            idx.copy_(perm[b * batch:(b + 1) * batch])
            if lr_table is not None:
                opt.param_groups[0]["lr"].copy_(lr_table[epoch * steps + b])
            if graph is not None:
                graph.replay()
                loss_sum += static_loss.detach()
            else:
                loss_sum += step().detach()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        losses.append(loss_sum.item() / steps)
        last = epoch + 1 == epochs
        accuracies.append(round(evaluate(model, test_x, test_y, scale, shift, dtype), 5)
                          if eval_every_epoch or last else None)
    accuracy = accuracies[-1]
    median = statistics.median(times[1:]) if len(times) > 1 else times[0]
    return {
        "system": "pytorch", "version": torch.__version__, "mode": mode, "precision": precision,
        "config": config, "batch": batch, "steps_per_epoch": steps, "epochs": epochs,
        "epoch_ms": [round(1e3 * t, 3) for t in times], "epoch_ms_median": round(1e3 * median, 3),
        "samples_per_s": round(steps * batch / median, 1),
        "tflops": round(flops_per_step(layers, width, batch) * steps / median / 1e12, 2),
        "train_loss": [round(v, 5) for v in losses], "test_accuracy": accuracy,
        "epoch_test_accuracy": accuracies, "bias": bias, "lr": lr, "schedule": schedule,
        "label_smoothing": label_smoothing, "compile_s": None if compile_s is None else round(compile_s, 1),
        "compile_mode": compile_mode,
        "peak_mem_mb": round(torch.cuda.max_memory_allocated() / 2**20, 1),
        "gpu": torch.cuda.get_device_name(),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", nargs="+", default=["4x784x128"])
    p.add_argument("--mode", nargs="+", default=["eager", "graph"], choices=["eager", "graph", "compile"])
    p.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16", "fp16"])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--schedule", default="constant", choices=["constant", "cosine"])
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--data", default="data/mnist")
    p.add_argument("--no-bias", action="store_true", help="Linear layers without bias")
    p.add_argument("--eval-every-epoch", action="store_true", help="test accuracy after every epoch (not timed)")
    a = p.parse_args()
    data = load_mnist(a.data, torch.device("cuda"))
    for config in a.config:
        for mode in a.mode:
            for precision in a.precision:
                torch.cuda.reset_peak_memory_stats()
                if precision == "fp16" and mode == "graph":
                    continue
                row = run(config, mode, precision, data, a.epochs, a.lr, not a.no_bias, a.eval_every_epoch,
                          schedule=a.schedule, label_smoothing=a.label_smoothing)
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
