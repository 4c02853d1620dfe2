"""Cloze prompts: a text with exactly one mask, split around it so it can be filled.

Users may spell the mask `[MASK]` or `<mask>` whatever the model; the split keeps the
text on either side so that the masked prompt (tokenizer's own mask token) and every
filled-in statement are built from the very same characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mlmkit.errors import MlmkitError
from mlmkit.models import MASK_SPELLINGS

_MASK = re.compile("|".join(re.escape(s) for s in MASK_SPELLINGS))


@dataclass(frozen=True)
class Cloze:
    """A prompt with one gap: `before` + answer + `after`."""

    before: str
    after: str

    def masked(self, mask_token: str) -> str:
        return self.before + mask_token + self.after

    def filled(self, answer: str) -> str:
        return self.before + answer + self.after

    def answer_span(self, answer: str) -> tuple[int, int]:
        """Character range of `answer` in `filled(answer)`."""
        return len(self.before), len(self.before) + len(answer)


def split_cloze(text: str, where: str) -> Cloze:
    """The one mask of `text` ([MASK] or <mask>); an error naming `where` otherwise."""
    found = _MASK.findall(text)
    if len(found) != 1:
        spelled = " or ".join(MASK_SPELLINGS)
        problem = "has no mask" if not found else f"has {len(found)} masks"
        raise MlmkitError(f"{where} {text!r} {problem}: write exactly one {spelled} where the "
                          "answer goes, e.g. 'The movie was fun. It was [MASK].'")
    match = _MASK.search(text)
    return Cloze(before=text[:match.start()], after=text[match.end():])


def check_template(template: str, placeholder: str, where: str) -> Cloze:
    """A template with one mask and at least one `placeholder` (e.g. `{text}`)."""
    cloze = split_cloze(template, where)
    if placeholder not in template:
        raise MlmkitError(f"{where} {template!r} has no {placeholder}: mark where the input "
                          f"goes, e.g. '{placeholder} It was [MASK].'")
    return cloze


def substitute(cloze: Cloze, placeholder: str, value: str) -> Cloze:
    """`cloze` with `placeholder` replaced by `value` on both sides of the mask.

    Plain replacement (not str.format), so braces in the inserted text are harmless.
    """
    return Cloze(cloze.before.replace(placeholder, value), cloze.after.replace(placeholder, value))
