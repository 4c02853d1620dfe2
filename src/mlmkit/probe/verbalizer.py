"""Verbalizers (PET): each label is said by one or more words that can fill the mask."""

from __future__ import annotations

import json
from pathlib import Path

from mlmkit.core.records import decoded_lines
from mlmkit.errors import InvalidArgument

DEFAULT_VERBALIZER = {"positive": ["great", "good"], "negative": ["terrible", "bad"]}


def _pairs(pairs: list) -> list[tuple]:
    return [tuple(p) for p in pairs]


def parse_verbalizer(verbalizer, where: str = "verbalizer") -> dict[str, list[str]]:
    """`{label: [word, ...]}` (a bare word is a list of one), checked and copied.

    Accepts a dict, a JSON string of one, or the path of a JSON file holding one.
    """
    if isinstance(verbalizer, (str, Path)):
        text = str(verbalizer)
        path = Path(text)
        if not text.lstrip().startswith("{") and path.is_file():
            text = "".join(line for _, line in decoded_lines(path))
            where = f"{where} file {str(path)!r}"
        try:
            verbalizer = json.loads(text, object_pairs_hook=_pairs)
        except json.JSONDecodeError as error:
            raise InvalidArgument(f"{where}: not valid JSON ({error.msg}); write e.g. "
                              '\'{"positive": ["good", "great"], "negative": ["bad"]}\'') from error
    if isinstance(verbalizer, list) and all(isinstance(p, tuple) for p in verbalizer):
        labels = [label for label, _ in verbalizer]
        twice = next((label for label in labels if labels.count(label) > 1), None)
        if twice is not None:  # json.loads would keep only the last one's words
            raise InvalidArgument(f"{where}: the label {twice!r} is given twice; give each "
                                  "label once, with all its words in one list")
        verbalizer = dict(verbalizer)
    if not isinstance(verbalizer, dict) or len(verbalizer) < 2:
        raise InvalidArgument(f"{where}: needs an object mapping at least two labels to words, e.g. "
                          '{"positive": ["good"], "negative": ["bad"]}')
    out: dict[str, list[str]] = {}
    owner: dict[str, str] = {}
    for label, words in verbalizer.items():
        words = [words] if isinstance(words, str) else words
        if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words):
            raise InvalidArgument(f"{where}: label {label!r} needs a word or a non-empty list of "
                              f"words, got {words!r}")
        for word in words:
            if not word.strip():
                raise InvalidArgument(f"{where}: label {label!r} has an empty word")
            word = word.strip()
            if word in owner:
                raise InvalidArgument(f"{where}: the word {word!r} is given for both "
                                  f"{owner[word]!r} and {label!r}; a word can say one label")
            owner[word] = str(label)
        out[str(label)] = list(dict.fromkeys(w.strip() for w in words))
    return out
