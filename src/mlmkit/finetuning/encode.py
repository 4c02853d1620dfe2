"""Texts to token ids once, then length-bucketed batches padded to their own longest row.

Inputs longer than `max_length` are truncated (pairs longest-first; in a prompt, the texts,
never the template or its mask) and counted: the count goes into the metrics file.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch
from transformers.utils import logging as hf_logging

from mlmkit.errors import InvalidArgument
from mlmkit.probe.prompt import split_cloze

BUCKET_BATCHES = 50  # a shuffled chunk of this many batches is sorted by length


@dataclass
class Encoded:
    """Token ids of a split, with the mask position of each row (prompts only) and the
    token type ids of sentence pairs (models that read segments only)."""

    ids: list[list[int]]
    lengths: np.ndarray
    labels: np.ndarray
    mask_at: np.ndarray | None
    truncated: int
    type_ids: list[list[int]] | None = None

    def __len__(self) -> int:
        return len(self.ids)


@contextlib.contextmanager
def quiet_tokenizer():
    """transformers' 'sequence longer than the model' warning off: mlmkit counts them."""
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def encode_pairs(tokenizer, texts: list[tuple[str, ...]], labels: np.ndarray,
                 max_length: int, segments: bool = False) -> Encoded:
    """Single texts or pairs, with the tokenizer's special tokens, truncated at `max_length`.
    With `segments`, a pair keeps its token type ids (0 for the first text, 1 for the
    second); a single text needs none (all 0, the model's default)."""
    first = [t[0] for t in texts]
    second = [t[1] for t in texts] if len(texts[0]) == 2 else None
    with quiet_tokenizer():
        full = tokenizer(first, second, add_special_tokens=True)
        truncated = sum(len(row) > max_length for row in full["input_ids"])
        if truncated:
            full = tokenizer(first, second, truncation="longest_first", max_length=max_length)
    ids = full["input_ids"]
    type_ids = full.get("token_type_ids") if segments and second is not None else None
    return Encoded(ids, np.fromiter(map(len, ids), np.int64, len(ids)), labels, None, truncated,
                   type_ids)


