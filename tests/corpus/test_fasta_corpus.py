"""FASTA files as corpora: one document per record (multi-line, gzipped), and the reader's
one-line errors."""

from __future__ import annotations

import gzip

import pytest

from mlmkit.core.fasta import read_fasta
from mlmkit.corpus import corpus_stats, read_corpus
from mlmkit.corpus.documents import Document
from mlmkit.corpus.shards import open_shards, tokenize_corpus
from mlmkit.errors import InvalidData
from mlmkit.protein import protein_tokenizer

FASTA = ">sp|P1|first protein\nMKTAYIAK\nQRQISF\n\n>P2 second\nMVLSPADK\n"


def test_records_are_documents_over_their_lines(tmp_path):
    path = tmp_path / "proteins.fasta"
    path.write_text(FASTA)
    assert list(read_corpus(path)) == ["MKTAYIAKQRQISF", "MVLSPADK"]
    records = list(read_fasta(path))
    assert [r.id for r in records] == ["sp|P1|first", "P2"]
    assert records[0].description == "sp|P1|first protein"


def test_sequences_are_read_in_upper_case_keeping_special_tokens(tmp_path):
    """Lower case (soft-masked) residues are the same residues: read as the alphabet's."""
    path = tmp_path / "soft.fasta"
    path.write_text(">a\nmktAYiak\n>b\nmk<mask>ay\n")
    assert [r.sequence for r in read_fasta(path)] == ["MKTAYIAK", "MK<mask>AY"]
    ids = protein_tokenizer()(next(read_corpus(path)))["input_ids"]
    assert protein_tokenizer().unk_token_id not in ids


def test_gzipped_fasta_and_directories(tmp_path):
    with gzip.open(tmp_path / "a.fa.gz", "wt") as f:
        f.write(FASTA)
    (tmp_path / "b.faa").write_text(">x\nMK\n")
    assert list(read_corpus(tmp_path)) == ["MKTAYIAKQRQISF", "MVLSPADK", "MK"]


def test_gzip_known_by_its_bytes_not_its_name_and_old_mac_line_endings(tmp_path):
    with gzip.open(tmp_path / "a.fasta", "wt") as f:  # compressed, not named .gz
        f.write(FASTA)
    assert list(read_corpus(tmp_path / "a.fasta")) == ["MKTAYIAKQRQISF", "MVLSPADK"]
    (tmp_path / "plain.fasta.gz").write_text(FASTA)  # named .gz, not compressed
    assert list(read_corpus(tmp_path / "plain.fasta.gz")) == ["MKTAYIAKQRQISF", "MVLSPADK"]
    (tmp_path / "mac.fasta").write_bytes(FASTA.replace("\n", "\r").encode())
    assert [r.sequence for r in read_fasta(tmp_path / "mac.fasta")] == [
        "MKTAYIAKQRQISF", "MVLSPADK"]


def test_shared_uniref_sample(shared_data):
    stats = corpus_stats(shared_data / "protein" / "some_proteins.fasta")
    assert stats["documents"] == 15


@pytest.mark.parametrize("text, message", [
    (">a\n>b\nMK\n", "line 1: the record 'a' has no sequence"),
    ("MK\n>a\nMK\n", "line 1: sequence before any '>' header"),
    ("\n\n", "no FASTA record"),
])
def test_bad_fasta_is_one_line_naming_the_line(tmp_path, text, message):
    path = tmp_path / "bad.fasta"
    path.write_text(text)
    with pytest.raises(InvalidData) as error:
        list(read_corpus(path))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_pretraining_shards_keep_the_headers_as_document_ids(tmp_path):
    """Multi-line records become one document each, and each shard document reads back
    the id of the record it came from, across pieces (two records a piece) and workers,
    and a second corpus of the same sequences under other headers gets shards of its own."""
    path = tmp_path / "proteins.fasta"
    path.write_text(">sp|P1|first protein\nMKTAYIAK\nQRQISF\n>P2 second\nMVLSPADK\n"
                    ">P3\nMK\nTA\n>P4\nMLLK\n>P5\nKAYIA\n")
    tokenizer = protein_tokenizer()
    shards = tokenize_corpus(lambda: read_corpus(path), tokenizer, root=tmp_path / "cache",
                             show_progress=False, workers=2, piece_documents=2)
    assert shards.n_documents == 5 and shards.meta["pieces"] == 3
    assert shards.doc_ids == ["sp|P1|first", "P2", "P3", "P4", "P5"]
    assert shards.document_id(2) == "P3"
    assert tokenizer.decode(shards.document(2)).replace(" ", "") == "MKTA"
    reopened = open_shards(shards.path)  # read back from the folder
    assert reopened.doc_ids == shards.doc_ids
    renamed = tmp_path / "renamed.fasta"  # the same sequences under other headers
    renamed.write_text(path.read_text().replace(">P2 second", ">Q9"))
    other = tokenize_corpus(lambda: read_corpus(renamed), tokenizer, root=tmp_path / "cache",
                            show_progress=False, workers=1, piece_documents=2)
    assert other.path != shards.path and other.doc_ids[1] == "Q9"


def test_text_corpora_have_no_document_ids(tmp_path):
    path = tmp_path / "mixed"
    path.mkdir()
    (path / "a.txt").write_text("first line of text\n")
    (path / "b.fasta").write_text(">only\nMKT\n")
    shards = tokenize_corpus(lambda: read_corpus(path), protein_tokenizer(),
                             root=tmp_path / "cache", show_progress=False, workers=1)
    assert shards.doc_ids == [None, "only"]
    (path / "b.fasta").unlink()
    plain = tokenize_corpus(lambda: read_corpus(path), protein_tokenizer(),
                            root=tmp_path / "cache", show_progress=False, workers=1)
    assert plain.doc_ids is None and plain.document_id(0) is None
    assert not (plain.path / "doc_ids.txt").exists()


def test_a_document_id_is_one_line():
    with pytest.raises(InvalidData, match="spans lines"):
        Document("MK", "a\nb")
