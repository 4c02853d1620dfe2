"""The text all candidates of an item share: a common prefix and suffix, on word boundaries.

Tamborrino et al. (2020) score only the shared part of each hypothesis (e.g. the COPA
premise) conditioned on the part that differs: every candidate is then judged on the
same tokens, which removes the bias towards short or frequent candidate wordings.
"""

from __future__ import annotations

import os


def _boundary(texts: list[str], length: int) -> bool:
    """Is `length` characters a whole-word cut for every text?"""
    return all(length == len(t) or t[length].isspace() or not t[length].isalnum()
               or (length > 0 and not t[length - 1].isalnum()) for t in texts)


def shared_regions(candidates: list[str]) -> tuple[int, int]:
    """Character lengths (prefix, suffix) common to all candidates, cut at word boundaries."""
    prefix = len(os.path.commonprefix(candidates))
    while prefix > 0 and not _boundary(candidates, prefix):
        prefix -= 1
    reversed_texts = [t[::-1] for t in candidates]
    suffix = len(os.path.commonprefix(reversed_texts))
    while suffix > 0 and not _boundary(reversed_texts, suffix):
        suffix -= 1
    shortest = min(len(t) for t in candidates)
    return prefix, max(0, min(suffix, shortest - prefix))
