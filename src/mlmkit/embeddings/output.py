"""Writing vectors as `mlmkit embed` does: JSON lines, or the .npy format (one float32 array)."""

from __future__ import annotations

import json

import numpy as np


def write_npy(handle, vectors) -> None:
    """`vectors` as one float32 .npy array on the binary `handle` (np.load reads it)."""
    np.save(handle, np.asarray(vectors, dtype=np.float32), allow_pickle=False)


def vector_lines(vectors) -> str:
    """The JSON lines of `mlmkit embed --format jsonl`: {"embedding": [...]} per vector."""
    return "".join(json.dumps({"embedding": row}) + "\n" for row in np.asarray(vectors).tolist())
