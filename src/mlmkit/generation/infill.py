"""`infill`: fill the mask spans of a template by iterative unmasking.

A span of known length is filled directly. A span of unknown length (`[MASK:a-b]`) is
filled at every length in its range, all candidates in one batch, and the candidate with
the best pseudo-log-likelihood per token (PLL-normalised score) wins.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlmkit.core import checks
from mlmkit.core.results import Result
from mlmkit.errors import InvalidArgument
from mlmkit.generation.canvas import (
    MASK,
    PROMPT,
    Segment,
    continuation_ids,
    decode_part,
    special_wrap,
    text_ids,
)
from mlmkit.generation.cost import Cost, count_calls
from mlmkit.generation.generate import rows_per_batch
from mlmkit.generation.options import SamplerOptions, sampler_keywords
from mlmkit.generation.pll import token_pll
from mlmkit.generation.remote import mask_id
from mlmkit.generation.setup import check_texts
from mlmkit.generation.template import Span, parse_template
from mlmkit.generation.unmask import StepEvent, unmask_rows
from mlmkit.models.load import prepare_mlm


@dataclass
class Candidate(Result):
    """One way to fill a template: a length per span, its text and score."""

    lengths: tuple[int, ...]
    text: str
    spans: list[str]
    score: float | None
    """Mean PLL per token (nats), when the template had several candidates to choose from."""


@dataclass
class Infilled(Result):
    """A filled template: the chosen candidate first, every candidate tried after."""

    template: str
    text: str
    spans: list[str]
    lengths: tuple[int, ...]
    candidates: list[Candidate]
    model_calls: int
    """Model calls of the batches that held this template's candidates (= `cost.nfe`)."""
    cost: Cost | None = None
    """Model calls, tokens per call and wall time of all this template's candidates."""


def _cost(spent: dict, scoring=None) -> Cost:
    """The cost of one template: the calls and time of every batch holding its candidates,
    and (`scoring`, a `CallCount`) those of the PLL scoring that ranked its candidates."""
    parts = [Cost.of(batch, tokens) for batch, tokens in spent.values()]
    nfe, tokens = sum(p.nfe for p in parts), sum(p.tokens for p in parts)
    return Cost(nfe=nfe, tokens=tokens, tokens_per_call=tokens / nfe if nfe else 0.0,
                seconds=sum(p.seconds for p in parts), steps=max(p.steps for p in parts),
                remasked=sum(p.remasked for p in parts), edited=sum(p.edited for p in parts),
                scoring_calls=scoring.calls if scoring else 0,
                scoring_seconds=scoring.seconds if scoring else 0.0)


def _rows(tokenizer, pieces: list[str | Span], lengths: tuple[int, ...],
          mask: int) -> list[Segment]:
    segments, spans = [], iter(lengths)
    for index, piece in enumerate(pieces):
        if isinstance(piece, Span):
            segments.append(Segment(MASK, [mask] * next(spans)))
        else:
            before_span = index + 1 < len(pieces) and isinstance(pieces[index + 1], Span)
            text = piece.rstrip() if before_span else piece
            after_span = index > 0 and isinstance(pieces[index - 1], Span)
            ids = (continuation_ids(tokenizer, text) if after_span and text[:1].strip()
                   else text_ids(tokenizer, text))
            if ids:
                segments.append(Segment(PROMPT, ids))
    return segments


def _span_ids(content, masked, lengths: tuple[int, ...]) -> list[list[int]]:
    """The token ids filled into each span (spans take the masked positions in order)."""
    tokens, spans, start = content[masked].tolist(), [], 0
    for length in lengths:
        spans.append(tokens[start:start + length])
        start += length
    return spans


def _check_lengths(templates: list[str], jobs, special: int, max_length: int) -> None:
    """Every candidate fits the model: else a one-line error naming the template (before
    any model call; the canvas's own check would name a candidate and --length)."""
    for index, lengths, segments in jobs:
        masks = sum(lengths)
        needed = sum(len(segment.ids) for segment in segments) + special
        if needed > max_length:
            raise InvalidArgument(
                f"template {index + 1} {templates[index][:60]!r} needs {needed} tokens "
                f"({needed - masks - special} of text, {masks} to fill, {special} special) but "
                f"the model takes at most {max_length}: shorten its text or its [MASK:n] / "
                f"[MASK:a-b] spans")


