"""One reader of line-based inputs (text, JSONL, TSV, CSV; gzip; `-` for stdin) whose every
error names the file, the line and what to do.

Every feature that reads texts or records from a file goes through here, so a non-UTF-8
byte, a bad JSON line or a missing column reads the same everywhere.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import itertools
import json
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

from mlmkit.core.checks import choice
from mlmkit.errors import InvalidArgument, InvalidData, PathError

STDIN = "-"


def display_name(path) -> str:
    return "standard input" if str(path) == STDIN else repr(str(path))


def names_a_file(value) -> bool:
    """Whether `value` is the path of an existing file; False for text that cannot be a path
    (longer than a file name may be, holding a NUL, `~name` of no user), where `Path`
    raises."""
    try:
        return Path(value).expanduser().is_file()
    except (OSError, ValueError, RuntimeError):
        return False


def check_input_file(path, what: str = "input file") -> None:
    """A readable file (or `-`), else a `PathError` that says what to pass."""
    if str(path) == STDIN:
        return
    p = Path(path).expanduser()
    if p.is_dir():
        raise PathError(f"{what} {str(path)!r} is a directory: pass a file (or - for stdin)")
    if p.exists() and not p.is_file():
        raise PathError(f"{what} {str(path)!r} is not a regular file (a device, a socket or a "
                        "pipe): pass a file (or - for stdin)")
    if not p.is_file():
        raise PathError(f"{what} {str(path)!r} does not exist: check the path (or pass - to "
                        "read standard input)")


def count_lines(path) -> int:
    """Number of lines (a last line without a newline counts), read in constant memory."""
    check_input_file(path)
    count, last = 0, b"\n"
    with _open_binary(path) as handle:
        while block := handle.read(1 << 20):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


GZIP_MAGIC = b"\x1f\x8b"


def _open_binary(path):
    if str(path) == STDIN:
        return _Unclosable(sys.stdin.buffer)
    path = Path(path).expanduser()
    handle = open(path, "rb")
    if not handle.seekable():  # a pipe: its name says whether it is compressed
        if path.name.lower().endswith(".gz"):
            return gzip.open(handle, "rb")
        return handle
    if handle.peek(2)[:2] == GZIP_MAGIC:  # compressed whatever its name says
        handle.close()
        return gzip.open(path, "rb")
    return handle  # plain text, even named .gz


class _Unclosable(io.RawIOBase):
    """Standard input that a `with` block does not close."""

    def __init__(self, stream):
        self._stream = stream

    def __iter__(self):
        return iter(self._stream)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def decoded_lines(path, encoding: str = "utf-8",
                  errors: str = "strict") -> Iterator[tuple[int, str]]:
    """(line number, line with its ending) of a text file, decoded a line at a time.

    A decoding error names the file, the line and the byte offset, and says how to go on.
    """
    try:
        ascii_compatible = "\n".encode(encoding) == b"\n"
    except LookupError as error:
        raise InvalidArgument(f"unknown encoding {encoding!r} for {display_name(path)}: use "
                              "e.g. utf-8, latin-1 or cp1252 (--encoding)") from error
    try:
        codecs.lookup_error(errors)
    except LookupError as error:
        raise InvalidArgument(f"unknown encoding-errors handler {errors!r}: use strict, "
                              "replace or ignore (--encoding-errors)") from error
    check_input_file(path)
    if not ascii_compatible and str(path) != STDIN:  # UTF-16/32: no cutting on b"\n"
        try:
            with open(path, encoding=encoding, errors=errors, newline="") as handle:
                yield from enumerate(handle, start=1)
        except UnicodeError as error:
            raise decode_error(path, encoding, error, None, None) from error
        return
    offset = 0
    try:
        with _open_binary(path) as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    line = raw.decode(encoding, errors)
                except UnicodeDecodeError as error:
                    raise decode_error(path, encoding, error, number,
                                       offset + error.start) from error
                if number == 1 and line.startswith("\ufeff"):
                    line = line[1:]  # a byte-order mark is not text
                offset += len(raw)
                yield number, line
    except (gzip.BadGzipFile, EOFError, OSError) as error:
        if isinstance(error, PathError):
            raise
        raise InvalidData(f"{display_name(path)} cannot be read ({error}): if it is "
                          "gzip-compressed, the file is damaged or truncated") from error


def decode_error(path, encoding, error, line, offset) -> InvalidData:
    where = f" at byte offset {offset:,} (line {line:,})" if offset is not None else ""
    compressed = " of the decompressed text" if str(path).lower().endswith(".gz") else ""
    return InvalidData(
        f"{display_name(path)} is not valid {encoding}{where}{compressed}: "
        f"{getattr(error, 'reason', None) or error}; "
        f"convert it to {encoding}; commands that take --encoding read other encodings, "
        f"and --encoding-errors replace (encoding_errors='replace') replaces bad bytes"
    )


def read_lines(path, encoding: str = "utf-8",
               errors: str = "strict") -> Iterator[tuple[int, str]]:
    """(line number, line without its ending): every line, blank ones included."""
    for number, line in decoded_lines(path, encoding, errors):
        yield number, line.rstrip("\n").rstrip("\r")


def read_json_objects(path, encoding: str = "utf-8", errors: str = "strict",
                      what: str = "records", numbered=None) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line of a JSONL file (`numbered`: its
    (line number, line) pairs, when they were read already)."""
    for number, line in decoded_lines(path, encoding, errors) if numbered is None \
            else numbered:
        if not line.strip():
            continue
        yield number, parse_json_line(path, number, line, what)


