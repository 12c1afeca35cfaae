#!/usr/bin/env python3
"""PyTorch reference trainer: the run a sprintnet config describes, done by PyTorch from
the same initial weights on the same batches, so the two loss curves can be laid
over each other (tools/plot_loss_curves.py) and short runs compared weight by weight.

    python3 tools/torch_reference.py --config runs/NAME/config.toml --out runs/NAME/reference.jsonl

What is the same as sprintnet (each a port in tools/sprintnet_*.py, checked against
sprintnet's own values by tools/test_sprintnet_port.py):
  - the initial weights: drawn from Philox stream 1 of config.seed exactly as
    make_mlp does (or read from --init-weights, a safetensors file with
    nn.Sequential names "0.weight", "0.bias", ...);
  - the batch order: each epoch's Philox permutation of the training set, keyed
    by config.seed ^ 0x9E3779B97F4A7C15, with drop_last, batch_size, shuffle;
  - the inputs: x = x_u8 * scale + shift in the compute dtype, with the
    "standard" (training-set mean/std) or "unit" normalisation;
  - the model (Linear/activation nn.Sequential, model.classes outputs or the
    training labels' largest + 1, every label checked against it), loss (cross-entropy with label
    smoothing, or MSE against one-hot), optimizer (torch.optim SGD/Adam/AdamW)
    and the learning rate of every step (optim/lr_schedule.cpp);
  - the metrics: one JSON object per epoch with sprintnet's metrics.jsonl keys
    (train_loss = mean of the epoch's step losses, test loss/accuracy over the
    whole test set at eval_every, as sprintnet evaluates).
Differences left: summation order (cuBLAS/MKL vs sprintnet's kernels), so curves
agree closely for a while and then drift apart as any two fp32 runs do.
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402
import sprintnet_config  # noqa: E402
import sprintnet_data  # noqa: E402
import sprintnet_model  # noqa: E402
import sprintnet_random  # noqa: E402
from sprintnet_schedule import LrSchedule  # noqa: E402

ACTIVATIONS = {"identity": torch.nn.Identity, "relu": torch.nn.ReLU, "gelu": torch.nn.GELU, "tanh": torch.nn.Tanh,
               "sigmoid": torch.nn.Sigmoid, "silu": torch.nn.SiLU}
DTYPES = {"fp32": (torch.float32, np.float32), "fp64": (torch.float64, np.float64)}


def build_model(widths, config, init_weights, device, dtype):
    """nn.Sequential(Linear, act, ..., Linear) holding `init_weights` (numpy, by name)."""
    model_config = config["model"]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1], bias=model_config["bias"]))
        if i + 2 < len(widths):
            layers.append(ACTIVATIONS[model_config["activation"]]())
    model = torch.nn.Sequential(*layers).to(device=device, dtype=dtype)
    names = {name for name, _ in model.named_parameters()}
    if names != set(init_weights):
        raise ValueError(f"initial weights hold {sorted(init_weights)}, the model needs {sorted(names)}")
    with torch.no_grad():
        for name, p in model.named_parameters():
            value = np.asarray(init_weights[name])
            if tuple(value.shape) != tuple(p.shape):
                raise ValueError(f"initial weight {name} has shape {value.shape}, the model needs {tuple(p.shape)}")
            p.copy_(torch.from_numpy(value.astype(np.float64)).to(device=device, dtype=dtype))
    return model


def build_optimizer(params, o):
    if o["type"] == "sgd":
        return torch.optim.SGD(params, lr=o["lr"], momentum=o["momentum"], dampening=o["dampening"],
                               weight_decay=o["weight_decay"], nesterov=o["nesterov"])
    kinds = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
    if o["type"] not in kinds:
        raise ValueError(f"optim.type = {o['type']!r} is not known")
    return kinds[o["type"]](params, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                            weight_decay=o["weight_decay"])


def batch_loss(logits, labels, loss_config, classes, training):
    """Mean loss of a batch as sprintnet defines it; label smoothing only while training."""
    if loss_config["type"] == "mse":
        one_hot = torch.nn.functional.one_hot(labels, classes).to(logits.dtype)
        return torch.mean((logits - one_hot) ** 2)
    smoothing = loss_config["label_smoothing"] if training else 0.0
    return torch.nn.functional.cross_entropy(logits, labels, label_smoothing=smoothing)


class Batches:
    """train/batch_loader.cpp: uint8 images on the device, gathered and normalised per batch."""

    def __init__(self, images, labels, norm, batch_size, shuffle, drop_last, seed, device, dtype):
        self.images = torch.from_numpy(images).to(device)
        self.labels = torch.from_numpy(labels).to(device)
        # gather_rows_u8 rounds scale and shift to the compute dtype, then x * scale + shift in it.
        self.scale = torch.tensor(norm[0], dtype=dtype, device=device)
        self.shift = torch.tensor(norm[1], dtype=dtype, device=device)
        self.n, self.batch_size, self.shuffle, self.seed = len(labels), batch_size, shuffle, seed
        self.dtype, self.device = dtype, device
        full = self.n // batch_size
        self.count = full if drop_last or self.n % batch_size == 0 else full + 1
        self.order = torch.arange(self.n, device=device)

    def start_epoch(self, epoch):
        if self.shuffle:
            order = sprintnet_random.epoch_permutation(self.seed, epoch, self.n)
            self.order = torch.from_numpy(order).to(self.device)

    def batch(self, index):
        idx = self.order[index * self.batch_size:min(self.n, (index + 1) * self.batch_size)]
        return self.images[idx].to(self.dtype) * self.scale + self.shift, self.labels[idx]


def model_classes(config, data_classes, train_labels, test_labels):
    """The output layer's width: model.classes when set, as sprintnet's trainer takes it (a 10-class net for
    model.classes = 12 compared as "relative error inf"), else the data's count; every label must fit it."""
    classes = config["model"]["classes"] or data_classes
    for what, labels in (("training labels", train_labels), ("test labels", test_labels)):
        sprintnet_data.check_labels(labels, classes, what)
    return classes


