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
remasking) is a field there and a rule in `mlmkit.generation.samplers`, seen by `unmask`
through `StepContext` — neither caller changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from mlmkit.core.devices import autocast
from mlmkit.core.progress import Progress
from mlmkit.errors import InvalidArgument
from mlmkit.generation.canvas import Canvas, Segment, build_canvas, suppressed_ids
from mlmkit.generation.choose import choose_tokens
from mlmkit.generation.confidence import confidence
from mlmkit.generation.guidance import guided_logits, unconditional_input
from mlmkit.generation.options import SamplerOptions
from mlmkit.generation.predict import predict_logits
from mlmkit.generation.remote import logits_shift, mask_id, shift_positions
from mlmkit.generation.samplers import (
    StepContext,
    adaptive_counts,
    get_sampler,
    remask_sigma,
    spread_out,
    top_per_row,
)
from mlmkit.generation.schedules import block_index, reveal_counts, split_steps, time_grid
from mlmkit.models import adapter_for
from mlmkit.models.block_cache import BlockCache, check_supported


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
    remasked: torch.Tensor | None = None
    """bool [B, L]: tokens turned back into masks this step (--remask; None: off)."""
    edited: torch.Tensor | None = None
    """bool [B, L]: revealed tokens replaced this step (--edit; None: off)."""
    model_calls: int = 0
    """Model calls of this batch so far (the cost, for the live view)."""
    seconds: float = 0.0
    """Wall time of this batch so far."""
    filled: int = 0
    """Masks of this batch filled so far (all rows)."""
    probability: torch.Tensor | None = None
    """float [B, L]: the probability the step's predictions gave each token it revealed
    (the distribution the sampler drew from, before temperature; NaN elsewhere; None when
    the step revealed nothing)."""


@dataclass
class UnmaskResult:
    ids: torch.Tensor
    """LongTensor [B, L]: the final canvas (no mask left)."""
    model_calls: int
    """Encoder passes run (a guided step counts once: both halves are one batch)."""
    steps: int
    """Steps run."""
    seconds: float = 0.0
    """Wall time of the loop."""
    remasked: int = 0
    """Tokens remasked in all (--remask)."""
    edited: int = 0
    """Tokens edited in all (--edit)."""


