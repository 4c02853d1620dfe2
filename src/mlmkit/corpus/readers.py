"""Read user corpora lazily, one document at a time, whatever the file format.

`read_corpus` accepts the built-in `python-docs`, a file (.txt, .jsonl, .csv, .tsv, FASTA
(.fasta, .fa, .faa, .fna, .fas: one document per record, its sequence), each optionally
gzipped, .parquet, a Hugging Face `datasets` .arrow file), a directory (every
supported file inside, sorted, recursively), a glob, or a directory written by
`datasets.Dataset.save_to_disk`, a Hugging Face dataset by name (`hf:NAME` or
`hf:NAME:CONFIG`: streamed, or from the local cache when the hub cannot be reached), or a
list of these, read one after the other (`a.txt,b/*.jsonl` or a Python list; weighted lists
are pretraining mixtures: `mlmkit.corpus.mixture`). Nothing is read whole: text formats are decoded a line at a
time (so a decoding error can name its byte offset), parquet by record batches and
Hugging Face datasets through their memory-mapped Arrow tables.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from pathlib import Path

import datasets
import pyarrow.parquet as pq

from mlmkit.core.fasta import FASTA_SUFFIXES, read_fasta
from mlmkit.core.hub import hub_offline
from mlmkit.core.records import decoded_lines as _decoded_lines
from mlmkit.core.records import delimited_rows, parse_json_line, text_field
from mlmkit.corpus.documents import Document
from mlmkit.corpus.mixture import parse_corpus_spec
from mlmkit.corpus.python_docs import python_docs
from mlmkit.errors import MlmkitError

BUILTIN = "python-docs"
HUB_PREFIX = "hf:"
TEXT_SUFFIXES = (".txt", ".jsonl", ".csv", ".tsv", *FASTA_SUFFIXES)
SUFFIXES = TEXT_SUFFIXES + tuple(s + ".gz" for s in TEXT_SUFFIXES) + (".parquet", ".arrow")
_GLOB_CHARS = set("*?[")
_BATCH_ROWS = 1024


def _suffix(path: Path) -> str:
    """The format suffix, `.gz` included (`.jsonl.gz`), lower-cased; '' when unsupported."""
    name = path.name.lower()
    return next((s for s in sorted(SUFFIXES, key=len, reverse=True) if name.endswith(s)), "")


def _is_hf_dataset_dir(path: Path) -> bool:
    return (path / "dataset_dict.json").is_file() or (path / "state.json").is_file()


def _walk(directory: Path) -> list[Path]:
    """Supported files and Hugging Face dataset folders under `directory`, sorted by path."""
    found = []
    for root, dirs, files in os.walk(directory):
        root_path = Path(root)
        dirs.sort()
        datasets_here = [d for d in dirs if _is_hf_dataset_dir(root_path / d)]
        dirs[:] = [d for d in dirs if d not in datasets_here and not d.startswith(".")]
        entries = [root_path / f for f in files if not f.startswith(".") and _suffix(Path(f))]
        found += entries + [root_path / d for d in datasets_here]
    return sorted(found, key=lambda path: path.relative_to(directory).parts)


def resolve_sources(source: str | os.PathLike) -> list[Path]:
    """The files and dataset folders `source` names, in reading order (errors when none)."""
    text = str(source)
    path = Path(text).expanduser()
    if path.is_file():
        if not _suffix(path):
            raise MlmkitError(
                f"corpus file {text!r} has an unsupported format: use one of "
                f"{', '.join(SUFFIXES)}, a directory, a glob or {BUILTIN!r}"
            )
        return [path]
    if path.is_dir():
        if _is_hf_dataset_dir(path):
            return [path]
        found = _walk(path)
        if not found:
            raise MlmkitError(
                f"corpus directory {text!r} holds no corpus files: put files ending in "
                f"{', '.join(SUFFIXES)} in it (searched recursively)"
            )
        return found
    if _GLOB_CHARS & set(text):
        matches = sorted(Path(m) for m in glob.glob(os.path.expanduser(text), recursive=True))
        found = []
        for match in matches:
            if match.is_dir():
                found += [match] if _is_hf_dataset_dir(match) else _walk(match)
            elif _suffix(match):
                found.append(match)
        if not found:
            raise MlmkitError(
                f"corpus glob {text!r} matches no corpus file ({len(matches)} paths matched, "
                f"none ending in {', '.join(SUFFIXES)}): check the pattern"
            )
        return found
    raise MlmkitError(
        f"corpus {text!r} does not exist: give {BUILTIN!r}, a file ({', '.join(SUFFIXES)}), "
        "a directory, a glob, or a Hugging Face dataset saved with save_to_disk"
    )


def _read_txt(path, *, paragraphs, encoding, encoding_errors, **_) -> Iterator[str]:
    """A document per line, or per blank-line-separated paragraph (its lines kept)."""
    lines = (line for _, line in _decoded_lines(path, encoding, encoding_errors))
    if not paragraphs:
        for line in lines:
            text = line.rstrip("\r\n")
            if text.strip():
                yield text
        return
    block: list[str] = []
    for line in lines:
        if line.strip():
            block.append(line.rstrip())
        elif block:
            yield "\n".join(block)
            block = []
    if block:
        yield "\n".join(block)


def _read_jsonl(path, *, field, encoding, encoding_errors, **_) -> Iterator[str]:
    for number, line in _decoded_lines(path, encoding, encoding_errors):
        if not line.strip():
            continue
        text = text_field(path, number, parse_json_line(path, number, line, "corpus"), field)
        if text.strip():
            yield text


def _read_delimited(path, *, field, encoding, encoding_errors, **_) -> Iterator[str]:
    """A .csv/.tsv column; quoted fields may hold delimiters and newlines."""
    delimiter = "\t" if ".tsv" in path.name.lower() else ","
    rows = delimited_rows(path, delimiter, encoding, encoding_errors)
    header = next(rows, None)
    if header is None:
        return
    _text_column(path, header, field)
    column = header.index(field)
    for _, row in rows:
        if row[column].strip():
            yield row[column]


def _text_column(path, names, field) -> None:
    if field not in names:
        raise MlmkitError(f"{str(path)!r} has no column {field!r}: its columns are "
                          f"{list(names)}; choose one with --text-field")


def _batches_texts(path, batches, field) -> Iterator[str]:
    for batch in batches:
        yield from _column_texts(str(path), batch.column(0).to_pylist(), field)


def _column_texts(source: str, values, field) -> Iterator[str]:
    """The non-blank texts of a column's values (None skipped; other types an error)."""
    for text in values:
        if text is None:
            continue
        if not isinstance(text, str):
            raise MlmkitError(f"{source!r}: column {field!r} holds "
                              f"{type(text).__name__} values, not text: choose --text-field")
        if text.strip():
            yield text


