"""A TSV/CSV file whose content uses the other delimiter than its name says is read by its
content, with a warning that names the fix (the common case: a tab-separated `.csv`)."""

from __future__ import annotations

import pytest

from mlmkit.core.records import read_table, read_texts
from mlmkit.errors import InvalidData


@pytest.mark.parametrize("name, content, other", [
    ("t.csv", "sentence\tlabel\nA good film.\t1\nA bad one, sadly.\t0\n", "tab"),
    ("t.tsv", "sentence,label\nA good film.,1\n\"A bad one, sadly.\",0\n", "comma"),
])
def test_the_header_decides_the_delimiter(tmp_path, name, content, other):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.warns(UserWarning, match=rf"its header is {other}-separated.*name it \."):
        rows = [row for _, row in read_table(path)]
    assert rows == [{"sentence": "A good film.", "label": "1"},
                    {"sentence": "A bad one, sadly.", "label": "0"}]
    with pytest.warns(UserWarning):
        assert [t for _, t in read_texts(path, "sentence")][1] == "A bad one, sadly."


def test_a_file_that_matches_its_name_is_read_without_a_warning(tmp_path, recwarn):
    path = tmp_path / "t.csv"
    path.write_text('text,label\n"tabs\there, too",1\n', encoding="utf-8")
    assert [row for _, row in read_table(path)] == [{"text": "tabs\there, too", "label": "1"}]
    single = tmp_path / "one.csv"
    single.write_text("text\nno delimiter at all\n", encoding="utf-8")
    assert [row for _, row in read_table(single)] == [{"text": "no delimiter at all"}]
    assert not recwarn.list


def test_finetune_reads_a_tab_separated_csv(tmp_path):
    from mlmkit.finetuning.data import read_split
    from mlmkit.finetuning.tasks import get_task

    path = tmp_path / "train.csv"
    path.write_text("sentence\tlabel\nA good film.\t1\nA bad film.\t0\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="tab-separated"):
        texts, labels, _ = read_split(get_task("sst2"), "train", path=path)
    assert texts == [("A good film.",), ("A bad film.",)]
    assert [value for value, _ in labels] == ["1", "0"]


def test_text_that_cannot_be_a_path_names_no_file(tmp_path):
    """A sequence longer than a file name, a NUL, `~user` of no user: no file, no error."""
    from mlmkit.core.records import names_a_file

    (tmp_path / "here.txt").write_text("x")
    assert names_a_file(tmp_path / "here.txt")
    for text in ("M" * 300, "a\0b", "~no-such-user-mlmkit/x", str(tmp_path / "absent")):
        assert not names_a_file(text)


def test_a_tsv_is_read_as_glue_files_are_written_unless_it_is_well_formed_csv(tmp_path):
    """A text may start with a lone quote (STS-B, GLUE): read with CSV quoting, it swallowed
    the rows after it. Such a file is split on tabs, quotes as they are; a file that is
    well-formed CSV (AG News, pandas: quoted tabs, newlines, doubled quotes) is unquoted."""
    glue = tmp_path / "glue.tsv"
    glue.write_text('s1\ts2\tscore\n"Then the captain was gone.\tHe came back.\t0.8\n'
                    '"Is it?"\tYes.\t1.0\nLast.\tRow.\t3.0\n', encoding="utf-8")
    assert list(read_table(glue)) == [
        (2, {"s1": '"Then the captain was gone.', "s2": "He came back.", "score": "0.8"}),
        (3, {"s1": '"Is it?"', "s2": "Yes.", "score": "1.0"}),
        (4, {"s1": "Last.", "s2": "Row.", "score": "3.0"})]
    exported = tmp_path / "exported.tsv"
    exported.write_text('id\ttext\n1\t"A ""quoted"" word."\n2\t"line one\nline\ttwo"\n'
                        '3\tplain\n4\t\n', encoding="utf-8")
    assert list(read_table(exported)) == [
        (2, {"id": "1", "text": 'A "quoted" word.'}),
        (4, {"id": "2", "text": "line one\nline\ttwo"}),
        (5, {"id": "3", "text": "plain"}), (6, {"id": "4", "text": ""})]
    glue.write_text('text\tlabel\nok\t1\n"never closed\t1\t2\nmore\t0\n', encoding="utf-8")
    with pytest.raises(InvalidData, match="line 3: a row of 3 fields under a header of 2"):
        list(read_table(glue))


def test_the_shared_sts_b_files_read_whole(shared_data):
    for name, rows in (("train.tsv", 5749), ("validation.tsv", 1500)):
        read = list(read_table(shared_data / "stsb" / name))
        assert len(read) == rows
        assert all(len(row) == 5 and "\n" not in row["sentence1"] for _, row in read)
        assert any(row["sentence1"].startswith('"') for _, row in read)  # quotes kept


@pytest.mark.parametrize("text, rows", [
    ('{"text": "a", "label": 1}\n', [{"text": "a", "label": 1}]),
    ("text\tlabel\na, b\t1\n", [{"text": "a, b", "label": "1"}]),
    ('text,label\n"a\tb",1\n', [{"text": "a\tb", "label": "1"}]),
])
def test_standard_input_is_read_in_the_format_its_first_line_has(monkeypatch, text, rows):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert [row for _, row in read_table("-")] == rows