def parse_json_document(text: str, where: str, hint: str, **options):
    """A whole JSON document (`json.loads(text, **options)`); broken or too deeply nested
    JSON is an InvalidData naming `where`, the line and column, then `hint` (what the file
    should hold)."""
    try:
        return json.loads(text, **options)
    except json.JSONDecodeError as error:
        raise InvalidData(f"{where}: invalid JSON at line {error.lineno}, column {error.colno} "
                          f"({error.msg}); {hint}") from error
    except RecursionError:
        raise InvalidData(f"{where}: JSON nested too deeply; {hint}") from None


def parse_json_line(path, number: int, line: str, what: str = "records") -> dict:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise InvalidData(f"{display_name(path)} line {number}: invalid JSON ({error.msg} at "
                          f"column {error.colno}); {what} files hold one JSON object per "
                          "line") from error
    except RecursionError:
        raise InvalidData(f"{display_name(path)} line {number}: JSON nested too deeply; "
                          f"{what} files hold one flat JSON object per line") from None
    if not isinstance(row, dict):
        raise InvalidData(f"{display_name(path)} line {number}: a JSON "
                          f"{json_type(row)}, not an object; {what} files hold one JSON "
                          "object per line")
    return row


def json_type(value) -> str:
    """The JSON name of a parsed value's type (for errors: 'null', not 'NoneType')."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {list: "list", dict: "object", str: "string"}.get(type(value), type(value).__name__)


def is_jsonl(path) -> bool:
    name = str(path).lower().removesuffix(".gz")
    return name.endswith((".jsonl", ".ndjson", ".json"))


def delimiter_of(path) -> str | None:
    name = str(path).lower().removesuffix(".gz")
    return "\t" if name.endswith(".tsv") else "," if name.endswith(".csv") else None


def read_table(path, encoding: str = "utf-8", errors: str = "strict",
               what: str = "records", delimiter: str | None = None) -> Iterator[tuple[int, dict]]:
    """(line number, row as a dict) of a JSONL, TSV or CSV file (a header row names the
    columns of TSV/CSV; quoted fields may hold delimiters and newlines). `delimiter`: the
    TSV/CSV delimiter when the file's name does not say it; standard input (read once, as a
    stream) is JSONL when its first line is an object, else TSV when it holds a tab, else
    CSV."""
    delimiter = delimiter or delimiter_of(path)
    numbered = None
    if delimiter is None and str(path) == STDIN:  # no name to read the format from
        head, numbered = _head_and_whole(decoded_lines(STDIN, encoding, errors))
        delimiter = _sniffed_delimiter(head)
    if delimiter is None:
        yield from read_json_objects(path, encoding, errors, what, numbered)
        return
    rows = delimited_rows(path, delimiter, encoding, errors, numbered)
    header = next(rows, None)
    if header is None:
        return
    for number, row in rows:
        yield number, dict(zip(header, row, strict=True))


SNIFF_LINES = 10_000  # the lines of standard input that judge its format (read once)


def _head_and_whole(numbered) -> tuple[list, Iterator]:
    """The first `SNIFF_LINES` of a stream that can be read once, and the whole stream
    (those, then the rest)."""
    stream = iter(numbered)
    head = list(itertools.islice(stream, SNIFF_LINES))
    return head, itertools.chain(head, stream)


def _sniffed_delimiter(numbered: list[tuple[int, str]]) -> str | None:
    """The format of lines without a file name: None (JSONL), a tab or a comma."""
    first = next((line for _, line in numbered if line.strip()), "")
    if first.lstrip().startswith("{"):
        return None
    return "\t" if "\t" in first else ","


def delimiter_in_header(path, header_line: str, delimiter: str) -> str:
    """The delimiter a TSV/CSV file really uses, from its header line: a `.csv` whose header
    holds tabs and no comma is read as TSV (and a `.tsv` of commas as CSV), with a warning.
    Tab-separated files named `.csv` are common; read by their name, every row was one
    column and the error pointed at the column flags, not at the delimiter."""
    other = "," if delimiter == "\t" else "\t"
    if delimiter in header_line or other not in header_line:
        return delimiter
    names = {"\t": "tab", ",": "comma"}
    warnings.warn(f"{display_name(path)}: its header is {names[other]}-separated, not "
                  f"{names[delimiter]}-separated as its name says: read with {names[other]}s "
                  f"(name it .{'tsv' if other == chr(9) else 'csv'} to silence this)",
                  stacklevel=3)
    return other


def delimited_rows(path, delimiter: str, encoding: str = "utf-8", errors: str = "strict",
                   numbered=None):
    """The header of a TSV/CSV file (nothing for an empty file), then (line number, row) of
    each non-empty row. A row whose field count differs from the header's, or broken
    quoting, is an InvalidData naming the file and line. The delimiter is the one the header
    line uses when it is not the one the name says (`delimiter_in_header`). `numbered`:
    the (line number, line) pairs, when they were read already.

    A CSV is read with CSV quoting: quoted fields may hold commas, newlines and be long (a
    document). A TSV is read with CSV quoting where the whole file (standard input: its
    first `SNIFF_LINES` lines) is well-formed CSV of the header's width and holds a quote
    (AG News, a spreadsheet's or pandas' export, whose quoted fields may hold tabs and
    newlines); else as GLUE and STS-B files are written and read, a row a line split on
    tabs, quotes as they are (a text may start with a lone `"`: `"Then the captain was
    gone.`), so that such a row never swallows the rows after it."""
    csv.field_size_limit(2**31 - 1)  # documents are long; the default stops at 128 KiB
    if numbered is None and str(path) != STDIN:
        def lines():  # a pass over the file: (line number, line)
            return decoded_lines(path, encoding, errors)
        sample = lines  # the whole file judges a TSV's quoting
    else:  # standard input, read once: its first lines judge a TSV's quoting
        head, whole = _head_and_whole(decoded_lines(STDIN, encoding, errors)
                                      if numbered is None else numbered)

        def lines():
            return whole

        def sample():
            return iter(head)
    first = next(sample(), None)
    if first is None:
        return
    delimiter = delimiter_in_header(path, first[1], delimiter)
    if delimiter == "\t" and not _csv_quoted(sample()):
        yield from _tab_rows(path, lines())
        return
    reader = csv.reader((line for _, line in lines()), delimiter=delimiter)
    try:
        header = next(reader, None)
        if header is None:
            return
        yield header
        for row in reader:
            if not row:
                continue
            _check_width(path, reader.line_num, row, header)
            yield reader.line_num, row
    except csv.Error as error:
        raise InvalidData(f"{display_name(path)} line {reader.line_num}: {error}") from error


def _check_width(path, number: int, row: list, header: list) -> None:
    if len(row) != len(header):
        raise InvalidData(f"{display_name(path)} line {number}: a row of {len(row)} fields "
                          f"under a header of {len(header)} ({header}); fix the quoting or "
                          "the delimiter")


def _csv_quoted(numbered) -> bool:
    """Whether a TSV's (line number, line) pairs use CSV quoting: they hold a quote, and
    read with strict CSV quoting every row has the header's width."""
    quoted = False

    def texts():
        nonlocal quoted
        for _, line in numbered:
            quoted = quoted or '"' in line
            yield line
    reader = csv.reader(texts(), delimiter="\t", strict=True)
    try:
        header = next(reader, None)
        if any(row and len(row) != len(header) for row in reader):
            return False
    except csv.Error:
        return False
    return quoted


