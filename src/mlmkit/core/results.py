"""The result contract: every public function returns a dataclass with `to_dict()`, a
JSON-ready dict (nested dataclasses, tuples, tensors and numpy values converted; a
non-finite float becomes None, since JSON has no NaN)."""

from __future__ import annotations

import dataclasses
import json
import math


def jsonable(value):
    """`value` as plain JSON types (dict, list, str, int, float, bool, None)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "to_dict") and not isinstance(value, Result):
            return jsonable(value.to_dict())
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not f.name.startswith("_")}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "tolist"):  # torch tensors, numpy arrays and scalars
        return jsonable(value.tolist())
    if hasattr(value, "__fspath__"):
        return str(value)
    return str(value)


class Result:
    """Base of result dataclasses: `to_dict()` and `to_json()` for free."""

    def to_dict(self) -> dict:
        return {f.name: jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)
                if not f.name.startswith("_")}

    def to_json(self, **kwargs) -> str:
        return one_line(json.dumps(self.to_dict(), ensure_ascii=False, allow_nan=False,
                                   **kwargs))


# Characters json.dumps(ensure_ascii=False) leaves raw that str.splitlines() and many JSONL
# readers take as line ends: escaped, so one record stays one line (the JSON is equal).
_LINE_BREAKS = str.maketrans({"\u0085": "\\u0085", "\u2028": "\\u2028",
                              "\u2029": "\\u2029"})


def one_line(text: str) -> str:
    """`text` (JSON) with the Unicode line separators inside its strings escaped."""
    return text.translate(_LINE_BREAKS)


def dumps(value, **kwargs) -> str:
    """JSON text of any result, list of results or plain value (never NaN/Infinity)."""
    return one_line(json.dumps(jsonable(value), ensure_ascii=False, allow_nan=False, **kwargs))
