"""`mlmkit generate`, `mlmkit infill` and `mlmkit eval elbo` on a saved tiny model."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.errors import MlmkitError

runner = CliRunner()


def test_generate_json_trace_and_prompts_file(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    trace = tmp_path / "trace.jsonl"
    result = runner.invoke(app, ["generate", model, "--prompt", "Return the", "--length", "6",
                                 "--steps", "3", "--json", "--trace", str(trace), "--fix",
                                 "1=value"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["prompt"] == "Return the" and len(record["token_ids"]) == 6
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2, 3]
    assert sum(sum(line["revealed"]) for line in lines) == 5  # 6 positions, one fixed
    assert not any(lines[-1]["masked"])
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Return the\nA list of\n")
    result = runner.invoke(app, ["generate", model, "--prompts-file", str(prompts), "--length",
                                 "4", "--sampler", "ancestral", "--json"])
    assert result.exit_code == 0, result.output
    assert [r["prompt"] for r in json.loads(result.stdout)] == ["Return the", "A list of"]


def test_generate_show_and_plain_output(saved_tiny_mlm):
    model = str(saved_tiny_mlm("bert"))
    result = runner.invoke(app, ["generate", model, "--prompt", "Return the", "--length", "4",
                                 "--show", "--block-length", "2", "--cfg-scale", "1"])
    assert result.exit_code == 0, result.output
    assert "Return the" in result.stdout


def test_infill_command(saved_tiny_mlm):
    model = str(saved_tiny_mlm("roberta"))
    result = runner.invoke(app, ["infill", model, "Return the [MASK:1-2] of the list.",
                                 "--temperature", "0", "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert len(record["candidates"]) == 2 and record["text"].endswith("of the list.")
    result = runner.invoke(app, ["infill", model, "No mask here."])
    assert isinstance(result.exception, MlmkitError)
    assert "no mask span" in str(result.exception)


def test_eval_elbo_command(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    texts = tmp_path / "texts.txt"
    texts.write_text("Return the list.\n\nA value.\n")
    result = runner.invoke(app, ["eval", "elbo", model, str(texts), "--samples", "8", "--json"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["line"] for r in records] == [1, 3]
    assert all(r["nats_per_token"] > 0 and r["perplexity_bound"] > 1 for r in records)
    result = runner.invoke(app, ["eval", "elbo", model, str(texts), "--samples", "4"])
    assert result.exit_code == 0 and "ppl bound" in result.stdout


def test_bad_cli_input(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    for args, message in [
        (["generate", model, "--length", "0"], "--length 0"),
        (["generate", model, "--steps", "0"], "--steps 0"),
        (["generate", model, "--fix", "x=the"], "POSITION=TEXT"),
        (["generate", model, "--prompts-file", str(tmp_path / "none.txt")], "does not exist"),
    ]:
        result = runner.invoke(app, args)
        assert isinstance(result.exception, MlmkitError), (args, result.output)
        assert message in str(result.exception)
