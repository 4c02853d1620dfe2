"""What a policy needs to know about a tokenizer: specials, [MASK], replacements, word starts.

Word starts are a per-vocabulary-id table computed once: a token starts a word when, decoded
after an ordinary anchor token and re-encoded, the fast tokenizer puts it in a new word
(`word_ids`). That uses the tokenizer's own pre-tokenizer, so it holds for WordPiece (`##`),
SentencePiece (`▁`) and byte-level BPE (`Ġ`) alike, never one family's prefix convention.
"""

from __future__ import annotations

import torch

from mlmkit.errors import MlmkitError

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


def word_start_table(tokenizer) -> torch.Tensor:
    """Bool [V]: True where a token begins a new word (specials too)."""
    size = len(tokenizer)
    if not getattr(tokenizer, "is_fast", False):
        raise MlmkitError("deriving word starts needs a fast tokenizer: load it with "
                          "AutoTokenizer.from_pretrained(..., use_fast=True) or pass word_starts=")
    anchor = _anchor_id(tokenizer)
    prefix = tokenizer.decode([anchor])
    ids = list(range(size))
    texts = tokenizer.batch_decode([[anchor, i] for i in ids], skip_special_tokens=False,
                                   clean_up_tokenization_spaces=False)
    encoded = tokenizer(texts, add_special_tokens=False)
    table = torch.zeros(size, dtype=torch.bool)
    for i, text in enumerate(texts):  # offline, once per tokenizer: not on the hot path
        tokens = encoded["input_ids"][i]
        if tokens == [anchor, i]:
            words = encoded.word_ids(i)
            table[i] = words[1] != words[0]
        else:  # re-encoding merged or split: fall back on the decoded separation
            rest = text[len(prefix):] if text.startswith(prefix) else text
            table[i] = (not rest) or rest[0].isspace() or not rest[0].isalnum()
    table[special_token_ids(tokenizer)] = True
    return table


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

    def word_starts(self, device) -> torch.Tensor:
        if self._word_starts is None:
            self._word_starts = word_start_table(self.tokenizer)
        return self._on("words", lambda: self._word_starts, device)