def train(config, data, device, dtype_name="fp32", init_weights=None, log=print):
    """Runs the whole training. Returns (metrics rows, per-step losses, final weights as numpy by name)."""
    dtype, np_dtype = DTYPES[dtype_name]
    (train_x, train_y), (test_x, test_y), classes = data
    classes = model_classes(config, classes, train_y, test_y)
    widths = sprintnet_model.layer_widths(train_x.shape[1], config["model"]["hidden"], classes)
    if init_weights is None:
        # Drawn as sprintnet draws them (in fp32, its training dtype), then widened if needed.
        init_weights = sprintnet_model.initial_weights(widths, config["model"]["bias"], config["model"]["init"],
                                                       config["seed"], sprintnet_random.INIT_STREAM, np.float32)
    model = build_model(widths, config, init_weights, device, dtype)
    optimizer = build_optimizer(model.parameters(), config["optim"])
    norm = sprintnet_data.make_normalization(train_x, config["data"]["normalize"])
    t = config["train"]
    seed = (config["seed"] ^ sprintnet_random.SHUFFLE_SEED_SALT) & ((1 << 64) - 1)
    loader = Batches(train_x, train_y, norm, t["batch_size"], t["shuffle"], t["drop_last"], seed, device, dtype)
    if loader.count < 1:
        raise ValueError(f"the training set has {loader.n} sample{'' if loader.n == 1 else 's'}, fewer than one "
                         f"batch of {t['batch_size']} (train.batch_size), and train.drop_last = true drops that "
                         f"partial batch: set train.batch_size to at most {loader.n} or train.drop_last = false")
    test_loader = Batches(test_x, test_y, norm, min(t["eval_batch_size"], len(test_y)), False, False, 0, device,
                          dtype)
    schedule = LrSchedule(config["schedule"], config["optim"]["lr"], loader.count, loader.count * t["epochs"])

    rows, step_losses, step = [], [], 0
    for epoch in range(1, t["epochs"] + 1):
        model.train()
        loader.start_epoch(epoch - 1)
        losses = torch.zeros(loader.count, dtype=dtype, device=device)  # read once per epoch: no sync per step
        start = time.perf_counter()
        for b in range(loader.count):
            lr = schedule.lr_at(step)
            for group in optimizer.param_groups:
                group["lr"] = lr
            x, y = loader.batch(b)
            optimizer.zero_grad(set_to_none=True)
            loss = batch_loss(model(x), y, config["loss"], classes, training=True)
            loss.backward()
            optimizer.step()
            losses[b] = loss.detach()
            step += 1
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        epoch_time = time.perf_counter() - start
        epoch_losses = losses.double().cpu().numpy()
        step_losses += [{"step": step - loader.count + i + 1, "epoch": epoch, "loss": float(v)}
                        for i, v in enumerate(epoch_losses)]
        row = {"step": step, "epoch": epoch, "train_loss": float(epoch_losses.mean()), "test_loss": None,
               "test_accuracy": None, "epoch_time_s": epoch_time,
               "samples_per_s": min(loader.n, loader.count * t["batch_size"]) / epoch_time, "lr": lr}
        if epoch == t["epochs"] or (t["eval_every"] > 0 and epoch % t["eval_every"] == 0):
            row["test_loss"], row["test_accuracy"] = evaluate(model, test_loader, config["loss"], classes)
        rows.append(row)
        line = f"epoch {epoch}/{t['epochs']}: train loss {row['train_loss']:.4f}"
        if row["test_accuracy"] is not None:
            line += f", test loss {row['test_loss']:.4f}, test accuracy {100 * row['test_accuracy']:.2f} %"
        log(line + f", {epoch_time:.2f} s")
        if not math.isfinite(row["train_loss"]):
            log(f"training diverged: the train loss of epoch {epoch} is {row['train_loss']}")
            break
    weights = {name: p.detach().cpu().numpy().astype(np_dtype) for name, p in model.named_parameters()}
    return rows, step_losses, weights


