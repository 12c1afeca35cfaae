"""sprintnet's data pipeline in numpy: a port of src/sprintnet/data/ (IDX files,
dataset_files, train/test limits, make_normalization).

The images stay uint8; a batch is x = float(x_u8) * scale + shift, computed in
the model's dtype with scale and shift rounded to it first, as
ops::gather_rows_u8 does.
"""

import gzip
import math
import os

import numpy as np

_STANDARD_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                   "t10k-labels-idx1-ubyte")
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_PIXEL_MAX = 255.0


def read_idx(path):
    """A raw or gzipped IDX file (gzip found by its magic bytes) as a numpy array."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise ValueError(f"{path}: not an IDX file (bad magic {data[:4].hex()})")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    dtype = np.dtype(_IDX_TYPES[data[2]])
    payload = data[4 + 4 * ndim:]
    if len(payload) != math.prod(dims) * dtype.itemsize:
        raise ValueError(f"{path}: payload of {len(payload)} bytes does not match dims {dims}")
    return np.frombuffer(payload, dtype=dtype).reshape(dims)


def _standard_file(folder, name):
    for candidate in (os.path.join(folder, name), os.path.join(folder, name + ".gz")):
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(f"{os.path.join(folder, name)} not found (nor .gz): run scripts/get-data, "
                            "or pass --data-dir")


def dataset_files(data_config, data_dir=None):
    """The four IDX paths of data/dataset_files.cpp: <dir>/<dataset>/..., or data.* for dataset "idx"."""
    dataset = data_config["dataset"]
    if dataset in ("mnist", "fashion-mnist"):
        folder = os.path.join(data_dir or data_config["dir"], dataset)
        return [_standard_file(folder, name) for name in _STANDARD_FILES]
    if dataset == "idx":
        return [data_config[key] for key in ("train_images", "train_labels", "test_images", "test_labels")]
    raise ValueError(f"data.dataset = {dataset!r} is not known")


MAX_CLASSES = 1 << 16  # data/dataset.h kMaxClasses


def check_labels(labels, classes, what):
    """The class count of data/dataset.cpp's check_labels: `classes` (model.classes) when > 0, with every label
    in [0, classes); 0 takes the largest label + 1."""
    if labels.size and labels.min() < 0:
        raise ValueError(f"{what}: label {int(labels.min())} is negative")
    largest = int(labels.max()) if labels.size else -1
    if classes > 0:
        if largest >= classes:
            raise ValueError(f"{what}: label {largest} is outside [0, {classes}) (model.classes, or the training "
                             "labels' largest + 1)")
        return classes
    if largest >= MAX_CLASSES:
        raise ValueError(f"{what}: largest label is {largest}, which would mean {largest + 1} classes (at most "
                         f"{MAX_CLASSES} are accepted)")
    return largest + 1


def load_train_test(data_config, data_dir=None, classes=0):
    """((train_images u8 [N, D], train_labels int64 [N]), (test...), num_classes): `classes` (model.classes)
    when > 0, else the largest training label + 1; every label of both files is checked against it before the
    limits are applied, as sprintnet does."""
    paths = dataset_files(data_config, data_dir)
    train_images, train_labels, test_images, test_labels = (read_idx(p) for p in paths)
    num_classes = check_labels(train_labels, classes, f"labels file {paths[1]}")
    check_labels(test_labels, num_classes, f"labels file {paths[3]}")

    def split(images, labels, limit):
        kept = min(limit, len(labels)) if limit > 0 else len(labels)
        return (images[:kept].reshape(kept, -1).astype(np.uint8),  # a writable copy, for torch.from_numpy
                labels[:kept].astype(np.int64))

    train = split(train_images, train_labels, data_config["train_limit"])
    test = split(test_images, test_labels, data_config["test_limit"])
    return train, test, num_classes


def make_normalization(train_images, mode):
    """(scale, shift) of data/normalization.cpp, summed over a byte histogram in the same order (bit-identical)."""
    if mode == "unit":
        return 1.0 / _PIXEL_MAX, 0.0
    if mode != "standard":
        raise ValueError(f"data.normalize = {mode!r} is not known")
    histogram = np.bincount(train_images.reshape(-1), minlength=256).tolist()
    count = float(train_images.size)
    mean = 0.0
    for v, n in enumerate(histogram):
        mean += v / _PIXEL_MAX * float(n)
    mean /= count
    variance = 0.0
    for v, n in enumerate(histogram):
        d = v / _PIXEL_MAX - mean
        variance += d * d * float(n)
    stddev = math.sqrt(variance / count)
    if stddev <= 0.0:
        raise ValueError("every training pixel has the same value: use data.normalize = 'unit'")
    return 1.0 / (_PIXEL_MAX * stddev), -mean / stddev
