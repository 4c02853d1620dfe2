"""The faces take one path to a model: the CLI commands, the server and the Ray classes each
obtain it from `mlmkit.load` (once per model) and call the bound model, as a Python user
does, so the runtime flags mean the same on every face."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import mlmkit
import mlmkit.mlm
from mlmkit.cli import app


@pytest.fixture(scope="module")
def model_dir(saved_tiny_mlm):
    return str(saved_tiny_mlm("bert"))


@pytest.fixture
def loads(monkeypatch):
    """Every call of `mlmkit.load` (the facade resolves it from mlmkit.mlm on each use):
    a list of (model, keywords)."""
    calls = []
    real = mlmkit.mlm.load

    def counting(model, **keywords):
        calls.append((model, keywords))
        return real(model, **keywords)

    monkeypatch.setattr(mlmkit.mlm, "load", counting)
    return calls


RUNTIME = ["--device", "cpu", "--precision", "fp32", "--threads", "1", "--batch-tokens", "96"]


@pytest.mark.parametrize("name", ["score", "fill", "eval elbo", "probe rank", "generate"])
def test_each_command_loads_its_model_once_with_its_runtime_flags(name, model_dir, tmp_path,
                                                                  loads):
    texts = tmp_path / "texts.txt"
    texts.write_text("the value is returned\nopen the file\n", encoding="utf-8")
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"candidates": ["the file is open", "file the open is"],
                                 "label": 0}) + "\n", encoding="utf-8")
    args = {"score": [model_dir, str(texts), "-o", "-"],
            "fill": [model_dir, "the [MASK] is returned", "--json"],
            "eval elbo": [model_dir, str(texts), "--samples", "2", "--json"],
            "probe rank": [model_dir, str(items), "--json"],
            "generate": [model_dir, "the", "--length", "2", "--steps", "2",
                         "--json"]}[name]
    result = CliRunner().invoke(app, [*name.split(), *args, *RUNTIME])
    assert result.exit_code == 0, result.output
    assert len(loads) == 1, loads
    model, keywords = loads[0]
    assert str(model) == model_dir
    runtime = {k: keywords[k] for k in ("device", "precision", "threads", "batch_tokens")}
    runtime["device"] = str(runtime["device"])  # score passes its rank's torch.device
    assert runtime == {"device": "cpu", "precision": "fp32", "threads": 1, "batch_tokens": 96}


def test_the_server_loads_each_model_through_load(model_dir, loads):
    pytest.importorskip("fastapi", reason="the extra mlmkit[serve] is not installed")
    from fastapi.testclient import TestClient

    from mlmkit.serve import ServeConfig, create_app, load_models

    models = load_models([f"a={model_dir}", f"b={model_dir}"], device="cpu", threads=1)
    assert len(loads) == 2 and all(isinstance(m, mlmkit.MLM) for m in models.values())
    with TestClient(create_app({"c": model_dir}, ServeConfig(threads=1))) as client:
        response = client.post("/v1/score", json={"texts": ["the value is returned"]})
    assert response.status_code == 200, response.text
    # the app binds its model once, with the config's runtime; a request loads nothing
    assert len(loads) == 3 and str(loads[-1][0]) == model_dir
    assert loads[-1][1]["threads"] == 1
    expected = mlmkit.load(model_dir, device="cpu").score(["the value is returned"])
    assert response.json()["results"][0]["pll"] == pytest.approx(expected[0].pll, abs=1e-5)


def test_the_ray_classes_load_through_load(model_dir, loads):
    from mlmkit.integrations.ray import FillMask, Scorer

    scorer = Scorer(model_dir, device="cpu", threads=1, batch_tokens=96)
    filler = FillMask(model_dir, device="cpu", threads=1)
    assert len(loads) == 2 and isinstance(scorer.mlm, mlmkit.MLM)
    assert scorer.mlm.batch_tokens == 96
    out = scorer({"text": ["the value is returned"]})
    assert out["pll"][0] == pytest.approx(
        scorer.mlm.score(["the value is returned"])[0].pll, abs=1e-9)
    assert len(filler({"text": ["the [MASK] is returned"]})["filled"]) == 1
