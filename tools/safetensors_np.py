"""The safetensors format with numpy only (no dependency on the safetensors package):
    u64 little-endian N | N bytes of JSON header | raw little-endian tensor data
The header maps each name to {"dtype", "shape", "data_offsets"}, plus an optional
"__metadata__" of strings. sprintnet's reader (io/safetensors.cpp) checks every
file these functions write, so the format is held to the same rules as the
package's own files.
"""

import json
import os
import struct

import numpy as np

_CODES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "U8": "u1"}
_HEADER_ALIGNMENT_BYTES = 8


def _code_of(array):
    for code, dtype in _CODES.items():
        if np.dtype(dtype) == array.dtype.newbyteorder("<"):
            return code
    raise ValueError(f"no safetensors code for dtype {array.dtype}")


def save(path, tensors, metadata=None):
    """Writes {name: numpy array} (in insertion order) and string metadata; atomic (temp file, rename)."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        code = _code_of(array)
        blob = array.astype(_CODES[code], copy=False).tobytes()
        header[name] = {"dtype": code, "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % _HEADER_ALIGNMENT_BYTES)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)


def load(path):
    """({name: numpy array}, metadata dict)."""
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in sorted(header.items(), key=lambda item: item[1]["data_offsets"][0]):
        begin, end = entry["data_offsets"]
        dtype = np.dtype(_CODES[entry["dtype"]])
        tensors[name] = np.frombuffer(body[begin:end], dtype=dtype).reshape(entry["shape"]).copy()
    return tensors, metadata
