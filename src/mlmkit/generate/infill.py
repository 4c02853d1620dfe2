"""`infill`: fill the mask spans of a template by iterative unmasking.

A span of known length is filled directly. A span of unknown length (`[MASK:a-b]`) is
filled at every length in its range, all candidates in one batch, and the candidate with
the best pseudo-log-likelihood per token (PLL-normalised score) wins.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from mlmkit.errors import MlmkitError
from mlmkit.generate.canvas import MASK, PROMPT, Segment, build_canvas, suppressed_ids, text_ids
from mlmkit.generate.choose import ChoiceConfig
from mlmkit.generate.pll import token_pll
from mlmkit.generate.template import Span, parse_template
from mlmkit.generate.unmask import StepEvent, UnmaskConfig, unmask
from mlmkit.models import as_mlm


@dataclass
class Candidate:
    """One way to fill a template: a length per span, its text and score."""

    lengths: tuple[int, ...]
    text: str
    spans: list[str]
    score: float | None
    """Mean PLL per token (nats), when the template had several candidates to choose from."""


@dataclass
class Infilled:
    """A filled template: the chosen candidate first, every candidate tried after."""

    template: str
    text: str
    spans: list[str]
    lengths: tuple[int, ...]
    candidates: list[Candidate]
    model_calls: int


def _rows(tokenizer, pieces: list[str | Span], lengths: tuple[int, ...]) -> list[Segment]:
    segments, spans = [], iter(lengths)
    for index, piece in enumerate(pieces):
        if isinstance(piece, Span):
            segments.append(Segment(MASK, [tokenizer.mask_token_id] * next(spans)))
        else:
            before_span = index + 1 < len(pieces) and isinstance(pieces[index + 1], Span)
            ids = text_ids(tokenizer, piece.rstrip() if before_span else piece)
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


def infill(
    model,
    template: str | Sequence[str],
    *,
    steps: int | None = None,
    sampler: str = "confidence",
    confidence: str = "prob",
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    block_length: int | None = None,
    cfg_scale: float = 0.0,
    seed: int = 0,
    cache: bool = True,
    max_candidates: int = 64,
    batch_size: int = 16,
    on_step: Callable[[StepEvent], None] | None = None,
) -> Infilled | list[Infilled]:
    """Fill `template` ("The cat [MASK:3] on the mat.", or a list of templates).

    `steps` defaults to the number of masks (one token per step). Spans of unknown length
    are tried at every length of their range (at most `max_candidates` combinations).
    """
    mlm = as_mlm(model)
    tokenizer = mlm.tokenizer
    templates = [template] if isinstance(template, str) else list(template)
    if not templates:
        raise MlmkitError("no templates given: pass a template with a [MASK] span")
    jobs = []  # (template index, lengths, segments)
    for index, text in enumerate(templates):
        pieces = parse_template(text, where=f"template {index + 1}")
        spans = [p for p in pieces if isinstance(p, Span)]
        combos = list(itertools.islice(
            itertools.product(*(s.lengths for s in spans)), max_candidates + 1))
        if len(combos) > max_candidates:
            raise MlmkitError(
                f"template {index + 1} {text!r} has more than {max_candidates} span-length "
                f"combinations: narrow the [MASK:a-b] ranges or raise --max-candidates"
            )
        jobs += [(index, lengths, _rows(tokenizer, pieces, lengths)) for lengths in combos]
    most_masks = max(sum(lengths) for _, lengths, _ in jobs)
    config = UnmaskConfig(
        steps=most_masks if steps is None else steps, sampler=sampler, confidence=confidence,
        choice=ChoiceConfig(temperature, top_k, top_p), block_length=block_length,
        cfg_scale=cfg_scale, cache=cache,
    )
    if batch_size < 1:
        raise MlmkitError(f"--batch-size {batch_size} must be at least 1")
    filled, calls = [], [0] * len(templates)
    for first in range(0, len(jobs), batch_size):
        chunk = jobs[first:first + batch_size]
        canvas = build_canvas(tokenizer, [segments for _, _, segments in chunk],
                              mlm.max_length, what="template candidate")
        step_hook = None
        if on_step is not None:
            def step_hook(event, first=first):
                on_step(replace(event, first_row=first))
        out = unmask(mlm, canvas, config, suppressed=suppressed_ids(tokenizer, allow_eos=False),
                     seed=seed + first // batch_size, on_step=step_hook)
        ids = out.ids.cpu()
        for row, (index, lengths, _) in enumerate(chunk):
            content = ids[row][canvas.content[row]]
            spans = _span_ids(content, canvas.masked[row][canvas.content[row]], lengths)
            filled.append((index, Candidate(lengths, tokenizer.decode(content.tolist()),
                                            [tokenizer.decode(s).strip() for s in spans], None),
                           content.tolist()))
            calls[index] = max(calls[index], out.model_calls)
    counts = [sum(f[0] == i for f in filled) for i in range(len(templates))]
    to_score = [f for f in filled if counts[f[0]] > 1]
    for (_, candidate, _), pll in zip(to_score, token_pll(mlm, [f[2] for f in to_score]),
                                      strict=True):
        candidate.score = float(pll.mean())
    results = []
    for index, text in enumerate(templates):
        candidates = [candidate for i, candidate, _ in filled if i == index]
        if counts[index] > 1:
            candidates.sort(key=lambda c: -c.score)
        best = candidates[0]
        results.append(Infilled(template=text, text=best.text, spans=best.spans,
                                lengths=best.lengths, candidates=candidates,
                                model_calls=calls[index]))
    return results[0] if isinstance(template, str) else results
