"""Strict jsonl reading for probe data: every error names the file and the line.

Probe files are small and hand-written, so typos are the common failure: an unknown
field is an error (with the allowed ones listed), not something silently ignored.
"""

from __future__ import annotations

import json
from pathlib import Path

from mlmkit.errors import MlmkitError


def read_jsonl(path: str | Path, allowed: set[str], what: str) -> list[tuple[int, dict]]:
    """(line number, row) for every non-blank line of `path`; rows must be JSON objects.

    `allowed` is the set of field names a row may hold; `what` names the kind of data in
    errors ("facts", "items", ...).
    """
    path = Path(path)
    if not path.is_file():
        raise MlmkitError(f"{what} file {str(path)!r} does not exist (or is not a file): "
                          "pass a jsonl file with one JSON object per line")
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise MlmkitError(f"{path}, line {number}: invalid JSON ({error.msg} at "
                                  f"column {error.colno})") from error
            if not isinstance(row, dict):
                raise MlmkitError(f"{path}, line {number}: expected a JSON object, got a "
                                  f"{type(row).__name__}")
            unknown = sorted(set(row) - allowed)
            if unknown:
                raise MlmkitError(f"{path}, line {number}: unknown field(s) {unknown}; "
                                  f"{what} rows may hold {sorted(allowed)}")
            rows.append((number, row))
    if not rows:
        raise MlmkitError(f"{what} file {path} is empty: it needs one JSON object per line")
    return rows


def field(row: dict, name: str, kind: type | tuple[type, ...], where: str, required: bool = True):
    """`row[name]` checked against `kind`; None when absent and not required."""
    if name not in row:
        if required:
            raise MlmkitError(f"{where}: missing field {name!r}")
        return None
    value = row[name]
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in _tuple(kind):
        names = " or ".join(k.__name__ for k in _tuple(kind))
        raise MlmkitError(f"{where}: field {name!r} must be a {names}, got {value!r}")
    return value


def _tuple(kind) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)
