"""How bias scores read in tables (the CLI's and the report's): numbers, intervals, notes."""

from __future__ import annotations

from mlmkit.core.statistics import MIN_INTERVAL_ITEMS, NO_SPREAD


def number(value, digits: int = 2) -> str:
    """Fixed decimals; digits = 0 means 3 significant digits (divergences can be tiny)."""
    if value is None or value != value:
        return "–"
    return f"{value:.3g}" if digits == 0 else f"{value:.{digits}f}"


def digits_for(name: str) -> int:
    """Divergences in 3 significant digits, percentages with 2 decimals."""
    return 0 if name.startswith(("KL", "JS")) else 2


def interval(score, digits: int = 2, short: bool = False, none: str = "–") -> str:
    """'[low, high]', or why there is none (too few items or resamples, no spread; `short`:
    in a few words, for narrow terminals), or `none` (no bootstrap)."""
    if score.note == NO_SPREAD:
        low = number(score.low, digits)
        return f"{low} (no spread)" if short else f"no spread ({low} in every resample)"
    if score.note:
        if not short:
            return score.note
        return ("– (too few resamples)" if "resamples" in score.note
                else f"– (n < {MIN_INTERVAL_ITEMS})")
    if score.low is None or score.high is None:
        return none
    return f"[{number(score.low, digits)}, {number(score.high, digits)}]"
