"""Embed a file of texts in constant memory: read a chunk, embed it, append its vectors.

A corpus of millions of passages does not fit in memory as texts and vectors at once, and
a run of hours must survive being killed. So a file is read by chunks of `chunk_texts`
records (text per line, JSONL, TSV/CSV or FASTA, `-` for standard input), each chunk is
embedded by `embed` and its vectors appended to the output: JSON lines
`{"embedding": [...]}` or one float32 .npy array, row i for input record i.

A file output grows as `.NAME.<key>.partial` beside it (`mlmkit.engine.job_files`: the key
covers the input, the model and every setting) and is renamed into place when complete. A
run killed part-way resumes from the last complete chunk when started again with the same
input and settings, and ends with the file an uninterrupted run writes: every chunk is
embedded alone, as it would have been. The .npy partial starts with a header of fixed
size whose row count is written when the run completes, so rows are appended as they
come, the partial's size says how many it holds, and nothing is read back or copied.

`shard=(I, N)` embeds only the pieces I, I + N, ... of `chunk_texts` records and leaves
`OUTPUT.shard.json` beside its output; `merge_shards` joins N shards into the file one run
writes (`mlmkit.engine.job_shards`), JSON lines or .npy.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlmkit.core import checks
from mlmkit.core.fasta import input_texts, is_fasta
from mlmkit.core.output import check_output_path, fsync_directory, open_output
from mlmkit.core.progress import Progress, warn
from mlmkit.core.records import STDIN, check_input_file, count_lines, display_name
from mlmkit.core.results import Result
from mlmkit.embeddings.embed import embed
from mlmkit.embeddings.output import vector_lines, write_npy
from mlmkit.engine.job_files import (
    complete_line_prefix,
    fingerprint,
    lock,
    partial_path,
    remove_stale_partials,
)
from mlmkit.engine.job_shards import (
    MergeSummary,
    merge_line_shards,
    owns_piece,
    parse_shard,
    read_shards,
    write_shard_info,
)
from mlmkit.errors import InvalidData, PathError
from mlmkit.models.load import prepare_mlm
from mlmkit.options.embedding import OUTPUT_FORMATS

FORMAT_VERSION = 1  # bump when the records change: older partial files are not resumed
NPY_HEADER_BYTES = 128  # a multiple of 64, as the .npy format aligns its data


@dataclass
class EmbedFileSummary(Result):
    """What a file embedding run did."""

    texts: int
    """Output rows: the input's records (a shard: its own)."""
    dimensions: int
    seconds: float
    resumed_texts: int = 0
    """Rows taken from the partial output of an earlier, interrupted run."""
    output: str = "-"

    @property
    def texts_per_second(self) -> float:
        return self.texts / self.seconds if self.seconds > 0 else 0.0


def npy_header(rows: int, dimensions: int) -> bytes:
    """The .npy (version 1.0) header of a C-order float32 array [rows, dimensions], padded
    to `NPY_HEADER_BYTES` whatever the numbers, so it can be rewritten in place."""
    text = f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {dimensions}), }}"
    size = NPY_HEADER_BYTES - 10  # magic (6), version (2), header length (2)
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", size)
            + text.encode("latin1").ljust(size - 1) + b"\n")


def output_format_of(output, output_format: str | None) -> str:
    """jsonl or npy: as given, else npy for an output named .npy, else jsonl."""
    if output_format is None:
        return "npy" if str(output).lower().endswith(".npy") else "jsonl"
    return checks.choice("format", output_format, OUTPUT_FORMATS)


