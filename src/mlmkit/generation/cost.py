"""What a generation cost: model calls (NFE), tokens revealed per call, wall time.

Every `Generation` and `Infilled` carries one `Cost`, in Python, in `--json` and in the
live view. A batch's rows share its model calls (one call runs every row), so a row's
tokens per call is its own masks over its batch's calls. `nfe` counts the sampler's calls
only; the calls that rank the candidates of a span of unknown length by PLL are
`scoring_calls` (so nfe + scoring_calls is every model call of the result).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from mlmkit.core.results import Result


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
    scoring_calls: int = 0
    """infill: model calls of the PLL scoring that ranked this template's candidates (0 when
    it had one candidate; one scoring run ranks every template's, so templates share its
    calls as rows share a batch's); not part of `nfe` or `tokens_per_call`."""
    scoring_seconds: float = 0.0
    """infill: wall time of that scoring (not part of `seconds`)."""

    @classmethod
    def of(cls, batch, tokens: int) -> Cost:
        """The cost of a row with `tokens` masks in `batch` (an `UnmaskedBatch`)."""
        return cls(nfe=batch.model_calls, tokens=tokens,
                   tokens_per_call=tokens / batch.model_calls if batch.model_calls else 0.0,
                   seconds=batch.seconds, steps=batch.steps, remasked=batch.remasked,
                   edited=batch.edited)


@dataclass
class CallCount:
    """Model calls and wall time counted by `count_calls`."""

    calls: int = 0
    seconds: float = 0.0


@contextlib.contextmanager
def count_calls(model):
    """Count the forward passes of `model` in the block (its input embeddings run once per
    pass, whichever path the caller takes to the encoder) and time the block."""
    counted = CallCount()
    try:
        module = model.get_input_embeddings()
    except (AttributeError, NotImplementedError):  # a model without the accessor
        module = None
    module = model if module is None else module

    def hook(*_):
        counted.calls += 1

    handle = module.register_forward_hook(hook)
    started = time.perf_counter()
    try:
        yield counted
    finally:
        counted.seconds = time.perf_counter() - started
        handle.remove()
