"""Deep-mutational-scan files: a CSV with one variant per row (ProteinGym's layout: a
`mutant` column such as `A42G:V50L`, measured fitness in another column).

Read whole (a scan is thousands of rows), checked row by row against the wild type; every
problem is one line naming the file and line.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from mlmkit.core.records import STDIN
from mlmkit.errors import InvalidArgument, InvalidData, PathError
from mlmkit.protein.mutations import parse_variant


@dataclass
class Scan:
    """The rows of a DMS file (as read, strings), its columns and each row's line number."""

    path: Path
    columns: list[str]
    rows: list[dict[str, str]]
    lines: list[int]
    header: list[str] | None = None  # the header's fields as written (columns: stripped)

    def column(self, name: str) -> list[str]:
        if name not in self.columns:
            raise InvalidArgument(f"{self.path} has no column {name!r} (its columns: "
                                  f"{', '.join(self.columns)})")
        return [row[name] for row in self.rows]

    def where(self, i: int) -> str:
        return f"{self.path} line {self.lines[i]}"


GZIP_MAGIC = b"\x1f\x8b"


def _open_text(path: str | Path):
    """The CSV's text (`-`: standard input), gzip-compressed or not; utf-8-sig: a
    spreadsheet's byte-order mark is not part of the first column's name."""
    if str(path) == STDIN:
        data = sys.stdin.buffer.read()
    else:
        data = Path(path).read_bytes()
    if data.startswith(GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise InvalidData(f"{path} is gzip-compressed and cannot be decompressed "
                              f"({error}): the file is damaged or truncated") from None
    return io.StringIO(data.decode("utf-8-sig"), newline="")


def read_scan(path: str | Path, mutation_col: str = "mutant",
              naming: str = "--mutation-field") -> Scan:
    """The rows of the CSV at `path` (`-`: standard input); it must have a header with
    `mutation_col` (`naming`: where the user names that column) and at least one row, each
    row as many fields as the header."""
    source = path
    path = Path("standard input" if str(source) == STDIN else source)
    if str(source) != STDIN and path.is_dir():
        raise PathError(f"{path} is a directory: pass the DMS file (a CSV) in it")
    if str(source) != STDIN and not path.is_file():
        raise PathError(f"{path}: no such DMS file (or pass - to read standard input)")
    try:
        with _open_text(source) as f:
            # strict: a quote never closed is an error where it opens, not a row that
            # swallowed the rest of the file
            reader = csv.reader(f, strict=True)
            row_start = 1  # the line where the row being read begins
            header = next(reader, None)
            while header is not None and not any(field.strip() for field in header):
                row_start = reader.line_num + 1  # blank lines before the header
                header = next(reader, None)
            if header is None:
                raise InvalidData(f"{path} is empty: a DMS file is a CSV with a header line "
                                  f"and a {mutation_col!r} column")
            top = f"{path} line {row_start}"
            if header[0].lstrip().startswith(">"):
                raise InvalidData(f"{top} starts with '>': this is a FASTA file, not a DMS "
                                  "CSV; give the wild type's FASTA as --sequence and the CSV "
                                  "of variants as the DMS")
            columns = [field.strip() for field in header]
            twice = sorted({name for name in columns if columns.count(name) > 1})
            if twice:
                raise InvalidData(f"{top}: the column {twice[0]!r} appears twice: "
                                  "name each column once")
            if mutation_col not in columns:
                other = next((name for sep, name in (("\t", "tabs"), (";", "semicolons"))
                              if len(columns) == 1 and sep in columns[0]), None)
                if other is not None:
                    raise InvalidData(f"{top}: the header is one column holding "
                                      f"{other}: a DMS file is comma-separated (CSV); write "
                                      "it with commas")
                raise InvalidData(f"{top}: no {mutation_col!r} column (its columns: "
                                  f"{', '.join(columns)}): name it with {naming}")
            rows, lines = [], []
            row_start = reader.line_num + 1
            for fields in reader:
                # a row's line is where it begins (a quoted field may span lines)
                line, row_start = row_start, reader.line_num + 1
                if not fields or not any(f.strip() for f in fields):
                    continue
                if len(fields) != len(columns):
                    raise InvalidData(f"{path} line {line}: {len(fields)} fields, the header "
                                      f"has {len(columns)}: is the file a well-formed CSV?")
                rows.append(dict(zip(columns, fields, strict=True)))
                lines.append(line)
    except UnicodeDecodeError as error:
        raise InvalidData(f"{path}: not UTF-8 text ({error.reason}): is it a CSV file?") \
            from None
    except csv.Error as error:
        if "end of data" in str(error):
            raise InvalidData(f"{path} line {row_start}: a quote opened in this row is never "
                              "closed: close it, or remove the stray quote") from None
        raise InvalidData(f"{path} line {reader.line_num}: malformed CSV ({error})") from None
    if not rows:
        raise InvalidData(f"{path} has a header but no rows: nothing to score")
    return Scan(path, columns, rows, lines, header)


def check_mutations(scan: Scan, sequence: str, mutation_col: str, offset: int,
                    offset_name: str = "--offset") -> list[str]:
    """The mutation strings of `scan`, each checked against `sequence` (an error names the
    file, line and mutation, and `offset_name`: where the offset was set)."""
    texts = scan.column(mutation_col)
    for i, text in enumerate(texts):
        parse_variant(text, sequence, offset, name=f"{scan.where(i)} ({text!r})",
                      offset_name=offset_name)
    return texts


def check_varied(values: list[float], scan: Scan, naming: str) -> list[float]:
    """`values` (a scan's measured column, `naming` where it was named), refused when they
    are all the same: Spearman's ρ against them is undefined."""
    if len(set(values)) < 2:
        raise InvalidData(f"{naming}: every row of {scan.path} holds {values[0]!r}: Spearman's "
                          "ρ needs values that differ")
    return values


def numbers(scan: Scan, column: str) -> list[float]:
    """The values of `column` as floats (an empty field or NaN is an error naming the line:
    a correlation over a subset of rows would be a silent choice)."""
    values = []
    for i, text in enumerate(scan.column(column)):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise InvalidData(f"{scan.where(i)}: {column} is {text!r}, not a finite number: "
                              "remove the row or fill it in")
        values.append(value)
    return values