class _Predictor:
    """Logits at the asked positions, computed at most once per canvas state."""

    def __init__(self, mlm, canvas: Canvas, config: SamplerOptions, suppressed: torch.Tensor):
        self.mlm, self.canvas, self.config, self.suppressed = mlm, canvas, config, suppressed
        self.version = 0
        self.calls = 0
        self._key = None
        self._logits = None
        self.mask_id, self.shift = mask_id(mlm), logits_shift(mlm)
        self.block_cache = None
        if config.block_cache:
            self.block_cache = BlockCache(mlm.model)
        self._columns: slice | None = None
        self._refresh = True

    def start_block(self, in_block: torch.Tensor) -> None:
        """A new block: the next call refreshes the block cache; later calls of the block
        run only the columns that hold the block (in any row)."""
        columns = in_block.any(0).nonzero().squeeze(1)
        self._columns = slice(int(columns.min()), int(columns.max()) + 1)
        self._refresh = True

    def _cached_logits(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """`predict_logits` through the block cache: a refresh (exact) at the block's first
        call, then the block's columns only (approximate)."""
        canvas, model = self.canvas, self.mlm.model
        guided = self.config.cfg_scale != 0.0 and bool(canvas.prompt.any())
        attention = canvas.attention_mask
        if guided:
            uncond = unconditional_input(ids, canvas.prompt, self.mask_id)
            ids, attention = torch.cat([ids, uncond]), torch.cat([attention, attention])
            positions = torch.cat([positions, positions])
        if self._refresh:
            hidden = self.block_cache.refresh(ids, attention)[positions]
            self._refresh = False
        else:
            hidden = self.block_cache.window(ids, self._columns)[positions[:, self._columns]]
        logits = adapter_for(model).head(model, hidden).float()
        if guided:
            cond, uncond_logits = logits.split(logits.shape[0] // 2)
            logits = guided_logits(cond, uncond_logits, self.config.cfg_scale)
        if len(self.suppressed):
            logits[:, self.suppressed] = float("-inf")
        return logits

    def logits(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        fresh = self._key is not None and self._key[0] == self.version and torch.equal(
            self._key[1], positions)
        if not (self.config.cache and fresh) and self.block_cache is not None:
            self._logits = self._cached_logits(ids, positions)
            self._key = (self.version, positions.clone())
            self.calls += 1
        elif not (self.config.cache and fresh):
            self._logits = predict_logits(
                self.mlm.model, ids, self.canvas.attention_mask,
                shift_positions(positions) if self.shift else positions,
                prompt=self.canvas.prompt, mask_id=self.mask_id,
                cfg_scale=self.config.cfg_scale, suppressed=self.suppressed,
            )
            self._key = (self.version, positions.clone())
            self.calls += 1
        return self._logits


class _Step:
    """Lazy predictions of one step: tokens drawn once, at all active positions or a subset.

    The model runs at `positions`: the active (masked) positions, plus, when editing, the
    editable revealed ones (`logits()` is the active rows, `edit_logits()` the others)."""

    def __init__(self, predictor: _Predictor, ids, active, config: SamplerOptions, generator,
                 positions=None):
        self.predictor, self.ids, self.active = predictor, ids, active
        self.positions = active if positions is None else positions
        self.config, self.generator = config, generator
        self._tokens = None
        self._logits = None

    def all_logits(self) -> torch.Tensor:
        return self.predictor.logits(self.ids, self.positions)

    def logits(self) -> torch.Tensor:
        if self._logits is None:
            logits = self.all_logits()
            self._logits = logits if self.positions is self.active else \
                logits[self.active[self.positions]]
        return self._logits

    def edit_logits(self, editable: torch.Tensor) -> torch.Tensor:
        return self.all_logits()[editable[self.positions]]

    def _all_tokens(self) -> torch.Tensor:
        if self._tokens is None:
            self._tokens = choose_tokens(self.logits(), self.config.choice, self.generator)
        return self._tokens

    def confidence(self) -> torch.Tensor:
        return confidence(self.config.confidence, self.logits(), self._all_tokens())

    def entropy(self) -> torch.Tensor:
        probs = torch.softmax(self.logits().double(), dim=-1)
        return -torch.special.xlogy(probs, probs).sum(-1)

    def tokens_at(self, reveal: torch.Tensor) -> torch.Tensor:
        rows = reveal[self.active]
        if self._tokens is not None:
            return self._tokens[rows]
        return choose_tokens(self.logits()[rows], self.config.choice, self.generator)


def _scattered(active: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """float64 [B, L]: `values` at the active positions, -inf elsewhere."""
    scores = torch.full(active.shape, float("-inf"), dtype=torch.float64, device=active.device)
    scores[active] = values.double()
    return scores


def _block_plan(options: SamplerOptions, n_blocks: int, masked, blocks) -> list[int]:
    """Steps of each block: the split of `steps`; adaptive without steps: the block's masks."""
    if options.steps is None:
        return [int(((blocks == b) & masked).sum(1).max()) for b in range(n_blocks)]
    return split_steps(options.steps, n_blocks)


def _schedule(options: SamplerOptions, block_steps: int) -> list[tuple[int, bool]]:
    """(scheduled step index, whether a remask-loop step) in order: the loop steps run after
    half of the block's steps."""
    plan = [(j, False) for j in range(block_steps)]
    n_loop = options.loop_steps(block_steps)
    if n_loop:
        at = max(1, block_steps // 2)
        plan[at:at] = [(at - 1, True)] * n_loop
    return plan


def _block_steps(options: SamplerOptions, block_steps: int, masked, in_block, n_block,
                 pending: list[int]):
    """(scheduled step index, whether a remask-loop step) of one block, in order. With an
    adaptive reveal the loop cannot sit at a fixed step (a block may finish in one call):
    it runs once every row has at most half its block's masks left (`pending[0]` loop
    steps; the step before holds each row there), and `pending[0]` is then 0."""
    if not pending[0]:
        yield from _schedule(options, block_steps)
        return
    for j in range(block_steps):
        if pending[0] and bool(((masked & in_block).sum(1) * 2 <= n_block).all()):
            for _ in range(pending[0]):
                yield j, True
            pending[0] = 0
        yield j, False


class _Corrections:
    """State of remasking and editing: which tokens the sampler revealed (the only ones that
    may change again) and the confidence each had when revealed."""

    def __init__(self, options: SamplerOptions, masked: torch.Tensor, mask_id: int):
        self.options, self.mask_id = options, mask_id
        self.generated = torch.zeros_like(masked)
        self.confidence = torch.full(masked.shape, float("-inf"), dtype=torch.float64,
                                     device=masked.device)
        self.remasked = 0
        self.edited = 0

    def sigma(self, t, s, looping) -> torch.Tensor:
        return remask_sigma(self.options.remask, self.options.remask_sigma, t, s, looping)

    def pick_remask(self, in_block, count: torch.Tensor, generator,
                    by_confidence: bool) -> torch.Tensor:
        """The `count[b]` revealed tokens of each row to remask: the least confident (random
        ones for the random sampler)."""
        candidates = self.generated & in_block
        if by_confidence:
            scores = -self.confidence
        else:
            scores = torch.rand(candidates.shape, dtype=torch.float64, generator=generator,
                                device=candidates.device)
        scores = scores.masked_fill(~candidates, float("-inf"))
        return candidates & top_per_row(scores, count)

    def edits(self, step: _Step, ids, editable: torch.Tensor):
        """(bool [B, L] positions to replace, their new tokens, their probabilities)."""
        logits = step.edit_logits(editable)
        probs = torch.softmax(logits.double(), dim=-1)
        current = ids[editable]
        probs.scatter_(1, current.unsqueeze(1), -1.0)
        best_prob, best = probs.max(dim=-1)
        change = best_prob > self.options.edit
        where = torch.zeros_like(editable)
        where[editable] = change
        return where, best[change], best_prob[change]


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

    `options.steps` must be resolved (`SamplerOptions.resolve`; None only for an adaptive
    reveal policy without a step floor); `seed` seeds this canvas. With remasking or editing,
    only the tokens the sampler revealed may change again, and only in the current block.
    """
    if options.steps is None and not options.adaptive:
        raise ValueError("unmask needs resolved options: call options.resolve(...) first")
    started = time.perf_counter()
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
    plan = _block_plan(options, n_blocks, masked, blocks) if n_blocks else []
    planned = [len(_schedule(options, n)) for n in plan]
    cap = options.step_cap(sum(planned))
    # the steps later blocks may still need: a block's edit-only steps leave them room, so
    # that no batch runs more than `cap` steps in all
    later = [sum(planned[b + 1:]) for b in range(len(plan))]
    fix = _Corrections(options, masked, mask_id(mlm))
    editing, remasking = options.edit is not None, options.remask is not None
    steps_run = 0
    total_masks = int(masked.sum())

    def emit(block, reveal, remasked=None, edited=None, probability=None):
        if on_step is not None:
            on_step(StepEvent(step=steps_run, block=block, ids=ids.cpu().clone(),
                              masked=masked.cpu().clone(), revealed=reveal.cpu(),
                              content=canvas.content.cpu(),
                              remasked=None if remasked is None else remasked.cpu(),
                              edited=None if edited is None else edited.cpu(),
                              model_calls=predictor.calls,
                              filled=int(total_masks - masked.sum()),
                              seconds=time.perf_counter() - started,
                              probability=probability))

    with torch.inference_mode():
        for block, block_steps in enumerate(plan):
            in_block = blocks == block
            if predictor.block_cache is not None:
                predictor.start_block(in_block)
            n_block = (masked & in_block).sum(1)
            counts = reveal_counts(n_block, block_steps)
            grid = time_grid(block_steps).tolist()
            pending = [options.loop_steps(block_steps) if options.adaptive else 0]
            for j, looping in _block_steps(options, block_steps, masked, in_block, n_block,
                                           pending):
                active = masked & in_block
                if not bool(active.any()):
                    break
                editable = fix.generated & in_block if editing else None
                step = _Step(predictor, ids, active, options, generator,
                             positions=None if editable is None else active | editable)
                if not options.cache:
                    step.logits()
                spread = None
                if looping:
                    count = torch.zeros_like(counts[:, j])
                elif options.adaptive:
                    scores = confidences = _scattered(active, step.confidence())
                    if options.min_gap is not None and options.min_gap > 1:
                        spread = spread_out(scores, options.min_gap)
                        scores = scores.masked_fill(~spread, float("-inf"))
                    count = adaptive_counts(options.reveal, options.reveal_parameter, scores,
                                            lambda a=active, st=step: _scattered(a, st.entropy()))
                    if pending[0]:  # --remask loop: each row stops at half its masks
                        left = active.sum(1)
                        count = torch.where(left * 2 > n_block,
                                            torch.minimum(count, left - n_block // 2),
                                            torch.zeros_like(count))
                    if options.steps is not None:
                        left = active.sum(1)
                        floor = (left + (block_steps - j) - 1) // (block_steps - j)
                        count = torch.maximum(count, floor)
                else:
                    count = counts[:, j]
                remask = None
                if remasking:
                    # a spaced row replaces only as many remasked tokens as the spacing has
                    # room for (else its step would not fit and be unspaced)
                    room = None if spread is None else torch.where(
                        count <= spread.sum(1), spread.sum(1), active.sum(1))
                    remask, count, reveal_p = _plan_remask(
                        fix, sampler, in_block, active, n_block, count, grid, j, looping,
                        generator, room)
                if not sampler.scheduled and remasking:
                    draws = torch.rand(active.shape, dtype=torch.float64, generator=generator,
                                       device=device)
                    reveal = active & (draws < reveal_p.unsqueeze(1))
                elif sampler.scheduled and not bool(count.any()):
                    reveal = torch.zeros_like(active)
                else:
                    t, s = (grid[j], grid[j]) if looping else (grid[j], grid[j + 1])
                    among, confidence = active, step.confidence
                    if spread is not None:  # spaced, where the row's count fits the spacing
                        fits = (count <= spread.sum(1)).unsqueeze(1)
                        among = torch.where(fits, spread, active)
                        confidence = (lambda c=confidences, m=among: c[m])  # noqa: E731
                    reveal = sampler.select(StepContext(
                        active=among, counts=count, t=t, s=s,
                        generator=generator, confidence=confidence,
                    ))
                edited = torch.zeros_like(active) if editing else None
                if editing and bool(editable.any()):
                    edited, new, probs = fix.edits(step, ids, editable)
                    if remask is not None:
                        keep = ~remask[edited]
                        edited &= ~remask
                        new, probs = new[keep], probs[keep]
                changed, probability = False, None
                if bool(reveal.any()):
                    tokens = step.tokens_at(reveal)
                    if on_step is not None:  # for live views: no model call of their own
                        probability = _revealed_probability(step, reveal, tokens)
                    ids[reveal] = tokens
                    masked &= ~reveal
                    if remasking or editing:
                        fix.generated |= reveal
                        if remasking and sampler.name == "confidence":
                            fix.confidence[reveal] = _chosen_confidence(step, reveal)
                    changed = True
                if edited is not None and bool(edited.any()):
                    ids[edited] = new
                    fix.confidence[edited] = probs
                    fix.edited += int(edited.sum())
                    changed = True
                if remask is not None and bool(remask.any()):
                    ids[remask] = fix.mask_id
                    masked |= remask
                    fix.generated &= ~remask
                    fix.remasked += int(remask.sum())
                    changed = True
                if changed:
                    predictor.version += 1
                steps_run += 1
                emit(block, reveal, remask, edited, probability)
            while editing and steps_run < cap - later[block]:
                editable = fix.generated & in_block & ~masked
                if not bool(editable.any()):
                    break
                step = _Step(predictor, ids, masked & in_block, options, generator,
                             positions=editable)
                edited, new, probs = fix.edits(step, ids, editable)
                steps_run += 1
                if bool(edited.any()):
                    ids[edited] = new
                    fix.confidence[edited] = probs
                    fix.edited += int(edited.sum())
                    predictor.version += 1
                emit(block, torch.zeros_like(masked), None, edited)
                if not bool(edited.any()):
                    break
    return UnmaskResult(ids=ids, model_calls=predictor.calls, steps=steps_run,
                        seconds=time.perf_counter() - started, remasked=fix.remasked,
                        edited=fix.edited)


def _revealed_probability(step: _Step, reveal: torch.Tensor, tokens: torch.Tensor
                          ) -> torch.Tensor:
    """float [B, L] on the CPU: the step's softmax probability of each revealed token."""
    logits = step.logits()[reveal[step.active]].float()
    chosen = torch.softmax(logits, dim=-1).gather(1, tokens.view(-1, 1)).squeeze(1)
    out = torch.full(reveal.shape, float("nan"))
    out[reveal.cpu()] = chosen.cpu()
    return out


def _chosen_confidence(step: _Step, reveal: torch.Tensor) -> torch.Tensor:
    """The confidence of the tokens revealed at `reveal` (from the step's predictions)."""
    scores = _scattered(step.active, step.confidence())
    return scores[reveal]


def _plan_remask(fix: _Corrections, sampler, in_block, active, n_block, count, grid,
                 j, looping, generator, room=None):
    """(bool [B, L] tokens to remask, the reveals per row including the replacements, the
    ancestral reveal probability per row) of one step under ReMDM's schedule.

    Ancestral: each revealed token is remasked with probability sigma_t and each mask
    revealed with ReMDM's posterior probability. Scheduled samplers: as many tokens as a
    Binomial(revealed, sigma_t) draw are remasked (the least confident ones for the
    confidence sampler) and the step reveals that many masks more than its schedule, so the
    number of masks still follows the schedule; t and s are the fractions of the block
    masked before and after the step. `room`: the most reveals per row (a row spaced by
    --min-gap remasks only as many tokens as it has spaced masks left to reveal)."""
    if sampler.scheduled:
        total = n_block.clamp_min(1).double()
        left = active.sum(1)
        t = left.double() / total
        s = t if looping else (left - count).double() / total
        sigma = fix.sigma(t, s, looping)
        draws = torch.rand(active.shape, dtype=torch.float64, generator=generator,
                           device=active.device)
        extra = (fix.generated & in_block & (draws < sigma.unsqueeze(1))).sum(1)
        # Binomial(revealed, sigma), at most s (and within `room` reveals: --min-gap)
        extra = torch.minimum(extra, (left if room is None else room) - count)
        remask = fix.pick_remask(in_block, extra, generator,
                                 by_confidence=sampler.name == "confidence")
        return remask, count + extra, None
    t = torch.full(active.shape[:1], grid[j + 1] if looping else grid[j], dtype=torch.float64,
                   device=active.device)
    s = t if looping else torch.full_like(t, grid[j + 1])
    sigma = fix.sigma(t, s, looping)
    reveal_p = torch.where(s <= 0, torch.ones_like(t),
                           ((t - s) + sigma * (1 - t)) / t.clamp_min(1e-12))
    draws = torch.rand(active.shape, dtype=torch.float64, generator=generator,
                       device=active.device)
    remask = fix.generated & in_block & (draws < sigma.unsqueeze(1))
    return remask, count, reveal_p


DEFAULT_BATCH_ROWS = 16
"""Rows per batch when no token budget is given (each batch is seeded on its own)."""


@dataclass(kw_only=True)
class UnmaskedBatch(UnmaskResult):
    """One batch of rows after the loop (its `ids` on the CPU), and where its rows stand."""

    first: int
    """Index of the batch's first row among all the rows."""
    canvas: Canvas


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
    exclude_ids: Sequence[int] = (),
) -> list[UnmaskedBatch]:
    """The loop `generate` and `infill` share: build every row's canvas (checking lengths
    and options before any model call), then unmask the rows batch by batch, batch k seeded
    with `options.seed + k`. `what` names a row in errors ("prompt", "template candidate").
    A batch holds `rows` rows if given, else as many as `batch_tokens` allows. No special
    token is sampled, nor any of `exclude_ids`."""
    tokenizer = mlm.tokenizer
    widths = [sum(len(s.ids) for s in row) for row in segments]
    guided = options.cfg_scale != 0.0
    per_batch = rows or batch_rows(batch_tokens, max(widths) + 2, guided)
    canvases = [build_canvas(tokenizer, segments[first:first + per_batch], mlm.max_length,
                             what, first=first) for first in range(0, len(segments), per_batch)]
    if guided and not any(bool(c.prompt.any()) for c in canvases):
        # the unconditional pass masks the prompt: with none, it is the conditional one
        raise InvalidArgument(
            f"--cfg-scale {options.cfg_scale} guides by masking the prompt text, but no "
            f"{what} has any (the unconditional pass would equal the conditional one): give "
            f"text to condition on, or drop --cfg-scale")
    most_masks = max(int(c.masked.sum(1).max()) for c in canvases)
    vocab = int(getattr(mlm.model.config, "vocab_size", None) or len(tokenizer))
    options = options.resolve(default_steps, most_masks, vocab, what=f"a {what}")
    if options.block_cache:
        check_supported(mlm.model)
        if logits_shift(mlm):
            raise InvalidArgument("--block-cache does not support models with shifted logits: "
                                  "drop --block-cache")
    bad = [i for i in exclude_ids if isinstance(i, bool) or not isinstance(i, int | np.integer)
           or not 0 <= i < vocab]
    if bad:
        raise InvalidArgument(f"exclude_ids: {bad[0]!r} is not a token id of the model (0 to "
                              f"{vocab - 1})")
    suppressed = sorted(set(suppressed_ids(tokenizer, allow_eos=allow_eos)) | {mask_id(mlm)}
                        | {int(i) for i in exclude_ids})
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
            done.append(UnmaskedBatch(**{**vars(out), "ids": out.ids.cpu()}, first=first,
                                      canvas=canvas))
            bar.advance(canvas.ids.shape[0])
    return done
