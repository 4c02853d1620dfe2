"""The extras: a feature whose optional dependency is missing says, in one line, which
extra installs it; scoring and the CLI's start-up import none of them.

A package is made absent the way Python itself marks one: `sys.modules[name] = None`, so
`import name` raises ModuleNotFoundError (monkeypatch puts everything back after the test).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.errors import MissingExtra, MlmkitError
from mlmkit.extras import require

OPTIONAL = ("fastapi", "uvicorn", "httptools", "starlette", "httpx", "playwright",
            "matplotlib", "tensorboard", "peft", "ray", "mkdocs")


def absent(monkeypatch, *names: str) -> None:
    """Make `names` not importable, and forget the mlmkit modules that imported them."""
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)
    for name in list(sys.modules):
        if name == "mlmkit.serve" or name.startswith("mlmkit.serve."):
            monkeypatch.delitem(sys.modules, name)


def one_line_error(result, extra: str, needs: str) -> str:
    """The CLI's exit status 1 and its single `error:` line naming `extra`."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and f"needs {needs}, which is not installed" in lines[0]
    assert lines[0].endswith(f"pip install 'mlmkit[{extra}]'")
    return lines[0]


# ---- the helper


def test_require_returns_the_module_or_names_the_extra(monkeypatch):
    assert require("json", extra="serve", feature="x") is json
    absent(monkeypatch, "fastapi")
    with pytest.raises(MissingExtra) as caught:
        require("fastapi", extra="serve", feature="mlmkit serve")
    assert str(caught.value) == ("mlmkit serve needs fastapi, which is not installed: "
                                 "pip install 'mlmkit[serve]'")
    assert isinstance(caught.value, MlmkitError)  # the CLI prints it as one line, exit 1
    # a module of a missing package: the message names the package, which pip installs
    with pytest.raises(MissingExtra, match=r"^x needs mlmkit_no_such_package, which is not"):
        require("mlmkit_no_such_package.figure", extra="plots", feature="x")


# ---- serve: fastapi, uvicorn


@pytest.mark.parametrize("missing", ["fastapi", "uvicorn"])
def test_serve_without_its_extra_fails_at_once(monkeypatch, tmp_path, missing):
    absent(monkeypatch, missing)
    with pytest.raises(MissingExtra, match=rf"mlmkit serve needs {missing}.*mlmkit\[serve\]"):
        from mlmkit.serve import create_app  # noqa: F401
    # the model does not exist: the message comes before anything tries to load it
    result = CliRunner().invoke(app, ["serve", str(tmp_path / "no-model"), "--port", "0"])
    one_line_error(result, "serve", missing)


# ---- plots: matplotlib, tensorboard


@pytest.mark.plots
def test_pretraining_without_plots_trains_and_warns_once(monkeypatch, tmp_path,
                                                         wordpiece_tokenizer, capsys):
    from mlmkit.pretraining import PretrainConfig, pretrain

    absent(monkeypatch, "matplotlib", "tensorboard")
    config = PretrainConfig(model="tiny", tokenizer=wordpiece_tokenizer.name_or_path,
                            seq_len=32, batch_size=4, steps=2, eval_every=0, eval_blocks=4,
                            pppl_sentences=2, log_every=1, run_dir=str(tmp_path / "run"),
                            progress=False, fill_mask_examples=0, threads=1,
                            precision="fp32")
    result = pretrain(config)
    assert result.summary["status"] == "finished"
    run = tmp_path / "run"
    assert (run / "metrics.jsonl").read_text().strip()
    assert not (run / "plots").exists() and not (run / "tensorboard").exists()
    warnings = [line for line in capsys.readouterr().err.splitlines()
                if line.startswith("warning:")]
    assert warnings == ["warning: plotting a run's metrics (plots/, tensorboard/) needs "
                        "matplotlib, which is not installed: pip install 'mlmkit[plots]'; "
                        "this run trains all the same and writes metrics.jsonl only"]


