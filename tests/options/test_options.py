"""The options dataclasses (mlmkit.options) are the one source of the library's keywords, the
CLI's flags and the server's request fields: these tests hold the three to them."""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from typing import Annotated, Literal

import pytest
import typer
from typer.testing import CliRunner

import mlmkit
from mlmkit.cli import app
from mlmkit.cli.options import SEED, Given, command
from mlmkit.errors import InvalidArgument
from mlmkit.options import build, default_of, fields_of, option, types_of
from mlmkit.options.embedding import EmbeddingTraining
from mlmkit.options.finetuning import Finetuning
from mlmkit.options.sampler import Sampling
from mlmkit.options.scoring import Scoring
from mlmkit.options.serving import ServeConfig


def _choices(cls, name):
    kind = types_of(cls)[name]
    literal = next(k for k in (kind, *typing.get_args(kind))
                   if typing.get_origin(k) is typing.Literal)
    return set(typing.get_args(literal))


@pytest.mark.parametrize("function,cls", [
    ("generate", Sampling), ("infill", Sampling), ("finetune", Finetuning),
    ("score", Scoring), ("train_embeddings", EmbeddingTraining)])
def test_library_keywords_are_the_fields_with_their_defaults(function, cls):
    package = {"generate": "generation", "infill": "generation", "finetune": "finetuning",
               "score": "scoring", "train_embeddings": "finetuning"}[function]
    parameters = inspect.signature(getattr(getattr(mlmkit, package), function)).parameters
    for field in fields_of(cls):
        assert field.name in parameters, f"mlmkit.{function} lacks {field.name}"
        assert parameters[field.name].kind is inspect.Parameter.KEYWORD_ONLY
        assert parameters[field.name].default == default_of(field), field.name


def test_choices_are_the_library_registries():
    from mlmkit.generation.confidence import CONFIDENCES
    from mlmkit.generation.options import REMASKS, REVEALS
    from mlmkit.generation.samplers import SAMPLERS
    from mlmkit.scoring.jobs import METRICS
    from mlmkit.scoring.masked_copies import UNK_MODES

    assert _choices(Sampling, "sampler") == set(SAMPLERS)
    assert _choices(Sampling, "confidence") == set(CONFIDENCES)
    assert _choices(Sampling, "reveal") == set(REVEALS)
    assert _choices(Sampling, "remask") == set(REMASKS)
    assert _choices(Scoring, "metric") == set(METRICS)
    assert _choices(Scoring, "unk") == set(UNK_MODES)


def test_sampler_options_check_the_fields_of_sampling():
    from mlmkit.generation.options import SamplerOptions

    assert [f.name for f in fields_of(SamplerOptions)] == [f.name for f in fields_of(Sampling)]
    with pytest.raises(InvalidArgument, match="--min-gap"):
        SamplerOptions(min_gap=2)  # spacing needs an adaptive reveal


def test_an_unknown_keyword_is_one_line_naming_the_close_ones():
    with pytest.raises(InvalidArgument) as error:
        build(Sampling, min_gapp=2)
    assert "'min_gapp' is not an option of Sampling: did you mean min_gap?" == str(error.value)
    with pytest.raises(InvalidArgument, match="the options are"):
        build(Scoring, {"zzz": 1})
    assert build(Scoring, metric="pll_word_l2r").metric == "pll_word_l2r"


@pytest.mark.parametrize("command,cls", [
    ("generate", Sampling), ("infill", Sampling), ("finetune", Finetuning),
    ("serve", ServeConfig)])
def test_each_field_is_a_flag_with_its_help(command, cls):
    from mlmkit.cli.options import SHARED

    root = typer.main.get_command(app)
    options = {opt: param for param in root.commands[command].params for opt in param.opts}
    for field in fields_of(cls):
        if not field.metadata.get("cli", True) or field.name in SHARED:
            continue
        flag = field.metadata.get("flag") or "--" + field.name.replace("_", "-")
        assert flag in options, f"mlmkit {command} lacks {flag}"
        assert options[flag].help == field.metadata["help"]
        assert options[flag].default == default_of(field)


def test_a_literal_field_is_a_flag_with_choices():
    result = CliRunner().invoke(app, ["generate", "m", "--sampler", "greedy"])
    assert result.exit_code == 2
    assert "ancestral" in result.output and "confidence" in result.output


def test_the_request_schemas_come_from_the_options():
    from mlmkit.serve.schemas import CompareRequest, GenerateRequest, InfillRequest, ScoreRequest

    for request in (GenerateRequest, InfillRequest):
        for field in fields_of(Sampling):
            assert request.model_fields[field.name].default == default_of(field)
            assert request.model_fields[field.name].description == field.metadata["help"]
    for field in fields_of(Scoring):
        assert ScoreRequest.model_fields[field.name].default == default_of(field)
        if field.name in ("metric", "unk", "stride"):
            assert CompareRequest.model_fields[field.name].default == default_of(field)
    schema = GenerateRequest.model_json_schema()["properties"]
    assert set(schema["sampler"]["enum"]) == _choices(Sampling, "sampler")



@dataclass(frozen=True)
class Toy:
    min_gap: int | None = option(None, "Spacing.")
    mode: Literal["a", "b"] = option("a", "A or b.")
    seed: int = option(0, "The seed.")


SEEN = {}


def built_command(*, toy: Toy, seed: int = SEED) -> None:
    SEEN["built"] = toy


def given_command(*, values: Annotated[dict, Given(Toy)]) -> None:
    SEEN["given"] = values


def test_the_mechanism_builds_the_dataclass_or_hands_over_the_flags_given():
    """`command()`: a dataclass parameter comes back built from its flags (a field named
    like a parameter of the command takes that parameter's value); `Given(...)` hands over
    only the flags given on the command line."""
    toy_app = typer.Typer()
    command(toy_app, "built", built_command)
    command(toy_app, "given", given_command)
    runner = CliRunner()
    assert runner.invoke(toy_app, ["built", "--min-gap", "3", "--seed", "7"]).exit_code == 0
    assert SEEN["built"] == Toy(min_gap=3, mode="a", seed=7)
    assert runner.invoke(toy_app, ["given", "--mode", "b"]).exit_code == 0
    assert SEEN["given"] == {"mode": "b"}
    assert runner.invoke(toy_app, ["built", "--mode", "c"]).exit_code == 2
