"""ProteinGym's sliding window: which residues a model that reads at most `window` residues
sees when it scores position `index` of a longer protein.

A position in the first or last half-window is scored with the protein's first or last
`window` residues; any other position in the window centred on it. A protein that fits is
read whole, so windowed scoring equals whole-sequence scoring wherever the sequence fits.
"""

from __future__ import annotations


def residue_window(index: int, length: int, window: int) -> tuple[int, int]:
    """[start, end) of the residues read to score residue `index` of a protein of `length`."""
    if length <= window:
        return 0, length
    half = window // 2
    if index < half:
        return 0, window
    if index >= length - half:
        return length - window, length
    return max(0, index - half), min(length, index + half)
