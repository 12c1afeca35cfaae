"""MNIST's IDX files read with numpy alone (shared by the PyTorch and JAX peers)."""
import gzip
import os

import numpy as np

MEAN, STD = 0.1307, 0.3081  # sprintnet's "standard" normalisation of MNIST


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def find(data_dir, name):
    for candidate in (name, name + ".gz"):
        path = os.path.join(data_dir, candidate)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(os.path.join(data_dir, name))
