"""Tokenization in bounded pieces: one pass over the corpus (the cache key comes from it),
worker processes, and a build interrupted part-way resumes without redoing finished pieces."""

from __future__ import annotations

import numpy as np
import pytest

import mlmkit.corpus.shards as shards_module
from mlmkit.core import staging
from mlmkit.corpus.python_docs import python_docs
from mlmkit.corpus.shards import tokenize_corpus

PIECE = 10
DOCS = [d[:300] for d in python_docs("train")[:64]] + ["   "]  # 7 pieces, a blank document


def _counting(monkeypatch):
    calls = []
    real = shards_module.tokenize_piece

    def counted(definition, dtype, documents, target):
        calls.append(len(documents))
        return real(definition, dtype, documents, target)

    monkeypatch.setattr(shards_module, "tokenize_piece", counted)
    return calls


@pytest.fixture(scope="module")
def reference(tmp_path_factory, wordpiece_tokenizer):
    """The corpus tokenized by two worker processes, in pieces of 10 documents."""
    root = tmp_path_factory.mktemp("pieces-ref")
    return tokenize_corpus(lambda: iter(DOCS), wordpiece_tokenizer, root=root, workers=2,
                           piece_documents=PIECE, show_progress=False)


def test_pieces_in_worker_processes_equal_one_batch(reference, wordpiece_tokenizer):
    backend = _clean_backend(wordpiece_tokenizer)
    ids = [e.ids for e in backend.encode_batch([d for d in DOCS if d.strip()],
                                               add_special_tokens=False)]
    assert reference.meta["pieces"] == 7 and reference.n_documents == len(ids)
    assert np.array_equal(np.asarray(reference.tokens), np.concatenate(ids))
    assert reference.doc_offsets.tolist() == np.concatenate([[0], np.cumsum(
        [len(i) for i in ids])]).tolist()
    # the key is the one a separate hashing pass gives (caches and runs of older versions)
    corpus_hash, _ = shards_module.documents_fingerprint(DOCS)
    assert reference.path.name == shards_module.shard_key(corpus_hash, wordpiece_tokenizer)


def test_an_interrupted_build_resumes_from_its_finished_pieces(tmp_path, monkeypatch,
                                                               reference,
                                                               wordpiece_tokenizer):
    def killed():
        for i, document in enumerate(DOCS):
            if i == 35:  # pieces 0-2 finished, the fourth being read
                raise KeyboardInterrupt
            yield document

    with pytest.raises(KeyboardInterrupt):
        tokenize_corpus(killed, wordpiece_tokenizer, root=tmp_path, workers=1,
                        piece_documents=PIECE, show_progress=False)
    pieces = next(tmp_path.glob(".pieces-*"))
    assert len([p for p in pieces.iterdir() if (p / "done.json").exists()]) == 3
    dead = pieces / f".abc.{staging._HOST}-99999999.staging"  # what a kill -9 leaves
    dead.mkdir()
    calls, reads = _counting(monkeypatch), []

    def documents():
        reads.append(1)
        return iter(DOCS)

    resumed = tokenize_corpus(documents, wordpiece_tokenizer, root=tmp_path, workers=1,
                              piece_documents=PIECE, show_progress=False)
    assert calls == [10, 10, 10, 4] and len(reads) == 1  # the rest only, in one pass
    assert np.array_equal(np.asarray(resumed.tokens), np.asarray(reference.tokens))
    assert resumed.path.name == reference.path.name
    assert [p.name for p in tmp_path.iterdir()] == [resumed.path.name]  # pieces removed
    calls.clear()
    again = tokenize_corpus(documents, wordpiece_tokenizer, root=tmp_path, workers=1,
                            piece_documents=PIECE, show_progress=False)
    assert again.meta["reused"] and calls == [] and len(reads) == 2  # hashed, not tokenized


EDGE = ["", "   ", "x", "a [MASK][SEP] b ##ab #ab ## #", "ünïcødé 日本語 ﬁ café\u0301 \u200b",
        "tab\tand\nnew line\r\n", "supercalifragilistic" * 40, "word " * 3000,
        "[UNK] [PAD]", "😀 emoji ##", "ｆｕｌｌ　ｗｉｄｔｈ"]


