"""`mlmkit tokenizer train`: every kind loads with AutoTokenizer, with its family's specials."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

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
    """The real entry point (user errors become one line and exit 1)."""
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
        "--vocab-size", "300", "--text-field", "body", "--no-progress",
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
        "wordpiece", "--vocab-size", "256", "--text-field", "body", "--lowercase", "--no-progress",
    ])
    assert result.exit_code == 0, result.output
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "lc"))
    assert tok.tokenize("RETURN") == tok.tokenize("return")


def test_encoding_errors_replace_reads_a_latin1_file(tmp_path, monkeypatch, capsys):
    path = tmp_path / "latin.txt"
    path.write_bytes(b"caf\xe9 au lait and other words\n" * 20)
    code, _, err = run_main(monkeypatch, capsys, "tokenizer", "train", str(path), "-o",
                            str(tmp_path / "t1"), "--vocab-size", "64", "--no-progress")
    assert code == 1
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
        ([str(small_corpus), "--text-field", "body", "--kind", "sentencepiece"],
         "unknown tokenizer kind 'sentencepiece'"),
    ]
    for args, message in cases:
        code, _, err = run_main(monkeypatch, capsys, "tokenizer", "train", *args, "-o",
                                str(tmp_path / "out"), "--no-progress")
        assert code == 1, (args, err)
        assert message in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("args", "flag"), [
    (["--vocab-size", "1000000000"], "--vocab-size"),  # the Rust trainer would abort
    (["--vocab-size", "-5"], "--vocab-size"),
    (["--vocab-size", "10"], "--vocab-size"),
    (["--max-length", "-1"], "--max-length"),
    (["--max-length", "0"], "--max-length"),
])
def test_sizes_are_bounded_before_training(tmp_path, monkeypatch, capsys, small_corpus, args,
                                           flag):
    code, _, err = run_main(monkeypatch, capsys, "tokenizer", "train", str(small_corpus),
                            "--text-field", "body", "-o", str(tmp_path / "out"), "--no-progress",
                            *args)
    assert code == 1, err
    assert flag in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_python_api_bounds_the_vocabulary(tmp_path):
    from mlmkit.errors import InvalidArgument
    from mlmkit.tokenizer import train_tokenizer

    with pytest.raises(InvalidArgument, match="--vocab-size"):
        train_tokenizer(["some text"] * 10, tmp_path / "t", vocab_size=10**9)


# ---- saved tokenizers load in transformers 4.x as well as 5.x

TRANSFORMERS4_PYTHON = os.environ.get("MLMKIT_TRANSFORMERS4_PYTHON", "/tmp/tf4/bin/python")


def _load_with_transformers4(directory) -> list[int] | None:
    """The ids of a sentence as transformers 4.x's AutoTokenizer gives them, or None when no
    4.x environment exists (`python -m venv /tmp/tf4 && /tmp/tf4/bin/pip install
    'transformers<5'`, or MLMKIT_TRANSFORMERS4_PYTHON)."""
    if not Path(TRANSFORMERS4_PYTHON).exists():
        return None
    code = ("import json, sys, transformers; from transformers import AutoTokenizer; "
            "assert transformers.__version__.startswith('4.'), transformers.__version__; "
            "t = AutoTokenizer.from_pretrained(sys.argv[1]); "
            "print(json.dumps([type(t).__name__, t.mask_token, "
            "t('Return the ' + t.mask_token + ' of values.')['input_ids']]))")
    done = subprocess.run([TRANSFORMERS4_PYTHON, "-c", code, str(directory)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TRANSFORMERS_VERBOSITY": "error"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", ["wordpiece", "bpe", "unigram"])
def test_saved_tokenizer_declares_a_class_transformers4_loads(tokenizer_factory, fixture_dir,
                                                              tmp_path, kind):
    from transformers import AutoTokenizer

    from mlmkit.tokenizer import save_tokenizer

    directory = fixture_dir / f"tok-{kind}"
    tokenizer_factory(kind)
    # as trained, and as saved again by a run (model folders, checkpoints): the same class
    loaded = AutoTokenizer.from_pretrained(str(directory))
    save_tokenizer(loaded, tmp_path / "again")
    for folder in (directory, tmp_path / "again"):
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        assert config["tokenizer_class"] == "PreTrainedTokenizerFast"  # not TokenizersBackend
        text = f"Return the {loaded.mask_token} of values."
        ids = AutoTokenizer.from_pretrained(str(folder))(text)["input_ids"]  # 5.x
        assert ids == loaded(text)["input_ids"]
        old = _load_with_transformers4(folder)
        if old is not None:
            name, mask, old_ids = old
            assert name == "PreTrainedTokenizerFast" and mask == loaded.mask_token
            assert old_ids == ids


def test_transformers4_check_can_fail(tokenizer_factory, fixture_dir, tmp_path):
    """The 4.x check above is real: 5.x's own class name does not load in 4.x."""
    import shutil

    tokenizer_factory("wordpiece")
    if not Path(TRANSFORMERS4_PYTHON).exists():
        pytest.skip("no transformers 4.x environment")
    folder = tmp_path / "backend"
    shutil.copytree(fixture_dir / "tok-wordpiece", folder)
    path = folder / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**config, "tokenizer_class": "TokenizersBackend"}))
    with pytest.raises(AssertionError):
        _load_with_transformers4(folder)