def _read_parquet(path, *, field, **_) -> Iterator[str]:
    parquet = pq.ParquetFile(path)
    _text_column(path, parquet.schema_arrow.names, field)
    yield from _batches_texts(path, parquet.iter_batches(_BATCH_ROWS, columns=[field]), field)


def _read_hf_dataset(path, *, field, split, **_) -> Iterator[str]:
    if path.is_dir():
        loaded = datasets.load_from_disk(str(path))
    else:
        loaded = datasets.Dataset.from_file(str(path))  # memory-mapped, not read whole
    if isinstance(loaded, datasets.DatasetDict):
        names = list(loaded)
        if split == "all":
            parts = [loaded[name] for name in names]
        elif split in loaded:
            parts = [loaded[split]]
        else:
            raise MlmkitError(f"Hugging Face dataset {str(path)!r} has no split {split!r}: "
                              f"its splits are {names} (or 'all'); choose one with --split")
    else:
        parts = [loaded]
    for part in parts:
        _text_column(path, part.column_names, field)
        table = part.select_columns([field]).with_format("arrow")
        yield from _batches_texts(path, table.iter(batch_size=_BATCH_ROWS), field)


def _hub_name(source: str) -> tuple[str, str | None]:
    name, _, config = source[len(HUB_PREFIX):].partition(":")
    if not name.strip():
        raise MlmkitError(f"corpus {source!r}: give a dataset name after {HUB_PREFIX!r}, "
                          "e.g. hf:wikitext:wikitext-2-raw-v1")
    return name.strip(), (config.strip() or None)


