"""The files of a long job over a file of texts: a partial output that a killed run resumes.

A job (scoring, embedding) writes its output progressively to `.NAME.<key>.partial` beside
it and renames it into place when complete, so a crash never leaves half a file under the
real name. The key hashes everything the output depends on: the input file (path, size,
modification time), the model's weights and tokenizer by content, and every setting, so a
run resumes only the partial file of the same input, model and settings; partial files of
other settings are debris and removed at the start. An advisory lock keeps two live runs
from writing one partial file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

try:
    import fcntl
except ImportError:  # no advisory locks on this platform
    fcntl = None


def model_identity(mlm) -> dict:
    """The model's weights and tokenizer, by content: a retrained model is another model.

    Up to 1,024 evenly spaced values of every parameter, exactly (no sum whose rounding
    could depend on threads or devices), and the tokenizer's full definition.
    """
    digest = hashlib.sha256()
    with torch.no_grad():
        for name, parameter in mlm.model.named_parameters():
            flat = parameter.detach().reshape(-1)
            step = max(1, flat.numel() // 1024)
            digest.update(f"{name}{tuple(parameter.shape)}".encode())
            digest.update(flat[::step].float().cpu().numpy().tobytes())
    tokenizer = mlm.tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None)
    vocabulary = backend.to_str() if backend is not None else json.dumps(
        sorted(tokenizer.get_vocab().items()))
    return {"weights": digest.hexdigest(),
            "tokenizer": hashlib.sha256(vocabulary.encode("utf-8")).hexdigest(),
            "class": type(mlm.model).__name__}


def fingerprint(input_path, mlm, settings: dict, version: int) -> str:
    """A short hash of everything an output depends on (input file, model, settings and the
    job's record layout `version`)."""
    stat = Path(input_path).expanduser().stat()
    key = {"input": [str(Path(input_path).expanduser().resolve()), stat.st_size,
                     stat.st_mtime_ns],
           "model": model_identity(mlm), "settings": settings, "format": version}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def partial_path(output: Path, key: str) -> Path:
    return output.with_name(f".{output.name}.{key}.partial")


def lock(handle) -> bool:
    """An exclusive lock on an open file (False: another process holds it)."""
    if fcntl is None:  # no advisory locks on this platform
        return True
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def remove_stale_partials(output: Path, keep: Path | None = None) -> int:
    """Delete partial files of `output` left by killed runs with other settings (not the
    one to resume, nor one another live run is writing); returns how many went."""
    removed = 0
    for path in output.parent.glob(f".{output.name}.*.partial"):
        if keep is not None and path == keep:
            continue
        try:
            with open(path, "rb") as handle:
                if not lock(handle):
                    continue
                path.unlink()
                removed += 1
        except OSError:
            continue
    return removed


def complete_line_prefix(path: Path, chunk_texts: int) -> tuple[int, int]:
    """(lines, bytes) of the longest prefix of whole chunks in a partial output of lines."""
    offsets = [0]
    with open(path, "rb") as handle:
        position = 0
        for raw in handle:
            if not raw.endswith(b"\n"):
                break  # a line cut by the kill
            position += len(raw)
            offsets.append(position)
    lines = (len(offsets) - 1) // chunk_texts * chunk_texts
    return lines, offsets[lines]
