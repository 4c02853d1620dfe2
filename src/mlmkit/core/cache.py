"""Where mlmkit keeps derived data (harvested corpora, token shards): one folder, atomic writes."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """`$MLMKIT_CACHE` (default `~/.cache/mlmkit`) joined with `parts`, created."""
    root = Path(os.environ.get("MLMKIT_CACHE", Path.home() / ".cache" / "mlmkit"))
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename: never a partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
