"""Range checks for numeric arguments, shared by the Python API and the CLI, so that a bad
value stops before any work with a message naming the argument (and its flag)."""

from __future__ import annotations

import math

from mlmkit.errors import InvalidArgument


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _shown(value) -> str:
    """The value as an error message shows it: a whole number of more than 20 digits by its
    sign and length (its repr would fill the line, and past 4,300 digits Python refuses to
    write it)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 66:
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"<{'a negative' if value < 0 else 'a'} number of about {digits:,} digits>"
    return repr(value)


def clipped(text: str, width: int = 40) -> str:
    """`text` as an error message quotes it: its first `width` characters and "…" when it is
    longer (a protein sequence, a repr of a large object)."""
    return text if len(text) <= width else text[:width] + "…"


def _number(name: str, value, kind=float):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(f"{name}={_shown(value)} ({_flag(name)}) must be a number")
    if kind is int and (isinstance(value, float) and not value.is_integer()):
        raise InvalidArgument(f"{name}={_shown(value)} ({_flag(name)}) must be a whole number")
    # an int is finite, and one past a double's range would overflow math.isfinite
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgument(f"{name}={_shown(value)} ({_flag(name)}) must be a finite number")
    return value


def finite(name: str, value):
    return _number(name, value)


def positive(name: str, value):
    """> 0 and finite (learning rates, temperatures, ...)."""
    _number(name, value)
    if value <= 0:
        raise InvalidArgument(f"{name}={_shown(value)} ({_flag(name)}) must be > 0")
    return value


def non_negative(name: str, value):
    _number(name, value)
    if value < 0:
        raise InvalidArgument(f"{name}={_shown(value)} ({_flag(name)}) must be ≥ 0")
    return value


def within(name: str, value, low: float, high: float):
    """A finite number in [low, high]: the range past which a weight makes logits overflow."""
    _number(name, value)
    if not low <= value <= high:
        raise InvalidArgument(f"{name}={_shown(value)} ({_flag(name)}) must be between {low:g} "
                              f"and {high:,g}")
    return value


def count(name: str, value, minimum: int = 1, maximum: int | None = None):
    """A whole number in [minimum, maximum] (steps, sizes, top-k, ...)."""
    _number(name, value, int)
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum:,}" if maximum is not None else f"≥ {minimum}"
        raise InvalidArgument(f"{name}={_shown(value)} ({_flag(name)}) must be a whole number "
                              f"{bound}")
    return int(value)


def probability(name: str, value, *, closed_low: bool = True, closed_high: bool = False):
    """In [0, 1) by default (masking rates, dropout); the ends' openness is configurable."""
    _number(name, value)
    low_ok = value >= 0 if closed_low else value > 0
    high_ok = value <= 1 if closed_high else value < 1
    if not (low_ok and high_ok):
        interval = ("[" if closed_low else "(") + "0, 1" + ("]" if closed_high else ")")
        raise InvalidArgument(f"{name}={_shown(value)} ({_flag(name)}) must be in {interval}")
    return value


def boolean(name: str, value) -> bool:
    """True or False (a switch), not a value that only looks like one ("yes", 1)."""
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name}={_shown(value)} ({_flag(name)}) must be True or False")
    return value


def choice(name: str, value, options) -> str:
    if value not in options:
        raise InvalidArgument(f"{name}={_shown(value)} ({_flag(name)}) is not known: use one of "
                              f"{', '.join(map(str, options))}")
    return value
