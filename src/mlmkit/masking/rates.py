"""How many: the masking rate of each row, constant, scheduled over steps, or sampled per row.

A rate component returns a float32 [B] tensor of rates for a batch at a training step. The
schedules are pure functions of the step (resuming needs no state); the sampled ones draw
from the policy's (seed, step) generator.
"""

from __future__ import annotations

import math

import torch

from mlmkit.errors import MlmkitError
from mlmkit.masking.counter_stream import CounterStream
from mlmkit.masking.registry import RATES
from mlmkit.masking.seeding import normal, rand, uniform


def _check_rate(value, what: str) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise MlmkitError(f"masking rate {what}={value} must be between 0 and 1")
    return value


class Rate:
    PARAMS: dict = {}

    def __init__(self, **_):
        pass

    def value(self, step: int) -> float:
        """The rate at `step` for schedules (sampled rates return their mean)."""
        raise NotImplementedError

    def __call__(self, batch: int, step: int, generator, device) -> torch.Tensor:
        return torch.full((batch,), self.value(step), dtype=torch.float32, device=device)


@RATES.register("constant")
class ConstantRate(Rate):
    PARAMS = {"value": 0.15}

    def __init__(self, value=0.15, total_steps=None, **_):
        self.rate = _check_rate(value, "value")

    def value(self, step: int) -> float:
        return self.rate

    def describe(self) -> str:
        return f"{self.rate:g}"


class _Schedule(Rate):
    PARAMS = {"start": 0.3, "end": 0.15, "total_steps": None}

    def __init__(self, start=0.3, end=0.15, total_steps=None, **_):
        self.start, self.end = _check_rate(start, "start"), _check_rate(end, "end")
        if total_steps is None or int(total_steps) < 1:
            raise MlmkitError(f"the {self.name} masking-rate schedule needs total_steps "
                              f"(a positive number of training steps), got {total_steps!r}")
        self.total_steps = int(total_steps)

    def progress(self, step: int) -> float:
        return min(max(step, 0) / self.total_steps, 1.0)

    def describe(self) -> str:
        return f"{self.name} {self.start:g}→{self.end:g} over {self.total_steps} steps"


@RATES.register("linear")
class LinearRate(_Schedule):
    """Linear from start to end (Ankner et al. 2023: 30% → 15%)."""

    name = "linear"

    def value(self, step: int) -> float:
        return self.start + (self.end - self.start) * self.progress(step)


@RATES.register("cosine")
class CosineRate(_Schedule):
    """Half a cosine from start to end."""

    name = "cosine"

    def value(self, step: int) -> float:
        return self.end + (self.start - self.end) * 0.5 * (1 + math.cos(math.pi * self.progress(step)))


@RATES.register("step")
class StepRate(Rate):
    """Piecewise constant: values[i] from milestones[i - 1] on (milestones in steps)."""

    PARAMS = {"values": (0.3, 0.15), "milestones": None}
    name = "step"

    def __init__(self, values=(0.3, 0.15), milestones=None, total_steps=None, **_):
        self.values = [_check_rate(v, "values") for v in values]
        if milestones is None:
            if total_steps is None:
                raise MlmkitError("the step masking-rate schedule needs milestones (steps at "
                                  "which the rate changes) or total_steps to space them evenly")
            milestones = [round(total_steps * i / len(self.values))
                          for i in range(1, len(self.values))]
        self.milestones = [int(m) for m in milestones]
        if len(self.milestones) != len(self.values) - 1:
            raise MlmkitError(f"the step schedule has {len(self.values)} values and "
                              f"{len(self.milestones)} milestones: give one milestone fewer "
                              "than values")
        if self.milestones != sorted(self.milestones):
            raise MlmkitError(f"step schedule milestones {self.milestones} must be increasing")

    def value(self, step: int) -> float:
        return self.values[sum(step >= m for m in self.milestones)]

    def describe(self) -> str:
        return f"step {self.values} at {self.milestones}"