@sampler_keywords
def infill(
    model,
    template: str | Sequence[str],
    *,
    options: SamplerOptions,
    trust_remote_code: bool | None = None,
    max_candidates: int = 64,
    batch_tokens: int | None = None,
    precision: str = "auto",
    device=None,
    threads: int | None = None,
    progress: bool | None = None,
    on_step: Callable[[StepEvent], None] | None = None,
    batch_size: int | None = None,
    exclude_ids: Sequence[int] = (),
) -> Infilled | list[Infilled]:
    """Fill `template` ("The cat [MASK:3] on the mat.", or a list of templates).

    The sampling keywords are those of `SamplerOptions` (`steps` defaults to the number of
    masks: one token per step). Spans of unknown length are tried at every length of their
    range (at most `max_candidates` combinations); the candidates run through the same loop
    as `generate`, and the best PLL per token wins. `exclude_ids`: token ids never sampled
    (besides the special tokens, never sampled either). `batch_size` (candidates per batch)
    is a deprecated alias of `batch_tokens`.
    """
    max_candidates = checks.count("max_candidates", max_candidates, 1, 10_000)
    batch_tokens, rows = rows_per_batch(batch_tokens, batch_size, "infill")
    templates = [template] if isinstance(template, str) else list(template)
    if not templates:
        raise InvalidArgument("no templates given: pass a template with a [MASK] span")
    if not all(isinstance(t, str) for t in templates):
        raise InvalidArgument("template must be a string or a list of strings")
    check_texts(templates, "template")
    parsed = [parse_template(text, where=f"template {index + 1}")
              for index, text in enumerate(templates)]
    combos_of = []
    for index, (text, pieces) in enumerate(zip(templates, parsed, strict=True)):
        spans = [p for p in pieces if isinstance(p, Span)]
        combos = list(itertools.islice(
            itertools.product(*(s.lengths for s in spans)), max_candidates + 1))
        if len(combos) > max_candidates:
            raise InvalidArgument(
                f"template {index + 1} {text!r} has more than {max_candidates} span-length "
                f"combinations: narrow the [MASK:a-b] ranges or raise --max-candidates"
            )
        combos_of.append(combos)
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads,
                                trust_remote_code=trust_remote_code)
    tokenizer = mlm.tokenizer
    for index, (text, pieces) in enumerate(zip(templates, parsed, strict=True)):
        spans = [p for p in pieces if isinstance(p, Span)]
        if max(s.longest for s in spans) > mlm.max_length or \
                sum(s.shortest for s in spans) > mlm.max_length:
            raise InvalidArgument(
                f"template {index + 1} {text[:60]!r} asks for more masks than the model's "
                f"{mlm.max_length} positions: use shorter [MASK:n] / [MASK:a-b] spans")
    jobs = [(index, lengths, _rows(tokenizer, pieces, lengths, mask_id(mlm)))
            for index, (pieces, combos) in enumerate(zip(parsed, combos_of, strict=True))
            for lengths in combos]
    _check_lengths(templates, jobs, len(sum(special_wrap(tokenizer), [])), mlm.max_length)
    most_masks = max(sum(lengths) for _, lengths, _ in jobs)
    batches = unmask_rows(mlm, [segments for _, _, segments in jobs], options,
                          default_steps=most_masks, allow_eos=False, what="template candidate",
                          batch_tokens=batch_tokens, rows=rows, precision=precision,
                          progress=progress, on_step=on_step, exclude_ids=exclude_ids)
    filled = []
    spent = [{} for _ in templates]  # template -> {batch: tokens of its candidates there}
    for batch in batches:
        canvas = batch.canvas
        for row in range(batch.ids.shape[0]):
            index, lengths, _ = jobs[batch.first + row]
            content = batch.ids[row][canvas.content[row]]
            spans = _span_ids(content, canvas.masked[row][canvas.content[row]], lengths)
            filled.append((index, Candidate(lengths, tokenizer.decode(content.tolist()),
                                            [decode_part(tokenizer, s).strip() for s in spans], None),
                           content.tolist()))
            tokens = int(canvas.masked[row].sum())
            spent[index][id(batch)] = (batch, spent[index].get(id(batch), (batch, 0))[1]
                                       + tokens)
    counts = [sum(f[0] == i for f in filled) for i in range(len(templates))]
    to_score = [f for f in filled if counts[f[0]] > 1]
    with count_calls(mlm.model) as scoring:  # the scoring's batches mix the templates
        plls = token_pll(mlm, [f[2] for f in to_score], batch_tokens=batch_tokens,
                         precision=precision)
    for (_, candidate, _), pll in zip(to_score, plls, strict=True):
        candidate.score = float(pll.mean())
    results = []
    for index, text in enumerate(templates):
        candidates = [candidate for i, candidate, _ in filled if i == index]
        if counts[index] > 1:
            candidates.sort(key=lambda c: -c.score)
        best = candidates[0]
        cost = _cost(spent[index], scoring if counts[index] > 1 else None)
        results.append(Infilled(template=text, text=best.text, spans=best.spans,
                                lengths=best.lengths, candidates=candidates,
                                model_calls=cost.nfe, cost=cost))
    return results[0] if isinstance(template, str) else results
