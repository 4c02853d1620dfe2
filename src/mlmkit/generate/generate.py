"""`generate`: continue prompts by iterative unmasking from any masked LM.

The canvas is [CLS] prompt [MASK] * length [SEP]; a sampler reveals the masks over
`steps` steps (see `mlmkit.generate.samplers`), optionally in left-to-right blocks, with
classifier-free guidance and user-fixed positions. A generated [SEP]/EOS ends the text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from mlmkit.errors import MlmkitError
from mlmkit.generate.canvas import (
    FIXED,
    MASK,
    PROMPT,
    Segment,
    build_canvas,
    end_ids,
    suppressed_ids,
    text_ids,
)
from mlmkit.generate.choose import ChoiceConfig
from mlmkit.generate.eos import pad_after_end
from mlmkit.generate.unmask import StepEvent, UnmaskConfig, unmask
from mlmkit.models import as_mlm


@dataclass
class Generation:
    """One generated text."""

    prompt: str
    text: str
    """The continuation, up to (not including) a generated [SEP]/EOS."""
    full_text: str
    """Prompt and continuation decoded together."""
    token_ids: list[int]
    """The `length` generated positions; after a generated end token they are padding."""
    ended: bool
    """Whether a generated end token cut the continuation short."""
    model_calls: int
    """Encoder passes of the batch this text was generated in."""
    steps: int


def _generated_segments(tokenizer, length: int, constraints: Mapping[int, str | int] | None):
    """The generated region as segments: masks, with user-fixed tokens at given positions."""
    if length < 1:
        raise MlmkitError(f"--length {length} must be at least 1")
    kinds, ids = [MASK] * length, [tokenizer.mask_token_id] * length
    for position, value in sorted((constraints or {}).items()):
        tokens = [int(value)] if isinstance(value, int) else text_ids(tokenizer, str(value))
        if not tokens:
            raise MlmkitError(f"constraint at position {position} is empty: give a token")
        if position < 0 or position + len(tokens) > length:
            raise MlmkitError(
                f"constraint {value!r} at position {position} does not fit in the {length} "
                f"generated positions (0 to {length - 1}): use a position inside --length"
            )
        for offset, token in enumerate(tokens):
            kinds[position + offset], ids[position + offset] = FIXED, token
    segments: list[Segment] = []
    for kind, token in zip(kinds, ids, strict=True):
        if segments and segments[-1].kind == kind:
            segments[-1].ids.append(token)
        else:
            segments.append(Segment(kind, [token]))
    return segments


def generate(
    model,
    prompt: str | Sequence[str] = "",
    *,
    length: int = 64,
    steps: int | None = None,
    sampler: str = "confidence",
    confidence: str = "prob",
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    block_length: int | None = None,
    cfg_scale: float = 0.0,
    constraints: Mapping[int, str | int] | None = None,
    seed: int = 0,
    cache: bool = True,
    batch_size: int = 16,
    on_step: Callable[[StepEvent], None] | None = None,
) -> Generation | list[Generation]:
    """Continue `prompt` (a string, or a list for a batch) with `length` new tokens.

    `model` is an `MLM`, a name/path, or a (model, tokenizer) pair. `steps` defaults to
    `length` (one token per step). `constraints` fixes generated positions (0-based in
    the continuation) to a token id or a text. Same seed and batch, same result.
    """
    mlm = as_mlm(model)
    tokenizer = mlm.tokenizer
    generated_segments = _generated_segments(tokenizer, length, constraints)
    config = UnmaskConfig(
        steps=length if steps is None else steps, sampler=sampler, confidence=confidence,
        choice=ChoiceConfig(temperature, top_k, top_p), block_length=block_length,
        cfg_scale=cfg_scale, cache=cache,
    )
    if batch_size < 1:
        raise MlmkitError(f"--batch-size {batch_size} must be at least 1")
    prompts = [prompt] if isinstance(prompt, str) else list(prompt)
    if not prompts:
        raise MlmkitError("no prompts given: pass a prompt (it may be empty) or a list")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    results: list[Generation] = []
    for first in range(0, len(prompts), batch_size):
        chunk = prompts[first:first + batch_size]
        rows = [[Segment(PROMPT, text_ids(tokenizer, p))] + [Segment(s.kind, list(s.ids))
                for s in generated_segments] for p in chunk]
        canvas = build_canvas(tokenizer, rows, mlm.max_length, what="prompt")
        step_hook = None
        if on_step is not None:
            def step_hook(event, first=first):
                on_step(replace(event, first_row=first))
        out = unmask(mlm, canvas, config, suppressed=suppressed_ids(tokenizer, allow_eos=True),
                     seed=seed + first // batch_size, on_step=step_hook)
        region = canvas.content & ~canvas.prompt
        ids, cut = pad_after_end(out.ids.cpu(), region, canvas.masked, end_ids(tokenizer), pad)
        for row, text in enumerate(chunk):
            gen = ids[row][region[row]].tolist()
            keep = ids[row][region[row] & ~cut[row]].tolist()
            ended = bool(cut[row].any())
            prompt_ids = ids[row][canvas.prompt[row]].tolist()
            results.append(Generation(
                prompt=text,
                text=tokenizer.decode(keep, skip_special_tokens=False),
                full_text=tokenizer.decode(prompt_ids + keep, skip_special_tokens=False),
                token_ids=gen, ended=ended, model_calls=out.model_calls, steps=out.steps,
            ))
    return results[0] if isinstance(prompt, str) else results
