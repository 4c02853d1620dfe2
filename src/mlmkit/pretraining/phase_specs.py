"""The phases a config declares, parsed and checked from the config alone: steps that add up
to --steps, block lengths within the model's positions, a RoPE θ only on a RoPE family.
No torch, so the config checks them as it is built (`mlmkit.pretraining.phases` runs them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlmkit.errors import InvalidArgument
from mlmkit.models.preset_table import (
    PRESET_POSITIONS,
    ROPE_FAMILIES,
    init_positions,
    parse_preset,
    preset_positions,
)

PHASE_KEYS = ("name", "steps", "seq_len", "masking_rate", "rope_theta", "mixture", "lr")
LR_KEYS = ("warmup", "start", "end", "shape")
LR_SHAPES = ("linear", "cosine", "sqrt", "constant")
RUN_CORPUS = "corpus"  # a mixture's name for the run's --corpus
@dataclass(frozen=True)
class LRPiece:
    """A phase's learning rate, as shares of the peak: 0 → `start` over `warmup` steps,
    then `start` → `end` along `shape` (sqrt: 1 − sqrt, the decay of ModernBERT's
    last phase)."""

    warmup: int = 0
    start: float = 1.0
    end: float = 1.0
    shape: str = "linear"

    def factor(self, step_in_phase: int, steps: int) -> float:
        if step_in_phase < self.warmup:
            return self.start * (step_in_phase + 1) / self.warmup
        rest = max(steps - self.warmup, 1)
        t = min((step_in_phase - self.warmup) / rest, 1.0)
        if self.shape == "constant":
            t = 0.0
        elif self.shape == "cosine":
            t = 0.5 * (1 - math.cos(math.pi * t))
        elif self.shape == "sqrt":
            t = math.sqrt(t)
        return self.start + (self.end - self.start) * t


@dataclass(frozen=True)
class Phase:
    name: str
    steps: int
    seq_len: int
    masking_rate: tuple[float, float] | None
    rope_theta: float | None
    mixture: tuple[tuple[str, float], ...]
    lr: LRPiece | None

    def describe(self) -> str:
        parts = [f"{self.steps} steps", f"seq_len {self.seq_len}"]
        if self.masking_rate is not None:
            a, b = self.masking_rate
            parts.append(f"masking {a:g}" + (f"→{b:g}" if b != a else ""))
        if self.rope_theta is not None:
            parts.append(f"RoPE θ {self.rope_theta:g}")
        if len(self.mixture) > 1 or self.mixture[0][0] != RUN_CORPUS:
            parts.append("mixture " + ", ".join(f"{c} {w:g}" for c, w in self.mixture))
        if self.lr is not None:
            parts.append(f"lr {self.lr.start:g}→{self.lr.end:g} ({self.lr.shape}"
                         + (f", warmup {self.lr.warmup}" if self.lr.warmup else "") + ")")
        return f"{self.name}: " + ", ".join(parts)


def _number(where: str, value, low: float, high: float, *, whole: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            value) or not low <= value <= high or (whole and not float(value).is_integer()):
        kind = "a whole number" if whole else "a number"
        raise InvalidArgument(f"{where}={value!r} must be {kind} between {low:g} and {high:g}")
    return int(value) if whole else float(value)


def parse_phases(raw, *, total_steps: int | None, seq_len: int, max_seq_len: int,
                 rope: bool | None, objective: str = "mlm") -> list[Phase]:
    """The config's `phases` list, checked field by field (errors name `phases[i].field`).

    `rope`: whether the run's model has RoPE (None: not known yet, checked at build time).
    """
    if not isinstance(raw, list) or not raw:
        raise InvalidArgument("phases must be a non-empty list of mappings (see "
                              "mlmkit.pretraining.phases)")
    phases = []
    for i, item in enumerate(raw):
        where = f"phases[{i}]"
        if not isinstance(item, dict):
            raise InvalidArgument(f"{where} must be a mapping of {', '.join(PHASE_KEYS)}")
        unknown = sorted(set(item) - set(PHASE_KEYS))
        if unknown:
            raise InvalidArgument(f"{where}: unknown field(s) {unknown}; valid: "
                                  f"{list(PHASE_KEYS)}")
        if "steps" not in item:
            raise InvalidArgument(f"{where}: give its steps")
        steps = _number(f"{where}.steps", item["steps"], 1, 10**15, whole=True)
        length = _number(f"{where}.seq_len", item.get("seq_len", seq_len), 8, max_seq_len,
                         whole=True)
        rate = item.get("masking_rate")
        if rate is not None:
            if objective == "diffusion":
                raise InvalidArgument(f"{where}.masking_rate: the diffusion objective draws "
                                      "its own rate per sequence; drop masking_rate")
            pair = rate if isinstance(rate, (list, tuple)) else [rate, rate]
            if len(pair) != 2:
                raise InvalidArgument(f"{where}.masking_rate={rate!r}: a rate or [start, end]")
            rate = tuple(_number(f"{where}.masking_rate", r, 0.0, 1.0) for r in pair)
            if min(rate) <= 0:
                raise InvalidArgument(f"{where}.masking_rate={item['masking_rate']!r} must "
                                      "be above 0")
        theta = item.get("rope_theta")
        if theta is not None:
            theta = _number(f"{where}.rope_theta", theta, 1.0, 1e12)
            if rope is False:
                raise InvalidArgument(f"{where}.rope_theta: the run's model family has no "
                                      "RoPE (absolute or relative positions); use a RoPE "
                                      "family (modernbert, ettin, mmbert, eurobert, neobert) "
                                      "or drop rope_theta")
        mixture = item.get("mixture", {RUN_CORPUS: 1.0})
        if not isinstance(mixture, dict) or not mixture:
            raise InvalidArgument(f"{where}.mixture must map corpora to weights, e.g. "
                                  "{corpus: 0.7, python-docs: 0.3}")
        weights = []
        for name, weight in mixture.items():
            if not isinstance(name, str) or not name.strip():
                raise InvalidArgument(f"{where}.mixture: {name!r} is not a corpus name")
            weights.append((name, _number(f"{where}.mixture[{name}]", weight, 0.0, 1e9)))
        total = sum(w for _, w in weights)
        if total <= 0:
            raise InvalidArgument(f"{where}.mixture: the weights add up to 0")
        mixture = tuple((n, w / total) for n, w in weights if w > 0)
        lr = item.get("lr")
        if lr is not None:
            if not isinstance(lr, dict) or set(lr) - set(LR_KEYS):
                raise InvalidArgument(f"{where}.lr must be a mapping of {', '.join(LR_KEYS)}")
            shape = lr.get("shape", "linear")
            if shape not in LR_SHAPES:
                raise InvalidArgument(f"{where}.lr.shape={shape!r}: use one of "
                                      f"{list(LR_SHAPES)}")
            lr = LRPiece(warmup=_number(f"{where}.lr.warmup", lr.get("warmup", 0), 0, steps,
                                        whole=True),
                         start=_number(f"{where}.lr.start", lr.get("start", 1.0), 0.0, 1.0),
                         end=_number(f"{where}.lr.end", lr.get("end", lr.get("start", 1.0)),
                                     0.0, 1.0),
                         shape=shape)
        name = item.get("name", f"phase {i + 1}")
        if not isinstance(name, str):
            raise InvalidArgument(f"{where}.name={name!r} must be text")
        phases.append(Phase(name, steps, length, rate, theta, mixture, lr))
    with_lr = [p.lr is not None for p in phases]
    if any(with_lr) and not all(with_lr):
        raise InvalidArgument("phases: give every phase an lr piece, or none (then --schedule "
                              "runs over the whole budget)")
    added = sum(p.steps for p in phases)
    if total_steps is None:
        raise InvalidArgument("phases need a --steps budget (their steps add up to it), not "
                              "--tokens or --time")
    if added != total_steps:
        raise InvalidArgument(f"phases: their steps add up to {added} "
                              f"({' + '.join(str(p.steps) for p in phases)}), not --steps "
                              f"{total_steps}: make them add up")
    return phases


def scale_phases(raw: list, steps: int) -> list:
    """A recipe's phases stretched to `steps` (largest remainders, each phase ≥ 1 step;
    lr warmups scale with their phase)."""
    old = [int(p["steps"]) for p in raw]
    total = sum(old)
    if steps < len(old):
        raise InvalidArgument(f"--steps {steps}: the recipe has {len(old)} phases; give at "
                              f"least {len(old)} steps")
    exact = [s * steps / total for s in old]
    new = [max(1, int(e)) for e in exact]
    order = sorted(range(len(old)), key=lambda i: exact[i] - int(exact[i]), reverse=True)
    i = 0
    while sum(new) != steps:
        j = order[i % len(order)]
        if sum(new) < steps:
            new[j] += 1
        elif new[j] > 1:
            new[j] -= 1
        i += 1
    out = []
    for phase, before, count in zip(raw, old, new, strict=True):
        phase = dict(phase, steps=count)
        if isinstance(phase.get("lr"), dict) and phase["lr"].get("warmup"):
            warm = round(phase["lr"]["warmup"] * count / max(before, 1))
            phase["lr"] = dict(phase["lr"], warmup=min(warm, count))
        out.append(phase)
    return out


def phase_limit(config) -> int:
    """The longest block a phase may ask: the model's positions."""
    if config.init is not None:
        return init_positions(config.init) or PRESET_POSITIONS
    return preset_positions(config.model)


def check_config_phases(config) -> None:
    """The config's phases, checked with what the config alone tells (PretrainConfig.validate):
    steps adding up to --steps, lengths within the model's positions, a RoPE θ only on a RoPE
    family (an --init model is checked when it is loaded)."""
    if config.recipe is not None and (not isinstance(config.recipe, str)
                                      or not config.recipe.strip()):
        raise InvalidArgument(f"recipe={config.recipe!r} must be a recipe name")
    rope = None
    if config.init is None:
        family, _ = parse_preset(config.model)
        rope = family in ROPE_FAMILIES
    parse_phases(config.phases, total_steps=config.steps, seq_len=config.seq_len,
                 max_seq_len=phase_limit(config), rope=rope, objective=config.objective)


