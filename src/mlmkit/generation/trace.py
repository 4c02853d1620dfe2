"""`--trace out.jsonl`: every step's canvas, one JSON line per row and step, for replay."""

from __future__ import annotations

import json
from pathlib import Path

from mlmkit.core.output import write_text
from mlmkit.generation.unmask import StepEvent


def step_row(tokenizer, event: StepEvent, row: int) -> dict:
    """One row of a step as JSON-ready fields: the content tokens (masks as the mask token),
    which are masked and which were revealed at this step (bools per content token),
    "remasked" and "edited" with --remask / --edit, and "confidence": the probability the
    step gave each token it revealed (None elsewhere, or when it revealed nothing)."""
    content = event.content[row]
    confidence = None
    if event.probability is not None:
        confidence = [None if value != value else round(value, 6)  # NaN: not revealed
                      for value in event.probability[row][content].tolist()]
    return {
        "tokens": tokenizer.convert_ids_to_tokens(event.ids[row][content].tolist()),
        "masked": event.masked[row][content].tolist(),
        "revealed": event.revealed[row][content].tolist(),
        **{name: getattr(event, name)[row][content].tolist()
           for name in ("remasked", "edited") if getattr(event, name) is not None},
        "confidence": confidence,
    }


class TraceRecorder:
    """Collects step events; `save` writes them atomically as JSON lines.

    Each line: {"row", "step", "block", the fields of `step_row`, and "model_calls" so far}.
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.lines: list[str] = []

    def __call__(self, event: StepEvent) -> None:
        for row in range(event.ids.shape[0]):
            self.lines.append(json.dumps({
                "row": event.first_row + row, "step": event.step, "block": event.block,
                **step_row(self.tokenizer, event, row),
                "model_calls": event.model_calls,
            }, ensure_ascii=False))

    def save(self, path: str | Path, inputs=()) -> None:
        """Write the lines atomically (`-`: standard output); refuses to overwrite an input."""
        write_text(path, "".join(line + "\n" for line in self.lines), inputs=inputs,
                   what="trace")
