"""Texts to token ids, word ids and character offsets, so scores map back onto the text."""

from __future__ import annotations

from dataclasses import dataclass

from mlmkit.errors import ModelError


@dataclass
class EncodedText:
    """One text as the engine sees it, with what is needed to report tokens and words."""

    ids: list[int]
    word_ids: list[int | None] | None  # None when the tokenizer is not a fast one
    offsets: list[tuple[int, int]] | None  # character spans, leading spaces trimmed


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Drop the whitespace byte-level BPE and SentencePiece fold into a token's span."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def encode_texts(tokenizer, texts: list[str]) -> list[EncodedText]:
    """Tokenize with special tokens and without truncation (long texts go to windows)."""
    if not texts:
        return []
    fast = getattr(tokenizer, "is_fast", False)
    encoding = tokenizer(list(texts), add_special_tokens=True, truncation=False,
                         return_offsets_mapping=fast, verbose=False)
    out = []
    for i, text in enumerate(texts):
        ids = list(encoding["input_ids"][i])
        if not fast:
            out.append(EncodedText(ids, None, None))
            continue
        offsets = [_trim(text, s, e) for s, e in encoding["offset_mapping"][i]]
        out.append(EncodedText(ids, encoding.word_ids(i), offsets))
    return out


def span_targets(encoded: EncodedText, special_ids: set[int], span: tuple[int, int] | None):
    """Positions to score: non-special tokens, inside `span` (character range) when given.

    A token is inside when its trimmed characters lie within [start, end) (a zero-width
    token, such as a lone "▁", when it sits at or after `start` and before `end`); the
    other tokens stay unmasked as context (conditional scoring).
    """
    positions = [t for t, token in enumerate(encoded.ids) if token not in special_ids]
    if span is None:
        return positions
    if encoded.offsets is None:
        raise ModelError("conditional scoring (spans) needs a fast tokenizer with offsets")
    lo, hi = span
    return [t for t in positions
            if lo <= encoded.offsets[t][0] < hi and encoded.offsets[t][1] <= hi]