def embed_file(
    model,
    input_path,
    output_path="-",
    *,
    field: str | None = None,
    format: str | None = None,
    output_format: str | None = None,
    chunk_texts: int = 2048,
    resume: bool = True,
    shard: tuple[int, int] | str | None = None,
    encoding: str = "utf-8",
    encoding_errors: str = "strict",
    pooling: str | None = None,
    normalize: bool | None = None,
    dimensions: int | None = None,
    prompt: str | None = None,
    layers: int = 4,
    batch_tokens: int | None = None,
    precision: str = "auto",
    device=None,
    threads: int | None = None,
    progress: bool | None = None,
) -> EmbedFileSummary:
    """Embed every record of `input_path` (`-`: standard input) into `output_path` (`-`:
    standard output), by chunks of `chunk_texts` records; see the module.

    `output_format`: jsonl or npy (default: npy for a name ending in .npy). `resume`:
    continue from the partial output an interrupted run with the same input, model and
    settings left; False starts over. `shard`: (I, N) or "I/N". `format`: the input's
    format (text, jsonl, tsv, csv) where its name does not say it. The embedding keywords
    and the runtime options are those of `mlmkit.embed`.
    """
    chunk_texts = checks.count("chunk_texts", chunk_texts, 1)
    output_format = output_format_of(output_path, output_format)
    check_input_file(input_path)
    from_stdin, to_stdout = str(input_path) == STDIN, str(output_path) == "-"
    if not to_stdout:
        check_output_path(output_path, inputs=[input_path])
    shard = parse_shard(shard) if shard is not None else None
    if shard is not None and (to_stdout or from_stdin):
        raise PathError("--shard: a shard reads a file and writes a file (-o PATH): run one "
                        "job per shard")
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads,
                                 allow_untrained_head=True)
    options = dict(pooling=pooling, normalize=normalize, dimensions=dimensions,
                   prompt=prompt, layers=layers, batch_tokens=batch_tokens,
                   precision=precision)
    width = dimensions or int(mlm.model.config.hidden_size)
    embed(mlm, [], **options)  # the options checked before any input is read
    began = time.perf_counter()
    records = input_texts(input_path, field, encoding, encoding_errors, format)
    total = None if from_stdin or is_fasta(input_path) else count_lines(input_path)
    if to_stdout:
        return _embed_to_stdout(input_path, mlm, records, output_format, chunk_texts, options,
                                total, progress, began, width)
    output = Path(output_path).expanduser()
    output.parent.mkdir(parents=True, exist_ok=True)
    settings = {**options, "field": field, "format": format, "output_format": output_format,
                "chunk_texts": chunk_texts, "encoding": encoding,
                "encoding_errors": encoding_errors, "device": mlm.device.type}
    run_key = None if from_stdin else fingerprint(input_path, mlm, settings, FORMAT_VERSION)
    partial = (output.with_name(f".{output.name}.{os.getpid()}.partial") if from_stdin else
               partial_path(output, run_key if shard is None else fingerprint(
                   input_path, mlm, {**settings, "shard": list(shard)}, FORMAT_VERSION)))
    remove_stale_partials(output, keep=partial)
    # read-write, not append: the .npy header at the start is rewritten when complete
    handle = os.fdopen(os.open(partial, os.O_RDWR | os.O_CREAT, 0o666), "r+b")
    if not lock(handle):
        handle.close()  # that run's file: left as it is
        raise PathError(f"another mlmkit embed is writing {str(output)!r} with the same "
                        "input and settings: wait for it, or choose another output")
    skip = taken = n_records = 0
    try:
        skip = _resume_point(partial, handle, output_format, width, chunk_texts,
                             resume and not from_stdin)
        description = "embedding" if not skip else f"embedding (resumed at record {skip + 1})"
        with Progress(description, total=total, unit="texts", enabled=progress) as bar:
            bar.update(skip)
            chunk: list[str] = []
            lines: list[int] = []

            def flush():
                vectors = embed(mlm, chunk, **options, progress=False,
                                name_of=line_names(input_path, lines))
                handle.write(vector_lines(vectors).encode("utf-8") if output_format == "jsonl"
                             else np.ascontiguousarray(vectors, dtype="<f4").tobytes())
                handle.flush()
                bar.advance(len(chunk))
                chunk.clear()
                lines.clear()

            for index, (line, text) in enumerate(records):
                n_records = index + 1
                if shard is not None and not owns_piece(index, chunk_texts, *shard):
                    continue
                taken += 1
                if taken <= skip:  # written by the interrupted run
                    continue
                chunk.append(text)
                lines.append(line)
                if len(chunk) >= chunk_texts:
                    flush()
            if chunk:
                flush()
        if not n_records:
            raise InvalidData(f"{display_name(input_path)} holds no text: give one text per "
                              "line")
        if output_format == "npy":
            handle.seek(0)
            handle.write(npy_header(taken, width))
        handle.flush()
        os.fsync(handle.fileno())
    except KeyboardInterrupt:
        handle.close()
        if from_stdin:
            partial.unlink(missing_ok=True)
        else:
            warn(f"{str(output)!r} was not written: the vectors so far are kept in "
                 f"{str(partial)!r}; the same command resumes from them (--no-resume starts "
                 "over)")
        raise
    except BaseException:
        handle.close()
        partial.unlink(missing_ok=True)
        raise
    handle.close()
    os.replace(partial, output)
    fsync_directory(output.parent)
    if shard is not None:
        write_shard_info(output, shard, chunk_texts, n_records, taken, run_key,
                         output_format=output_format, dimensions=width)
    return EmbedFileSummary(texts=taken, dimensions=width,
                            seconds=time.perf_counter() - began, resumed_texts=skip,
                            output=str(output_path))


