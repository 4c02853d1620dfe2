"""Token shards: a corpus tokenized once into memory-mapped files, cached by a hash.

A shard directory holds `tokens.bin` (uint16 when the vocabulary fits, else uint32),
`word_starts.bin` (uint8, 1 where a token begins a word, from the fast tokenizer's
`word_ids()`), `doc_offsets.npy` (int64, document i is tokens[off[i]:off[i+1]]), for a
corpus whose documents carry source ids (a FASTA file's headers, `corpus.documents`)
`doc_ids.txt` (document i's id on line i; an empty line where a document had none), and
`meta.json`, written last. The directory is built under a temporary name and renamed,
so a crash never leaves a half-written shard behind that a later run would trust.

It is built in one pass over the corpus (`tokenize_corpus`): bounded pieces of documents
are tokenized by worker processes into `.pieces-KEY/HASH/` folders as they are read, while
the corpus is hashed for the cache key; the pieces are then joined in order. A build
killed part-way leaves its finished pieces, which the next build reuses.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import itertools
import json
import multiprocessing
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from mlmkit.core.cache import atomic_write_text, cache_dir
from mlmkit.core.progress import Progress
from mlmkit.core.staging import fsync_tree, remove_leftovers, staging_dir
from mlmkit.corpus.documents import document_id
from mlmkit.errors import MlmkitError

FORMAT_VERSION = 1  # bump when the shard layout or the tokenization rules change
BATCH_DOCUMENTS = 512
# a piece: the unit of parallel work, resumption and memory; small enough that N workers
# finish together (8192 documents left one of 2 workers idle a third of the time)
PIECE_DOCUMENTS = 2048
PIECE_BYTES = 4 << 20


@dataclass
class TokenShards:
    """A tokenized corpus: tokens, word-start flags and document boundaries (memory-mapped)."""

    path: Path
    tokens: np.ndarray
    word_starts: np.ndarray
    doc_offsets: np.ndarray
    meta: dict
    doc_ids: list[str | None] | None = None
    """Each document's id in its source (FASTA: the header's first word); None without."""

    @property
    def n_tokens(self) -> int:
        return int(self.doc_offsets[-1])

    @property
    def n_documents(self) -> int:
        return len(self.doc_offsets) - 1

    def document(self, index: int) -> np.ndarray:
        return np.asarray(self.tokens[self.doc_offsets[index]:self.doc_offsets[index + 1]])

    def document_id(self, index: int) -> str | None:
        """Document `index`'s id in its source (a FASTA record's), or None."""
        return None if self.doc_ids is None else self.doc_ids[index]


def tokenizer_fingerprint(tokenizer) -> str:
    """A hash of everything that decides the token ids: the serialized fast tokenizer."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise MlmkitError(
            f"tokenizer {type(tokenizer).__name__} is not a fast tokenizer: pretraining needs "
            "one (word starts come from word_ids()); load it with AutoTokenizer(use_fast=True)"
        )
    digest = hashlib.blake2b(_without_call_state(backend).encode("utf-8"), digest_size=16)
    digest.update(str(len(tokenizer)).encode())
    return digest.hexdigest()


def _without_call_state(backend) -> str:
    """The serialized tokenizer without its truncation and padding settings.

    transformers leaves the last call's `truncation=`/`padding=` set on the backend, so a
    tokenizer that was once called with padding would otherwise miss the cache (and fail a
    resume check) although its ids are the same: shards are built without either. The
    common case (neither set) hashes exactly the string it always hashed.
    """
    if backend.truncation is None and backend.padding is None:
        return backend.to_str()
    copy = Tokenizer.from_str(backend.to_str())
    copy.no_truncation()
    copy.no_padding()
    return copy.to_str()


def _hash_document(digests, document: str, data: bytes) -> None:
    """Add one document (its UTF-8 `data`, and its source id if it has one) to `digests`:
    two corpora of the same texts under different ids have different shards."""
    ident = document_id(document)
    for digest in digests:
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
        if ident is not None:
            name = ident.encode("utf-8")
            digest.update(b"id" + len(name).to_bytes(8, "little") + name)


