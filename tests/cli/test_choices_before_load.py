"""A value outside its choices is refused before the model loads: with a model that does
not exist, the error names the choice, not the model (a bad --metric once surfaced only
after minutes of loading)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from mlmkit.cli import app

MISSING = "no/such-model"

CASES = [
    (["score", MISSING, "texts.txt", "--metric", "bogus"], "--metric"),
    (["score", MISSING, "texts.txt", "--reduction", "bogus"], "--reduction"),
    (["rescore", MISSING, "texts.txt", "--metric", "bogus"], "--metric"),
    (["eval", "elbo", MISSING, "texts.txt", "--method", "bogus"], "--method"),
    (["eval", "suite", MISSING, "--parts", "bogus"], "--parts"),
    (["generate", MISSING, "--prompt", "a", "--sampler", "bogus"], "--sampler"),
    (["infill", MISSING, "a [MASK] b", "--sampler", "bogus"], "--sampler"),
    (["embed", MISSING, "texts.txt", "--pooling", "bogus"], "--pooling"),
    (["probe", "rank", MISSING, "texts.txt", "--metric", "bogus"], "--metric"),
    (["embed", MISSING, "texts.txt", "--precision", "bogus"], "--precision"),
]


@pytest.mark.parametrize("argv, flag", CASES, ids=[" ".join(c[0][:2]) + " " + c[1]
                                                  for c in CASES])
def test_a_bad_choice_is_named_before_the_model_loads(argv, flag, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "texts.txt").write_text("The cat sat on the mat.\n", encoding="utf-8")
    result = CliRunner().invoke(app, argv)
    assert result.exit_code in (1, 2), result.output
    assert "bogus" in result.stderr and flag in result.stderr, result.stderr
    assert MISSING not in result.stderr, result.stderr
