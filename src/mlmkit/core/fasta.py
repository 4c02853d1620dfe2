"""FASTA files: records of a `>` header line and a sequence over one or more lines.

Plain or gzip-compressed (`.gz`), or standard input (`-`), read a line at a time
(`core.records.decoded_lines`: a decoding error names the line). The header's first word is
the record's id; sequences are read in upper case. A record without a sequence, or a file
without records, is an error naming the line.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mlmkit.core.checks import choice, clipped
from mlmkit.core.records import (
    STDIN,
    TEXT_FORMATS,
    decoded_lines,
    display_name,
    names_a_file,
    read_texts,
)
from mlmkit.errors import InvalidArgument, InvalidData

FASTA_SUFFIXES = (".fasta", ".fa", ".faa", ".fna", ".fas")
_SPECIAL = re.compile(r"(<[^<>]*>)")


@dataclass(frozen=True)
class Record:
    """One FASTA record: its id (the header's first word), the whole header, the sequence,
    and the line of its header."""

    id: str
    description: str
    sequence: str
    line: int = 0


def read_fasta(path: str | Path, encoding: str = "utf-8",
               encoding_errors: str = "strict") -> Iterator[Record]:
    """The records of a FASTA file (`-`: standard input), in order, one at a time."""
    yield from _records(display_name(path) if str(path) == STDIN else path,
                        decoded_lines(path, encoding, encoding_errors))


def _records(name, lines: Iterable[tuple[int, str]]) -> Iterator[Record]:
    header, header_line, parts = None, 0, []
    # old Mac line endings (a lone \r) end lines too, within the line that holds them
    for number, line in ((n, piece) for n, text in lines for piece in text.split("\r")):
        line = line.strip()
        if not line or line.startswith(";"):
            continue
        if line.startswith(">"):
            if header is not None:
                yield _record(name, header, header_line, parts)
            header, header_line, parts = line[1:].strip(), number, []
        elif header is None:
            raise InvalidData(f"{name} line {number}: sequence before any '>' header: "
                              "is this a FASTA file?")
        else:
            parts.append(line)
    if header is None:
        raise InvalidData(f"{name}: no FASTA record (a record starts with a '>' header line)")
    yield _record(name, header, header_line, parts)


def _record(path, header: str, line: int, parts: list[str]) -> Record:
    # upper case: residues and bases are case-insensitive in FASTA (lower case marks
    # soft-masked regions), and the tokenizers' alphabets are upper case; a special token
    # written into a sequence (<mask>) keeps its spelling
    pieces = _SPECIAL.split("".join("".join(parts).split()))
    sequence = "".join(p if i % 2 else p.upper() for i, p in enumerate(pieces))
    if not sequence:
        raise InvalidData(f"{path} line {line}: the record {header!r} has no sequence")
    return Record(id=header.split()[0] if header else f"record-{line}", description=header,
                  sequence=sequence, line=line)


def fasta_texts(path: str | Path, encoding: str = "utf-8",
                errors: str = "strict") -> Iterator[tuple[int, str]]:
    """(header line, sequence) per record: a FASTA file read as the texts of the commands
    that take one text per line (`mlmkit score`, `mlmkit embed`), a protein per text."""
    for record in read_fasta(path, encoding, errors):
        yield record.line, record.sequence


INPUT_FORMATS = (*TEXT_FORMATS, "fasta")
"""The input formats of the commands that read a text per record (`--format`)."""


def input_texts(path, field: str | None = None, encoding: str = "utf-8",
                errors: str = "strict", format: str | None = None) -> Iterator[tuple[int, str]]:
    """(line number, text) per input record of the commands that take one text per line:
    `mlmkit.core.records.read_texts`, or for FASTA (`format="fasta"`, or a file's suffix)
    (header line, sequence) per record. Standard input read as text whose first line opens
    like a FASTA record is said once (a warning): it is read a line per text unless
    `format="fasta"`."""
    if format is not None:
        choice("format", format, INPUT_FORMATS)
    if format == "fasta" or (format is None and str(path) != STDIN and is_fasta(path)):
        if field is not None:
            raise InvalidArgument(f"--text-field {field!r}: a FASTA file has no fields (each "
                                  "record's sequence is a text): leave --text-field out")
        return fasta_texts(path, encoding, errors)
    texts = read_texts(path, field, encoding, errors, format)
    if str(path) == STDIN and format is None and field is None:
        return _said_if_fasta(texts)
    return texts


def _said_if_fasta(texts: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    first = next(texts, None)
    if first is None:
        return
    if first[1].startswith(">"):
        warnings.warn("standard input starts with '>' as FASTA does: it is read as text, a "
                      "line per input; pass --format fasta to read its records", stacklevel=2)
    yield first
    yield from texts


def is_fasta(path: str | Path) -> bool:
    return str(path).lower().removesuffix(".gz").endswith(FASTA_SUFFIXES)


def read_sequence(value: str | Path, what: str = "--sequence") -> str:
    """A wild-type sequence given as letters, as a FASTA file of one record, or as `-`:
    standard input holding either (`what`: where it was given, for the error). Residues
    given as letters are capitals: capital letters that also name a file in the current
    folder are refused as ambiguous (a protein `MKV` beside a file `MKV`: `./MKV` names the
    file); a name in lower case, with a suffix or a folder is a file's, and one that names
    no file is refused (`insulin` is not read as the protein INSULIN)."""
    value = str(value)
    if value == STDIN:
        lines = list(decoded_lines(STDIN))
        if not any(line.lstrip().startswith(">") for _, line in lines):
            return "".join("".join(line for _, line in lines).split()).upper()
        return _one_record(list(_records(display_name(STDIN), lines)), value, what)
    if not (is_fasta(value) or _path_like(value) or names_a_file(value)):
        if value.isalpha() and not value.isupper():  # a file name, by its lower case
            raise InvalidArgument(f"{what} {clipped(value)!r}: no such file, and letters in lower "
                                  "case are read as a file's name, not as residues: give an "
                                  "existing FASTA file, or the residues in capitals")
        return value
    if value.isascii() and value.isalpha() and value.isupper():  # a file, and residues too
        raise InvalidArgument(f"{what} {value!r} is both a file here and a sequence of letters: "
                              f"write ./{value} to read the file, or give the letters on "
                              f"standard input ({what} -)")
    return sequence_file(value, what)


_FILE_SUFFIX = re.compile(r"\.[A-Za-z]\w{0,5}$")  # .txt, .fasta, .gz, ...


def _path_like(value: str) -> bool:
    """Whether `value` reads as a path rather than residues: a folder separator, a leading
    `~` or `.`, or a file suffix."""
    return ("/" in value or "\\" in value or value.startswith(("~", "."))
            or bool(_FILE_SUFFIX.search(value)))


def sequence_file(path: str | Path, what: str = "--sequence") -> str:
    """The sequence of the FASTA file at `path`, which must hold one record."""
    return _one_record(list(read_fasta(path)), path, what)


def _one_record(records: list[Record], source, what: str) -> str:
    if len(records) != 1:
        raise InvalidData(f"{display_name(source)}: {len(records)} records; {what} takes a "
                          "FASTA file of one record")
    return records[0].sequence