def _clean_backend(tokenizer):
    """A copy of the Rust tokenizer without truncation or padding: the session tokenizer's
    backend keeps whatever an earlier test's `tokenizer(..., truncation=..., padding=...)`
    call left on it (the library's own reading turns both off)."""
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()
    backend.no_padding()
    return backend


def _reference(tokenizer, documents):
    """What shards held before the fast path: each document's ids and starts from its
    `word_ids()` (None read as -1; a start where the id changes; the first token always)."""
    ids, starts = [], []
    for encoding in _clean_backend(tokenizer).encode_batch(documents, add_special_tokens=False):
        words = [-1 if w is None else w for w in encoding.word_ids]
        ids += encoding.ids
        starts += [1 if i == 0 or words[i] != words[i - 1] else 0 for i in range(len(words))]
    return ids, starts


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_piece_encoding_is_identical_to_word_ids(kind, tokenizer_factory, corpus_sample):
    """Ids and word starts, by the continuation table (WordPiece) or the batched word ids
    (others), equal the per-document word_ids() reading on the corpus and edge cases."""
    tokenizer = tokenizer_factory(kind)
    definition = tokenizer.backend_tokenizer.to_str()
    backend = shards_module._backend(definition)
    table = backend.table
    assert (table is not None) == (kind == "wordpiece")  # the fast path is taken
    if kind == "wordpiece":  # NFD + StripAccents: ASCII documents skip the normalizer
        assert backend.ascii is not None
    documents = corpus_sample[:200] + EDGE
    ids, starts, lengths = shards_module.encode_documents(backend, table, documents,
                                                          np.dtype(np.uint16))
    ref_ids, ref_starts = _reference(tokenizer, documents)
    assert ids.tolist() == ref_ids and starts.tolist() == ref_starts
    assert lengths.sum() == len(ref_ids) and len(lengths) == len(documents)
    assert lengths[200] == 0  # "": no tokens, kept in place
    if table is not None:  # the general path agrees on the same text
        general = shards_module.encode_documents(backend, None, documents, np.dtype(np.uint16))
        assert general[0].tolist() == ref_ids and general[1].tolist() == ref_starts


def test_only_normalizers_that_keep_ascii_are_skipped():
    nfd = {"type": "NFD"}
    same = shards_module._ascii_identity
    assert same({"normalizer": {"type": "Sequence", "normalizers": [nfd, {"type": "NFKC"}]}})
    assert not same({"normalizer": {"type": "Sequence", "normalizers": [
        nfd, {"type": "Lowercase"}]}})
    assert not same({"normalizer": {"type": "BertNormalizer", "lowercase": True}})
    # a normalized non-ASCII added token could match ASCII text only through the normalizer
    assert not same({"normalizer": nfd, "added_tokens": [{"content": "café", "normalized": True}]})
    assert same({"normalizer": nfd, "added_tokens": [{"content": "café", "normalized": False},
                                                     {"content": "[MASK]", "normalized": True}]})


def test_the_tokenizer_fingerprint_ignores_a_calls_truncation_and_padding(wordpiece_tokenizer):
    """transformers leaves a call's truncation/padding on the backend; the token ids of a
    shard do not depend on them, so neither does its cache key (nor a resume check)."""
    import copy

    tokenizer = copy.deepcopy(wordpiece_tokenizer)
    tokenizer.backend_tokenizer.no_truncation()
    tokenizer.backend_tokenizer.no_padding()
    plain = shards_module.tokenizer_fingerprint(tokenizer)
    assert plain == shards_module.tokenizer_fingerprint(copy.deepcopy(tokenizer))
    tokenizer(["a b c d e f", "a"], truncation=True, max_length=4, padding="max_length")
    assert tokenizer.backend_tokenizer.padding is not None  # the state the key must ignore
    assert tokenizer.backend_tokenizer.truncation is not None
    assert shards_module.tokenizer_fingerprint(tokenizer) == plain
    assert tokenizer.backend_tokenizer.padding is not None  # the caller's tokenizer untouched
    tokenizer.add_tokens(["brandnewtoken"])  # other ids: another key
    assert shards_module.tokenizer_fingerprint(tokenizer) != plain
