#!/usr/bin/env python3
"""PyTorch reference for bench/step_bench: the same LxHxB MLP, the same step
(zero_grad, forward, cross_entropy, backward, SGD momentum 0.9), random data,
eager mode, fp32 or bf16 autocast (--precision; on the CPU as torch.autocast("cpu")).
Prints one JSON line per config in step_bench's format."""
import contextlib
import argparse
import json
import statistics
import time

import torch

from torch_mlp import build, flops_per_step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", nargs="+", default=["4x784x128", "3x256x128"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    a = p.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    for text in a.config:
        layers, width, batch = (int(v) for v in text.split("x"))
        torch.manual_seed(0)
        model = build(layers, width).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = torch.randn(batch, 784, device=dev)
        y = torch.randint(0, 10, (batch,), device=dev)

        def autocast():
            if a.precision == "fp32":
                return contextlib.nullcontext()
            return torch.autocast(device_type=dev.type, dtype=torch.bfloat16)

        def step():
            opt.zero_grad()
            with autocast():
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()

        def sync():
            if dev.type == "cuda":
                torch.cuda.synchronize()

        for _ in range(a.warmup):
            step()
        sync()
        times = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            for _ in range(a.steps):
                step()
            sync()
            times.append((time.perf_counter() - t0) / a.steps)
        med = statistics.median(times)
        print(json.dumps({"system": "pytorch-eager", "device": str(dev), "threads": torch.get_num_threads(),
                          "precision": a.precision, "config": text, "step_ms": med * 1e3, "epoch_ms": med * 1e3 * 468,
                          "samples_per_s": batch / med, "gflops": flops_per_step(layers, width, batch) / med / 1e9,
                          "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
