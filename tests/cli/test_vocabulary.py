"""The command line's one vocabulary (docs/CLI.md): the same words on every command, the old
spellings still read (with one deprecation line), choice values in any accepted spelling,
`score --text`, `--tokenizer DIR`, and help that reads as words, not types."""

from __future__ import annotations

import json
import re
import shutil
import warnings

import pytest
import typer
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.cli import help as cli_help
from mlmkit.cli.options import Command
from mlmkit.cli.vocabulary import POSITIONAL, RENAMED, choice_value, rewrite
from mlmkit.errors import InvalidArgument
from mlmkit.options import renamed_keyword

ROOT = typer.main.get_command(app)
# Commands with a model argument that load no model (they read its config, or build one).
LOADS_NO_MODEL = {"model info", "model init"}
# Flags of the previous release that no command may declare any more.
OLD_FLAGS = {"--field", "--text-cols", "--label-col", "--out-dir", "--prompts-file",
             "--templates-file", "--mutation-col", "--score-col", "--target-col", "--dms",
             "--out", "--json-out", "--output-dir"}
TYPE_TAGS = re.compile(r"<(bool|str|int|float|text|list\[\w+\]|int range|float range)>|\{model\}")
TEXTS = ["Return the number of items in a container.", "Open the file for reading."]


def _leaves(command=ROOT, path=()):
    for name in sorted(getattr(command, "commands", {})):
        sub = command.commands[name]
        if hasattr(sub, "commands"):
            yield from _leaves(sub, (*path, name))
        else:
            yield " ".join((*path, name)), sub


LEAVES = dict(_leaves())


def _options(command) -> dict:
    return {opt: p for p in command.params if not isinstance(p, typer.core.TyperArgument)
            for opt in (*p.opts, *p.secondary_opts)}


def _invoke(args, **kwargs):
    return CliRunner().invoke(app, args, **kwargs)


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_every_command_speaks_the_one_vocabulary(name):
    command = LEAVES[name]
    options = _options(command)
    assert not OLD_FLAGS & set(options), f"{name} still declares {OLD_FLAGS & set(options)}"
    columns = [o for o in options if o.endswith(("-col", "-cols", "-column"))]
    assert not columns, f"{name}: a column flag ends in -field ({columns})"
    if "-o" in options:
        assert "--output" in options["-o"].opts, f"{name}: -o is --output"
    if "--resume" in options:
        assert options["--resume"].is_flag, f"{name}: --resume is a switch everywhere"
    arguments = [p for p in command.params if isinstance(p, typer.core.TyperArgument)]
    models = [p for p in arguments if p.name.startswith("model")]
    if models:
        assert arguments[0] is models[0], f"{name}: MODEL comes first"
        if name not in LOADS_NO_MODEL:
            assert "--tokenizer" in options, f"{name} loads a model: it takes --tokenizer DIR"
    for param in command.params:
        assert "_" not in (param.metavar or "").replace("MODEL_", "").replace("SHARD_", ""), \
            f"{name}: {param.name}'s values are spelled with dashes ({param.metavar})"


def test_the_column_flags_are_the_same_words_everywhere():
    text_field = {n for n, c in LEAVES.items() if "--text-field" in _options(c)}
    assert {"score", "embed", "pretrain", "tokenizer train", "mask stats", "finetune",
            "probe classify"} <= text_field
    assert {n for n, c in LEAVES.items() if "--label-field" in _options(c)} >= {
        "finetune", "probe classify"}
    run_dir = {n for n, c in LEAVES.items() if "--run-dir" in _options(c)}
    assert run_dir >= {"pretrain", "finetune", "eval suite"}


@pytest.mark.parametrize("path", sorted(RENAMED))
def test_each_renamed_flag_is_gone_and_its_replacement_is_there(path):
    command = LEAVES[path]
    options = _options(command)
    for renamed in RENAMED[path]:
        if renamed.new == POSITIONAL:
            assert renamed.old not in options
            assert any(isinstance(p, typer.core.TyperArgument) and not p.name.startswith("model")
                       for p in command.params)
        elif renamed.then is None:
            assert renamed.old not in options and renamed.new in options
        else:
            assert options[renamed.new].is_flag and renamed.then in options


# --- the old spellings ----------------------------------------------------------------------


def test_old_flags_become_new_ones_with_one_line(capsys):
    args = rewrite("finetune", ["m", "--text-cols", "a,b", "--label-col=y", "--text-cols", "c"],
                   {})
    assert args == ["m", "--text-field", "a,b", "--label-field=y", "--text-field", "c"]
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2  # one line per old flag, however often it is given
    assert "--text-cols" in lines[0] and "use --text-field" in lines[0]


def test_an_old_flag_whose_value_is_now_positional_goes_after_the_arguments():
    assert rewrite("eval blimp", ["--data", "pairs/", "m", "--limit", "2"], {}) == \
        ["m", "--limit", "2", "--", "pairs/"]
    assert rewrite("generate", ["m", "--prompt=-x", "--", "y"], {}) == ["m", "--", "y", "-x"]


