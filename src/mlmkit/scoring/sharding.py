"""Sharded scoring: under torchrun, and as independent jobs (`--shard I/N`).

Under torchrun each rank scores every world-th line; rank 0 merges. Line i goes to rank
i % world, so each rank's part file is already in input order and the merge is a
round-robin read (constant memory). The process group itself (backend, device per rank,
timeout) is `mlmkit.engine.process_group`.

As jobs (a Slurm array, separate machines, one after the other): `--shard I/N` scores the
pieces I, I + N, ... of `chunk_texts` lines each and leaves `OUTPUT.shard.json` beside its
output (shard, count, piece size, input lines, records, and the key of input, model and
settings); `merge_shards` checks that N complete shards of one run are given and
interleaves their pieces back in input order (constant memory, no parsing).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from mlmkit.core.output import open_output
from mlmkit.core.results import Result
from mlmkit.core.staging import write_text
from mlmkit.errors import InvalidArgument, InvalidData, PathError, RunError

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
    """Whether input line `index` (0-based) is in a piece of shard `shard` of `count`."""
    return (index // piece) % count == shard


def shard_info_path(output: Path) -> Path:
    return output.with_name(output.name + ".shard.json")


def write_shard_info(output: Path, shard: tuple[int, int], piece: int, input_lines: int,
                     records: int, key: str) -> None:
    """Written after the shard's output is complete: what `merge_shards` checks."""
    write_text(shard_info_path(output), json.dumps(
        {"format": SHARD_FORMAT, "shard": shard[0], "of": shard[1], "chunk_texts": piece,
         "input_lines": input_lines, "records": records, "key": key}) + "\n")


@dataclass
class MergeSummary(Result):
    """What `merge_shards` wrote."""

    output: str
    shards: int
    lines: int


def _shard_info(path: Path) -> dict:
    info_path = shard_info_path(path)
    if not path.is_file():
        raise PathError(f"shard output {str(path)!r} does not exist: finish that shard first "
                        "(a killed shard resumes when started again)")
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise InvalidData(f"{str(path)!r} has no readable {info_path.name}: it is not the "
                          "complete output of mlmkit score --shard I/N") from None
    if not isinstance(info, dict) or info.get("format") != SHARD_FORMAT:
        raise InvalidData(f"{str(info_path)!r} is not a shard description of this mlmkit "
                          "version: score that shard again")
    return info


def merge_shards(shards, output="-") -> MergeSummary:
    """Join the outputs of `mlmkit score --shard I/N`, I = 0..N-1 (any order), into the
    file a single run writes (`-`: standard output). Refuses missing, duplicate or
    incomplete shards, and shards of different inputs, models or settings."""
    paths = [Path(p).expanduser() for p in shards]
    if not paths:
        raise InvalidArgument("score merge: give the shard outputs to join")
    infos = [_shard_info(p) for p in paths]
    first = infos[0]
    count = first["of"]
    for path, info in zip(paths, infos, strict=True):
        for name in ("of", "key", "chunk_texts", "input_lines"):
            if info[name] != first[name]:
                raise InvalidData(f"{str(path)!r} is not a shard of the same run as "
                                  f"{str(paths[0])!r} (its {name} differs): merge the shards "
                                  "of one input, model and settings")
    by_index = {}
    for path, info in zip(paths, infos, strict=True):
        if info["shard"] in by_index:
            raise InvalidArgument(f"shard {info['shard']}/{count} is given twice: "
                                  f"{str(by_index[info['shard']])!r} and {str(path)!r}")
        by_index[info["shard"]] = path
    missing = [i for i in range(count) if i not in by_index]
    if missing:
        raise InvalidArgument(f"score merge: shard(s) {', '.join(f'{i}/{count}' for i in missing)}"
                              f" missing: give all {count} shard outputs")
    lines, piece = first["input_lines"], first["chunk_texts"]
    if sum(info["records"] for info in infos) != lines:
        raise InvalidData(f"the {count} shards hold {sum(i['records'] for i in infos)} "
                          f"records for {lines} input lines: score the shards again")
    handles = [by_index[i].open(encoding="utf-8") for i in range(count)]
    try:
        with open_output(output, inputs=paths) as out:
            for start in range(0, lines, piece):
                source = handles[(start // piece) % count]
                for _ in range(min(piece, lines - start)):
                    record = source.readline()
                    if not record.endswith("\n"):
                        raise InvalidData(f"shard {(start // piece) % count}/{count} ended "
                                          "before its records did: score it again")
                    out.write(record)
            for index, handle in enumerate(handles):
                if handle.readline():
                    raise InvalidData(f"shard {index}/{count} holds more records than its "
                                      "pieces: score it again")
    finally:
        for handle in handles:
            handle.close()
    return MergeSummary(output=str(output), shards=count, lines=lines)


def owns(index: int, rank: int, world: int) -> bool:
    """Whether input line `index` (0-based) is scored by `rank` of `world`."""
    return index % world == rank


def part_path(output: Path, rank: int, world: int) -> Path:
    return output.with_name(f".{output.name}.part{rank}-of-{world}")


def merge_parts(output: Path, world: int, n_lines: int) -> Path:
    """Interleave the ranks' part files back into input order; return the merged temp file."""
    merged = output.with_name(f".{output.name}.merged")
    parts = [part_path(output, r, world).open(encoding="utf-8") for r in range(world)]
    try:
        with merged.open("w", encoding="utf-8", newline="\n") as out:
            for i in range(n_lines):
                line = parts[i % world].readline()
                if not line:
                    raise RunError(f"rank {i % world}'s part of {str(output)!r} ended before "
                                   f"line {i + 1}: a rank failed; run the command again")
                out.write(line)
            out.flush()
            os.fsync(out.fileno())
    finally:
        for handle in parts:
            handle.close()
    for r in range(world):
        part_path(output, r, world).unlink(missing_ok=True)
    return merged
