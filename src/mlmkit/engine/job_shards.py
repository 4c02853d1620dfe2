"""A job over a file of texts split into independent jobs: `--shard I/N`, then `merge`.

As jobs (a Slurm array, separate machines, one after the other), shard I of N takes the
pieces I, I + N, I + 2N, ... of `chunk_texts` input records each, and when complete leaves
`OUTPUT.shard.json` beside its output: shard, count, piece size, input records, its own
records, the output's format and the key of input, model and settings. A merge checks
that N complete shards of one run are given and puts their pieces back in input order, so
the merged file is the one a single run writes. Pieces (not one contiguous range each)
keep shards of equal work when long texts cluster in one part of a file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from mlmkit.core.output import open_output
from mlmkit.core.results import Result
from mlmkit.core.staging import write_text
from mlmkit.errors import InvalidArgument, InvalidData, PathError

SHARD_FORMAT = 1
_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(shard) -> tuple[int, int]:
    """(I, N) from "I/N" or a pair: shard I (0-based) of N."""
    if isinstance(shard, str):
        match = _SHARD.match(shard)
        if not match:
            raise InvalidArgument(f"--shard {shard!r}: give I/N, e.g. 0/4 for the first of 4 "
                                  "shards (I from 0 to N-1)")
        index, count = int(match.group(1)), int(match.group(2))
    else:
        try:
            index, count = (int(v) for v in shard)
        except (TypeError, ValueError):
            raise InvalidArgument(f"shard {shard!r}: give (I, N) or 'I/N'") from None
    if count < 1 or not 0 <= index < count:
        raise InvalidArgument(f"--shard {index}/{count}: I must be from 0 to N-1 and N at "
                              "least 1, e.g. 0/4 ... 3/4")
    return index, count


def owns_piece(index: int, piece: int, shard: int, count: int) -> bool:
    """Whether input record `index` (0-based) is in a piece of shard `shard` of `count`."""
    return (index // piece) % count == shard


def shard_info_path(output: Path) -> Path:
    return output.with_name(output.name + ".shard.json")


def write_shard_info(output: Path, shard: tuple[int, int], piece: int, input_lines: int,
                     records: int, key: str, **extra) -> None:
    """Written after the shard's output is complete: what a merge checks. `extra`: what
    else the merge needs (the output's format, the vectors' width)."""
    write_text(shard_info_path(output), json.dumps(
        {"format": SHARD_FORMAT, "shard": shard[0], "of": shard[1], "chunk_texts": piece,
         "input_lines": input_lines, "records": records, "key": key, **extra}) + "\n")


@dataclass
class MergeSummary(Result):
    """What a merge of shards wrote."""

    output: str
    shards: int
    lines: int


@dataclass
class Shards:
    """N complete shards of one run, in shard order, with what their descriptions say."""

    paths: list[Path]
    infos: list[dict]

    @property
    def count(self) -> int:
        return len(self.paths)

    @property
    def lines(self) -> int:
        return self.infos[0]["input_lines"]

    @property
    def piece(self) -> int:
        return self.infos[0]["chunk_texts"]

    def pieces(self):
        """(shard index, records) of each piece, in input order."""
        for start in range(0, self.lines, self.piece):
            yield (start // self.piece) % self.count, min(self.piece, self.lines - start)


def _shard_info(path: Path, command: str) -> dict:
    info_path = shard_info_path(path)
    if not path.is_file():
        raise PathError(f"shard output {str(path)!r} does not exist: finish that shard first "
                        "(a killed shard resumes when started again)")
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise InvalidData(f"{str(path)!r} has no readable {info_path.name}: it is not the "
                          f"complete output of mlmkit {command} --shard I/N") from None
    if not isinstance(info, dict) or info.get("format") != SHARD_FORMAT:
        raise InvalidData(f"{str(info_path)!r} is not a shard description of this mlmkit "
                          f"version: {command} that shard again")
    return info


def read_shards(shards, command: str, same=()) -> Shards:
    """The shard outputs `shards` (any order), checked: every one of N given once, all of
    one input, model and settings (and of the same `same` fields), their records adding up
    to the input's."""
    paths = [Path(p).expanduser() for p in shards]
    if not paths:
        raise InvalidArgument(f"{command} merge: give the shard outputs to join")
    infos = [_shard_info(p, command) for p in paths]
    first = infos[0]
    count = first["of"]
    for path, info in zip(paths, infos, strict=True):
        for name in ("of", "key", "chunk_texts", "input_lines", *same):
            if info.get(name) != first.get(name):
                raise InvalidData(f"{str(path)!r} is not a shard of the same run as "
                                  f"{str(paths[0])!r} (its {name} differs): merge the shards "
                                  "of one input, model and settings")
    by_index: dict[int, tuple[Path, dict]] = {}
    for path, info in zip(paths, infos, strict=True):
        if info["shard"] in by_index:
            raise InvalidArgument(f"shard {info['shard']}/{count} is given twice: "
                                  f"{str(by_index[info['shard']][0])!r} and {str(path)!r}")
        by_index[info["shard"]] = (path, info)
    missing = [i for i in range(count) if i not in by_index]
    if missing:
        raise InvalidArgument(f"{command} merge: shard(s) "
                              f"{', '.join(f'{i}/{count}' for i in missing)} missing: give "
                              f"all {count} shard outputs")
    records = sum(info["records"] for info in infos)
    if records != first["input_lines"]:
        raise InvalidData(f"the {count} shards hold {records} records for "
                          f"{first['input_lines']} input lines: {command} the shards again")
    ordered = [by_index[i] for i in range(count)]
    return Shards(paths=[p for p, _ in ordered], infos=[i for _, i in ordered])


def merge_line_shards(shards, output="-", command: str = "score") -> MergeSummary:
    """Join shard outputs of one record per line (JSONL) into the file a single run
    writes (`-`: standard output), in constant memory without parsing a record."""
    found = read_shards(shards, command)
    handles = [path.open(encoding="utf-8") for path in found.paths]
    try:
        with open_output(output, inputs=found.paths) as out:
            for index, records in found.pieces():
                for _ in range(records):
                    record = handles[index].readline()
                    if not record.endswith("\n"):
                        raise InvalidData(f"shard {index}/{found.count} ended before its "
                                          f"records did: {command} it again")
                    out.write(record)
            for index, handle in enumerate(handles):
                if handle.readline():
                    raise InvalidData(f"shard {index}/{found.count} holds more records than "
                                      f"its pieces: {command} it again")
    finally:
        for handle in handles:
            handle.close()
    return MergeSummary(output=str(output), shards=found.count, lines=found.lines)
