"""The iterative-unmasking loop shared by `generate` and `infill`.

Blocks are unmasked left to right; within a block, each step asks the sampler which
still-masked positions to reveal and writes the chosen tokens there, and nowhere else.
The model is called lazily: a step that reveals nothing (frequent with the ancestral
sampler and many steps) costs no model call, and predictions on an unchanged canvas are
reused (MDLM's cache, valid because an MLM has no time conditioning). With `cache=False`
the model runs at every step, the straightforward loop; the outputs are identical.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from mlmkit.errors import MlmkitError
from mlmkit.generate.canvas import Canvas
from mlmkit.generate.choose import ChoiceConfig, choose_tokens
from mlmkit.generate.confidence import check_confidence, confidence
from mlmkit.generate.predict import predict_logits
from mlmkit.generate.samplers import StepContext, get_sampler
from mlmkit.generate.schedules import block_index, reveal_counts, split_steps, time_grid


@dataclass(frozen=True)
class UnmaskConfig:
    """How masks are turned into tokens (every field is a CLI flag of the same name)."""

    steps: int
    """Sampler steps in all (divided among the blocks)."""
    sampler: str = "confidence"
    """ancestral, confidence or random (see mlmkit.generate.samplers)."""
    confidence: str = "prob"
    """For the confidence sampler: prob, margin or entropy."""
    choice: ChoiceConfig = field(default_factory=ChoiceConfig)
    """Temperature, top-k and top-p of the token choice."""
    block_length: int | None = None
    """Semi-autoregressive blocks of this many masks, left to right (None: one block)."""
    cfg_scale: float = 0.0
    """Classifier-free guidance weight w (0: none)."""
    cache: bool = True
    """Skip the model call when the canvas did not change since the last one."""

    def __post_init__(self):
        if self.steps < 1:
            raise MlmkitError(f"--steps {self.steps} must be at least 1")
        get_sampler(self.sampler)
        check_confidence(self.confidence)
        if self.block_length is not None and self.block_length < 1:
            raise MlmkitError(f"--block-length {self.block_length} must be at least 1")


@dataclass
class StepEvent:
    """One step of the loop, for live views and traces (tensors on the CPU)."""

    step: int
    block: int
    ids: torch.Tensor
    masked: torch.Tensor
    revealed: torch.Tensor
    content: torch.Tensor
    """bool [B, L]: the positions between the special tokens (what a view shows)."""
    first_row: int = 0
    """Index of this batch's first row among all the caller's inputs."""


@dataclass
class UnmaskResult:
    ids: torch.Tensor
    """LongTensor [B, L]: the final canvas (no mask left)."""
    model_calls: int
    """Encoder passes run (a guided step counts once: both halves are one batch)."""
    steps: int
    """Steps run."""


class _Predictor:
    """Logits at the active positions, computed at most once per canvas state."""

    def __init__(self, mlm, canvas: Canvas, config: UnmaskConfig, suppressed: torch.Tensor):
        self.mlm, self.canvas, self.config, self.suppressed = mlm, canvas, config, suppressed
        self.version = 0
        self.calls = 0
        self._key = None
        self._logits = None

    def logits(self, ids: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        fresh = self._key is not None and self._key[0] == self.version and torch.equal(
            self._key[1], active)
        if not (self.config.cache and fresh):
            self._logits = predict_logits(
                self.mlm.model, ids, self.canvas.attention_mask, active,
                prompt=self.canvas.prompt, mask_id=self.mlm.tokenizer.mask_token_id,
                cfg_scale=self.config.cfg_scale, suppressed=self.suppressed,
            )
            self._key = (self.version, active.clone())
            self.calls += 1
        return self._logits


class _Step:
    """Lazy predictions of one step: tokens drawn once, at all active positions or a subset."""

    def __init__(self, predictor: _Predictor, ids, active, config: UnmaskConfig, generator):
        self.predictor, self.ids, self.active = predictor, ids, active
        self.config, self.generator = config, generator
        self._tokens = None
        self._logits = None

    def logits(self) -> torch.Tensor:
        if self._logits is None:
            self._logits = self.predictor.logits(self.ids, self.active)
        return self._logits

    def _all_tokens(self) -> torch.Tensor:
        if self._tokens is None:
            self._tokens = choose_tokens(self.logits(), self.config.choice, self.generator)
        return self._tokens

    def confidence(self) -> torch.Tensor:
        return confidence(self.config.confidence, self.logits(), self._all_tokens())

    def tokens_at(self, reveal: torch.Tensor) -> torch.Tensor:
        rows = reveal[self.active]
        if self._tokens is not None:
            return self._tokens[rows]
        return choose_tokens(self.logits()[rows], self.config.choice, self.generator)


def unmask(
    mlm,
    canvas: Canvas,
    config: UnmaskConfig,
    *,
    suppressed: list[int] = (),
    seed: int = 0,
    on_step: Callable[[StepEvent], None] | None = None,
) -> UnmaskResult:
    """Fill every masked position of `canvas`; nothing else on the canvas changes."""
    device = mlm.device
    canvas = canvas.to(device)
    sampler = get_sampler(config.sampler)
    generator = torch.Generator(device=device).manual_seed(seed)
    vocab = int(getattr(mlm.model.config, "vocab_size", len(mlm.tokenizer)))
    banned = sorted(set(suppressed) | set(range(len(mlm.tokenizer), vocab)))
    predictor = _Predictor(mlm, canvas, config, torch.tensor(banned, dtype=torch.long,
                                                             device=device))
    ids, masked = canvas.ids.clone(), canvas.masked.clone()
    blocks = block_index(masked, config.block_length)
    n_blocks = int(blocks.max()) + 1 if bool(masked.any()) else 0
    steps_run = 0
    with torch.inference_mode():
        for block, block_steps in enumerate(split_steps(config.steps, n_blocks)
                                            if n_blocks else []):
            in_block = blocks == block
            counts = reveal_counts((masked & in_block).sum(1), block_steps)
            grid = time_grid(block_steps).tolist()
            for j in range(block_steps):
                active = masked & in_block
                if not bool(active.any()):
                    break
                step = _Step(predictor, ids, active, config, generator)
                if not config.cache:
                    step.logits()
                if sampler.scheduled and not bool(counts[:, j].any()):
                    reveal = torch.zeros_like(active)
                else:
                    reveal = sampler.select(StepContext(
                        active=active, counts=counts[:, j], t=grid[j], s=grid[j + 1],
                        generator=generator, confidence=step.confidence,
                    ))
                if bool(reveal.any()):
                    ids[reveal] = step.tokens_at(reveal)
                    masked &= ~reveal
                    predictor.version += 1
                steps_run += 1
                if on_step is not None:
                    on_step(StepEvent(step=steps_run, block=block, ids=ids.cpu().clone(),
                                      masked=masked.cpu().clone(), revealed=reveal.cpu(),
                                      content=canvas.content.cpu()))
    return UnmaskResult(ids=ids, model_calls=predictor.calls, steps=steps_run)