def documents_fingerprint(documents: Iterable[str]) -> tuple[str, int]:
    """A hash of the documents' text and ids (in order) and their count: the corpus part of
    a key."""
    digest = hashlib.blake2b(digest_size=16)
    count = 0
    for document in documents:
        _hash_document((digest,), document, document.encode("utf-8"))
        count += 1
    return digest.hexdigest(), count


def shard_key(corpus_hash: str, tokenizer, settings: dict | None = None) -> str:
    """The cache key of (corpus, tokenizer, settings)."""
    payload = json.dumps(
        {"corpus": corpus_hash, "tokenizer": tokenizer_fingerprint(tokenizer),
         "settings": settings or {}, "format": FORMAT_VERSION},
        sort_keys=True,
    )
    return hashlib.blake2b(payload.encode(), digest_size=12).hexdigest()



def _pieces(documents: Iterable[str], corpus_digest, max_documents: int, max_bytes: int):
    """Bounded pieces of the corpus: (documents with text, their ids (None where a
    document has none), piece hash, documents read).

    One pass: `corpus_digest` is updated exactly as `documents_fingerprint` does (so the
    cache key is the one of a separate hashing pass), each piece gets its own hash (the name
    it is stored under, so a rerun finds the pieces a killed one finished)."""
    batch: list[str] = []
    ids: list[str | None] = []
    piece = hashlib.blake2b(digest_size=16)
    size = read = 0
    for document in documents:
        if not isinstance(document, str):
            raise MlmkitError(f"corpus documents must be strings, got {type(document).__name__}")
        data = document.encode("utf-8")
        _hash_document((corpus_digest, piece), document, data)
        read += 1
        if document.strip():
            batch.append(str(document))
            ids.append(document_id(document))
            size += len(data)
        if len(batch) >= max_documents or size >= max_bytes:
            yield batch, ids, piece.hexdigest(), read
            batch, ids, piece, size, read = [], [], hashlib.blake2b(digest_size=16), 0, 0
    if read:
        yield batch, ids, piece.hexdigest(), read


_WORKER_TOKENIZERS: dict[str, object] = {}


def _continuation_table(definition: str) -> np.ndarray | None:
    """Per token id, True where the token continues a word, when that alone decides the
    word starts; else None (then they come from the encodings' `word_ids()`).

    It does for a WordPiece model with the `##` prefix behind `BertPreTokenizer`: a word's
    first piece is looked up without the prefix and every later one with it, and `#` is
    punctuation, always a word of its own, so no word's first piece can be a `##` entry
    (an [UNK] is a whole word; an added token is a word of its own). For those tokenizers
    `encode_batch_fast` (no offsets, no word ids) gives identical ids and starts."""
    spec = json.loads(definition)
    model, pre = spec.get("model") or {}, spec.get("pre_tokenizer") or {}
    if (model.get("type") != "WordPiece" or model.get("continuing_subword_prefix") != "##"
            or pre.get("type") != "BertPreTokenizer"):
        return None
    vocab = dict(model.get("vocab") or {})
    added = spec.get("added_tokens") or []
    for token in added:
        if token["content"].startswith("##"):
            return None  # an added token spelled like a continuation: not worth the risk
        vocab[token["content"]] = token["id"]
    if not vocab:
        return None
    table = np.zeros(max(vocab.values()) + 1, dtype=bool)
    for token, index in vocab.items():
        table[index] = token.startswith("##")
    return table


# Unicode normalizations that leave ASCII text as it is (lower-casing, stripping and
# replacing do not): for an ASCII document the tokenizer can skip its normalizer.
_ASCII_IDENTITY = {"NFC", "NFD", "NFKC", "NFKD", "StripAccents"}


def _ascii_identity(spec: dict) -> bool:
    """Whether the tokenizer's normalizer changes no ASCII text, and no added token is
    matched through it in a way the raw text would not be (normalized non-ASCII ones)."""
    normalizer = spec.get("normalizer")
    steps = [] if normalizer is None else (
        normalizer.get("normalizers", []) if normalizer.get("type") == "Sequence"
        else [normalizer])
    if any(step.get("type") not in _ASCII_IDENTITY for step in steps):
        return False
    return all(token["content"].isascii() or not token.get("normalized", True)
               for token in spec.get("added_tokens") or [])


