"""Score a file of texts in constant memory: read a chunk, score it, append its JSONL lines.

Input is a text per line, JSONL (`field` names the text) or TSV/CSV, read by
`mlmkit.core.records` (`-` is standard input). The output has one record per input
line, in input order, empty lines included (with a null score); `-` is standard output.

A file output is written progressively to `.NAME.<fingerprint>.partial` beside it and
renamed into place when complete, so a crash never leaves half a file under the real
name. The fingerprint covers the input file, the model's weights and tokenizer and every
setting that changes a score; a run killed part-way (kill -9, power loss) resumes from the
last complete chunk of its partial file when started again with the same input and
settings, and ends with a file byte-identical to an uninterrupted run (chunks are scored
exactly as they would have been). Partial files of other settings for the same output are
removed at the start, so debris never blocks a rerun. Under torchrun each rank scores its
share of the lines and rank 0 merges them (`scoring.distributed`).

`shard=(I, N)` (`mlmkit score --shard I/N`, e.g. one job of a Slurm array) scores only the
pieces I, I + N, I + 2N, ... of the input (piece k: lines k·C+1 to (k+1)·C, C =
`chunk_texts`), resumably, and writes `OUTPUT.shard.json` beside its output when done;
`merge_shards` (`mlmkit score merge`) joins the N outputs into the file one run writes.
Every piece is scored as one chunk, exactly as in a single run, so the merge is
byte-identical to it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from mlmkit.core import checks
from mlmkit.core.fasta import input_texts as read_texts
from mlmkit.core.fasta import is_fasta
from mlmkit.core.output import check_output_path, fsync_directory
from mlmkit.core.progress import Progress, warn
from mlmkit.core.records import STDIN, check_input_file, count_lines
from mlmkit.core.results import Result, one_line
from mlmkit.engine.job_files import complete_line_prefix, lock, partial_path, remove_stale_partials
from mlmkit.engine.job_files import fingerprint as job_fingerprint
from mlmkit.engine.job_shards import owns_piece, parse_shard, write_shard_info
from mlmkit.errors import InvalidData, PathError
from mlmkit.models import prepare_mlm
from mlmkit.scoring.scores import TextScore
from mlmkit.scoring.sharding import merge_parts, owns, part_path
from mlmkit.scoring.text_scores import check_score_options, score

# bump when the record layout changes: old partial files are not resumed (2: the records
# hold score and reduction)
FORMAT_VERSION = 2


@dataclass
class FileSummary(Result):
    """What a file scoring run did."""

    texts: int
    """Output records: the input's lines (a shard: its own lines)."""
    empty: int
    seconds: float
    first_empty_line: int | None = None
    resumed_lines: int = 0
    """Lines taken from the partial output of an earlier, interrupted run."""
    output: str = "-"

    @property
    def texts_per_second(self) -> float:
        return self.texts / self.seconds if self.seconds > 0 else 0.0


def fingerprint(input_path, mlm, settings: dict) -> str:
    """A short hash of everything a score file depends on (input file, model, settings)."""
    return job_fingerprint(input_path, mlm, settings, FORMAT_VERSION)


def score_record(line: int, result: TextScore) -> str:
    """The JSON line of one text's score, as `score_file` writes it (`line`: from 1)."""
    return one_line(json.dumps({"line": line, **result.to_dict()}, ensure_ascii=False,
                               allow_nan=False)) + "\n"