@torch.no_grad()
def evaluate(model, loader, loss_config, classes):
    """(mean loss, accuracy) over the whole test set, as train/evaluate.cpp: no label smoothing;
    the MSE of a sample is its mean over classes; argmax takes the first of equal maxima."""
    model.eval()
    loss_sum = torch.zeros((), dtype=torch.float64, device=loader.device)
    correct = torch.zeros((), dtype=torch.int64, device=loader.device)
    for b in range(loader.count):
        x, y = loader.batch(b)
        logits = model(x)
        if loss_config["type"] == "mse":
            one_hot = torch.nn.functional.one_hot(y, classes).to(logits.dtype)
            loss_sum += ((logits - one_hot) ** 2).mean(dim=1).sum().double()
        else:
            loss_sum += torch.nn.functional.cross_entropy(logits, y, reduction="sum").double()
        correct += (logits.argmax(dim=1) == y).sum()
    model.train()
    return loss_sum.item() / loader.n, correct.item() / loader.n


def relative_error(actual, expected):
    """max |a - e| / max |e|, the measure of tests/parity/reference_compare.h."""
    actual, expected = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    if actual.shape != expected.shape:
        return math.inf
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    diff = float(np.max(np.abs(actual - expected))) if expected.size else 0.0
    if math.isnan(diff):
        return math.inf
    return 0.0 if diff == 0.0 else diff / max(scale, 1e-300)


def _json_value(v):
    return None if isinstance(v, float) and not math.isfinite(v) else v


def write_jsonl(path, rows):
    """JSON lines with sprintnet's key order and compact separators; NaN/inf as null, as sprintnet writes them."""
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps({k: _json_value(v) for k, v in row.items()}, separators=(",", ":")) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="a sprintnet config (a run's config.toml lists every key)")
    parser.add_argument("--out", required=True, help="metrics JSONL to write (sprintnet's metrics.jsonl keys)")
    parser.add_argument("--step-losses", help="also write every step's loss as JSONL {step, epoch, loss}")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (a GPU when there is one)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp32", help="compute dtype (fp64: CPU truth)")
    parser.add_argument("--data-dir", help="folder holding <dataset>/ (default: the config's data.dir)")
    parser.add_argument("--init-weights", help="safetensors with the initial weights (default: drawn from the seed "
                                               "as sprintnet draws them)")
    parser.add_argument("--save-weights", help="write the final weights here (safetensors, nn.Sequential names)")
    parser.add_argument("--compare-weights", help="a sprintnet model.safetensors to compare the final weights with")
    parser.add_argument("--tolerance", type=float, default=1e-4,
                        help="largest relative error (max|diff|/max|ref|) accepted by --compare-weights; fp32 runs "
                             "drift apart with the steps, so this suits runs of tens of steps (default 1e-4)")
    parser.add_argument("--threads", type=int, help="CPU threads for PyTorch")
    args = parser.parse_args()

    config = sprintnet_config.load_config(args.config)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else torch.device(
        args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    # Full fp32 matrix products (no TF32), as sprintnet's fp32; PyTorch >= 2.9 names this setting anew.
    try:
        torch.backends.cuda.matmul.fp32_precision = "ieee"
    except (AttributeError, AssertionError):  # older PyTorch (1.13 answers unknown names with AssertionError)
        torch.backends.cuda.matmul.allow_tf32 = False

    data = sprintnet_data.load_train_test(config["data"], args.data_dir, config["model"]["classes"])
    init = safetensors_np.load(args.init_weights)[0] if args.init_weights else None
    print(f"torch {torch.__version__} on {device} ({args.dtype}); {len(data[0][1])} train / {len(data[1][1])} test "
          f"samples, {data[2]} classes; initial weights "
          f"{'from ' + args.init_weights if init else 'drawn from seed %d like sprintnet' % config['seed']}",
          flush=True)
    rows, step_losses, weights = train(config, data, device, args.dtype, init,
                                       log=lambda line: print(line, flush=True))
    write_jsonl(args.out, rows)
    if args.step_losses:
        write_jsonl(args.step_losses, step_losses)
    if args.save_weights:
        safetensors_np.save(args.save_weights, weights, {"format": "pt", "producer": "tools/torch_reference.py"})
    print(f"wrote {args.out}")
    if args.compare_weights:
        theirs = safetensors_np.load(args.compare_weights)[0]
        worst = 0.0
        for name, value in weights.items():
            error = relative_error(theirs[name], value) if name in theirs else math.inf
            worst = max(worst, error)
            # An infinite error has a reason: say it (a layer missing, or another shape: model.classes, hidden).
            why = ("" if name in theirs and theirs[name].shape == value.shape
                   else " (not in the file)" if name not in theirs
                   else f" (shape {tuple(theirs[name].shape)} there, {tuple(value.shape)} here)")
            print(f"  {name:12s} relative error {error:.3g}{why}")
        verdict = "within" if worst <= args.tolerance else "OVER"
        print(f"final weights vs {args.compare_weights}: worst {worst:.3g}, {verdict} tolerance {args.tolerance}")
        if worst > args.tolerance:
            # One ReLU input rounding to the other side of zero in either run is enough to part two fp32
            # runs; an fp64 run is the arbiter of which one left the exact path.
            print("to see which side is off, compare both with a --dtype fp64 --device cpu run (--save-weights)")
            sys.exit(1)


if __name__ == "__main__":
    main()