def _resume_point(partial: Path, handle, output_format: str, width: int, chunk_texts: int,
                  resume: bool) -> int:
    """How many records the partial file holds in whole chunks (0 unless `resume`), the
    file cut to them and the handle at its end, ready to append."""
    size = os.path.getsize(partial)
    skip = 0
    if output_format == "jsonl":
        if resume and size:
            skip, keep = complete_line_prefix(partial, chunk_texts)
        else:
            keep = 0
    else:
        row = 4 * width
        if resume and size >= NPY_HEADER_BYTES:
            skip = (size - NPY_HEADER_BYTES) // row // chunk_texts * chunk_texts
        keep = NPY_HEADER_BYTES + skip * row
    handle.truncate(keep)
    if output_format == "npy" and not skip:
        handle.seek(0)
        handle.write(npy_header(0, width))  # rewritten with the row count at the end
    handle.seek(0, os.SEEK_END)
    return skip


def _embed_to_stdout(source, mlm, records, output_format, chunk_texts, options, total,
                     progress, began, width) -> EmbedFileSummary:
    """Standard output: JSON lines as each chunk is done; .npy at the end (its header
    needs the row count first, and standard output cannot be rewound)."""
    count, kept = 0, []
    with Progress("embedding", total=total, unit="texts", enabled=progress) as bar:
        chunk: list[str] = []
        lines: list[int] = []
        for line, text in records:
            chunk.append(text)
            lines.append(line)
            if len(chunk) >= chunk_texts:
                count += _emit(mlm, chunk, lines, source, output_format, options, kept)
                bar.advance(len(chunk))
                chunk, lines = [], []
        if chunk:
            count += _emit(mlm, chunk, lines, source, output_format, options, kept)
            bar.advance(len(chunk))
    if not count:
        raise InvalidData(f"{display_name(source)} holds no text: give one text per line")
    if output_format == "npy":
        with open_output("-", mode="wb") as out:
            write_npy(out, np.concatenate(kept))
    return EmbedFileSummary(texts=count, dimensions=width,
                            seconds=time.perf_counter() - began, output="-")


def line_names(source, lines: list[int]):
    """What an error calls text i of a chunk: its file (or standard input) and line."""
    return lambda i: f"{display_name(source)} line {lines[i]}"


def _emit(mlm, chunk, lines, source, output_format, options, kept) -> int:
    vectors = embed(mlm, chunk, **options, progress=False, name_of=line_names(source, lines))
    if output_format == "jsonl":
        sys.stdout.write(vector_lines(vectors))
        sys.stdout.flush()
    else:
        kept.append(vectors)
    return len(chunk)


def merge_shards(shards, output="-") -> MergeSummary:
    """Join the outputs of `mlmkit embed --shard I/N`, I = 0..N-1 (any order), into the
    file a single run writes (`-`: standard output): JSON lines, or one .npy array whose
    rows are copied piece by piece (constant memory). Refuses missing, duplicate or
    incomplete shards, and shards of different inputs, models or settings."""
    found = read_shards(shards, "embed", same=("output_format", "dimensions"))
    if found.infos[0].get("output_format") != "npy":
        return merge_line_shards(shards, output, command="embed")
    width = found.infos[0]["dimensions"]
    arrays = []
    for index, path in enumerate(found.paths):
        try:
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError):
            raise InvalidData(f"{str(path)!r} is not a readable .npy file: embed shard "
                              f"{index}/{found.count} again") from None
        if array.shape != (found.infos[index]["records"], width):
            raise InvalidData(f"{str(path)!r} holds an array of shape {array.shape}, not "
                              f"({found.infos[index]['records']}, {width}): embed shard "
                              f"{index}/{found.count} again")
        arrays.append(array)
    offsets = [0] * found.count
    with open_output(output, inputs=found.paths, mode="wb") as out:
        out.write(npy_header(found.lines, width))
        for index, rows in found.pieces():
            start = offsets[index]
            out.write(np.ascontiguousarray(arrays[index][start:start + rows]).tobytes())
            offsets[index] += rows
    return MergeSummary(output=str(output), shards=found.count, lines=found.lines)