def _read_hub(source: str, *, field, split, **_) -> Iterator[str]:
    """A Hugging Face dataset by name: streamed (nothing downloaded whole); when that
    fails (no network, offline mode), the copy in the local cache, memory-mapped."""
    name, config = _hub_name(source)
    split = None if split == "all" else split
    try:
        loaded = datasets.load_dataset(name, config, split=split, streaming=True)
    except Exception as streaming_error:  # noqa: BLE001 (the library raises many kinds)
        try:
            with hub_offline(True):  # the cached copy only: never a whole download here
                loaded = datasets.load_dataset(name, config, split=split)
        except Exception:  # noqa: BLE001
            reason = str(streaming_error).splitlines()[0] if str(streaming_error) else \
                type(streaming_error).__name__
            raise MlmkitError(
                f"corpus {source!r}: cannot stream the dataset {name!r} and it is not in the "
                f"local cache ({reason}); check the name, --split and the network, or give "
                "a local file or a save_to_disk folder") from None
    parts = list(loaded.values()) if isinstance(
        loaded, datasets.DatasetDict | datasets.IterableDatasetDict) else [loaded]
    for part in parts:
        names = part.column_names
        if names is not None:
            _text_column(source, names, field)
        for batch in part.iter(batch_size=_BATCH_ROWS):
            if field not in batch:
                _text_column(source, list(batch), field)
            yield from _column_texts(source, batch[field], field)


def _read_fasta(path, *, encoding, encoding_errors, **_) -> Iterator[str]:
    """A document per FASTA record: its sequence over all its lines, carrying the record's
    id (the header's first word, `mlmkit.core.fasta.read_fasta`) that token shards keep."""
    for record in read_fasta(path, encoding, encoding_errors):
        yield Document(record.sequence, record.id)


_READERS = {**dict.fromkeys(FASTA_SUFFIXES, _read_fasta), ".txt": _read_txt, ".jsonl": _read_jsonl, ".csv": _read_delimited,
            ".tsv": _read_delimited, ".parquet": _read_parquet, ".arrow": _read_hf_dataset}


def _reader_for(path: Path):
    if path.is_dir():
        return _read_hf_dataset
    return _READERS[_suffix(path).removesuffix(".gz")]


def read_corpus(
    source: str | os.PathLike,
    *,
    field: str = "text",
    split: str = "train",
    paragraphs: bool = False,
    encoding: str = "utf-8",
    encoding_errors: str = "strict",
) -> Iterator[str]:
    """Documents of `source`, lazily, in a fixed order (files sorted by path).

    `field` is the jsonl key / csv, parquet or dataset column; `split` applies to
    python-docs (train, validation, all) and to saved `DatasetDict`s; `paragraphs` makes
    a .txt document a blank-line-separated paragraph instead of a line. Blank documents
    are skipped; a corpus with none at all is an error (raised when iteration ends).
    `encoding_errors="replace"` reads files with undecodable bytes.
    """
    parts = parse_corpus_spec(source)
    if parts[0].weight is not None:
        raise MlmkitError(f"corpus {str(source)!r}: weights (SOURCE:W) mix corpora in "
                          "pretraining only; here give the sources without weights")
    if len(parts) > 1:
        options = dict(field=field, split=split, paragraphs=paragraphs, encoding=encoding,
                       encoding_errors=encoding_errors)  # every source checked before reading
        return _chained([read_corpus(p.source, **options) for p in parts])
    source = parts[0].source
    if str(source).startswith(HUB_PREFIX):
        options = dict(field=field, split=split)
        return _documents(str(source), [str(source)], options)
    if str(source) == BUILTIN:
        try:
            documents = python_docs(split)
        except ValueError as error:
            raise MlmkitError(str(error)) from error
        return iter(documents)
    paths = resolve_sources(source)
    options = dict(field=field, split=split, paragraphs=paragraphs, encoding=encoding,
                   encoding_errors=encoding_errors)
    return _documents(str(source), paths, options)


def _chained(readers: list[Iterator[str]]) -> Iterator[str]:
    """Several sources, one after the other."""
    for reader in readers:
        yield from reader


def _documents(source: str, paths: list, options: dict) -> Iterator[str]:
    count = 0
    for path in paths:
        reader = _read_hub if isinstance(path, str) else _reader_for(path)
        for text in reader(path, **options):
            count += 1
            yield text
    if count == 0:
        files = f"{len(paths)} file{'s' if len(paths) != 1 else ''}"
        raise MlmkitError(f"corpus {source!r} is empty: no non-blank document in {files} "
                          f"(field {options['field']!r} where one applies); check the path, "
                          f"--text-field and the files' contents")


def corpus_stats(source: str | os.PathLike, **options) -> dict[str, int]:
    """Documents, whitespace-separated words and characters of a corpus (one pass)."""
    documents = words = characters = 0
    for text in read_corpus(source, **options):
        documents += 1
        words += len(text.split())
        characters += len(text)
    return {"documents": documents, "words": words, "characters": characters}
