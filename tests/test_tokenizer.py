"""`mlmkit tokenizer train`: every kind loads with AutoTokenizer, with its family's specials."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

SPECIALS = {
    "wordpiece": {"cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]",
                  "pad_token": "[PAD]", "unk_token": "[UNK]"},
    "bpe": {"cls_token": "<s>", "sep_token": "</s>", "mask_token": "<mask>",
            "pad_token": "<pad>", "unk_token": "<unk>"},
}
SPECIALS["unigram"] = SPECIALS["bpe"]


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory, corpus_sample):
    path = tmp_path_factory.mktemp("tok-corpus") / "docs.jsonl"
    path.write_text("".join(json.dumps({"body": d}) + "\n" for d in corpus_sample[:300]),
                    encoding="utf-8")
    return path


def run_main(monkeypatch, capsys, *args):
    """The real entry point (errors become one line and exit 2)."""
    from mlmkit.cli import main

    monkeypatch.setattr("sys.argv", ["mlmkit", *args])
    try:
        main()
        code = 0
    except SystemExit as done:
        code = done.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("kind", ["wordpiece", "bpe", "unigram"])
def test_train_command_saves_a_loadable_tokenizer(small_corpus, tmp_path, kind):
    from transformers import AutoTokenizer

    from mlmkit.cli import app

    out_dir = tmp_path / kind
    result = CliRunner().invoke(app, [
        "tokenizer", "train", str(small_corpus), "-o", str(out_dir), "--kind", kind,
        "--vocab-size", "300", "--field", "body", "--no-progress",
    ])
    assert result.exit_code == 0, result.output
    assert "300 documents" in result.stdout
    tok = AutoTokenizer.from_pretrained(str(out_dir))
    for name, token in SPECIALS[kind].items():
        assert getattr(tok, name) == token
        assert tok.convert_tokens_to_ids(token) != tok.unk_token_id or name == "unk_token"
    assert len(tok) % 64 == 0 and len(tok) >= 300
    ids = tok("Return the list of values.")["input_ids"]
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    masked = tok(f"Return the {tok.mask_token} of values.")["input_ids"]
    assert masked.count(tok.mask_token_id) == 1
    before_mask = tok.convert_ids_to_tokens(masked[masked.index(tok.mask_token_id) - 1])
    assert before_mask not in ("Ġ", "▁")  # the mask absorbs its leading space, as RoBERTa's


def test_lowercase_flag(small_corpus, tmp_path):
    from transformers import AutoTokenizer

    from mlmkit.cli import app

    result = CliRunner().invoke(app, [
        "tokenizer", "train", str(small_corpus), "-o", str(tmp_path / "lc"), "--kind",
        "wordpiece", "--vocab-size", "256", "--field", "body", "--lowercase", "--no-progress",
    ])
    assert result.exit_code == 0, result.output
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "lc"))
    assert tok.tokenize("RETURN") == tok.tokenize("return")


def test_encoding_errors_replace_reads_a_latin1_file(tmp_path, monkeypatch, capsys):
    path = tmp_path / "latin.txt"
    path.write_bytes(b"caf\xe9 au lait and other words\n" * 20)
    code, _, err = run_main(monkeypatch, capsys, "tokenizer", "train", str(path), "-o",
                            str(tmp_path / "t1"), "--vocab-size", "64", "--no-progress")
    assert code == 2
    assert "byte offset 3" in err and "--encoding-errors replace" in err
    code, out, err = run_main(monkeypatch, capsys, "tokenizer", "train", str(path), "-o",
                              str(tmp_path / "t2"), "--vocab-size", "64", "--no-progress",
                              "--encoding-errors", "replace")
    assert code == 0, err
    assert (tmp_path / "t2" / "tokenizer.json").is_file()


def test_bad_inputs_are_one_error_line(tmp_path, monkeypatch, capsys, small_corpus):
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n  \n", encoding="utf-8")
    cases = [
        ([str(blank)], "is empty"),
        ([str(tmp_path / "missing.txt")], "does not exist"),
        ([str(small_corpus)], "line 1 has no field 'text'"),
        ([str(small_corpus), "--field", "body", "--kind", "sentencepiece"],
         "unknown tokenizer kind 'sentencepiece'"),
    ]
    for args, message in cases:
        code, _, err = run_main(monkeypatch, capsys, "tokenizer", "train", *args, "-o",
                                str(tmp_path / "out"), "--no-progress")
        assert code == 2, (args, err)
        assert message in err and "Traceback" not in err
