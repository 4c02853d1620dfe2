"""The iterative-unmasking loop shared by `generate` and `infill`.

Blocks are unmasked left to right; within a block, each step asks the sampler which
still-masked positions to reveal and writes the chosen tokens there, and nowhere else.
The model is called lazily: a step that reveals nothing (frequent with the ancestral
sampler and many steps) costs no model call, and predictions on an unchanged canvas are
reused (MDLM's cache, valid because an MLM has no time conditioning). With `cache=False`
the model runs at every step, the straightforward loop; the outputs are identical.

`unmask_rows` is the one entry point of `generate` and `infill`: rows of segments in,
canvases built and checked, batches unmasked with per-batch seeds. Everything it may vary
is a field of `SamplerOptions`; a new reveal policy (threshold, entropy bound,
remasking) is a field there and a rule in `mlmkit.generate.samplers`, seen by `unmask`
through `StepContext` — neither caller changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from mlmkit.generate.canvas import Canvas, Segment, build_canvas, suppressed_ids
from mlmkit.generate.choose import choose_tokens
from mlmkit.generate.confidence import confidence
from mlmkit.generate.options import SamplerOptions
from mlmkit.generate.predict import predict_logits
from mlmkit.generate.samplers import StepContext, get_sampler
from mlmkit.generate.schedules import block_index, reveal_counts, split_steps, time_grid


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

    def __init__(self, mlm, canvas: Canvas, config: SamplerOptions, suppressed: torch.Tensor):
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

    def __init__(self, predictor: _Predictor, ids, active, config: SamplerOptions, generator):
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
    options: SamplerOptions,
    *,
    suppressed: list[int] = (),
    seed: int = 0,
    on_step: Callable[[StepEvent], None] | None = None,
) -> UnmaskResult:
    """Fill every masked position of `canvas`; nothing else on the canvas changes.

    `options.steps` must be resolved (`SamplerOptions.resolve`); `seed` seeds this canvas.
    """
    if options.steps is None:
        raise ValueError("unmask needs resolved options: call options.resolve(...) first")
    device = mlm.device
    canvas = canvas.to(device)
    sampler = get_sampler(options.sampler)
    generator = torch.Generator(device=device).manual_seed(seed)
    vocab = int(getattr(mlm.model.config, "vocab_size", len(mlm.tokenizer)))
    banned = sorted(set(suppressed) | set(range(len(mlm.tokenizer), vocab)))
    predictor = _Predictor(mlm, canvas, options, torch.tensor(banned, dtype=torch.long,
                                                             device=device))
    ids, masked = canvas.ids.clone(), canvas.masked.clone()
    blocks = block_index(masked, options.block_length)
    n_blocks = int(blocks.max()) + 1 if bool(masked.any()) else 0
    steps_run = 0
    with torch.inference_mode():
        for block, block_steps in enumerate(split_steps(options.steps, n_blocks)
                                            if n_blocks else []):
            in_block = blocks == block
            counts = reveal_counts((masked & in_block).sum(1), block_steps)
            grid = time_grid(block_steps).tolist()
            for j in range(block_steps):
                active = masked & in_block
                if not bool(active.any()):
                    break
                step = _Step(predictor, ids, active, options, generator)
                if not options.cache:
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


DEFAULT_BATCH_ROWS = 16
"""Rows per batch when no token budget is given (each batch is seeded on its own)."""


@dataclass
class UnmaskedBatch:
    """One batch of rows after the loop, on the CPU."""

    first: int
    """Index of the batch's first row among all the rows."""
    canvas: Canvas
    ids: torch.Tensor
    """LongTensor [b, L]: the final canvas."""
    model_calls: int
    steps: int


def batch_rows(batch_tokens: int | None, width: int, guided: bool) -> int:
    """Rows per batch: `batch_tokens` padded tokens (a guided row runs twice), at least one;
    `DEFAULT_BATCH_ROWS` without a budget."""
    if batch_tokens is None:
        return DEFAULT_BATCH_ROWS
    return max(1, batch_tokens // (width * (2 if guided else 1)))


def unmask_rows(
    mlm,
    segments: list[list[Segment]],
    options: SamplerOptions,
    *,
    default_steps: int,
    allow_eos: bool,
    what: str,
    batch_tokens: int | None = None,
    rows: int | None = None,
    precision: str = "fp32",
    progress: bool | None = None,
    on_step: Callable[[StepEvent], None] | None = None,
) -> list[UnmaskedBatch]:
    """The loop `generate` and `infill` share: build every row's canvas (checking lengths
    and options before any model call), then unmask the rows batch by batch, batch k seeded
    with `options.seed + k`. `what` names a row in errors ("prompt", "template candidate").
    A batch holds `rows` rows if given, else as many as `batch_tokens` allows."""
    from mlmkit.runtime.devices import autocast
    from mlmkit.runtime.progress import Progress

    tokenizer = mlm.tokenizer
    widths = [sum(len(s.ids) for s in row) for row in segments]
    guided = options.cfg_scale != 0.0
    per_batch = rows or batch_rows(batch_tokens, max(widths) + 2, guided)
    canvases = [build_canvas(tokenizer, segments[first:first + per_batch], mlm.max_length,
                             what, first=first) for first in range(0, len(segments), per_batch)]
    most_masks = max(int(c.masked.sum(1).max()) for c in canvases)
    vocab = int(getattr(mlm.model.config, "vocab_size", None) or len(tokenizer))
    options = options.resolve(default_steps, most_masks, vocab, what=f"a {what}")
    suppressed = suppressed_ids(tokenizer, allow_eos=allow_eos)
    done = []
    with Progress("unmasking", total=len(segments), unit="rows", enabled=progress) as bar, \
            autocast(precision, mlm.device):
        for number, canvas in enumerate(canvases):
            first = number * per_batch
            hook = None
            if on_step is not None:
                def hook(event, first=first):
                    on_step(replace(event, first_row=first))
            out = unmask(mlm, canvas, options, suppressed=suppressed,
                         seed=options.seed + number, on_step=hook)
            done.append(UnmaskedBatch(first, canvas, out.ids.cpu(), out.model_calls,
                                      out.steps))
            bar.advance(canvas.ids.shape[0])
    return done