@RATES.register("uniform")
class UniformRate(Rate):
    """Per row, rate ~ U(low, high) (u-PMLM's uniform prior)."""

    PARAMS = {"low": 0.0, "high": 1.0}

    def __init__(self, low=0.0, high=1.0, total_steps=None, **_):
        self.low, self.high = _check_rate(low, "low"), _check_rate(high, "high")
        if self.low > self.high:
            raise MlmkitError(f"uniform rate: low={low} is above high={high}")

    def value(self, step: int) -> float:
        return 0.5 * (self.low + self.high)

    def __call__(self, batch, step, generator, device):
        u = rand(batch, generator, device)
        return self.low + (self.high - self.low) * u

    def describe(self) -> str:
        return f"U({self.low:g}, {self.high:g}) per row"


def sample_gamma(shape: float, count: int, generator, device) -> torch.Tensor:
    """Gamma(shape, 1) draws from `generator` (Marsaglia–Tsang, vectorised rejection rounds).
    A counter stream draws the rounds from a child stream: how many rounds the batch needs
    then changes no later draw, and a row's rounds are its own."""
    if isinstance(generator, CounterStream):
        generator = generator.child()
    boost = shape < 1.0
    alpha = shape + 1.0 if boost else shape
    d = alpha - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    out = torch.empty(count, dtype=torch.float64, device=device)
    todo = torch.ones(count, dtype=torch.bool, device=device)
    while bool(todo.any()):  # rounds over the whole batch; > 95% accepted per round
        x = normal(count, generator, device)
        u = uniform(count, generator, device, dtype=torch.float64)
        v = (1 + c * x) ** 3
        ok = (v > 0) & (torch.log(u) < 0.5 * x * x + d - d * v + d * torch.log(v.clamp(min=1e-300)))
        take = ok & todo
        out = torch.where(take, d * v, out)
        todo &= ~take
    if boost:
        out = out * uniform(count, generator, device, dtype=torch.float64) ** (1.0 / shape)
    return out


@RATES.register("beta")
class BetaRate(Rate):
    """Per row, rate ~ Beta(a, b) (FiLM)."""

    PARAMS = {"a": 2.0, "b": 2.0}

    def __init__(self, a=2.0, b=2.0, total_steps=None, **_):
        self.a, self.b = float(a), float(b)
        if not (0 < self.a < math.inf and 0 < self.b < math.inf):
            raise MlmkitError(f"beta rate: a={a} and b={b} must be positive and finite")

    def value(self, step: int) -> float:
        return self.a / (self.a + self.b)

    def __call__(self, batch, step, generator, device):
        x = sample_gamma(self.a, batch, generator, device)
        y = sample_gamma(self.b, batch, generator, device)
        return (x / (x + y)).float()

    def describe(self) -> str:
        return f"Beta({self.a:g}, {self.b:g}) per row"


@RATES.register("diffusion")
class DiffusionRate(Rate):
    """Diffusion time t ~ U(eps, 1), stratified: exactly one draw in each of B equal
    intervals of (eps, 1) (low-discrepancy sampling, as MDLM), in shuffled row order.

    The counter stream draws each row's time on its own, t ~ U(eps, 1): stratifying needs
    the whole global batch, which no process holds (the row stream, one row per call,
    draws the same law)."""

    PARAMS = {"eps": 1e-3}

    def __init__(self, eps=1e-3, total_steps=None, **_):
        self.eps = float(eps)
        if not 0.0 <= self.eps < 1.0:
            raise MlmkitError(f"diffusion rate: eps={eps} must be in [0, 1)")

    def value(self, step: int) -> float:
        return 0.5 * (1.0 + self.eps)

    def __call__(self, batch, step, generator, device):
        if isinstance(generator, CounterStream):
            u = generator.uniform(batch, torch.float64)
            return (self.eps + (1.0 - self.eps) * u).float()
        u = torch.rand(batch, generator=generator, device=device, dtype=torch.float64)
        cell = torch.arange(batch, device=device, dtype=torch.float64)
        t = self.eps + (1.0 - self.eps) * (cell + u) / batch
        order = torch.randperm(batch, generator=generator, device=device)
        return t[order].float()

    def describe(self) -> str:
        return f"diffusion t ~ U({self.eps:g}, 1) stratified"
