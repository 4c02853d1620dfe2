"""Infill templates: text with mask spans `[MASK]`, `[MASK:3]` or `[MASK:2-5]`.

`[MASK]` is one token, `[MASK:n]` exactly n tokens, `[MASK:a-b]` a span of unknown
length tried at every length from a to b. `<mask>` works the same way (RoBERTa spelling).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mlmkit.errors import InvalidArgument

SPAN = re.compile(r"\[MASK(?::(\d+)(?:-(\d+))?)?\]|<mask(?::(\d+)(?:-(\d+))?)?>")
MALFORMED = re.compile(r"\[MASK:[^\]]*\]|<mask:[^>]*>")
"""What looks like a span with a length but is not one ([MASK:-1], [MASK:x], <mask:1->)."""


@dataclass(frozen=True)
class Span:
    """A masked span: its lengths to try, shortest first."""

    shortest: int
    longest: int

    @property
    def lengths(self) -> range:
        return range(self.shortest, self.longest + 1)


def parse_template(template: str, where: str = "template") -> list[str | Span]:
    """The template as text pieces and spans, in order; an error when it has no span."""
    pieces: list[str | Span] = []
    cursor = 0
    for match in SPAN.finditer(template):
        if match.start() > cursor:
            pieces.append(template[cursor:match.start()])
        low = match.group(1) or match.group(3)
        high = match.group(2) or match.group(4)
        shortest = int(low) if low else 1
        longest = int(high) if high else shortest
        if shortest < 1 or longest < shortest:
            raise InvalidArgument(
                f"{where}: span {match.group(0)!r} has no valid length: write [MASK:n] with "
                f"n >= 1 or [MASK:a-b] with 1 <= a <= b"
            )
        pieces.append(Span(shortest, longest))
        cursor = match.end()
    if cursor < len(template):
        pieces.append(template[cursor:])
    for piece in pieces:  # a span written wrongly is an error, not text to keep
        bad = isinstance(piece, str) and MALFORMED.search(piece)
        if bad:
            raise InvalidArgument(
                f"{where}: span {bad.group(0)!r} has no valid length: write [MASK:n] with "
                f"n >= 1 or [MASK:a-b] with 1 <= a <= b"
            )
    if not any(isinstance(p, Span) for p in pieces):
        raise InvalidArgument(
            f"{where} {template!r} has no mask span: mark what to fill with [MASK], [MASK:3] "
            f"(3 tokens) or [MASK:1-4] (1 to 4 tokens), e.g. 'The cat [MASK:2] on the mat.'"
        )
    return pieces
