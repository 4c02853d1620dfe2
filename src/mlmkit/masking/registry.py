"""String registries for policy components: a name picks a class; an unknown name lists the valid ones."""

from __future__ import annotations

import math

from mlmkit.errors import MlmkitError


def normalise_name(name: str) -> str:
    """`Whole-Word` and `whole_word` name the same component."""
    return str(name).strip().lower().replace("-", "_")


def _check_finite(value, where: str) -> None:
    """A component's parameter, or any number inside it, is finite: a NaN passes every
    range check written as `x <= 0` (a Beta rate with a NaN made its sampler loop forever),
    so the registry refuses it for every component before its own range checks."""
    values = value if isinstance(value, (list, tuple)) else [value]
    for item in values:
        if isinstance(item, float) and not math.isfinite(item):
            raise MlmkitError(f"{where}={value!r} must be finite: give a number")


class Registry:
    """Components of one kind (units, rates, ...), each registered under a name."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, type] = {}

    def register(self, name: str):
        def add(cls):
            self._entries[normalise_name(name)] = cls
            return cls

        return add

    @property
    def names(self) -> list[str]:
        return sorted(self._entries)

    def get(self, name: str) -> type:
        key = normalise_name(name)
        if key not in self._entries:
            raise MlmkitError(f"unknown masking {self.kind} {name!r}: use one of {self.names}")
        return self._entries[key]

    def build(self, name: str, params: dict, **context):
        """An instance of `name` from `params`; unknown parameters are an error, not ignored."""
        cls = self.get(name)
        allowed = getattr(cls, "PARAMS", {})
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise MlmkitError(
                f"masking {self.kind} {name!r} has no parameter(s) {unknown}: "
                f"its parameters are {sorted(allowed) or 'none'}")
        for key, value in params.items():
            _check_finite(value, f"masking {self.kind} {name!r}: {key}")
        return cls(**{**allowed, **context, **params})


UNITS = Registry("units")
RATES = Registry("rate")
WEIGHTS = Registry("weights")
COUNTS = Registry("count")