class _Backend:
    """A worker's tokenizer: the fast tokenizer of a definition (never truncating or
    padding), the same without its normalizer where that changes no ASCII text, and the
    continuation table where word starts can come from it."""

    def __init__(self, definition: str):
        spec = json.loads(definition)
        self.full = Tokenizer.from_str(definition)
        self.ascii = None
        if spec.get("normalizer") is not None and _ascii_identity(spec):
            self.ascii = Tokenizer.from_str(definition)
            self.ascii.normalizer = None
        for tokenizer in (self.full, self.ascii):
            if tokenizer is not None:
                tokenizer.no_truncation()  # a document is never cut: packing splits it
                tokenizer.no_padding()
        self.table = _continuation_table(definition)
        if not hasattr(self.full, "encode_batch_fast"):  # tokenizers < 0.20
            self.table = None

    def encode(self, documents: list[str], fast: bool) -> list:
        """Encodings of `documents`, in order: the ASCII ones without the normalizer (the
        same result, a fifth less work), the rest with it."""
        def run(tokenizer, texts):
            method = tokenizer.encode_batch_fast if fast else tokenizer.encode_batch
            return method(texts, add_special_tokens=False)

        if self.ascii is None:
            return run(self.full, documents)
        ascii_text = [text.isascii() for text in documents]
        encodings: list = [None] * len(documents)
        for tokenizer, wanted in ((self.ascii, True), (self.full, False)):
            chosen = [i for i, is_ascii in enumerate(ascii_text) if is_ascii == wanted]
            if chosen:
                for i, encoding in zip(chosen, run(tokenizer, [documents[i] for i in chosen]),
                                       strict=True):
                    encodings[i] = encoding
        return encodings


def _backend(definition: str) -> _Backend:
    """The `_Backend` of `definition`, cached per process."""
    key = hashlib.blake2b(definition.encode("utf-8"), digest_size=8).hexdigest()
    if key not in _WORKER_TOKENIZERS:
        _WORKER_TOKENIZERS.clear()
        _WORKER_TOKENIZERS[key] = _Backend(definition)
    return _WORKER_TOKENIZERS[key]


def encode_documents(backend: _Backend, table, documents: list[str], dtype) -> tuple:
    """Token ids, word-start flags (uint8) and per-document lengths of `documents`, as
    numpy arrays, without a Python object per token where it can: ids stream straight
    into an array; word starts come from the continuation `table` (see
    `_continuation_table`) or, without one, from all the word ids of the batch at once."""
    encodings = backend.encode(documents, fast=table is not None)
    lengths = np.fromiter((len(e) for e in encodings), dtype=np.int64, count=len(encodings))
    total = int(lengths.sum())
    ids = np.fromiter(itertools.chain.from_iterable(e.ids for e in encodings),
                      dtype=dtype, count=total)
    if table is not None:
        starts = (~table[ids]).view(np.uint8)
    else:  # word ids, None (nan) read as -1: a start where the id changes
        words = np.array(list(itertools.chain.from_iterable(e.word_ids for e in encodings)),
                         dtype=np.float64)
        words = np.nan_to_num(words, nan=-1.0)
        starts = np.ones(total, dtype=np.uint8)
        if total > 1:
            starts[1:] = words[1:] != words[:-1]
    firsts = np.cumsum(lengths)[:-1]
    starts[firsts[firsts < total]] = 1  # every document's first token starts a word
    return ids, starts, lengths


