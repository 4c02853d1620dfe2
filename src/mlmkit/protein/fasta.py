"""FASTA files: records of a `>` header line and a sequence over one or more lines.

Plain or gzip-compressed (`.gz`). The header's first word is the record's id. A record
without a sequence, or a file without records, is an error naming the line.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mlmkit.errors import InvalidData, PathError


@dataclass(frozen=True)
class Record:
    """One FASTA record: its id (the header's first word), the whole header, the sequence."""

    id: str
    description: str
    sequence: str


def _open(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def read_fasta(path: str | Path) -> Iterator[Record]:
    """The records of a FASTA file, in order, one at a time."""
    path = Path(path)
    if not path.is_file():
        raise PathError(f"{path}: no such FASTA file")
    header, header_line, parts = None, 0, []
    try:
        with _open(path) as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if not line or line.startswith(";"):
                    continue
                if line.startswith(">"):
                    if header is not None:
                        yield _record(path, header, header_line, parts)
                    header, header_line, parts = line[1:].strip(), number, []
                elif header is None:
                    raise InvalidData(f"{path} line {number}: sequence before any '>' header: "
                                      "is this a FASTA file?")
                else:
                    parts.append(line)
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as error:
        raise InvalidData(f"{path}: not a readable FASTA file ({error})") from None
    if header is None:
        raise InvalidData(f"{path}: no FASTA record (a record starts with a '>' header line)")
    yield _record(path, header, header_line, parts)


def _record(path: Path, header: str, line: int, parts: list[str]) -> Record:
    sequence = "".join("".join(parts).split())
    if not sequence:
        raise InvalidData(f"{path} line {line}: the record {header!r} has no sequence")
    return Record(id=header.split()[0] if header else f"record-{line}", description=header,
                  sequence=sequence)


def read_sequence(value: str) -> str:
    """A wild-type sequence given as letters or as a FASTA file of one record."""
    path = Path(value)
    looks_like_file = path.suffix.lower() in (".fasta", ".fa", ".faa", ".gz", ".fas") \
        or "/" in value or path.is_file()
    if not looks_like_file:
        return value
    records = list(read_fasta(path))
    if len(records) != 1:
        raise InvalidData(f"{path}: {len(records)} records; --sequence takes a FASTA file of "
                          "one record")
    return records[0].sequence
