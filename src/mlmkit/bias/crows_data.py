"""Read the CrowS-Pairs CSV as it is published, checking every row.

The file has a nameless index column, then `sent_more, sent_less, stereo_antistereo,
bias_type, annotations, anon_writer, anon_annotators`; one quoted field (row 1293) holds
a newline, which the csv module reads correctly. A row that cannot be used is an error
naming its row and line, never skipped.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from mlmkit.core.data_dir import default_data_dir
from mlmkit.core.records import decoded_lines
from mlmkit.errors import InvalidData, PathError

REQUIRED_COLUMNS = ("sent_more", "sent_less", "stereo_antistereo", "bias_type")
DIRECTIONS = ("stereo", "antistereo")
CROWS_FILE = Path("crows_pairs") / "crows_pairs_anonymized.csv"


def default_crows_path() -> Path:
    """`crows_pairs/crows_pairs_anonymized.csv` in the data folder (`$MLMKIT_DATA`, else
    mlmkit's cache: `mlmkit.core.data_dir`), looked up when a command runs."""
    return default_data_dir() / CROWS_FILE


@dataclass(frozen=True)
class CrowsPair:
    """One minimal pair. `sent_more` is the more stereotyping sentence in both directions."""

    row: int  # 1-based data row (the header is row 0)
    line: int  # physical line of the file where the row starts
    sent_more: str
    sent_less: str
    direction: str  # "stereo" or "antistereo"
    bias_type: str

    @property
    def sent1(self) -> str:
        """The official script's sent1: the stereotypical sentence of the pair."""
        return self.sent_more if self.direction == "stereo" else self.sent_less

    @property
    def sent2(self) -> str:
        return self.sent_less if self.direction == "stereo" else self.sent_more


def read_crows_pairs(path: str | Path) -> list[CrowsPair]:
    """All pairs of a CrowS-Pairs CSV (`-`: standard input), in file order; errors name the
    row and line (a non-UTF-8 byte: its line and byte offset)."""
    if str(path) != "-" and not Path(path).expanduser().is_file():
        raise PathError(
            f"CrowS-Pairs file {str(path)!r} does not exist (or is not a file): pass the path "
            f"of crows_pairs_anonymized.csv after the model, or put it at "
            f"$MLMKIT_DATA/{CROWS_FILE.as_posix()}"
        )
    def lines():
        try:
            for _, line in decoded_lines(path):
                yield line
        except InvalidData as error:
            raise InvalidData(f"cannot read CrowS-Pairs file: {error}") from None

    try:
        return _parse(lines(), path)
    except csv.Error as error:
        raise InvalidData(f"{str(path)!r} is not a valid CSV file: {error}") from error


def _parse(handle, path) -> list[CrowsPair]:
    reader = csv.reader(handle)
    header = next(reader, None)
    if header is None:
        raise InvalidData(f"CrowS-Pairs file {str(path)!r} is empty: it needs a header row")
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InvalidData(
            f"CrowS-Pairs file {str(path)!r} lacks the column(s) {missing}: the header must "
            f"name {list(REQUIRED_COLUMNS)} (it has {header})"
        )
    index = {name: header.index(name) for name in REQUIRED_COLUMNS}
    pairs: list[CrowsPair] = []
    line = reader.line_num + 1
    for row_number, fields in enumerate(reader, start=1):
        where = f"{str(path)!r} row {row_number} (line {line})"
        if len(fields) != len(header):
            raise InvalidData(
                f"{where} has {len(fields)} fields, the header has {len(header)}: fix the "
                f"quoting of that row"
            )
        values = {name: fields[i] for name, i in index.items()}
        for name in ("sent_more", "sent_less", "bias_type"):
            if not values[name].strip():
                raise InvalidData(f"{where} has an empty {name!r}: fill it in or remove the row")
        if values["stereo_antistereo"] not in DIRECTIONS:
            raise InvalidData(
                f"{where} has stereo_antistereo={values['stereo_antistereo']!r}: use one of "
                f"{list(DIRECTIONS)}"
            )
        pairs.append(CrowsPair(
            row=row_number, line=line, sent_more=values["sent_more"],
            sent_less=values["sent_less"], direction=values["stereo_antistereo"],
            bias_type=values["bias_type"],
        ))
        line = reader.line_num + 1
    if not pairs:
        raise InvalidData(f"CrowS-Pairs file {str(path)!r} has a header but no rows")
    return pairs
