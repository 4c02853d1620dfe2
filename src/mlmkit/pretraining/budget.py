"""The training budget (steps, tokens or wall-clock) and the progress share it implies."""

from __future__ import annotations

from dataclasses import dataclass

from mlmkit.core.devices import resolve_device, resolve_precision
from mlmkit.pretraining.config import parse_duration


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


# The default run's budget, sized for the machine: 1,000 steps take about 5 minutes on 2 CPU
# cores that multiply bf16 natively (or on a GPU). Without bf16 the run is fp32, about twice
# as slow per step on an idle machine and many times slower on a loaded one, so there the
# same 1,000 steps are capped at 10 minutes of training time (the schedule follows
# whichever budget is further along), and `mlmkit pretrain` ends within 15 minutes on 2
# cores. Where the steps come first, the run is the same for the same seed.
DEFAULT_STEPS = 1000
FP32_CPU_TIME = "10m"


def default_budget(device: str | None = "auto", precision: str | None = "auto") -> dict:
    """The budget fields of a run given none: capped in time on a CPU that trains in fp32."""
    resolved = resolve_device(device)
    fp32_cpu = resolved.type == "cpu" and resolve_precision(
        precision, resolved, task="training") == "fp32"
    return {"steps": DEFAULT_STEPS, **({"time": FP32_CPU_TIME} if fp32_cpu else {})}