def _tab_rows(path, numbered):
    """`delimited_rows` of a TSV without quoting: the header, then (line number, row)."""
    header = None
    for number, line in numbered:
        text = line.rstrip("\r\n")
        if not text:
            continue
        row = text.split("\t")
        if header is None:
            header = row
            yield header
            continue
        _check_width(path, number, row, header)
        yield number, row


TEXT_FORMATS = ("text", "jsonl", "tsv", "csv")
"""The formats of a file of texts (`--format`); without one, the file's name says it."""


def read_texts(path, field: str | None = None, encoding: str = "utf-8",
               errors: str = "strict", format: str | None = None) -> Iterator[tuple[int, str]]:
    """(line number, text) per input line, blank lines included (as '').

    Plain text: each line is a text. JSONL (by suffix, or whenever `field` is given for a
    non-TSV/CSV input): the `field` of each object (default 'text'). TSV/CSV: the `field`
    column (default 'text'). `format` (one of TEXT_FORMATS) overrides what the name says,
    e.g. for standard input or a file named .txt that holds JSON lines.
    """
    if format is not None:
        choice("format", format, TEXT_FORMATS)
    delimiter = {"tsv": "\t", "csv": ","}.get(format) if format else delimiter_of(path)
    if format == "text" or (format is None and delimiter is None and not is_jsonl(path)
                            and field is None):
        yield from read_lines(path, encoding, errors)
        return
    name = field or "text"
    if delimiter is not None:
        for number, row in read_table(path, encoding, errors, what="text",
                                      delimiter=delimiter):
            yield number, text_field(path, number, row, name)
        return
    for number, line in decoded_lines(path, encoding, errors):
        if not line.strip():
            yield number, ""
            continue
        try:
            row = parse_json_line(path, number, line, "text")
        except InvalidData as error:
            if is_jsonl(path) or format == "jsonl":
                raise
            raise InvalidData(f"{error}; --text-field {name!r} reads JSONL (or TSV/CSV) "
                              "input: for a plain text file, one text per line, leave "
                              "--text-field out") from None
        yield number, text_field(path, number, row, name)


def text_field(path, number: int, row: dict, name: str) -> str:
    if name not in row:
        raise InvalidData(f"{display_name(path)} line {number} has no field {name!r} (its "
                          f"fields are {sorted(row)}): choose the text field with --text-field")
    value = row[name]
    if not isinstance(value, str):
        raise InvalidData(f"{display_name(path)} line {number}: field {name!r} holds "
                          f"{json_type(value)}, not a string; choose the text field with "
                          "--text-field")
    return value