def test_resume_with_a_directory_becomes_the_switch_and_the_run_dir():
    assert rewrite("pretrain", ["--resume", "runs/a", "--steps", "9"], {}) == \
        ["--resume", "--run-dir", "runs/a", "--steps", "9"]
    assert rewrite("pretrain", ["--resume", "--run-dir", "runs/a"], {}) == \
        ["--resume", "--run-dir", "runs/a"]
    assert rewrite("pretrain", ["--steps", "9", "--resume"], {}) == ["--steps", "9", "--resume"]


def test_other_commands_keep_their_flags_and_arguments():
    args = ["m", "--field", "x", "--data", "d", "--"]
    assert rewrite("probe classify", args, {}) == args


@pytest.mark.parametrize("spelling", ["pll-word-l2r", "pll_word_l2r", "within_word_l2r",
                                      "PLL-Word-L2R"])
def test_choice_values_in_every_accepted_spelling(spelling):
    assert choice_value(spelling, ("pll", "pll_word_l2r")) == "pll_word_l2r"
    assert rewrite("score", ["--metric", spelling], {"--metric": ("pll", "pll_word_l2r")}) == \
        ["--metric", "pll_word_l2r"]
    assert rewrite("score", [f"--metric={spelling}"], {"--metric": ("pll", "pll_word_l2r")}) \
        == ["--metric=pll_word_l2r"]


def test_hugging_face_names_of_a_precision_are_accepted():
    assert choice_value("bfloat16", ("auto", "fp32", "bf16")) == "bf16"
    assert choice_value("float32", ("auto", "fp32", "bf16")) == "fp32"
    assert choice_value("fp64", ("auto", "fp32", "bf16")) == "fp64"  # refused by the check


def test_renamed_python_keywords_warn_and_still_work():
    with pytest.warns(DeprecationWarning, match=r"finetune\(text_cols=...\) is deprecated: "
                                                r"use text_field="):
        assert renamed_keyword("finetune", "text_cols", "a", "text_field", None) == "a"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert renamed_keyword("finetune", "text_cols", None, "text_field", "b") == "b"
    with pytest.raises(InvalidArgument, match="not both"):
        renamed_keyword("finetune", "text_cols", "a", "text_field", "b")


def test_finetune_takes_the_new_keywords_and_refuses_both_spellings():
    import mlmkit

    with pytest.raises(InvalidArgument, match="text_field= or its old name text_cols="):
        mlmkit.finetune("no-model", "mine", text_field="a", text_cols="a")


# --- end to end, on a tiny model -----------------------------------------------------------------


@pytest.fixture
def texts(tmp_path):
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps({"body": t}) + "\n" for t in TEXTS))
    return path


def _records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_score_text_gives_the_records_of_a_file_of_those_lines(saved_tiny_mlm, texts):
    model = str(saved_tiny_mlm("bert"))
    from_file = _invoke(["score", model, str(texts), "--text-field", "body"])
    assert from_file.exit_code == 0, from_file.output
    literal = _invoke(["score", model, "--text", TEXTS[0], "--text", TEXTS[1]])
    assert literal.exit_code == 0, literal.output
    assert _records(literal.stdout) == _records(from_file.stdout)
    assert [r["line"] for r in _records(literal.stdout)] == [1, 2]


