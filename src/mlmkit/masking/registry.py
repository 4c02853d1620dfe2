"""String registries for policy components: a name picks a class; an unknown name lists the valid ones."""

from __future__ import annotations

from mlmkit.errors import MlmkitError


def normalise_name(name: str) -> str:
    """`Whole-Word` and `whole_word` name the same component."""
    return str(name).strip().lower().replace("-", "_")


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
        return cls(**{**allowed, **context, **params})


UNITS = Registry("units")
RATES = Registry("rate")
WEIGHTS = Registry("weights")
COUNTS = Registry("count")
