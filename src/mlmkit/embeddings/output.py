"""Writing vectors: the .npy format (one float32 array) for `mlmkit embed --format npy`."""

from __future__ import annotations

import numpy as np


def write_npy(handle, vectors) -> None:
    """`vectors` as one float32 .npy array on the binary `handle` (np.load reads it)."""
    np.save(handle, np.asarray(vectors, dtype=np.float32), allow_pickle=False)
