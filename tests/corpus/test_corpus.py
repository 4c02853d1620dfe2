"""Corpus readers: every format, directories and globs, laziness, and every bad input."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from mlmkit.corpus import corpus_stats, python_docs, read_corpus
from mlmkit.errors import MlmkitError

DOCS = ["The first document.", "A second, with a comma.", "Third: \u00e9t\u00e9 caf\u00e9."]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_txt_one_document_per_line_skips_blank_lines(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("\n".join([DOCS[0], "", "   ", DOCS[1], DOCS[2]]) + "\r\n", encoding="utf-8")
    assert list(read_corpus(path)) == DOCS


def test_txt_paragraphs_keep_their_lines(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("line one\nline two\n\n\n  \npara two\n", encoding="utf-8")
    assert list(read_corpus(path, paragraphs=True)) == ["line one\nline two", "para two"]


def test_utf8_byte_order_mark_is_dropped(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeffhello world\n".encode())
    assert list(read_corpus(path)) == ["hello world"]


def test_jsonl_field_and_gzip(tmp_path):
    records = [{"text": d, "id": i} for i, d in enumerate(DOCS)] + [{"text": "  "}]
    write_jsonl(tmp_path / "a.jsonl", records)
    assert list(read_corpus(tmp_path / "a.jsonl")) == DOCS
    with gzip.open(tmp_path / "b.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(json.dumps({"body": d}) for d in DOCS))
    assert list(read_corpus(tmp_path / "b.jsonl.gz", field="body")) == DOCS


def test_csv_quoted_newlines_and_tsv(tmp_path):
    (tmp_path / "a.csv").write_text(
        'id,text\n1,"multi\nline, quoted"\n2,plain\n3,""\n', encoding="utf-8"
    )
    assert list(read_corpus(tmp_path / "a.csv")) == ["multi\nline, quoted", "plain"]
    (tmp_path / "a.tsv").write_text("text\tlabel\nfirst doc\tx\nsecond, doc\ty\n",
                                    encoding="utf-8")
    assert list(read_corpus(tmp_path / "a.tsv")) == ["first doc", "second, doc"]


def test_parquet_is_read_by_batches(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    texts = [f"document number {i}" for i in range(2500)] + [None, ""]
    pq.write_table(pa.table({"content": texts, "n": list(range(len(texts)))}),
                   tmp_path / "a.parquet", row_group_size=700)
    out = list(read_corpus(tmp_path / "a.parquet", field="content"))
    assert out == texts[:2500]


def test_hugging_face_datasets_dir_dict_and_arrow_file(tmp_path):
    datasets = pytest.importorskip("datasets")
    train = datasets.Dataset.from_dict({"text": DOCS[:2], "label": [0, 1]})
    test = datasets.Dataset.from_dict({"text": DOCS[2:], "label": [2]})
    train.save_to_disk(str(tmp_path / "ds"))
    assert list(read_corpus(tmp_path / "ds")) == DOCS[:2]
    datasets.DatasetDict({"train": train, "test": test}).save_to_disk(str(tmp_path / "dd"))
    assert list(read_corpus(tmp_path / "dd")) == DOCS[:2]
    assert list(read_corpus(tmp_path / "dd", split="test")) == DOCS[2:]
    assert list(read_corpus(tmp_path / "dd", split="all")) == DOCS
    arrow = sorted((tmp_path / "ds").glob("*.arrow"))
    assert len(arrow) == 1
    assert list(read_corpus(arrow[0])) == DOCS[:2]
    with pytest.raises(MlmkitError, match=r"no split 'validation'.*\['train', 'test'\]"):
        list(read_corpus(tmp_path / "dd", split="validation"))
    with pytest.raises(MlmkitError, match=r"no column 'body'.*\['text', 'label'\]"):
        list(read_corpus(tmp_path / "ds", field="body"))


def test_directory_is_read_recursively_in_sorted_order(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z.txt").write_text("from b/z\n", encoding="utf-8")
    (tmp_path / "a.txt").write_text("from a\n", encoding="utf-8")
    write_jsonl(tmp_path / "c.jsonl", [{"text": "from c"}])
    (tmp_path / "notes.md").write_text("not a corpus file\n", encoding="utf-8")
    (tmp_path / ".hidden.txt").write_text("hidden\n", encoding="utf-8")
    assert list(read_corpus(tmp_path)) == ["from a", "from b/z", "from c"]
    assert list(read_corpus(f"{tmp_path}/**/*.txt")) == ["from a", "from b/z"]


def test_reading_is_lazy(tmp_path):
    # The first document comes back before the reader reaches a bad byte further on.
    path = tmp_path / "a.txt"
    path.write_bytes(b"good first line\n" + b"x" * 100_000 + b"\n\xff\n")
    documents = read_corpus(path)
    assert next(documents) == "good first line"
    assert next(documents) == "x" * 100_000
    with pytest.raises(MlmkitError, match="line 3"):
        next(documents)


def test_python_docs_splits():
    assert list(read_corpus("python-docs", split="validation")) == python_docs("validation")
    first = next(read_corpus("python-docs"))
    assert first == python_docs("train")[0]
    with pytest.raises(MlmkitError, match="unknown split 'dev'"):
        read_corpus("python-docs", split="dev")


def test_corpus_stats_counts_documents_and_words(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("one two three\nfour five\n", encoding="utf-8")
    assert corpus_stats(path) == {"documents": 2, "words": 5, "characters": 22}


# --- bad input: every error names the input and says what to do ---


def test_non_utf8_names_file_and_byte_offset_and_replace_works(tmp_path):
    path = tmp_path / "latin.txt"
    path.write_bytes(b"ok line\ncaf" + b"\xe9 au lait\n")
    with pytest.raises(MlmkitError) as error:
        list(read_corpus(path))
    message = str(error.value)
    assert "latin.txt" in message and "byte offset 11" in message and "line 2" in message
    assert "--encoding-errors replace" in message
    assert list(read_corpus(path, encoding_errors="replace")) == ["ok line", "caf\ufffd au lait"]
    assert list(read_corpus(path, encoding="latin-1"))[1] == "caf\u00e9 au lait"


def test_non_utf8_in_csv_and_jsonl_names_the_offset(tmp_path):
    csv_path = tmp_path / "a.csv"
    csv_path.write_bytes(b"text\nfine\n\x80bad\n")
    with pytest.raises(MlmkitError, match=r"a\.csv.*byte offset 10 \(line 3\)"):
        list(read_corpus(csv_path))
    jsonl_path = tmp_path / "a.jsonl"
    jsonl_path.write_bytes(b'{"text": "caf\xe9"}\n')
    with pytest.raises(MlmkitError, match=r"a\.jsonl.*byte offset 13 \(line 1\)"):
        list(read_corpus(jsonl_path))


def test_jsonl_missing_field_names_file_line_and_fields(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [{"text": "ok"}, {"body": "no text here"}])
    with pytest.raises(MlmkitError, match=r"a\.jsonl' line 2 has no field 'text'.*\['body'\]"):
        list(read_corpus(path))


def test_jsonl_invalid_json_and_non_text_field_name_the_line(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "ok"}\n\n{"text": "unterminated\n', encoding="utf-8")
    with pytest.raises(MlmkitError, match=r"a\.jsonl' line 3: invalid JSON"):
        list(read_corpus(path))
    path.write_text('{"text": 3}\n', encoding="utf-8")
    with pytest.raises(MlmkitError, match=r"line 1: field 'text' holds number, not a string"):
        list(read_corpus(path))
    path.write_text("[1, 2]\n", encoding="utf-8")
    with pytest.raises(MlmkitError, match=r"line 1: a JSON list, not an object"):
        list(read_corpus(path))


def test_csv_missing_column_lists_the_columns(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("sent_more,sent_less\na,b\n", encoding="utf-8")
    with pytest.raises(MlmkitError,
                       match=re.escape("has no column 'text': its columns are "
                                       "['sent_more', 'sent_less']")):
        list(read_corpus(path))
    assert list(read_corpus(path, field="sent_less")) == ["b"]


def test_parquet_missing_column_lists_the_columns(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "a.parquet")
    with pytest.raises(MlmkitError, match=r"no column 'text': its columns are \['body'\]"):
        list(read_corpus(tmp_path / "a.parquet"))


def test_missing_path_glob_without_match_and_unsupported_file(tmp_path):
    with pytest.raises(MlmkitError, match=r"corpus '.*nope\.txt' does not exist.*python-docs"):
        read_corpus(tmp_path / "nope.txt")
    with pytest.raises(MlmkitError, match=r"corpus glob '.*\*\.jsonl' matches no corpus file"):
        read_corpus(str(tmp_path / "*.jsonl"))
    (tmp_path / "a.docx").write_bytes(b"binary")
    with pytest.raises(MlmkitError, match=r"a\.docx' has an unsupported format: use one of"):
        read_corpus(tmp_path / "a.docx")
    with pytest.raises(MlmkitError, match="holds no corpus files"):
        read_corpus(tmp_path)


def test_empty_corpus_is_an_error_when_iteration_ends(tmp_path):
    path = tmp_path / "blank.txt"
    path.write_text("\n   \n\t\n", encoding="utf-8")
    documents = read_corpus(path)  # no error yet: the check needs the whole pass
    with pytest.raises(MlmkitError, match=r"corpus '.*blank\.txt' is empty"):
        list(documents)
    write_jsonl(tmp_path / "blank.jsonl", [{"text": ""}])
    with pytest.raises(MlmkitError, match="is empty: no non-blank document in 1 file "):
        list(read_corpus(tmp_path / "blank.jsonl"))


def test_shared_crows_pairs_csv_has_a_quoted_newline(shared_data):
    path = shared_data / "crows_pairs" / "crows_pairs_anonymized.csv"
    texts = list(read_corpus(path, field="sent_less"))
    assert len(texts) == 1508
    assert any("\n" in text for text in texts)


def test_shared_tinyshakespeare_paragraphs(shared_data):
    path = shared_data / "tinyshakespeare" / "input.txt"
    paragraphs = read_corpus(path, paragraphs=True)
    first = next(paragraphs)
    assert first.startswith("First Citizen:\n")
    assert "\n\n" not in first
