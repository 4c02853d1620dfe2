"""The canvas of iterative unmasking: token ids with the positions still to generate.

A row is built from segments: prompt text (fixed, and masked in the unconditional pass of
classifier-free guidance), masks (to generate) and fixed tokens (user constraints), wrapped
in the tokenizer's own special tokens ([CLS] ... [SEP], <s> ... </s>) and right-padded.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mlmkit.errors import InvalidArgument

PROMPT, MASK, FIXED = "prompt", "mask", "fixed"


@dataclass
class Segment:
    """A run of canvas tokens: `kind` is prompt, mask or fixed."""

    kind: str
    ids: list[int]


@dataclass
class Canvas:
    """A batch of rows: ids, attention, and which positions are masked / prompt / content."""

    ids: torch.Tensor
    """LongTensor [B, L]: tokens, with the mask id where a token is still to be generated."""
    attention_mask: torch.Tensor
    """LongTensor [B, L]: 1 on the row's tokens, 0 on right padding."""
    masked: torch.Tensor
    """bool [B, L]: the positions to generate."""
    prompt: torch.Tensor
    """bool [B, L]: the user's text (what classifier-free guidance masks)."""
    content: torch.Tensor
    """bool [B, L]: every position between the special tokens."""

    def to(self, device) -> Canvas:
        return Canvas(*(t.to(device) for t in (self.ids, self.attention_mask, self.masked,
                                                self.prompt, self.content)))


def special_wrap(tokenizer) -> tuple[list[int], list[int]]:
    """The special tokens the tokenizer puts before and after a single text."""
    probe = "a"
    bare = tokenizer(probe, add_special_tokens=False)["input_ids"]
    full = tokenizer(probe, add_special_tokens=True)["input_ids"]
    for start in range(len(full) - len(bare) + 1):
        if full[start:start + len(bare)] == bare:
            return list(full[:start]), list(full[start + len(bare):])
    return [], []


def text_ids(tokenizer, text: str) -> list[int]:
    """Token ids of `text` without special tokens."""
    if not text:
        return []
    # verbose=False: a text longer than the model is reported by mlmkit, in one line
    return list(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])


def continuation_ids(tokenizer, text: str) -> list[int]:
    """Token ids of `text` when it goes on a word begun before it: a template's text right
    after a [MASK] span, with no space between ("pars[MASK:2]y to").

    WordPiece marks a word's later pieces ("##y"), and a separately tokenized text would
    start a new word ("y"): its first word is split again here from the continuation
    pieces, by WordPiece's own longest-match rule. Byte-level BPE already reads a text
    without a leading space as a continuation; other tokenizers are left as they tokenize.
    """
    if not text:
        return []
    encoded = tokenizer(text, add_special_tokens=False, verbose=False)
    ids = list(encoded["input_ids"])
    backend = getattr(tokenizer, "backend_tokenizer", None)
    model = getattr(backend, "model", None)
    if not ids or type(model).__name__ != "WordPiece" or backend.pre_tokenizer is None:
        return ids
    normalized = backend.normalizer.normalize_str(text) if backend.normalizer else text
    words = backend.pre_tokenizer.pre_tokenize_str(normalized)
    joined = backend.pre_tokenizer.pre_tokenize_str("a" + normalized)
    if not words or words[0][1][0] != 0 or joined[0][0] != "a" + words[0][0]:
        return ids  # the text starts with a space or punctuation: a word of its own
    first = words[0][0]
    word_ids = encoded.word_ids()
    n_first = sum(1 for w in word_ids if w == word_ids[0])
    pieces, start = [], 0
    prefix = model.continuing_subword_prefix
    while start < len(first) and len(first) <= model.max_input_chars_per_word:
        end = len(first)
        while end > start and backend.token_to_id(prefix + first[start:end]) is None:
            end -= 1
        if end == start:
            break
        pieces.append(backend.token_to_id(prefix + first[start:end]))
        start = end
    if start < len(first) or not pieces:  # WordPiece's rule: an unsplittable word is [UNK]
        unk = backend.token_to_id(model.unk_token)
        pieces = [unk] if unk is not None else ids[:n_first]
    return pieces + ids[n_first:]


def decode_part(tokenizer, ids: list[int], **kwargs) -> str:
    """The text of `ids` cut from a longer sequence (a continuation, a filled span): as
    `tokenizer.decode`, without the WordPiece marker ("##") of a first token that goes on
    the word before it."""
    text = tokenizer.decode(ids, **kwargs)
    model = getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)
    prefix = getattr(model, "continuing_subword_prefix", None)
    if type(model).__name__ == "WordPiece" and prefix and text.startswith(prefix):
        text = text[len(prefix):]
    return text


def build_canvas(tokenizer, rows: list[list[Segment]], max_length: int, what: str,
                 first: int = 0) -> Canvas:
    """Wrap each row's segments in special tokens and pad the batch to its longest row.

    `what` names the input in errors ("prompt 3", "template 1"; `first` is the index of
    the batch's first row among all inputs): a row longer than the model's `max_length`
    is an error, never truncated.
    """
    prefix, suffix = special_wrap(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    built = []
    for index, segments in enumerate(rows):
        ids, kinds = list(prefix), ["special"] * len(prefix)
        for segment in segments:
            ids += segment.ids
            kinds += [segment.kind] * len(segment.ids)
        ids += suffix
        kinds += ["special"] * len(suffix)
        if len(ids) > max_length:
            n_prompt = kinds.count(PROMPT)
            raise InvalidArgument(
                f"{what} {first + index + 1} needs {len(ids)} tokens ({n_prompt} of text, "
                f"{kinds.count(MASK)} to generate, {len(prefix) + len(suffix)} special) but the "
                f"model takes at most {max_length}: shorten it or lower --length"
            )
        built.append((ids, kinds))
    width = max(len(ids) for ids, _ in built)
    batch = len(built)
    canvas = Canvas(
        ids=torch.full((batch, width), pad, dtype=torch.long),
        attention_mask=torch.zeros(batch, width, dtype=torch.long),
        masked=torch.zeros(batch, width, dtype=torch.bool),
        prompt=torch.zeros(batch, width, dtype=torch.bool),
        content=torch.zeros(batch, width, dtype=torch.bool),
    )
    for row, (ids, kinds) in enumerate(built):
        n = len(ids)
        canvas.ids[row, :n] = torch.tensor(ids)
        canvas.attention_mask[row, :n] = 1
        canvas.masked[row, :n] = torch.tensor([k == MASK for k in kinds])
        canvas.prompt[row, :n] = torch.tensor([k == PROMPT for k in kinds])
        canvas.content[row, :n] = torch.tensor([k != "special" for k in kinds])
    return canvas


def suppressed_ids(tokenizer, allow_eos: bool) -> list[int]:
    """Token ids a sampler never produces: [MASK], padding, [CLS] and other specials.

    With `allow_eos`, [SEP]/EOS stays allowed so a generation can end early.
    """
    banned = set(tokenizer.all_special_ids)
    banned |= {t for t in (tokenizer.mask_token_id, tokenizer.pad_token_id) if t is not None}
    if allow_eos:
        banned -= set(end_ids(tokenizer))
    return sorted(banned)


def end_ids(tokenizer) -> list[int]:
    """The ids that end a text: [SEP] and/or EOS."""
    return sorted({t for t in (tokenizer.sep_token_id, tokenizer.eos_token_id) if t is not None})
