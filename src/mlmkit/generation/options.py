"""`SamplerOptions`: how iterative unmasking turns masks into tokens, validated once.

The fields are declared once, with their help, in `mlmkit.options.sampler.Sampling` (the
source of the `generate`/`infill` keywords, the CLI flags and the server's request fields).
`generate` and `infill` (and their CLI commands) build one `SamplerOptions`; the shared
loop (`mlmkit.generation.unmask`) reads nothing else. Fields that do not depend on the
canvas are checked when the options are made; `resolve(...)` checks the rest (steps and
blocks against the number of masks) before any model call. A new reveal policy is a new
field here and a new rule in `mlmkit.generation.samplers`.
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings
from dataclasses import dataclass, replace
from functools import cached_property

from mlmkit.core import checks
from mlmkit.generation.choose import ChoiceConfig
from mlmkit.generation.confidence import check_confidence
from mlmkit.generation.samplers import get_sampler
from mlmkit.options import default_of, fields_of, types_of
from mlmkit.options.sampler import Sampling

MAX_ANCESTRAL_STEPS = 10_000
"""The ancestral sampler may take more steps than masks (most reveal nothing and cost no
model call), but not without end."""

MAX_TOTAL_STEPS = 10_000
"""No run of the loop (scheduled, remask-loop and edit steps together) goes past this."""

REVEALS = ("count", "threshold", "factor", "entropy-bound")
"""How many masks a step of the confidence sampler reveals (see mlmkit.generation.samplers)."""

REVEAL_DEFAULTS = {"threshold": 0.9, "factor": 1.0, "entropy-bound": 0.1}
"""The setting each adaptive policy uses when its parameter is not given."""

REMASKS = ("cap", "rescale", "loop")
"""ReMDM's remasking schedules of sigma (see mlmkit.generation.samplers.remask_sigma)."""

REMASK_DEFAULT_SIGMA = {"cap": 0.04, "rescale": 0.5, "loop": 0.1}


