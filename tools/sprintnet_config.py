"""A sprintnet run's config.toml read into plain dicts, for the reference trainer.

A run directory's config.toml lists every key (config_to_toml), so normally no
default is used. The defaults below mirror src/sprintnet/io/config.h for the
keys that change the maths, so a hand-written config with keys left out also
works; keys the reference does not need (output.*, device.allocator, ...)
are ignored.
"""

import copy
import tomllib

DEFAULTS = {
    "seed": 0,
    "data": {
        "dataset": "mnist", "dir": "data", "train_images": "", "train_labels": "", "test_images": "",
        "test_labels": "", "train_limit": 0, "test_limit": 0, "normalize": "standard",
    },
    "model": {"hidden": [256, 256], "activation": "relu", "bias": True, "init": "pytorch", "classes": 0},
    "train": {"epochs": 10, "batch_size": 128, "shuffle": True, "drop_last": True, "eval_every": 1,
              "eval_batch_size": 1000},
    "device": {"name": "auto", "precision": "auto"},
    "loss": {"type": "cross_entropy", "label_smoothing": 0.0},
    "optim": {"type": "sgd", "lr": 0.05, "momentum": 0.9, "dampening": 0.0, "nesterov": False, "weight_decay": 0.0,
              "beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
    "schedule": {"type": "constant", "warmup_steps": 0, "warmup_start_factor": 0.0, "step_size": 1, "gamma": 0.1,
                 "min_lr": 0.0, "pct_start": 0.3, "div_factor": 25.0, "final_div_factor": 1e4},
}


def load_config(path):
    """The config at `path` merged over DEFAULTS; raises ValueError naming the key on a bad type."""
    with open(path, "rb") as f:
        return config_from_dict(tomllib.load(f), path)


def config_from_toml(text, origin="<text>"):
    return config_from_dict(tomllib.loads(text), origin)


def config_from_dict(raw, path):
    config = copy.deepcopy(DEFAULTS)
    if "seed" in raw:
        config["seed"] = raw["seed"]
    for table, defaults in DEFAULTS.items():
        if not isinstance(defaults, dict) or table not in raw:
            continue
        for key, default in defaults.items():
            if key not in raw[table]:
                continue
            value = raw[table][key]
            # TOML integers are accepted where a float is expected, as sprintnet does.
            if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if type(value) is not type(default):
                raise ValueError(f"{path}: {table}.{key} = {value!r} should be a {type(default).__name__}")
            config[table][key] = value
    precision = config["device"]["precision"]
    if precision not in ("auto", "fp32"):
        raise ValueError(f"{path}: device.precision = {precision!r}: the reference trains in fp32 (or --dtype fp64)")
    return config