def test_plot_functions_without_matplotlib_name_the_extra(monkeypatch, tmp_path):
    from mlmkit.pretraining.plots import plot_history
    from mlmkit.training.metrics_log import MetricsLog

    absent(monkeypatch, "matplotlib", "tensorboard")
    with pytest.raises(MissingExtra, match=r"needs matplotlib.*mlmkit\[plots\]"):
        plot_history([{"step": 1, "split": "train", "loss": 2.0}], tmp_path)
    with pytest.raises(MissingExtra, match=r"TensorBoard logs needs tensorboard.*\[plots\]"):
        MetricsLog(tmp_path, tensorboard=True)
    MetricsLog(tmp_path, tensorboard=False).close()  # the JSONL log needs no extra


def test_suite_files_without_matplotlib_skip_the_chart_with_a_warning(monkeypatch, tmp_path,
                                                                      capsys):
    from mlmkit.evaluation.suite import SuiteResult, write_suite

    absent(monkeypatch, "matplotlib")
    write_suite(SuiteResult(model="m", quick=True, metrics={"blimp": 0.5}), tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {"suite.json", "suite.md"}
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs matplotlib" in err[0] and "mlmkit[plots]" in err[0]


def test_a_bias_report_without_matplotlib_fails_before_any_work(monkeypatch, tmp_path):
    absent(monkeypatch, "matplotlib")
    data = tmp_path / "crows.csv"
    data.write_text("sent_more,sent_less\n")
    result = CliRunner().invoke(app, ["bias", "crows", str(tmp_path / "no-model"), str(data), "-o", str(tmp_path / "report.html")])
    line = one_line_error(result, "plots", "matplotlib")
    assert "a bias report (--output .html or .md)" in line
    json_out = CliRunner().invoke(app, ["bias", "crows", str(tmp_path / "no-model"), str(data), "-o", str(tmp_path / "report.json")])
    assert "matplotlib" not in json_out.output  # a JSON result draws nothing


# ---- finetune / peft: LoRA


def test_lora_without_peft_fails_before_loading_the_model(monkeypatch, tmp_path):
    import mlmkit

    absent(monkeypatch, "peft")
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"text": f"text {i}", "label": i % 2}) + "\n"
                             for i in range(8)))
    missing_model = str(tmp_path / "no-model")
    with pytest.raises(MissingExtra, match=r"LoRA fine-tuning \(--lora\) needs peft.*"
                                           r"mlmkit\[finetune\]"):
        mlmkit.finetune(missing_model, task="mine", train=str(train), text_field="text",
                        label_field="label", lora=True)
    result = CliRunner().invoke(app, ["finetune", missing_model, "--task", "mine", "--train",
                                      str(train), "--text-field", "text", "--label-field",
                                      "label", "--lora"])
    one_line_error(result, "finetune", "peft")


def test_finetune_and_peft_are_the_same_extra():
    import tomllib

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    assert extras["finetune"] == extras["peft"]
    assert extras["all"] == ["mlmkit[serve,plots,finetune,ray,docs]"]
    core = " ".join(project["project"]["dependencies"])
    for name in OPTIONAL:
        assert name not in core, name


# ---- ray: the integration's classes need no Ray of their own


def test_the_ray_classes_score_without_ray(monkeypatch, saved_tiny_mlm):
    absent(monkeypatch, "ray")
    monkeypatch.delitem(sys.modules, "mlmkit.integrations.ray", raising=False)
    integration = importlib.import_module("mlmkit.integrations.ray")
    scorer = integration.Scorer(str(saved_tiny_mlm("bert")), device="cpu")
    assert len(scorer({"text": ["Open the file."]})["pll"]) == 1


# ---- the core imports no extra


CORE_RUN = """
import sys
import mlmkit
from mlmkit.cli import main

sys.argv = ["mlmkit", "score", sys.argv[1], sys.argv[2], "--device", "cpu", "--threads", "1"]
try:
    main()
except SystemExit as end:
    assert not end.code, end.code
import mlmkit.generation, mlmkit.pretraining.loop, mlmkit.pretraining.run, mlmkit.scoring
print("optional:", sorted(n for n in sys.modules if n.split(".")[0] in {optional}))
"""


def test_scoring_and_pretraining_modules_import_no_extra(saved_tiny_mlm, tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("Open the file.\nReturn the list.\n")
    script = CORE_RUN.format(optional=set(OPTIONAL))
    done = subprocess.run([sys.executable, "-c", script, str(saved_tiny_mlm("bert")),
                           str(texts)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "optional: []", done.stdout