@dataclass(frozen=True)
class SamplerOptions(Sampling):
    """The sampler's options (the fields of `mlmkit.options.sampler.Sampling`, each a CLI flag
    of the same name), checked, with the plan the loop follows."""

    def __post_init__(self):
        # whole numbers given as floats (4.0) are kept as ints: the loop indexes with them
        if self.steps is not None:
            self._whole("steps", checks.count("steps", self.steps, 1))
        get_sampler(self.sampler)
        check_confidence(self.confidence)
        if self.block_length is not None:
            self._whole("block_length", checks.count("block_length", self.block_length, 1))
        checks.non_negative("cfg_scale", self.cfg_scale)
        self._whole("seed", checks.count("seed", self.seed, 0, 2**63 - 1))
        if self.top_k is not None:
            self._whole("top_k", checks.count("top_k", self.top_k, 1))
        if not isinstance(self.cache, bool):
            raise checks.InvalidArgument(f"cache={self.cache!r} must be True or False")
        self.choice  # noqa: B018 (validates temperature, top-k and top-p)
        self._check_policies()
        # last: the checks above say what is wrong more precisely (an open end, "≥ 0")
        for field in fields_of(Sampling):  # each float's range (the request schema's too)
            value = getattr(self, field.name)
            if "range" in field.metadata and value is not None:
                checks.within(field.name, value, *field.metadata["range"])

    def _whole(self, name: str, value: int) -> None:
        object.__setattr__(self, name, value)

    def _check_policies(self) -> None:
        if self.confidence != "prob" and self.sampler != "confidence":
            raise checks.InvalidArgument(
                f"--confidence {self.confidence} ranks the predictions of --sampler "
                f"confidence; --sampler {self.sampler} does not rank them: drop --confidence "
                "or use --sampler confidence")
        checks.choice("reveal", self.reveal, REVEALS)
        params = {"threshold": self.threshold, "factor": self.factor,
                  "entropy-bound": self.entropy_bound}
        for policy, value in params.items():
            if value is not None and policy != self.reveal:
                raise checks.InvalidArgument(
                    f"--{policy} {value} is a "
                    f"setting of --reveal {policy}, not of --reveal {self.reveal}: add "
                    f"--reveal {policy} or drop it")
        if self.threshold is not None:
            checks.probability("threshold", self.threshold, closed_low=False, closed_high=True)
        if self.factor is not None:
            checks.positive("factor", self.factor)
        if self.entropy_bound is not None:
            checks.non_negative("entropy_bound", self.entropy_bound)
        if self.min_gap is not None:
            self._whole("min_gap", checks.count("min_gap", self.min_gap, 1, MAX_TOTAL_STEPS))
            if self.reveal == "count":
                raise checks.InvalidArgument(
                    f"--min-gap {self.min_gap} spaces the reveals of an adaptive policy (the "
                    "fixed count of --reveal count may not fit the spacing): add --reveal "
                    "threshold, factor or entropy-bound, or drop --min-gap")
        if self.reveal != "count":
            if self.sampler != "confidence":
                raise checks.InvalidArgument(
                    f"--reveal {self.reveal} ranks predictions by confidence: use --sampler "
                    f"confidence (not {self.sampler}), or --reveal count")
            if self.reveal in ("threshold", "factor") and self.confidence == "entropy":
                raise checks.InvalidArgument(
                    f"--reveal {self.reveal} compares a confidence in [0, 1]: use "
                    "--confidence prob or margin (entropy is not a probability)")
        if self.remask is None:
            for name in ("sigma", "remask_steps"):
                if getattr(self, name) is not None:
                    raise checks.InvalidArgument(
                        f"--{name.replace('_', '-')} is a setting of --remask: add --remask "
                        f"{'loop' if name == 'remask_steps' else 'cap'} or drop it")
        else:
            checks.choice("remask", self.remask, REMASKS)
            if self.sigma is not None:
                checks.probability("sigma", self.sigma, closed_low=False, closed_high=True)
            if self.remask_steps is not None:
                if self.remask != "loop":
                    raise checks.InvalidArgument(
                        f"--remask-steps is a setting of --remask loop, not --remask "
                        f"{self.remask}: drop it or use --remask loop")
                self._whole("remask_steps", checks.count("remask_steps", self.remask_steps, 1,
                                                         MAX_TOTAL_STEPS))
        if self.edit is not None:
            checks.probability("edit", self.edit, closed_low=False)
        if not isinstance(self.block_cache, bool):
            raise checks.InvalidArgument(f"block_cache={self.block_cache!r} must be True or "
                                         "False")
        if self.block_cache and self.block_length is None:
            raise checks.InvalidArgument("--block-cache reuses the keys and values outside the "
                                         "active block: give --block-length too")
        if self.max_steps is not None:
            self._whole("max_steps", checks.count("max_steps", self.max_steps, 1,
                                                   MAX_TOTAL_STEPS))
            if self.edit is None and self.remask is None:
                raise checks.InvalidArgument(
                    f"--max-steps {self.max_steps} caps the steps of --edit and --remask (the "
                    "other samplers run their planned steps): add --edit or --remask, or drop "
                    "--max-steps")

    @property
    def adaptive(self) -> bool:
        """Whether the number of reveals per step follows the predictions."""
        return self.reveal != "count"

    @property
    def reveal_parameter(self) -> float | None:
        """tau, f or gamma of the adaptive policy (its default when not given)."""
        if not self.adaptive:
            return None
        value = {"threshold": self.threshold, "factor": self.factor,
                 "entropy-bound": self.entropy_bound}[self.reveal]
        return REVEAL_DEFAULTS[self.reveal] if value is None else value

    @property
    def remask_sigma(self) -> float | None:
        """eta of the remask schedule (its default when not given)."""
        if self.remask is None:
            return None
        return REMASK_DEFAULT_SIGMA[self.remask] if self.sigma is None else self.sigma

    @property
    def plain(self) -> bool:
        """No adaptive reveal, remasking or editing: the original loop, bit for bit."""
        return not self.adaptive and self.remask is None and self.edit is None

    @cached_property
    def choice(self) -> ChoiceConfig:
        """Temperature, top-k and top-p of the token choice."""
        return ChoiceConfig(self.temperature, self.top_k, self.top_p)

    @property
    def scheduled(self) -> bool:
        """Whether the sampler reveals a fixed number of masks per step."""
        return get_sampler(self.sampler).scheduled

    def resolve(self, default_steps: int, most_masks: int, vocab_size: int | None = None,
                what: str = "the canvas") -> SamplerOptions:
        """These options with `steps` set (`default_steps` when None), checked against the
        canvas: `most_masks` is the largest number of masks in one row."""
        steps = default_steps if self.steps is None else self.steps
        if most_masks >= 1:
            if self.block_length is not None and self.block_length > most_masks:
                raise checks.InvalidArgument(
                    f"block_length={self.block_length} (--block-length) is longer than the "
                    f"{most_masks} masks of {what}: use at most {most_masks}, or no blocks")
            limit = max(default_steps, most_masks) if self.scheduled else max(
                MAX_ANCESTRAL_STEPS, default_steps)
            if steps > limit:
                why = ("more steps than masks would reveal nothing" if self.scheduled
                       else "the ancestral sampler's limit")
                raise checks.InvalidArgument(
                    f"steps={steps} (--steps) is more than {limit:,} ({why}): use --steps "
                    f"between 1 and {limit:,}")
            blocks = 1 if self.block_length is None else math.ceil(most_masks / self.block_length)
            if steps < blocks:
                raise checks.InvalidArgument(
                    f"steps={steps} (--steps) is fewer than the {blocks} blocks of "
                    f"{self.block_length} masks: every block needs a step; use --steps "
                    f"{blocks} or more, or a longer --block-length")
            self._check_plan(steps, blocks, most_masks)
        if vocab_size is not None and self.top_k is not None:
            checks.count("top_k", self.top_k, 1, vocab_size)
        if self.adaptive and self.steps is None:
            return self  # no step floor: each block runs until its masks are revealed
        return replace(self, steps=steps)

    def planned_steps(self, steps: int, blocks: int, most_masks: int) -> int:
        """Steps the loop plans (the scheduled ones and remask-loop ones), before edits."""
        base = most_masks if self.adaptive and self.steps is None else steps
        if self.remask == "loop":
            per_block = [steps // blocks + (i < steps % blocks) for i in range(blocks)]
            base += sum(self.loop_steps(n) for n in per_block)
        return base

    def loop_steps(self, block_steps: int) -> int:
        """remask=loop: the loop steps of a block of `block_steps` steps."""
        if self.remask != "loop":
            return 0
        return self.remask_steps if self.remask_steps is not None else max(1, block_steps // 2)

    def step_cap(self, planned: int) -> int:
        """All steps allowed: `max_steps`, or twice the plan (at most MAX_TOTAL_STEPS)."""
        if self.max_steps is not None:
            return self.max_steps
        return min(MAX_TOTAL_STEPS, 2 * planned) if self.edit is not None else planned

    def _check_remask_steps(self, steps: int, blocks: int, most_masks: int) -> None:
        """remask=cap/rescale: ReMDM's sigma_max is 0 on a block's first step (nothing is
        revealed yet) and on its last (nothing may stay masked), so a block of fewer than 3
        steps never remasks anything. A plan in which no block gets 3 steps is refused,
        rather than run as if --remask were not given; one in which only some do is run,
        with a warning that says which (steps are split evenly, the first blocks taking
        the remainder)."""
        if self.remask not in ("cap", "rescale"):
            return
        per_block = min(self.block_length or most_masks, most_masks)
        unbounded = self.adaptive and self.steps is None  # a block runs until it is revealed
        # with one step per mask at most, no count of --steps may give any block 3 steps
        no_steps_would_do = self.scheduled and not unbounded and 2 * blocks + 1 > most_masks
        if per_block < 3 or (no_steps_would_do and steps <= 2 * blocks):
            raise checks.InvalidArgument(
                f"--remask {self.remask} remasks only between a block's first and last steps, "
                f"so a block needs 3 steps, but a block of {per_block} mask(s) allows at most "
                f"{per_block} step(s): use more masks per block (--block-length, --length or "
                "longer spans), or drop --remask")
        if unbounded:
            return
        if steps <= 2 * blocks:
            every = f"; with {3 * blocks} every block remasks" if blocks > 1 else ""
            raise checks.InvalidArgument(
                f"--remask {self.remask} remasks only between a block's first and last steps, "
                f"so a block needs 3 steps, and {steps} step(s) over {blocks} block(s) give "
                f"none of them 3: use --steps {2 * blocks + 1} or more (got {steps}){every}, "
                "or drop --remask")
        if steps < 3 * blocks:
            warnings.warn(f"--remask {self.remask}: {steps} steps over {blocks} blocks give 3 "
                          f"steps to the first {steps - 2 * blocks} block(s) only, and a block "
                          f"remasks only between its first and last steps: the other blocks "
                          f"do not remask (--steps {3 * blocks} remasks in every block)",
                          stacklevel=4)

    def _check_plan(self, steps: int, blocks: int, most_masks: int) -> None:
        self._check_remask_steps(steps, blocks, most_masks)
        if self.remask == "loop" and not (self.adaptive and self.steps is None) and \
                steps < 2 * blocks:
            if self.scheduled and 2 * blocks > most_masks:  # --steps cannot go that high
                raise checks.InvalidArgument(
                    f"--remask loop runs its loop after half of each block's steps, so each "
                    f"of its {blocks} block(s) needs 2 steps, but {most_masks} mask(s) allow "
                    f"at most {most_masks} steps: use more masks per block (--block-length, "
                    f"--length or longer spans), --remask cap, or --sampler ancestral")
            raise checks.InvalidArgument(
                f"--remask loop runs its loop after half of each block's steps: with "
                f"{blocks} block(s) it needs --steps {2 * blocks} or more (got {steps})")
        planned = self.planned_steps(steps, blocks, most_masks)
        cap = self.max_steps if self.max_steps is not None else MAX_TOTAL_STEPS
        if planned > cap:
            if self.remask == "loop":
                raise checks.InvalidArgument(
                    f"the sampler plans {planned:,} steps (--steps and the --remask-steps of "
                    f"each of {blocks} block(s)) but --max-steps allows {cap:,}: lower "
                    f"--remask-steps or --steps, or raise --max-steps")
            what = "--steps" if self.steps is not None else "one per mask"
            raise checks.InvalidArgument(
                f"the sampler plans {planned:,} steps ({what}) but --max-steps allows "
                f"{cap:,}: raise --max-steps to {planned:,} or more, or give fewer --steps")


def sampler_keywords(function):
    """`function(model, inputs, *, ..., options: SamplerOptions, ...)` as the library shows it:
    `function(model, inputs, *, steps=None, sampler="confidence", ...)`, one keyword per
    field of `Sampling` with its default, built into one checked `SamplerOptions`.

    `generate` and `infill` share the sampler's 21 options; written out in each signature
    they drifted apart, declared once they cannot (help() and editors still show every
    keyword)."""
    names = [f.name for f in fields_of(Sampling)]
    types = types_of(Sampling)
    sampling = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY,
                                  default=default_of(f), annotation=types[f.name])
                for f in fields_of(Sampling)]
    own = list(inspect.signature(function).parameters.values())
    at = [p.name for p in own].index("options")  # the sampler's keywords stand in its place

    @functools.wraps(function)
    def with_sampler(*args, **keywords):
        chosen = {name: keywords.pop(name) for name in names if name in keywords}
        return function(*args, options=SamplerOptions(**chosen), **keywords)

    with_sampler.__signature__ = inspect.signature(function).replace(
        parameters=[*own[:at], *sampling, *own[at + 1:]])
    return with_sampler
