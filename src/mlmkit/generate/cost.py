"""What a generation cost: model calls (NFE), tokens revealed per call, wall time.

Every `Generation` and `Infilled` carries one `Cost`, in Python, in `--json` and in the
live view. A batch's rows share its model calls (one call runs every row), so a row's
tokens per call is its own masks over its batch's calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlmkit.runtime.results import Result


@dataclass
class Cost(Result):
    """The cost of one result (its batch's calls and time)."""

    nfe: int
    """Model calls (function evaluations) of the batch; a guided call counts once."""
    tokens: int
    """Masks this row had to fill."""
    tokens_per_call: float
    """tokens / nfe (0 when no call was needed)."""
    seconds: float
    """Wall time of the batch's unmasking loop."""
    steps: int
    """Sampler steps run (steps that revealed nothing cost no call)."""
    remasked: int = 0
    """Tokens turned back into masks in the batch (--remask)."""
    edited: int = 0
    """Revealed tokens replaced in the batch (--edit)."""

    @classmethod
    def of(cls, batch, tokens: int) -> Cost:
        """The cost of a row with `tokens` masks in `batch` (an `UnmaskedBatch`)."""
        return cls(nfe=batch.model_calls, tokens=tokens,
                   tokens_per_call=tokens / batch.model_calls if batch.model_calls else 0.0,
                   seconds=batch.seconds, steps=batch.steps, remasked=batch.remasked,
                   edited=batch.edited)
