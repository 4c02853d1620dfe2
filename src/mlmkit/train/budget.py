"""The training budget (steps, tokens or wall-clock) and the progress share it implies."""

from __future__ import annotations

from dataclasses import dataclass

from mlmkit.train.config import parse_duration


@dataclass
class Budget:
    """Whichever limit is reached first ends the run; progress is the largest share used."""

    steps: int | None = None
    tokens: int | None = None
    seconds: float | None = None

    @classmethod
    def from_config(cls, config) -> Budget:
        seconds = parse_duration(config.time) if config.time is not None else None
        return cls(steps=config.steps, tokens=config.tokens, seconds=seconds)

    def progress(self, step: int, tokens: int, elapsed: float) -> float:
        shares = []
        if self.steps:
            shares.append(step / self.steps)
        if self.tokens:
            shares.append(tokens / self.tokens)
        if self.seconds:
            shares.append(elapsed / self.seconds)
        return min(max(shares, default=1.0), 1.0)

    def done(self, step: int, tokens: int, elapsed: float) -> bool:
        return self.progress(step, tokens, elapsed) >= 1.0

    def describe(self) -> str:
        parts = []
        if self.steps:
            parts.append(f"{self.steps} steps")
        if self.tokens:
            parts.append(f"{self.tokens:,} tokens")
        if self.seconds:
            parts.append(f"{self.seconds:g} s")
        return " or ".join(parts)
