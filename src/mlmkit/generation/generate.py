"""`generate`: continue prompts by iterative unmasking from any masked LM.

The canvas is [CLS] prompt [MASK] * length [SEP]; a sampler reveals the masks over
`steps` steps (see `mlmkit.generation.samplers`), optionally in left-to-right blocks, with
classifier-free guidance and user-fixed positions. A generated [SEP]/EOS ends the text.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from mlmkit.core import checks
from mlmkit.core.results import Result
from mlmkit.engine.batching import check_budget
from mlmkit.errors import InvalidArgument
from mlmkit.generation.canvas import FIXED, MASK, PROMPT, Segment, decode_part, end_ids, text_ids
from mlmkit.generation.cost import Cost
from mlmkit.generation.eos import pad_after_end
from mlmkit.generation.options import SamplerOptions, sampler_keywords
from mlmkit.generation.remote import mask_id
from mlmkit.generation.setup import check_texts
from mlmkit.generation.unmask import StepEvent, unmask_rows
from mlmkit.models.load import prepare_mlm


@dataclass
class Generation(Result):
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
    cost: Cost | None = None
    """Model calls, tokens per call and wall time (see `mlmkit.generation.cost`)."""


def _generated_segments(tokenizer, length: int, constraints: Mapping[int, str | int] | None,
                        max_length: int, mask: int):
    """The generated region as segments: masks, with user-fixed tokens at given positions."""
    checks.count("length", length, 1, max_length)
    kinds, ids = [MASK] * length, [mask] * length
    if constraints is not None and not isinstance(constraints, Mapping):
        raise InvalidArgument("constraints must be a mapping {position: token id or text}")
    for position, value in sorted((constraints or {}).items()):
        if isinstance(position, bool) or not isinstance(position, int):
            raise InvalidArgument(f"constraint position {position!r} is not a whole number: "
                                  "use 0 for the first generated token")
        if isinstance(value, int) and not isinstance(value, bool):
            if not 0 <= value < len(tokenizer):
                raise InvalidArgument(
                    f"constraint at position {position}: token id {value} is not in the "
                    f"model's vocabulary (ids 0 to {len(tokenizer) - 1:,}); give an id in that "
                    "range or the token's text")
            tokens = [value]
        else:
            check_texts([str(value)], f"constraint at position {position}")
            tokens = text_ids(tokenizer, str(value))
        if not tokens:
            raise InvalidArgument(f"constraint at position {position} is empty: give a token")
        if mask in tokens:
            raise InvalidArgument(f"constraint at position {position} is the mask token: "
                                  "leave the position out of --fix to have it generated")
        if position < 0 or position + len(tokens) > length:
            raise InvalidArgument(
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


def rows_per_batch(batch_tokens, batch_size, what: str):
    """(`batch_tokens` checked, rows per batch from the deprecated `batch_size` or None)."""
    if batch_size is None:
        return check_budget(batch_tokens), None
    if batch_tokens is not None:
        raise InvalidArgument("pass batch_tokens or the deprecated batch_size, not both")
    warnings.warn(f"{what}(batch_size=...) is deprecated: use batch_tokens (padded tokens "
                  "per batch)", DeprecationWarning, stacklevel=3)
    return None, checks.count("batch_size", batch_size, 1)


@sampler_keywords
def generate(
    model,
    prompt: str | Sequence[str] = "",
    *,
    length: int = 64,
    options: SamplerOptions,
    constraints: Mapping[int, str | int] | None = None,
    trust_remote_code: bool | None = None,
    batch_tokens: int | None = None,
    precision: str = "auto",
    device=None,
    threads: int | None = None,
    progress: bool | None = None,
    on_step: Callable[[StepEvent], None] | None = None,
    batch_size: int | None = None,
) -> Generation | list[Generation]:
    """Continue `prompt` (a string, or a list for a batch) with `length` new tokens.

    `model` is an `MLM`, a name/path, or a (model, tokenizer) pair. The sampling keywords
    are those of `SamplerOptions` (`steps` defaults to `length`: one token per step).
    `constraints` fixes generated positions (0-based in the continuation) to a token id or
    a text. `batch_tokens` bounds the padded tokens of a batch (default: 16 prompts per
    batch); batch k is seeded with `seed + k`, so the same seed and batching give the same
    result. `batch_size` (prompts per batch) is a deprecated alias.

    Fast sampling: `reveal` = threshold / factor / entropy-bound reveals as many masks per
    step as the predictions allow (`threshold` tau, `factor` f, `entropy_bound` gamma;
    `min_gap`: masks revealed together lie at least this far apart);
    `remask` (cap, rescale, loop; `sigma`, `remask_steps`) and `edit` let later steps
    correct earlier ones, within `max_steps`; `block_cache` reuses the keys and values
    outside the active block (approximate). `trust_remote_code` runs a name/path whose
    code ships with the checkpoint (its mask id and logits shift are read from its config;
    see `mlmkit.generation.remote`). Each result's `cost` holds its model calls,
    tokens per call and wall time.
    """
    length = checks.count("length", length, 1)
    batch_tokens, rows = rows_per_batch(batch_tokens, batch_size, "generate")
    prompts = [prompt] if isinstance(prompt, str) else list(prompt)
    if not prompts:
        raise InvalidArgument("no prompts given: pass a prompt (it may be empty) or a list")
    if not all(isinstance(p, str) for p in prompts):
        raise InvalidArgument("prompt must be a string or a list of strings")
    check_texts(prompts, "prompt")
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads,
                                trust_remote_code=trust_remote_code)
    tokenizer = mlm.tokenizer
    generated_segments = _generated_segments(tokenizer, length, constraints, mlm.max_length,
                                             mask_id(mlm))
    block = options.block_length
    if block is not None and block <= length and length % block:
        # LLaDA's rule: equal blocks (a shorter last one is a different schedule)
        small = [b for b in range(1, math.isqrt(length) + 1) if length % b == 0]
        fits = sorted({*small, *(length // b for b in small)})
        shown = ", ".join(map(str, fits if len(fits) <= 8 else [*fits[:7], "..."]))
        raise InvalidArgument(
            f"block_length={block} (--block-length) does not divide length={length} "
            f"(--length): the last block would be shorter than the others; use a block "
            f"length that divides {length} ({shown}) or a length that is a multiple of "
            f"{block}")
    prompt_ids = [text_ids(tokenizer, p) for p in prompts]
    for index, ids in enumerate(prompt_ids):
        if mask_id(mlm) in ids:
            raise InvalidArgument(
                f"prompt {index + 1} holds the mask token {tokenizer.mask_token!r}: generate "
                "continues a prompt and never fills it; to fill masks inside a text use "
                "mlmkit infill (mlmkit.infill)")
    canvas_rows = [[Segment(PROMPT, ids)]
                   + [Segment(s.kind, list(s.ids)) for s in generated_segments]
                   for ids in prompt_ids]
    batches = unmask_rows(mlm, canvas_rows, options, default_steps=length, allow_eos=True,
                          what="prompt", batch_tokens=batch_tokens, rows=rows, precision=precision,
                          progress=progress, on_step=on_step)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    results: list[Generation] = []
    for batch in batches:
        canvas = batch.canvas
        region = canvas.content & ~canvas.prompt
        ids, cut = pad_after_end(batch.ids, region, canvas.masked, end_ids(tokenizer), pad)
        for row in range(ids.shape[0]):
            text = prompts[batch.first + row]
            gen = ids[row][region[row]].tolist()
            keep = ids[row][region[row] & ~cut[row]].tolist()
            prompt_ids = ids[row][canvas.prompt[row]].tolist()
            results.append(Generation(
                prompt=text,
                text=decode_part(tokenizer, keep, skip_special_tokens=False),
                full_text=tokenizer.decode(prompt_ids + keep, skip_special_tokens=False),
                token_ids=gen, ended=bool(cut[row].any()), model_calls=batch.model_calls,
                steps=batch.steps, cost=Cost.of(batch, int(canvas.masked[row].sum())),
            ))
    return results[0] if isinstance(prompt, str) else results
