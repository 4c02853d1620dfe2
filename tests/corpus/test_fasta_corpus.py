"""FASTA files as corpora: one document per record (multi-line, gzipped), and the reader's
one-line errors."""

from __future__ import annotations

import gzip

import pytest

from mlmkit.core.fasta import read_fasta
from mlmkit.corpus import corpus_stats, read_corpus
from mlmkit.errors import InvalidData

FASTA = ">sp|P1|first protein\nMKTAYIAK\nQRQISF\n\n>P2 second\nMVLSPADK\n"


def test_records_are_documents_over_their_lines(tmp_path):
    path = tmp_path / "proteins.fasta"
    path.write_text(FASTA)
    assert list(read_corpus(path)) == ["MKTAYIAKQRQISF", "MVLSPADK"]
    records = list(read_fasta(path))
    assert [r.id for r in records] == ["sp|P1|first", "P2"]
    assert records[0].description == "sp|P1|first protein"


def test_gzipped_fasta_and_directories(tmp_path):
    with gzip.open(tmp_path / "a.fa.gz", "wt") as f:
        f.write(FASTA)
    (tmp_path / "b.faa").write_text(">x\nMK\n")
    assert list(read_corpus(tmp_path)) == ["MKTAYIAKQRQISF", "MVLSPADK", "MK"]


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
