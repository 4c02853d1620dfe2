"""Strict rows for probe data, read by `mlmkit.core.records` (so `-` is standard input
and encoding errors name the byte offset), checked field by field on top.

Probe files are small and hand-written, so typos are the common failure: an unknown
field is an error (with the allowed ones listed), not something silently ignored.
"""

from __future__ import annotations

from mlmkit.core.records import display_name, read_json_objects
from mlmkit.errors import InvalidData


def row_name(path, number: int) -> str:
    """How messages name a row: "'facts.jsonl' line 3"."""
    return f"{display_name(path)} line {number}"


def read_jsonl(path, allowed: set[str], what: str,
               hint: str = "") -> list[tuple[int, dict]]:
    """(line number, row) for every non-blank line of `path` (a file or `-`).

    `allowed` is the set of field names a row may hold; `what` names the kind of data in
    errors ("facts", "items", ...); `hint` ends the unknown-field error (what to do).
    """
    rows = []
    for number, row in read_json_objects(path, what=what):
        unknown = sorted(set(row) - allowed)
        if unknown:
            raise InvalidData(f"{row_name(path, number)}: unknown field(s) {unknown}; {what} rows "
                              f"may hold {sorted(allowed)}" + (f"; {hint}" if hint else ""))
        rows.append((number, row))
    if not rows:
        raise InvalidData(f"{what} file {display_name(path)} is empty: it needs one JSON object "
                          "per line")
    return rows


def field(row: dict, name: str, kind: type | tuple[type, ...], where: str, required: bool = True):
    """`row[name]` checked against `kind`; None when absent and not required."""
    if name not in row:
        if required:
            raise InvalidData(f"{where}: missing field {name!r}")
        return None
    value = row[name]
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in _tuple(kind):
        names = " or ".join(k.__name__ for k in _tuple(kind))
        raise InvalidData(f"{where}: field {name!r} must be a {names}, got {value!r}")
    return value


def _tuple(kind) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)
