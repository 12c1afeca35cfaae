"""sprintnet's random numbers in Python: a port of src/sprintnet/core/philox.h and random.{h,cpp}.

Philox4x32-10 is counter-based, so every value depends only on (key, counter):
the numpy version below computes whole arrays of blocks at once and yields the
same 32-bit words as the C++ Generator, bit for bit. On top of it:
  - Generator(seed, stream): next_u32 / uniform_double / normal in the C++ draw order;
  - epoch_permutation(seed, epoch, n): the training order of one epoch.
tests/parity/golden/port_known_answers.json (written by the C++ parity test)
holds values computed by sprintnet itself; tools/test_sprintnet_port.py checks
this port against them.
"""

import math

import numpy as np

_MASK32 = np.uint64(0xFFFFFFFF)
_MUL0, _MUL1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_WEYL0, _WEYL1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_ROUNDS = 10

# core/random.h permutation_key(): the permutation's key is the seed xor this.
PERMUTATION_KEY_XOR = 0x5851F42D4C957F2D
# train/trainer.cpp: the training loader's seed is config.seed xor this salt,
# and the weights come from Philox stream 1 of config.seed.
SHUFFLE_SEED_SALT = 0x9E3779B97F4A7C15
INIT_STREAM = 1

_U64 = (1 << 64) - 1


def philox4x32_10_scalar(key, counter_lo, counter_hi):
    """Reference version on Python integers: the four 32-bit words of one block."""
    c0, c1 = counter_lo & 0xFFFFFFFF, (counter_lo >> 32) & 0xFFFFFFFF
    c2, c3 = counter_hi & 0xFFFFFFFF, (counter_hi >> 32) & 0xFFFFFFFF
    k0, k1 = key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF
    for _ in range(_ROUNDS):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & 0xFFFFFFFF, (p0 >> 32) ^ c3 ^ k1, p0 & 0xFFFFFFFF
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return c0, c1, c2, c3


def _split64(values):
    """uint64 array (or int) -> (low, high) 32-bit halves as uint64 arrays."""
    v = np.asarray(values, dtype=np.uint64)
    return v & _MASK32, v >> np.uint64(32)


def philox4x32_10(key, counter_lo, counter_hi):
    """Vectorised Philox4x32-10. Arguments are 64-bit ints or uint64 arrays (broadcast
    together); returns a uint32 array of shape broadcast_shape + (4,)."""
    c0, c1 = _split64(counter_lo)
    c2, c3 = _split64(counter_hi)
    k0, k1 = _split64(key)
    c0, c1, c2, c3, k0, k1 = np.broadcast_arrays(c0, c1, c2, c3, k0, k1)
    c0, c1, c2, c3, k0, k1 = (a.copy() for a in (c0, c1, c2, c3, k0, k1))
    shift = np.uint64(32)
    for _ in range(_ROUNDS):
        p0 = _MUL0 * c0  # 32 x 32 -> 64 bits: exact in uint64
        p1 = _MUL1 * c2
        c0, c1, c2, c3 = (p1 >> shift) ^ c1 ^ k0, p1 & _MASK32, (p0 >> shift) ^ c3 ^ k1, p0 & _MASK32
        k0 = (k0 + _WEYL0) & _MASK32
        k1 = (k1 + _WEYL1) & _MASK32
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def permutation_keys(seed, epoch, n):
    """core/random.h permutation_key() for samples 0..n-1, as uint32."""
    key = (seed ^ PERMUTATION_KEY_XOR) & _U64
    return philox4x32_10(key, np.arange(n, dtype=np.uint64), epoch & _U64)[:, 0]


def epoch_permutation(seed, epoch, n):
    """The order of epoch `epoch` (0-based): samples sorted by key, ties by index (a stable sort)."""
    return np.argsort(permutation_keys(seed, epoch, n), kind="stable").astype(np.int64)


class Generator:
    """core/random.h Generator: state (seed, stream, offset); offset counts 32-bit words drawn."""

    def __init__(self, seed=0, stream=0):
        self.seed = seed & _U64
        self.stream = stream & _U64
        self.offset = 0

    def u32(self, count):
        """The next `count` 32-bit words, as a uint64 array (block offset // 4, lane offset % 4)."""
        first_block, last_block = self.offset // 4, (self.offset + count + 3) // 4
        blocks = philox4x32_10(self.seed, np.arange(first_block, last_block, dtype=np.uint64), self.stream)
        start = self.offset - 4 * first_block
        self.offset += count
        return blocks.reshape(-1)[start:start + count].astype(np.uint64)

    def uniform_double(self, count):
        """Uniform in [0, 1) with 53 bits: 27 bits of one word, then 26 of the next."""
        words = self.u32(2 * count)
        hi, lo = words[0::2] >> np.uint64(5), words[1::2] >> np.uint64(6)
        return ((hi << np.uint64(26)) | lo).astype(np.float64) * (1.0 / 9007199254740992.0)

    def uniform(self, count, low, high):
        return low + (high - low) * self.uniform_double(count)

    def normal(self, count):
        """Box-Muller without a cached spare: each value draws u1 then u2 (four words).
        numpy's log/cos may differ from the C library's by an ulp, so fp64 values can
        differ in the last bit; after rounding to fp32 they agree."""
        pairs = self.uniform_double(2 * count)
        u1, u2 = 1.0 - pairs[0::2], pairs[1::2]
        return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)