@pytest.mark.parametrize("command", [["embed"], ["eval", "elbo", "--samples", "2"]])
def test_commands_reading_a_file_of_texts_take_text_too(command, saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n")
    name, *flags = command if command[0] == "embed" else (" ".join(command[:2]), *command[2:])
    from_file = _invoke([*name.split(), model, str(path), *flags, "--json"])
    literal = _invoke([*name.split(), model, "--text", TEXTS[0], "--text", TEXTS[1], *flags,
                       "--json"])
    assert from_file.exit_code == 0 and literal.exit_code == 0, literal.output
    assert literal.stdout == from_file.stdout


def test_score_wants_a_file_or_text_not_both(saved_tiny_mlm, texts):
    model = str(saved_tiny_mlm("bert"))
    both = _invoke(["score", model, str(texts), "--text", "A text."])
    assert both.exit_code == 1 and "not both" in both.stderr
    neither = _invoke(["score", model])
    assert neither.exit_code == 1 and "--text" in neither.stderr


def test_an_old_flag_still_works_end_to_end_with_one_line(saved_tiny_mlm, texts):
    model = str(saved_tiny_mlm("bert"))
    new = _invoke(["score", model, str(texts), "--text-field", "body"])
    old = _invoke(["score", model, str(texts), "--field", "body"])
    assert old.exit_code == 0, old.output
    assert old.stdout == new.stdout
    assert old.stderr.count("deprecated") == 1
    assert "'mlmkit score --field' is deprecated: use --text-field" in old.stderr


def test_format_forces_how_the_input_is_read(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    named_txt = tmp_path / "texts.txt"  # JSON lines under a name that says plain text
    named_txt.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    literal = _invoke(["score", model, "--text", TEXTS[0], "--text", TEXTS[1]])
    as_named = _invoke(["score", model, str(named_txt)])
    forced = _invoke(["score", model, str(named_txt), "--format", "jsonl"])
    assert forced.exit_code == 0, forced.output
    assert forced.stdout == literal.stdout != as_named.stdout
    piped = _invoke(["score", model, "-", "--format", "jsonl"], input=named_txt.read_text())
    assert piped.stdout == literal.stdout
    bad = _invoke(["score", model, str(named_txt), "--format", "xml"])
    assert bad.exit_code == 1 and "text, jsonl, tsv, csv" in bad.stderr


def test_every_spelling_of_a_metric_scores_the_same(saved_tiny_mlm):
    model = str(saved_tiny_mlm("bert"))
    outputs = {spelling: _invoke(["score", model, "--text", TEXTS[0], "--metric", spelling])
               for spelling in ("pll-word-l2r", "pll_word_l2r", "within_word_l2r")}
    for result in outputs.values():
        assert result.exit_code == 0, result.output
    assert len({r.stdout for r in outputs.values()}) == 1
    assert _records(outputs["pll-word-l2r"].stdout)[0]["metric"] == "pll_word_l2r"


def test_generate_reads_its_prompts_as_arguments_and_the_old_flag_too(saved_tiny_mlm):
    model = str(saved_tiny_mlm("bert"))
    common = ["--length", "3", "--steps", "3", "--seed", "1"]
    new = _invoke(["generate", model, "Return the", *common])
    old = _invoke(["generate", model, "--prompt", "Return the", *common])
    assert new.exit_code == 0 and old.exit_code == 0, old.output
    assert new.stdout == old.stdout and new.stdout.startswith("Return the")
    assert "use a positional argument" in old.stderr


@pytest.fixture
def model_without_tokenizer(saved_tiny_mlm, tmp_path):
    source = saved_tiny_mlm("bert")
    bare = tmp_path / "bare-model"
    bare.mkdir()
    for path in source.iterdir():
        if path.name == "config.json" or path.suffix in (".safetensors", ".bin"):
            shutil.copy(path, bare / path.name)
    return bare, source


def test_tokenizer_dir_serves_a_model_saved_without_one(model_without_tokenizer):
    bare, source = model_without_tokenizer
    refused = _invoke(["score", str(bare), "--text", TEXTS[0]])
    assert refused.exit_code == 1 and "--tokenizer DIR" in refused.stderr
    given = _invoke(["score", str(bare), "--text", TEXTS[0], "--tokenizer", str(source)])
    whole = _invoke(["score", str(source), "--text", TEXTS[0]])
    assert given.exit_code == 0, given.output
    assert _records(given.stdout) == _records(whole.stdout)
    filled = _invoke(["fill", str(bare), "A [MASK].", "--tokenizer", str(source), "--json"])
    assert filled.exit_code == 0, filled.output


def test_a_tokenizer_dir_that_is_not_one_is_one_line(model_without_tokenizer, tmp_path):
    bare, _ = model_without_tokenizer
    result = _invoke(["score", str(bare), "--text", TEXTS[0], "--tokenizer", str(tmp_path)])
    assert result.exit_code == 1
    assert "holds no tokenizer files" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# --- help --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_help_shows_words_not_types_and_the_examples_first(name, monkeypatch):
    monkeypatch.setenv("COLUMNS", "150")
    result = _invoke([*name.split(), "--help"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert not TYPE_TAGS.search(text), f"{name}: {TYPE_TAGS.search(text).group(0)} in help"
    example = text.find(f"mlmkit {name}")
    flags = min(i for i in (text.find("Options"), text.find("Arguments")) if i >= 0)
    assert 0 <= example < flags, f"{name}: its examples come before the flags"
    assert max(len(line) for line in text.splitlines()) <= 150


def test_help_uses_real_metavariables(monkeypatch):
    monkeypatch.setenv("COLUMNS", "150")
    text = _invoke(["score", "--help"]).stdout
    assert "score [OPTIONS] MODEL [INPUT]" in text
    for shown in ("FILE", "NAME", "pll|pll-word-l2r", "DIR"):
        assert shown in text


def test_help_takes_the_terminals_width_or_a_wide_page_without_one(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert cli_help.help_width() == 200
    wide = _invoke(["fill", "--help"]).stdout
    assert max(len(line) for line in wide.splitlines()) > 120
    monkeypatch.delenv("COLUMNS")
    assert cli_help.help_width() == cli_help.NO_TERMINAL_WIDTH  # pytest's streams: no terminal
    page = _invoke(["fill", "--help"]).stdout
    assert max(len(line) for line in page.splitlines()) == cli_help.NO_TERMINAL_WIDTH


def test_examples_move_up_after_the_first_paragraph():
    text, epilog = cli_help.examples_first(
        "One line.\n\nDetails here.", "\nExamples:\n\n  mlmkit x a\n\n  mlmkit x b\n\nMore.")
    assert epilog is None
    assert text.index("Examples:") < text.index("Details here.")
    assert text.index("One line.") < text.index("Examples:")
    assert "  mlmkit x b" in text and text.index("More.") > text.index("mlmkit x b")


def test_every_command_is_built_by_the_one_command_class():
    assert all(isinstance(c, Command) for c in LEAVES.values())
