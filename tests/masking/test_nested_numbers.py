"""Numbers inside nested options (masking policies, config files, overrides) are checked as
a flag's value is: finite, in range, before any work."""

from __future__ import annotations

import re

import pytest
import yaml
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.core.yaml_values import NotFinite, load_yaml
from mlmkit.errors import MlmkitError
from mlmkit.masking import build_policy
from mlmkit.masking.config import check_masking
from mlmkit.pretraining.run_state import parse_overrides


@pytest.mark.parametrize("text, where", [
    ("{rate: {name: beta, a: .nan, b: 2.0}}", "rate.a"),
    ("phases: [{steps: 2, lr: {start: .inf}}]", "phases[0].lr.start"),
    ("lr: -.inf", "lr"),
])
def test_load_yaml_refuses_a_non_finite_number_by_its_path(text, where):
    with pytest.raises(NotFinite, match=re.escape(f"{where} is")):
        load_yaml(text)
    assert isinstance(NotFinite("x"), yaml.YAMLError)  # callers' YAML messages carry it


@pytest.mark.parametrize("policy", [
    {"rate": {"name": "beta", "a": float("nan"), "b": 2.0}},
    {"rate": {"name": "beta", "a": float("inf"), "b": 2.0}},
    {"rate": {"name": "linear", "start": 0.3, "end": float("nan")}, "total_steps": 10},
    {"units": {"name": "span", "p": float("nan")}},
])
def test_a_policy_built_in_python_refuses_non_finite_parameters(wordpiece_tokenizer, policy):
    with pytest.raises(MlmkitError, match="finite"):
        build_policy(policy, wordpiece_tokenizer)


def test_check_masking_refuses_a_nan_written_inline():
    with pytest.raises(MlmkitError, match=r"--policy .*rate\.a is nan"):
        check_masking("{rate: {name: beta, a: .nan, b: 2.0}}", "--policy")


def test_mask_preview_with_a_nan_in_its_policy_stops_at_once(saved_tiny_mlm):
    result = CliRunner().invoke(app, ["mask", "preview", str(saved_tiny_mlm("bert")),
                                      "The cat sat on the mat.", "--policy",
                                      "{rate: {name: beta, a: .nan, b: 2.0}}"])
    assert result.exit_code == 1
    assert "rate.a is nan: give a finite number" in result.stderr


def test_an_override_with_a_nan_names_it():
    with pytest.raises(MlmkitError, match=r"--override 'lr=\.nan': lr must be a finite number"):
        parse_overrides(["lr=.nan"])


def test_a_config_file_or_phases_flag_with_a_nan_names_its_path(tmp_path):
    from mlmkit.cli import app as cli

    config = tmp_path / "c.yaml"
    config.write_text("steps: 10\nmasking: {rate: {name: beta, a: .nan, b: 2.0}}\n")
    result = CliRunner().invoke(cli, ["pretrain", "--config", str(config)])
    assert result.exit_code == 1
    assert "masking.rate.a is nan: give a finite number" in result.stderr
    result = CliRunner().invoke(cli, ["pretrain", "--steps", "3", "--phases",
                                      "[{steps: 3, lr: {start: .nan}}]"])
    assert result.exit_code == 1
    assert "--phases: phases[0].lr.start is nan: give a finite number" in result.stderr
