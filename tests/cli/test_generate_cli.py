"""`mlmkit generate`, `mlmkit infill` and `mlmkit eval elbo` on a saved tiny model."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from mlmkit.cli import app

runner = CliRunner()


def test_generate_json_trace_and_prompts_file(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    trace = tmp_path / "trace.jsonl"
    result = runner.invoke(app, ["generate", model, "Return the", "--length", "6",
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
    result = runner.invoke(app, ["generate", model, "--file", str(prompts), "--length",
                                 "4", "--sampler", "ancestral", "--json"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["prompt"] for line in result.stdout.splitlines()] == \
        ["Return the", "A list of"]


def test_generate_show_and_plain_output(saved_tiny_mlm):
    model = str(saved_tiny_mlm("bert"))
    result = runner.invoke(app, ["generate", model, "Return the", "--length", "4",
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
    assert result.exit_code == 1 and "no mask span" in result.stderr


def test_eval_elbo_command(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    texts = tmp_path / "texts.txt"
    texts.write_text("Return the list.\n\nA value.\n")
    result = runner.invoke(app, ["eval", "elbo", model, str(texts), "--samples", "8", "--json"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["line"] for r in records] == [1, 3]
    assert all(r["nats_per_token"] > 0 and r["perplexity_bound"] > 1 for r in records)
    assert all(r["parameterization"] == "subs" for r in records)
    assert "2 blank line(s)" not in result.stderr and "1 blank line(s)" in result.stderr
    result = runner.invoke(app, ["eval", "elbo", model, str(texts), "--samples", "4"])
    assert result.exit_code == 0 and "ppl bound" in result.stdout


def test_bad_cli_input(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n")
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"Return the value.\ncaf\xe9 au lait\n")
    latin_masks = tmp_path / "latin-masks.txt"
    latin_masks.write_bytes(b"A [MASK] here.\ncaf\xe9 [MASK]\n")
    for args, message in [
        (["generate", model, "--length", "0"], "length=0 (--length)"),
        (["generate", model, "--steps", "0"], "steps=0 (--steps)"),
        (["generate", model, "--length", "4", "--steps", "9"], "steps=9 (--steps) is more than 4"),
        (["generate", model, "--temperature", "nan"], "temperature=nan (--temperature) must be a "
                                                      "finite number"),
        (["generate", model, "--temperature", "-1"], "temperature=-1.0"),
        (["generate", model, "--top-p", "1.5"], "top_p=1.5 (--top-p)"),
        (["generate", model, "--top-k", "0"], "top_k=0 (--top-k)"),
        (["generate", model, "--cfg-scale", "inf"], "cfg_scale=inf"),
        (["generate", model, "--length", "8", "--block-length", "9"], "block_length=9"),
        (["generate", model, "--length", "8", "--block-length", "3"], "does not divide length=8"),
        (["generate", model, "--length", "100000"], "length=100000 (--length)"),
        (["generate", model, "--fix", "x=the"], "POSITION=TEXT"),
        (["generate", model, "--file", str(tmp_path / "none.txt")], "does not exist"),
        (["generate", model, "--file", str(latin)], "not valid utf-8 at byte offset 21 "
                                                            "(line 2)"),
        (["infill", model, "A [MASK] b", "--temperature", "nan"], "temperature=nan"),
        (["infill", model, "--file", str(latin)], "not valid utf-8"),
        (["infill", model, "A [MASK:2] b", "--steps", "3"], "steps=3 (--steps) is more than 2"),
        (["generate", model, "--length", "4", "--trace", str(tmp_path / "o.txt"), "-o",
          str(tmp_path / "o.txt")], "--trace '" + str(tmp_path / "o.txt") + "' is also the "
         "output (-o)"),
        (["infill", model, "A [MASK] b", "--trace", "-"], "--trace - and the results (-o -"),
        (["generate", model, "The [MASK] is", "--length", "2"],
         "prompt 1 holds the mask token '[MASK]'"),
        (["generate", model, "--length", "3", "--fix", "1=[MASK]"],
         "constraint at position 1 is the mask token"),
        (["generate", model, "--length", "4", "--max-steps", "30"], "--max-steps 30 caps"),
        (["infill", model, "A [MASK] b [MASK:-1]"], "span '[MASK:-1]' has no valid length"),
        (["infill", model, "a [MASK:126] b"], "template 1 'a [MASK:126] b' needs 130 tokens"),
        (["fill", model, "A [MASK].", "--top-k", "0"], "top_k=0 (--top-k)"),
        (["fill", model, "--file", str(latin_masks)], "not valid utf-8 at byte offset 18"),
        (["eval", "elbo", model, str(blank)], "has no text (every line is blank)"),
        (["eval", "elbo", model, str(tmp_path / "empty.txt")], "does not exist"),
        (["eval", "elbo", model, str(latin)], "not valid utf-8 at byte offset 21"),
        (["eval", "elbo", model, str(blank), "--samples", "0"], "samples=0 (--samples)"),
        (["eval", "elbo", model, str(blank), "--parameterization", "x"], "parameterization='x'"),
    ]:
        result = runner.invoke(app, args)
        assert result.exit_code == 1, (args, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, result.stderr)
        assert message in lines[0], (args, lines[0])
        assert "Traceback" not in result.output
    (tmp_path / "empty.txt").write_text("")
    result = runner.invoke(app, ["eval", "elbo", model, str(tmp_path / "empty.txt")])
    assert result.exit_code == 1 and "has no text (it is empty)" in result.stderr


def test_show_writes_no_cursor_codes_into_a_pipe(saved_tiny_mlm, tmp_path, mlmkit_command):
    import subprocess

    model = str(saved_tiny_mlm("bert"))
    done = subprocess.run([*mlmkit_command, "generate", model,
                           "Return the", "--length", "4", "--show", "--seed", "3"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    plain = runner.invoke(app, ["generate", model, "Return the", "--length", "4",
                                "--seed", "3"])
    assert done.stdout == plain.stdout and done.stdout.startswith("Return the")


def test_stdin_and_output_files(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["generate", model, "--file", "-", "--length", "4",
                                 "--json", "-o", str(out)], input="Return the\n\nA list\n")
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert [json.loads(line)["prompt"] for line in out.read_text().splitlines()] == \
        ["Return the", "", "A list"]
    out = tmp_path / "filled.txt"
    result = runner.invoke(app, ["infill", model, "--file", "-", "-o", str(out),
                                 "--temperature", "0"], input="Return the [MASK] value.\n")
    assert result.exit_code == 0, result.output
    assert out.read_text().count("\n") == 1 and "value" in out.read_text()
    texts = tmp_path / "texts.txt"
    texts.write_text("Return the list.\n")
    result = runner.invoke(app, ["eval", "elbo", model, str(texts), "-o", str(texts)])
    assert result.exit_code == 1 and "also an input" in result.stderr
    assert texts.read_text() == "Return the list.\n"


def test_undecodable_bytes_in_arguments_are_one_line_errors(saved_tiny_mlm):
    """An argument with bytes that are not UTF-8 reaches Python with lone surrogates."""
    model = str(saved_tiny_mlm("bert"))
    bad = b"caf\xe9".decode("utf-8", "surrogateescape")
    for args in (["generate", model, bad, "--length", "4"],
                 ["generate", model, "--fix", f"1={bad}", "--length", "4"],
                 ["infill", model, f"{bad} [MASK]"],
                 ["fill", model, f"{bad} [MASK]"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, (args, result.output)
        assert "not valid UTF-8 (byte 0xe9 at character 3)" in result.stderr, args