def tokenize_piece(definition: str, dtype: str, documents: list[str], target: str,
                   doc_ids: list[str | None] | None = None) -> int:
    """Tokenize one piece into the folder `target` (tokens.bin, word_starts.bin,
    lengths.npy, ids.json where documents carry ids, then done.json), built under a staging
    name and renamed: a piece is whole or absent. Runs in a worker process; returns the
    piece's token count."""
    target = Path(target)
    staging = staging_dir(target)
    try:
        backend = _backend(definition)
        ids, starts, lengths = [], [], []
        for start in range(0, len(documents), BATCH_DOCUMENTS):
            one = encode_documents(backend, backend.table,
                                   documents[start:start + BATCH_DOCUMENTS], np.dtype(dtype))
            for out, part in zip((ids, starts, lengths), one, strict=True):
                out.append(part)
        ids_all = np.concatenate(ids) if ids else np.zeros(0, dtype=dtype)
        ids_all.tofile(staging / "tokens.bin")  # one write per file
        (np.concatenate(starts) if starts else np.zeros(0, np.uint8)).tofile(
            staging / "word_starts.bin")
        np.save(staging / "lengths.npy",
                np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64))
        if doc_ids is not None and any(i is not None for i in doc_ids):
            (staging / "ids.json").write_text(json.dumps(doc_ids), encoding="utf-8")
        (staging / "done.json").write_text(json.dumps({"tokens": len(ids_all)}))
        fsync_tree(staging)
        try:
            os.replace(staging, target)
        except OSError:  # another build finished the same piece: keep theirs
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return len(ids_all)


