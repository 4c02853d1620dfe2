"""Fill-mask examples from a freshly trained model: a quick look at what it learned, on
sentences of the run's own held-out text (a model trained on Shakespeare is shown
Shakespeare), each with one word masked and that word given as the answer; on a corpus of
proteins, the start of a held-out protein with one residue masked."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from mlmkit.generation.fill_mask import fill_mask
from mlmkit.models import LoadedMLM

_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")
_WORD = re.compile(r"[^\W\d_]{3,}")  # letters only: a word the model can be asked for
CANDIDATES = 5000


@dataclass(frozen=True)
class FillExample:
    """A held-out sentence with one word masked (`{mask}` marks it) and that word."""

    template: str
    answer: str

    def text(self, mask_token: str) -> str:
        return self.template.format(mask=mask_token)

    def to_dict(self) -> dict:
        return {"template": self.template, "answer": self.answer}


def pick_examples(documents: Iterable[str], tokenizer, count: int, seed: int,
                  max_words: int = 24) -> list[FillExample]:
    """`count` sentences of 6 to `max_words` words from `documents` (drawn by `seed`), each
    with one word masked: a word of letters that the tokenizer keeps whole (one token), so
    that a right answer can be the top candidate."""
    if count <= 0:
        return []
    found: set[str] = set()
    words: set[str] = set()  # documents of one word (a protein), for a corpus of those
    for document in documents:  # the first sentences suffice: a large split is not read whole
        for line in str(document).split("\n"):
            found.update(s.strip() for s in _SENTENCE_END.split(line)
                         if 6 <= len(s.split()) <= max_words and "{" not in s and "}" not in s)
        if len(str(document).split()) == 1 and len(words) < CANDIDATES:
            words.add(str(document).strip())
        if len(found) >= CANDIDATES:
            break
    if not found:
        return _letter_examples(sorted(words), tokenizer, count, seed)
    sentences = sorted(found)
    rng = np.random.default_rng(seed)
    examples = []
    for index in rng.permutation(len(sentences)):
        sentence = sentences[index]
        words = [m for m in _WORD.finditer(sentence)
                 if len(tokenizer.tokenize(" " + m.group())) == 1]
        if not words:
            continue
        word = words[int(rng.integers(len(words)))]
        examples.append(FillExample(sentence[:word.start()] + "{mask}" + sentence[word.end():],
                                    word.group()))
        if len(examples) == count:
            break
    return examples


def _letter_examples(sequences: list[str], tokenizer, count: int, seed: int,
                     width: int = 48) -> list[FillExample]:
    """Examples of a corpus without sentences whose tokenizer reads one token a letter (a
    protein alphabet): the first `width` letters of a sequence, one letter masked."""
    rng = np.random.default_rng(seed)
    examples = []
    for index in rng.permutation(len(sequences)):
        crop = sequences[index][:width]
        if len(crop) < 6 or "{" in crop or "}" in crop:
            continue
        tokens = tokenizer.tokenize(crop)
        if len(tokens) != len(crop) or tokenizer.unk_token in tokens:
            continue  # not one known token a letter (k-mers): no example
        position = int(rng.integers(len(crop)))
        examples.append(FillExample(crop[:position] + "{mask}" + crop[position + 1:],
                                    crop[position]))
        if len(examples) == count:
            break
    return examples


def fill_mask_examples(mlm: LoadedMLM, examples: list[FillExample], top_k: int = 3
                       ) -> list[tuple[str, str, list]]:
    """(text, answer, [(token, probability), ...]) for each example."""
    texts = [e.text(mlm.tokenizer.mask_token) for e in examples]
    if not texts:
        return []
    results = fill_mask(mlm, texts, top_k=top_k)
    return [(text, example.answer, [(c.token.strip(), c.score)
                                    for c in result.masks[0].candidates])
            for text, example, result in zip(texts, examples, results, strict=True)]