class PromptEncoder:
    """Renders texts into a cloze template (`{text}`, or `{text1}` and `{text2}`, and one
    [MASK]) and tokenizes them; the verbalizer's words must each be one token."""

    def __init__(self, tokenizer, template: str, verbalizer: dict[str, list[str]],
                 label_names: list[str], n_texts: int):
        cloze = split_cloze(template, "template (--template)")
        holders = ["{text}"] if n_texts == 1 else ["{text1}", "{text2}"]
        for holder in holders:
            if template.count(holder) != 1:
                raise InvalidArgument(f"template (--template) {template!r} must hold {holder} "
                                      f"once ({' and '.join(holders)} for this task)")
        self.tokenizer, self.holders = tokenizer, holders
        self.template = cloze.before + tokenizer.mask_token + cloze.after
        missing = [name for name in label_names if name not in verbalizer]
        if missing:
            raise InvalidArgument(f"verbalizer (--verbalizer) has no word for label(s) "
                                  f"{missing}; give one word per label of {label_names}")
        unknown = [name for name in verbalizer if name not in label_names]
        if unknown:
            raise InvalidArgument(f"verbalizer (--verbalizer) names label(s) {unknown} that "
                                  f"the task does not have; its labels are {label_names}")
        several = {name: list(verbalizer[name]) for name in label_names
                   if len(verbalizer[name]) > 1}
        if several:
            name, words = next(iter(several.items()))
            raise InvalidArgument(f"verbalizer (--verbalizer) gives label {name!r} "
                                  f"{len(words)} words {words}: prompt-based fine-tuning "
                                  "trains one word per label; keep one")
        spaced = cloze.before[-1:].isspace() or False
        self.word_ids = []
        for name in label_names:
            word = verbalizer[name][0]
            with quiet_tokenizer():
                ids = tokenizer((" " if spaced else "") + word, add_special_tokens=False)
            ids = ids["input_ids"]
            if len(ids) != 1 or ids[0] == tokenizer.unk_token_id:
                raise InvalidArgument(f"verbalizer word {word!r} (label {name!r}) is "
                                      f"{len(ids)} token(s) {tokenizer.convert_ids_to_tokens(ids)}"
                                      " for this tokenizer: prompt-based fine-tuning needs one "
                                      "known token per label; choose another word")
            self.word_ids.append(ids[0])
        if len(set(self.word_ids)) != len(self.word_ids):
            raise InvalidArgument("verbalizer (--verbalizer): two labels share a token")

    def render(self, texts: tuple[str, ...]) -> str:
        out = self.template
        for holder, text in zip(self.holders, texts, strict=True):
            out = out.replace(holder, text)
        return out

    def _cut(self, texts: tuple[str, ...], budget: int) -> tuple[str, ...]:
        """Texts cut at token boundaries (longest first) to `budget` tokens in all."""
        tok = self.tokenizer
        with quiet_tokenizer():
            parts = [tok(t, add_special_tokens=False, return_offsets_mapping=True)
                     for t in texts]
        keep = [len(p["input_ids"]) for p in parts]
        while sum(keep) > budget and max(keep) > 0:
            keep[int(np.argmax(keep))] -= 1
        return tuple(t[:p["offset_mapping"][k - 1][1]] if k else ""
                     for t, p, k in zip(texts, parts, keep, strict=True))

    def encode(self, texts: list[tuple[str, ...]], labels: np.ndarray,
               max_length: int) -> Encoded:
        tok = self.tokenizer
        with quiet_tokenizer():
            ids = tok([self.render(t) for t in texts])["input_ids"]
        truncated = 0
        overhead = None
        for i, row in enumerate(ids):
            if len(row) <= max_length:
                continue
            truncated += 1
            if overhead is None:
                with quiet_tokenizer():
                    overhead = len(tok(self.render(("",) * len(self.holders)))["input_ids"])
            budget = max_length - overhead
            if budget < 1:
                raise InvalidArgument(f"the template takes {overhead} tokens, no fewer than "
                                      f"max_length={max_length} (--max-length); raise it")
            while len(row) > max_length and budget >= 0:
                with quiet_tokenizer():
                    row = tok(self.render(self._cut(texts[i], budget)))["input_ids"]
                budget -= 1
            ids[i] = row
        mask_id = tok.mask_token_id
        mask_at = np.empty(len(ids), dtype=np.int64)
        for i, row in enumerate(ids):
            where = [k for k, t in enumerate(row) if t == mask_id]
            if len(where) != 1:
                raise InvalidArgument(f"text {i} {texts[i]!r}: its prompt holds {len(where)} "
                                      "mask tokens; a text may not contain the mask token")
            mask_at[i] = where[0]
        return Encoded(ids, np.fromiter(map(len, ids), np.int64, len(ids)), labels, mask_at,
                       truncated)


def train_batches(lengths: np.ndarray, batch_size: int, seed: int, epoch: int,
                  bucket: bool = True) -> list[np.ndarray]:
    """The batches of one epoch: a seeded shuffle; with `bucket`, each chunk of
    BUCKET_BATCHES batches sorted by length (little padding), batches then shuffled."""
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(lengths))
    if bucket:
        chunk = batch_size * BUCKET_BATCHES
        order = np.concatenate([part[np.argsort(lengths[part], kind="stable")]
                                for part in np.array_split(order, range(chunk, len(order),
                                                                        chunk))])
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    if bucket:
        batches = [batches[k] for k in rng.permutation(len(batches))]
    return batches


def collate(encoded: Encoded, index: np.ndarray, pad_id: int, device) -> dict:
    """Padded input ids, attention mask, labels (and mask positions) of rows `index`."""
    lengths = encoded.lengths[index]
    longest = int(lengths.max())
    ids = np.full((len(index), longest), pad_id, dtype=np.int64)
    for row, i in enumerate(index):
        ids[row, :lengths[row]] = encoded.ids[i]
    mask = (np.arange(longest)[None, :] < lengths[:, None]).astype(np.int64)
    batch = {"input_ids": torch.from_numpy(ids).to(device),
             "attention_mask": torch.from_numpy(mask).to(device),
             "labels": torch.from_numpy(encoded.labels[index]).to(device)}
    if encoded.type_ids is not None:
        types = np.zeros((len(index), longest), dtype=np.int64)
        for row, i in enumerate(index):
            types[row, :lengths[row]] = encoded.type_ids[i]
        batch["token_type_ids"] = torch.from_numpy(types).to(device)
    if encoded.mask_at is not None:
        rows = torch.arange(len(index))
        batch["positions"] = torch.stack([rows, torch.from_numpy(encoded.mask_at[index])],
                                         dim=1).to(device)
    return batch
