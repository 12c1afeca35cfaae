#!/usr/bin/env python3
"""PyTorch DDP peer for bench/scaling: time per epoch of an LxWxB MLP on MNIST (B = the global batch)
over the GPUs torchrun starts, the way an expert runs DDP on one machine: one process per GPU,
NCCL, bf16 autocast with fp32 master weights, static_graph, gradients as bucket views, the data
set on every GPU as uint8 and each rank taking its B/N rows of every batch of the same per-epoch
permutation. SGD momentum 0.9, constant lr. Median over epochs 2..N; rank 0 prints one JSON line.

  torchrun --nproc_per_node N bench/torch_ddp_bench.py --config 4x8192x4096 [--epochs 4] [--data data/mnist]
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from mnist_idx import MEAN, STD
from torch_epoch_bench import load_mnist
from torch_mlp import build, flops_per_step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", default="4x8192x4096")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--data", default="data/mnist")
    p.add_argument("--bucket-mb", type=int, default=100)
    a = p.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    layers, width, batch = (int(v) for v in a.config.split("x"))
    assert batch % world == 0, "the global batch must split evenly"
    train_x, train_y, _, _ = load_mnist(a.data, dev)
    torch.manual_seed(0)
    model = build(layers, width).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local], static_graph=True,
                                                    gradient_as_bucket_view=True, bucket_cap_mb=a.bucket_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    scale, shift = 1.0 / (255.0 * STD), -MEAN / STD
    steps = train_x.shape[0] // batch
    local_batch = batch // world
    gen = torch.Generator(device=dev)
    times, losses = [], []
    for epoch in range(a.epochs):
        gen.manual_seed(epoch)
        perm = torch.randperm(train_x.shape[0], device=dev, generator=gen)
        loss_sum = torch.zeros((), device=dev)
        torch.cuda.synchronize()
        dist.barrier()
        start = time.perf_counter()
        for b in range(steps):
            idx = perm[b * batch + rank * local_batch: b * batch + (rank + 1) * local_batch]
            xb = train_x[idx].float() * scale + shift
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(ddp(xb), train_y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_sum += loss.detach()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        losses.append(loss_sum.item() / steps)
    median = statistics.median(times[1:]) if len(times) > 1 else times[0]
    if rank == 0:
        print(json.dumps({"system": "pytorch", "mode": "ddp", "precision": "bf16", "config": a.config, "gpus": world,
                          "batch": batch, "steps_per_epoch": steps, "epoch_ms": [round(1e3 * t, 3) for t in times],
                          "epoch_ms_median": round(1e3 * median, 3),
                          "tflops": round(flops_per_step(layers, width, batch) * steps / median / 1e12, 2),
                          "train_loss": [round(v, 5) for v in losses], "version": torch.__version__,
                          "gpu": torch.cuda.get_device_name()}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
