"""What a policy needs to know about a tokenizer: specials, [MASK], replacements, word starts.

Word starts come from per-vocabulary-id tables computed once: a token starts a word when, decoded
after an ordinary anchor token and re-encoded, the fast tokenizer puts it in a new word
(`word_ids`). That uses the tokenizer's own pre-tokenizer, so it holds for WordPiece (`##`),
SentencePiece (`▁`) and byte-level BPE (`Ġ`) alike, never one family's prefix convention.
"""

from __future__ import annotations

import torch

from mlmkit.errors import MlmkitError
from mlmkit.masking.lookup import take

_ANCHOR_TEXTS = ("a", "x", "the", "A")


def special_token_ids(tokenizer) -> list[int]:
    """Every special id: the named specials, additional ones and added tokens marked special."""
    ids = set(int(i) for i in tokenizer.all_special_ids)
    for index, token in getattr(tokenizer, "added_tokens_decoder", {}).items():
        if getattr(token, "special", False):
            ids.add(int(index))
    return sorted(ids)


def _anchor_id(tokenizer) -> int:
    special = set(special_token_ids(tokenizer))
    for text in _ANCHOR_TEXTS:
        ids = tokenizer.encode(text, add_special_tokens=False)
        if len(ids) == 1 and ids[0] not in special:
            return ids[0]
    raise MlmkitError("cannot find an ordinary one-token word in the tokenizer's vocabulary to "
                      "derive word starts from: pass word_starts= to the policy")


def char_class(ch: str) -> int:
    """0 none, 1 letter, 2 digit, 3 other (punctuation, symbols), 4 whitespace."""
    if not ch:
        return 0
    if ch.isspace():
        return 4
    return 1 if ch.isalpha() else 2 if ch.isdigit() else 3


_PROBES = {1: ("ab", "cd"), 2: ("12", "34"), 3: ("(", ")"), 4: ("\n", "\n")}


def class_splits(tokenizer) -> torch.Tensor:
    """Bool [5, 5]: whether the pre-tokenizer starts a new word where a character of class i
    meets one of class j with no space between (byte-level BPE splits "(val" after "(",
    BERT splits at every punctuation mark, SentencePiece at neither). Probed on the
    tokenizer itself; a junction the tokenizer merges into one token says nothing."""
    splits = torch.zeros(5, 5, dtype=torch.bool)
    for left, (a, _) in _PROBES.items():
        for right, (_, b) in _PROBES.items():
            if left == right and left in (1, 2):
                continue  # letters next to letters never start a word by themselves
            encoded = tokenizer(a + b, add_special_tokens=False, return_offsets_mapping=True)
            words, offsets = encoded.word_ids(), encoded["offset_mapping"]
            for k in range(1, len(offsets)):
                if offsets[k][0] == len(a) and offsets[k - 1][1] <= len(a):
                    splits[left, right] = words[k] != words[k - 1]
    return splits


class WordStarts:
    """Word starts of any id sequence from per-id tables, computed once per tokenizer.

    A token starts a word on its own when it begins with a space (as decoded after an
    ordinary anchor token) or when re-encoding `anchor + token` puts it in a new word for a
    reason other than the junction of character classes; it also starts one where the
    classes at its junction with the previous token make this pre-tokenizer split.
    """

    def __init__(self, tokenizer):
        if not getattr(tokenizer, "is_fast", False):
            raise MlmkitError("deriving word starts needs a fast tokenizer: load it with "
                              "AutoTokenizer.from_pretrained(..., use_fast=True) or pass "
                              "word_starts=")
        size = len(tokenizer)
        self.splits = class_splits(tokenizer)
        anchor = _anchor_id(tokenizer)
        prefix = tokenizer.decode([anchor])
        anchor_class = char_class(prefix[-1:])
        texts = tokenizer.batch_decode([[anchor, i] for i in range(size)],
                                       skip_special_tokens=False,
                                       clean_up_tokenization_spaces=False)
        encoded = tokenizer(texts, add_special_tokens=False, verbose=False)
        table = torch.zeros(size, dtype=torch.bool)
        first = torch.zeros(size, dtype=torch.long)
        last = torch.zeros(size, dtype=torch.long)
        for i, text in enumerate(texts):  # once per tokenizer, offline: not the hot path
            rest = text[len(prefix):] if text.startswith(prefix) else text
            first[i], last[i] = char_class(rest.lstrip()[:1]), char_class(rest[-1:])
            if rest[:1].isspace():
                table[i] = True
            elif encoded["input_ids"][i] == [anchor, i]:
                words = encoded.word_ids(i)
                table[i] = words[1] != words[0] and not self.splits[anchor_class, first[i]]
        specials = special_token_ids(tokenizer)
        table[specials] = True
        first[specials] = 0
        last[specials] = 0
        self.table, self.first, self.last = table, first, last

    def to(self, device) -> WordStarts:
        moved = object.__new__(WordStarts)
        for name in ("table", "first", "last", "splits"):
            setattr(moved, name, getattr(self, name).to(device))
        return moved

    def __call__(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Bool, shaped like `input_ids`: True where a token begins a word."""
        ids = input_ids.clamp(0, self.table.numel() - 1)
        starts = take(self.table, ids)
        if self.splits.any():
            junction = self.splits[self.last[ids[:, :-1]], self.first[ids[:, 1:]]]
            starts[:, 1:] |= junction
        return starts


def word_start_table(tokenizer) -> torch.Tensor:
    """Bool [V]: True where a token begins a new word out of context (specials too)."""
    return WordStarts(tokenizer).table


class Vocabulary:
    """Tokenizer facts a policy uses on every call, as tensors cached per device."""

    def __init__(self, tokenizer, protected_ids=()):
        if tokenizer.mask_token_id is None:
            raise MlmkitError("the tokenizer has no mask token: masked language modelling "
                              "needs one (set tokenizer.mask_token)")
        self.tokenizer = tokenizer
        self.size = len(tokenizer)
        self.mask_id = int(tokenizer.mask_token_id)
        self.special_ids = special_token_ids(tokenizer)
        self.protected_ids = sorted(set(int(i) for i in protected_ids))
        for i in self.protected_ids:
            if not 0 <= i < self.size:
                raise MlmkitError(f"protected id {i} is outside the vocabulary (0..{self.size - 1})")
        never = torch.zeros(self.size, dtype=torch.bool)
        never[self.special_ids] = True
        never[self.protected_ids] = True
        self._never = never
        replace = torch.ones(self.size, dtype=torch.bool)
        replace[self.special_ids] = False
        self._replacements = replace.nonzero().squeeze(1)
        if len(self._replacements) == 0:
            raise MlmkitError("the tokenizer has only special tokens: nothing to draw "
                              "random replacements from")
        self._word_starts = None
        self._cache: dict = {}

    def _on(self, name: str, tensor_fn, device) -> torch.Tensor:
        key = (name, str(device))
        if key not in self._cache:
            self._cache[key] = tensor_fn().to(device)
        return self._cache[key]

    def never_mask(self, device) -> torch.Tensor:
        """Bool [V]: specials and protected ids."""
        return self._on("never", lambda: self._never, device)

    def replacements(self, device) -> torch.Tensor:
        """Long [R]: the ids a random replacement may draw (no special token)."""
        return self._on("replace", lambda: self._replacements, device)

    def word_starts(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Bool [B, L] word starts derived from the ids (when the batch brings none)."""
        if self._word_starts is None:
            self._word_starts = WordStarts(self.tokenizer)
        key = ("words", str(input_ids.device))
        if key not in self._cache:
            self._cache[key] = self._word_starts.to(input_ids.device)
        return self._cache[key](input_ids)