def _one_thread_per_worker() -> None:
    """The processes are the parallelism: no thread pool of the tokenizers library in each."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ["RAYON_NUM_THREADS"] = "1"


def default_workers() -> int:
    """Tokenization processes: `$MLMKIT_TOKENIZE_WORKERS`, else the usable cores (up to 8)."""
    text = os.environ.get("MLMKIT_TOKENIZE_WORKERS", "").strip()
    if text:
        try:
            return max(1, int(text))
        except ValueError:
            raise MlmkitError(f"MLMKIT_TOKENIZE_WORKERS={text!r} is not a whole number") from None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


class _PieceBuilder:
    """Tokenizes pieces in up to `workers` processes (started when a second piece needs
    it), at most 2 × workers pieces in flight: memory is bounded by the piece size."""

    def __init__(self, tokenizer, folder: Path, workers: int):
        self.definition = tokenizer.backend_tokenizer.to_str()
        self.dtype = np.dtype(_token_dtype(tokenizer)).name
        self.folder, self.workers = folder, workers
        self.pool, self.pending = None, []
        self.held = None  # the first piece, until a second says processes are worth it

    def add(self, documents: list[str], target: Path, ids: list[str | None]) -> None:
        args = (self.definition, self.dtype, documents, str(target))
        if any(ident is not None for ident in ids):  # a text corpus's pieces carry none
            args += (ids,)
        if self.workers <= 1:
            tokenize_piece(*args)
            return
        if self.pool is None and self.held is None:
            self.held = args
            return
        self._submit(args)

    def _submit(self, args) -> None:
        if self.pool is None:
            # fork where it is safe (Linux; the workers use only numpy and tokenizers):
            # spawn would re-run a caller's script that has no `if __name__` guard
            method = "fork" if sys.platform.startswith("linux") else "spawn"
            self.pool = concurrent.futures.ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context(method),
                initializer=_one_thread_per_worker)
            if self.held is not None:
                held, self.held = self.held, None
                self.pending.append(self.pool.submit(tokenize_piece, *held))
        self.pending.append(self.pool.submit(tokenize_piece, *args))
        while len(self.pending) >= 2 * self.workers:
            self.pending.pop(0).result()

    def finish(self) -> None:
        if self.held is not None:  # one piece in all: no processes for a small corpus
            held, self.held = self.held, None
            tokenize_piece(*held)
        try:
            for future in self.pending:
                future.result()
        finally:
            self.close()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


def _token_dtype(tokenizer):
    return np.uint16 if len(tokenizer) <= np.iinfo(np.uint16).max + 1 else np.uint32


def _write_shards(pieces: list[Path], tokenizer, target: Path, description: str,
                  first_piece: str, pieces_key: str) -> None:
    """Join finished pieces, in corpus order, into one shard folder (`target`)."""
    dtype = _token_dtype(tokenizer)
    lengths: list[np.ndarray] = []
    ids: list[str | None] = []
    started = time.perf_counter()
    with open(target / "tokens.bin", "wb") as tok_file, \
            open(target / "word_starts.bin", "wb") as ws_file:
        for piece in pieces:
            for name, out in (("tokens.bin", tok_file), ("word_starts.bin", ws_file)):
                with open(piece / name, "rb") as source:
                    shutil.copyfileobj(source, out, 1 << 22)
            lengths.append(np.load(piece / "lengths.npy"))
            named = piece / "ids.json"
            ids.extend(json.loads(named.read_text(encoding="utf-8")) if named.exists()
                       else [None] * len(lengths[-1]))
    all_lengths = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
    kept = all_lengths > 0  # a document of only whitespace has no tokens
    all_lengths = all_lengths[kept]
    if len(all_lengths) == 0:
        raise MlmkitError(f"the corpus {description!r} has no text to tokenize: it is empty")
    offsets = np.zeros(len(all_lengths) + 1, dtype=np.int64)
    np.cumsum(all_lengths, out=offsets[1:])
    np.save(target / "doc_offsets.npy", offsets)
    ids = [ident for ident, keep in zip(ids, kept, strict=True) if keep]
    if any(ident is not None for ident in ids):
        (target / "doc_ids.txt").write_text(
            "".join(f"{ident or ''}\n" for ident in ids), encoding="utf-8")
    meta = {"dtype": np.dtype(dtype).name, "n_tokens": int(offsets[-1]),
            "n_documents": len(all_lengths), "vocab_size": len(tokenizer),
            "format": FORMAT_VERSION, "seconds": round(time.perf_counter() - started, 3),
            "pieces": len(pieces), "first_piece": first_piece, "pieces_key": pieces_key}
    atomic_write_text(target / "meta.json", json.dumps(meta, indent=1))


def open_shards(path: str | Path) -> TokenShards:
    """Open a finished shard directory (memory-mapped, read-only)."""
    path = Path(path)
    meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    dtype = np.dtype(meta["dtype"])
    n = meta["n_tokens"]
    tokens = np.memmap(path / "tokens.bin", dtype=dtype, mode="r", shape=(n,))
    word_starts = np.memmap(path / "word_starts.bin", dtype=np.uint8, mode="r", shape=(n,))
    offsets = np.load(path / "doc_offsets.npy")
    doc_ids = None
    if (path / "doc_ids.txt").exists():
        lines = (path / "doc_ids.txt").read_text(encoding="utf-8").split("\n")[:-1]
        doc_ids = [line or None for line in lines]
    if int(offsets[-1]) != n or len(offsets) != meta["n_documents"] + 1 \
            or (doc_ids is not None and len(doc_ids) != meta["n_documents"]):
        raise MlmkitError(f"token shards at {path} are inconsistent: delete the directory")
    return TokenShards(path=path, tokens=tokens, word_starts=word_starts, doc_offsets=offsets,
                       meta=meta, doc_ids=doc_ids)


def _candidate(base: Path, first_piece: str, pieces_key: str) -> Path | None:
    """A finished shard folder that began with the same piece (likely the same corpus)."""
    if not base.is_dir():
        return None
    for folder in base.iterdir():
        try:
            meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if meta.get("first_piece") == first_piece and meta.get("pieces_key") == pieces_key:
            return folder
    return None


def tokenize_corpus(
    documents: Callable[[], Iterable[str]],
    tokenizer,
    *,
    name: str = "corpus",
    settings: dict | None = None,
    total: int | None = None,
    show_progress: bool = True,
    root: str | Path | None = None,
    workers: int | None = None,
    piece_documents: int = PIECE_DOCUMENTS,
    piece_bytes: int = PIECE_BYTES,
) -> TokenShards:
    """Tokenize `documents()` into cached shards, or reuse the shards of an earlier run.

    One pass over the corpus: documents are cut into pieces of at most `piece_documents`
    documents / `piece_bytes` bytes, each tokenized by one of `workers` processes (default
    `default_workers()`) into its own folder as soon as it is read, while the corpus is
    hashed for the cache key (corpus text, tokenizer, `settings`). Memory is bounded by
    the pieces in flight, not by the corpus. A build killed part-way keeps its finished
    pieces: the next run with the same corpus and tokenizer tokenizes only the rest. When
    the first piece is that of a finished shard folder, the pass only hashes (the likely
    cache hit); only when the rest then differs is the corpus read a second time.
    """
    base = Path(root) if root is not None else cache_dir("shards")
    tok_settings = {"tokenizer": tokenizer_fingerprint(tokenizer), "settings": settings or {},
                    "format": FORMAT_VERSION}
    pieces_key = hashlib.blake2b(json.dumps(tok_settings, sort_keys=True).encode(),
                                 digest_size=8).hexdigest()
    folder = base / f".pieces-{pieces_key}"
    base.mkdir(parents=True, exist_ok=True)
    # shards of killed builds (this host's dead processes; older versions' after a day)
    remove_leftovers(base, legacy_age=86400)
    if folder.is_dir():
        remove_leftovers(folder)
    workers = default_workers() if workers is None else max(1, int(workers))

    def one_pass(speculate: bool):
        digest, count, order, candidate = hashlib.blake2b(digest_size=16), 0, [], None
        builder = _PieceBuilder(tokenizer, folder, workers)
        bar = Progress(f"tokenizing {name}", total=total, unit="docs",
                       enabled=None if show_progress else False)
        try:
            with bar:
                for texts, ids, piece, read in _pieces(documents(), digest, piece_documents,
                                                       piece_bytes):
                    count += read
                    order.append(piece)
                    if len(order) == 1 and speculate:
                        candidate = _candidate(base, piece, pieces_key)
                    if candidate is None and not (folder / piece / "done.json").exists():
                        folder.mkdir(parents=True, exist_ok=True)
                        builder.add(texts, folder / piece, ids)
                    bar.advance(read)
            builder.finish()
        finally:
            builder.close()
        return digest.hexdigest(), count, order, candidate

    corpus_hash, count, order, candidate = one_pass(speculate=True)
    if count == 0:
        raise MlmkitError(f"the corpus {name!r} has no documents: it is empty")
    key = shard_key(corpus_hash, tokenizer, settings)
    final = base / key
    tokenize = candidate is not None  # the first piece matched, the rest did not
    for attempt in range(JOIN_ATTEMPTS):
        reused = _reuse(final, folder, order)
        if reused is not None:
            return reused
        if tokenize:
            corpus_hash, count, order, _ = one_pass(speculate=False)
        staging = staging_dir(final)  # umask permissions, named by this process
        try:
            _write_shards([folder / piece for piece in order], tokenizer, staging, name,
                          order[0], pieces_key)
            fsync_tree(staging)
            try:
                os.replace(staging, final)
            except OSError:  # another process finished the same shards first: use theirs
                shutil.rmtree(staging, ignore_errors=True)
            break
        except FileNotFoundError:
            # a concurrent build of the same corpus joined its shards and removed the
            # pieces this one was reading: use its shards, or tokenize what is missing
            shutil.rmtree(staging, ignore_errors=True)
            if attempt == JOIN_ATTEMPTS - 1:
                raise
            tokenize = True
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    _remove_pieces(folder, order)
    shards = open_shards(final)
    shards.meta["reused"] = False
    return shards


JOIN_ATTEMPTS = 3


def _reuse(final: Path, folder: Path, order: list[str]) -> TokenShards | None:
    """The finished shards at `final` (this corpus's pieces then removed), or None."""
    if not (final / "meta.json").exists():
        return None
    try:
        shards = open_shards(final)
    except (OSError, ValueError, KeyError):
        shutil.rmtree(final, ignore_errors=True)
        return None
    shards.meta["reused"] = True
    _remove_pieces(folder, order)
    return shards


def _remove_pieces(folder: Path, order: list[str]) -> None:
    """The pieces are joined: remove them (and their folder once no build uses it)."""
    for piece in order:
        shutil.rmtree(folder / piece, ignore_errors=True)
    with contextlib.suppress(OSError):
        folder.rmdir()
