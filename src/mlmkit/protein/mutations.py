"""Mutations written as DMS files write them (`A42G`, multi-mutants `A42G:V50L`), checked
against the wild-type sequence.

A position counts from `offset` at the sequence's first residue (ProteinGym's files count
from 1; a DMS of a mature protein may count from 24). Every check names the mutation, so
a bad row of a 5,000-row file is one line, not a traceback.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from mlmkit.errors import InvalidData
from mlmkit.protein.alphabet import (
    AMBIGUOUS,
    MAX_NUCLEOTIDE_SHARE,
    NUCLEOTIDE_LETTERS,
    RESIDUES,
)

# ASCII digits only: int() would read other scripts' digits (٢, ２) as 2
_MUTATION = re.compile(r"^([A-Za-z])(-?[0-9]+)([A-Za-z])$")
_STOP_OR_GAP = re.compile(r"^[A-Za-z]-?[0-9]+[*\-]$")


@dataclass(frozen=True)
class Mutation:
    """One substitution: `wild_type` at `index` (0-based in the sequence) becomes `mutant`."""

    wild_type: str
    index: int
    mutant: str


def check_sequence(sequence: str, name: str = "the sequence") -> str:
    """`sequence` in upper case, each letter a residue of the alphabet, else one line naming
    the first bad letter and where it is. A gene (DNA or RNA letters: they are residues
    too, so nothing else would flag it) is refused: a masked LM of proteins would score
    it as a protein without a word."""
    if not isinstance(sequence, str):
        raise InvalidData(f"{name} is a {type(sequence).__name__}: give the amino-acid "
                          "letters as a string")
    if not sequence.strip():
        raise InvalidData(f"{name} is empty: give its amino-acid letters")
    sequence = "".join(sequence.split()).upper()
    for i, letter in enumerate(sequence):
        if letter not in RESIDUES:
            raise InvalidData(f"{name}: {letter!r} at residue {i + 1} is not an amino-acid "
                              f"letter (use {RESIDUES})")
    for thymine in "TU":  # DNA, then RNA
        bases = NUCLEOTIDE_LETTERS.replace("T", thymine)
        share = sum(sequence.count(c) for c in bases) / len(sequence)
        if len(sequence) >= 20 and share >= MAX_NUCLEOTIDE_SHARE and \
                set(bases[:4]) <= set(sequence):
            raise InvalidData(f"{name} reads as {'DNA' if thymine == 'T' else 'RNA'}, not a "
                              f"protein ({share:.0%} of its letters are {', '.join(bases)}): "
                              "give the protein's amino-acid letters (translate the gene)")
    return sequence


def parse_variant(text: str, sequence: str, offset: int = 1, name: str | None = None,
                  offset_name: str = "--offset") -> tuple[Mutation, ...]:
    """The mutations of `text` (`A42G` or `A42G:V50L`), checked against `sequence`.

    `name` says where `text` came from in an error (default: the text itself), and
    `offset_name` where the offset was set (a flag, or a key of a scans file)."""
    where = name or f"mutation {text!r}"
    if isinstance(text, float) and math.isnan(text):  # an empty cell read by pandas
        text = None
    if text is not None and not isinstance(text, str):
        raise InvalidData(f"{where}: of type {type(text).__name__}, not a mutation: give it "
                          "as a string (A42G, or A42G:V50L)")
    if text is None or not text.strip():
        raise InvalidData(f"{where}: no mutation given (write it as A42G, or A42G:V50L)")
    mutations, seen = [], set()
    for part in text.strip().split(":"):
        if not part.strip():
            raise InvalidData(f"{where}: an empty part between ':' separators: join the "
                              "mutations of a multi-mutant with single colons (A42G:V50L)")
        match = _MUTATION.match(part.strip())
        if match is None and _STOP_OR_GAP.match(part.strip()):
            raise InvalidData(f"{where}: {part.strip()!r} is a stop or a deletion; a masked "
                              "LM scores substitutions only: remove the row")
        if match is None:
            raise InvalidData(f"{where}: {part!r} is not a mutation: write wild type, "
                              "position, mutant (A42G; multi-mutants A42G:V50L)")
        wild, position, mutant = match.group(1).upper(), int(match.group(2)), \
            match.group(3).upper()
        for letter in (wild, mutant):
            if letter not in RESIDUES:
                raise InvalidData(f"{where}: {letter!r} is not an amino-acid letter "
                                  f"(use {RESIDUES})")
            if letter in AMBIGUOUS:
                raise InvalidData(f"{where}: {letter!r} is an ambiguous code (X: unknown, "
                                  "B: D or N, Z: E or Q), not a residue a variant can name: "
                                  "remove the row")
        index = position - offset
        if not 0 <= index < len(sequence):
            raise InvalidData(f"{where}: position {position} is outside the sequence "
                              f"({offset}..{offset + len(sequence) - 1} with offset {offset}): "
                              f"check {offset_name}")
        if sequence[index] != wild:
            raise InvalidData(f"{where}: the wild type at {position} is {sequence[index]!r}, "
                              f"not {wild!r}: check the sequence and {offset_name}")
        if index in seen:
            raise InvalidData(f"{where}: position {position} is mutated twice: give each "
                              "position one mutant letter (A42G, not A42G:A42V)")
        seen.add(index)
        mutations.append(Mutation(wild, index, mutant))
    return tuple(mutations)