def score_file(
    model,
    input_path,
    output_path="-",
    *,
    field: str | None = None,
    metric: str = "pll",
    per_token: bool = False,
    per_word: bool = False,
    unk: str = "score",
    stride: int = 1,
    reduction: str = "sum",
    chunk_texts: int = 2048,
    resume: bool = True,
    encoding: str = "utf-8",
    encoding_errors: str = "strict",
    batch_tokens: int | None = None,
    precision: str = "auto",
    device=None,
    threads: int | None = None,
    progress: bool | None = None,
    group=None,
    shard: tuple[int, int] | str | None = None,
    format: str | None = None,
) -> FileSummary:
    """Score every line of `input_path` (`-`: standard input) into `output_path` (JSONL;
    `-`: standard output), streaming by chunks of `chunk_texts` lines.

    `resume`: continue from the partial output an interrupted run with the same input,
    model and settings left (the result is byte-identical to an uninterrupted run); False
    starts over. `group`: the torchrun process group (`mlmkit.engine.process_group.init`):
    each rank scores every world-th line, rank 0 merges. `shard`: (I, N) or "I/N": score
    only every N-th piece of `chunk_texts` lines, from piece I (see the module). The other
    keywords are those of `mlmkit.score` and the runtime options (docs/API.md). `format`:
    text, jsonl, tsv or csv, for an input whose name does not say it (standard input).
    """
    check_score_options(metric, unk, stride, batch_tokens, reduction)
    chunk_texts = checks.count("chunk_texts", chunk_texts, 1)
    check_input_file(input_path)
    to_stdout = str(output_path) == "-"
    world = group.world if group is not None else 1
    rank = group.rank if group is not None else 0
    if not to_stdout:
        check_output_path(output_path, inputs=[input_path])
    elif world > 1:
        raise PathError("sharded scoring writes a file: pass -o PATH (standard output is "
                        "for a single process)")
    shard = parse_shard(shard) if shard is not None else None
    if shard is not None and (to_stdout or world > 1 or str(input_path) == STDIN):
        raise PathError("--shard: a shard reads a file and writes a file (-o PATH), in one "
                        "process (not under torchrun): run one job per shard")
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads)
    options = dict(metric=metric, per_token=per_token, per_word=per_word, unk=unk,
                   stride=stride, reduction=reduction, batch_tokens=batch_tokens,
                   precision=precision)
    began = time.perf_counter()
    output = None if to_stdout else Path(output_path).expanduser()
    resumable = output is not None and world == 1 and str(input_path) != STDIN
    partial, skip = None, 0
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        if resumable:
            settings = {**options, "field": field, "chunk_texts": chunk_texts,
                        "encoding": encoding, "encoding_errors": encoding_errors,
                        "device": mlm.device.type}
            if format is not None:  # the runs of earlier releases keep their keys
                settings["format"] = format
            run_key = fingerprint(input_path, mlm, settings)  # the same for every shard
            partial = partial_path(output, fingerprint(input_path, mlm, {
                **settings, "shard": list(shard)}) if shard is not None else run_key)
            remove_stale_partials(output, keep=partial)
            if not resume:
                with contextlib.suppress(FileNotFoundError):
                    partial.unlink()
        else:
            partial = part_path(output, rank, world) if world > 1 else output.with_name(
                f".{output.name}.{os.getpid()}.partial")
    total = None if str(input_path) == STDIN or is_fasta(input_path) \
        else count_lines(input_path)  # a FASTA file's records are fewer than its lines
    n_lines = empty = taken = blank_lines = 0
    first_empty = None

    held: list[str] = []  # records of blank lines before the first text: held until one
    unscored: list = [0, None]  # lines with text but no token to score, the first of them
    seen_text = False

    def flush(chunk: list[tuple[int, str]], out) -> None:
        nonlocal seen_text
        live = [(n, t) for n, t in chunk if t.strip()]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # empties are counted and reported once
            scored = score(mlm, [t for _, t in live], **options, progress=False) if live else []
        by_line = {n: r for (n, _), r in zip(live, scored, strict=True)}
        nothing = [n for n, r in by_line.items() if r.pll is None]  # the warnings silenced
        unscored[0] += len(nothing)
        unscored[1] = unscored[1] or min(nothing, default=None)
        held.append("".join(score_record(n, by_line.get(n) or TextScore(
            text=text, pll=None, n_tokens=0, n_words=0, metric=metric,
            reduction=reduction)) for n, text in chunk))
        seen_text = seen_text or bool(live)
        if seen_text:  # an input of blank lines only is an error: nothing is written for it
            out.write("".join(held))
            out.flush()
            held.clear()

    handle = None
    if output is not None:
        handle = open(partial, "a+", encoding="utf-8", newline="\n")  # noqa: SIM115
        if not lock(handle):
            handle.close()  # that run's file: left as it is
            raise PathError(f"another mlmkit score is writing {str(output)!r} with the same "
                            "input and settings: wait for it, or choose another output")
    try:
        if output is None:
            out = sys.stdout
        else:
            if resumable and resume and os.path.getsize(partial):
                skip, size = complete_line_prefix(partial, chunk_texts)
                handle.truncate(size)
            else:
                handle.truncate(0)
            handle.seek(0, os.SEEK_END)
            out = handle
        description = "scoring" if not skip else f"scoring (resumed at line {skip + 1})"
        with Progress(description, total=total, unit="texts",
                      enabled=progress if rank == 0 else False) as bar:
            bar.update(skip)
            chunk: list[tuple[int, str]] = []
            texts = read_texts(input_path, field, encoding, encoding_errors, format)
            for index, (number, text) in enumerate(texts):
                n_lines = index + 1
                blank = not text.strip()
                blank_lines += blank
                mine = shard is None or owns_piece(index, chunk_texts, *shard)
                if blank and mine:  # a shard reports its own lines; a run (merged) all
                    empty += 1
                    first_empty = first_empty or number
                if shard is not None:
                    if not mine:
                        continue
                elif not owns(index, rank, world):
                    continue
                taken += 1
                if taken <= skip:  # written by the interrupted run
                    continue
                chunk.append((number, text))
                if len(chunk) >= chunk_texts:
                    flush(chunk, out)
                    bar.advance(len(chunk) * world)
                    chunk = []
            if chunk:
                flush(chunk, out)
                bar.advance(len(chunk) * world)
            if n_lines == blank_lines:
                where = "standard input" if str(input_path) == STDIN else repr(str(input_path))
                raise InvalidData(f"{where} holds no text ({n_lines} line(s), all blank): give "
                                  "one text per line" + (f" (--text-field {field!r})" if field
                                                         else ""))
            if held:
                seen_text = True
                flush([], out)
        if handle is not None:
            handle.flush()
            os.fsync(handle.fileno())
    except KeyboardInterrupt:
        if handle is not None:
            handle.close()  # kept: the next run with the same settings resumes from it
            if not resumable:
                partial.unlink(missing_ok=True)
            else:
                warn(f"{str(output)!r} was not written: the lines scored so far are kept in "
                     f"{str(partial)!r}; the same command resumes from them (--no-resume "
                     "starts over)")
        raise
    except BaseException:
        if handle is not None:
            handle.close()
            partial.unlink(missing_ok=True)
        raise
    if handle is not None:
        handle.close()
    if world > 1:
        group.barrier()
        if group.is_main:
            os.replace(merge_parts(output, world, n_lines), output)
            fsync_directory(output.parent)
        group.barrier()
    elif output is not None:
        os.replace(partial, output)
        fsync_directory(output.parent)
        if shard is not None:
            write_shard_info(output, shard, chunk_texts, n_lines, taken, run_key)
    if empty:
        warnings.warn(f"{empty} empty or whitespace-only line(s) got a null score "
                      f"(first: line {first_empty})", stacklevel=2)
    if unscored[0]:  # this process's lines (under torchrun: rank 0's share)
        warnings.warn(f"{unscored[0]} line(s) with no token to score got a null score (first: "
                      f"line {unscored[1]}): only special tokens"
                      + (", or [UNK]s skipped with unk='skip'" if unk == "skip" else ""),
                      stacklevel=2)
    return FileSummary(texts=n_lines if shard is None else taken, empty=empty, seconds=time.perf_counter() - began,
                       first_empty_line=first_empty, resumed_lines=skip,
                       output=str(output_path))
