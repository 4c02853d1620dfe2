"""Run state: metrics rows keyed by step, signals (first: stop after the step; second: quit
at once)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from mlmkit.training.metrics_log import MetricsLog, unique_by_step


def _rows(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_metrics_rows_are_keyed_by_step_and_split(tmp_path):
    log = MetricsLog(tmp_path, tensorboard=False)
    log.log({"step": 2, "split": "train", "loss": 3.0})
    log.log({"step": 2, "split": "eval", "loss": 2.9})
    log.log({"step": 2, "split": "eval", "loss": 2.8})  # evaluated again after a resume
    log.log({"step": 4, "split": "train", "loss": 2.5})
    log.close()
    rows = _rows(tmp_path)
    assert [(r["step"], r["split"]) for r in rows] == [(2, "train"), (2, "eval"), (4, "train")]
    assert rows[1]["loss"] == 2.8 and log.history == rows
    # a resumed log starts from the saved history, duplicates dropped
    history = rows + [{"step": 4, "split": "train", "loss": 2.4}]
    again = MetricsLog(tmp_path, history, resume_step=4, tensorboard=False)
    again.log({"step": 4, "split": "eval", "loss": 2.0})
    again.close()
    assert [(r["step"], r["split"], r["loss"]) for r in _rows(tmp_path)] == [
        (2, "train", 3.0), (2, "eval", 2.8), (4, "train", 2.4), (4, "eval", 2.0)]


def test_unique_by_step_keeps_order_and_the_last_record():
    records = [{"step": 1, "split": "eval", "v": 1}, {"step": 1, "split": "eval", "v": 2},
               {"step": 0, "v": 0}]
    assert unique_by_step(records) == [{"step": 1, "split": "eval", "v": 2}, {"step": 0, "v": 0}]


SLOW_LOOP = """
import sys, time
from mlmkit.training.signals import StopOnSignal
with StopOnSignal() as stop:
    print("ready", flush=True)
    for step in range(1000):
        time.sleep(0.05)  # a training step
        if stop.requested:
            print(f"stopped {stop.requested} after step {step}", flush=True)
            time.sleep(float(sys.argv[1]))  # the save
            print("saved", flush=True)
            break
"""


def _start(save_seconds: float):
    process = subprocess.Popen([sys.executable, "-c", SLOW_LOOP, str(save_seconds)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    return process


def test_first_signal_stops_after_the_step():
    for sig in (signal.SIGTERM, signal.SIGINT):
        process = _start(0.1)
        process.send_signal(sig)
        out, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert f"stopped {sig.name}" in out and "saved" in out
        assert "saving after this step" in err and "Traceback" not in err


def test_second_signal_quits_at_once():
    for sig in (signal.SIGTERM, signal.SIGINT):
        process = _start(60)  # a save that would take a minute
        process.send_signal(sig)
        assert process.stdout.readline().startswith("stopped")
        started = time.monotonic()
        process.send_signal(sig)
        out, _ = process.communicate(timeout=30)
        assert time.monotonic() - started < 10
        assert process.returncode == -sig  # ended by the signal's default action
        assert "saved" not in out


# ---- end to end: tiny runs

import os  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from mlmkit.errors import InvalidArgument, RunError  # noqa: E402
from mlmkit.pretraining import PretrainConfig, pretrain  # noqa: E402
from mlmkit.training.checkpoint import list_states, load_latest_state  # noqa: E402


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory, corpus_sample) -> Path:
    path = tmp_path_factory.mktemp("run-state") / "docs.txt"
    path.write_text("\n".join(d.replace("\n", " ") for d in corpus_sample[:400]),
                    encoding="utf-8")
    return path


def tiny(run_dir, corpus, **overrides) -> PretrainConfig:
    """A tiny run that trains its own tokenizer on `corpus` (nothing given)."""
    values = dict(model="tiny", corpus=str(corpus), vocab_size=256, seq_len=32,
                  batch_size=8, steps=6, lr=3e-3, warmup=0.1, eval_every=3, eval_blocks=4,
                  pppl_sentences=0, save_every=0, log_every=1, run_dir=str(run_dir),
                  progress=False, fill_mask_examples=0, threads=1, precision="fp32",
                  validation_share=0.1)
    values.update(overrides)
    return PretrainConfig(**values)


def final_weights(run_dir) -> dict[str, torch.Tensor]:
    return load_file(str(Path(run_dir) / "final" / "model.safetensors"))


def test_resume_on_a_clean_cache_with_an_edited_config_yaml(corpus_file, tmp_path,
                                                              monkeypatch, capsys):
    """The tokenizers trainer is not deterministic (two trainings on one corpus give other
    vocabularies), so a resume that trained its tokenizer again would map ids to other
    embeddings; the run's stored tokenizer makes the resume exact."""
    run_dir = tmp_path / "run"
    monkeypatch.setenv("MLMKIT_CACHE", str(tmp_path / "cache-a"))
    halted = pretrain(tiny(run_dir, corpus_file, halt_after=3))
    uninterrupted = pretrain(tiny(tmp_path / "whole", corpus_file))  # the same tokenizer
    assert halted.interrupted and (run_dir / "tokenizer" / "tokenizer.json").is_file()
    config_yaml = run_dir / "config.yaml"
    edited = {**yaml.safe_load(config_yaml.read_text()), "vocab_size": 512, "lr": 0.5}
    config_yaml.write_text(yaml.safe_dump(edited))
    monkeypatch.setenv("MLMKIT_CACHE", str(tmp_path / "cache-b"))  # a clean cache
    capsys.readouterr()
    resumed = pretrain(resume=run_dir, overrides={"halt_after": None})
    err = capsys.readouterr().err
    assert "config.yaml differs" in err and "--vocab-size" in err and "--lr" in err
    assert resumed.summary["steps"] == 6
    # the stored tokenizer was used: none was trained in the new cache
    assert not list((tmp_path / "cache-b").glob("tokenizers/*"))
    reference = final_weights(uninterrupted.run_dir)
    weights = final_weights(run_dir)
    assert all(torch.equal(reference[k], weights[k]) for k in reference)
    keys = [(r["step"], r["split"]) for r in resumed.history]
    assert len(keys) == len(set(keys))  # metrics rows keyed by step
    rows = _rows(run_dir)
    assert [(r["step"], r["split"]) for r in rows] == keys


def test_resume_refuses_a_changed_studied_field_by_name(corpus_file, tmp_path):
    run_dir = tmp_path / "run"
    pretrain(tiny(run_dir, corpus_file, halt_after=2))
    with pytest.raises(RunError, match="--seq-len: 32 in the run, 64 now") as error:
        pretrain(resume=run_dir, overrides={"seq_len": 64, "steps": 8})
    assert "--override" in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(RunError, match="--lr"):
        pretrain(tiny(run_dir, corpus_file, lr=1e-4), resume=run_dir)
    assert [int(p.name[6:14]) for p in list_states(run_dir)] == [2]  # nothing written
    # budget, evaluation and runtime fields may change
    resumed = pretrain(resume=run_dir, overrides={"steps": 7, "eval_every": 0,
                                                  "halt_after": None, "log_every": 7})
    assert resumed.summary["steps"] == 7 and resumed.final_dir is not None


def test_resume_refuses_changed_data(corpus_file, tmp_path):
    corpus = tmp_path / "docs.txt"
    corpus.write_text(corpus_file.read_text(encoding="utf-8"), encoding="utf-8")
    run_dir = tmp_path / "run"
    pretrain(tiny(run_dir, corpus, halt_after=2))
    with open(corpus, "a", encoding="utf-8") as handle:
        handle.write("\nA document added after the run started, with new words.\n")
    with pytest.raises(RunError, match="data of --corpus .* is not what the run was trained"):
        pretrain(resume=run_dir)


def test_override_flag_on_the_cli(corpus_file, tmp_path, monkeypatch, capsys):
    from mlmkit.cli import main
    from mlmkit.pretraining.run_state import parse_overrides

    assert parse_overrides(["steps=9", "eval-every=0", "time="]) == {
        "steps": 9, "eval_every": 0, "time": None}
    for bad in (["steps"], ["colour=1"]):
        with pytest.raises(InvalidArgument, match="--override"):
            parse_overrides(bad)
    run_dir = tmp_path / "run"
    pretrain(tiny(run_dir, corpus_file, halt_after=2))

    def cli(*args):
        monkeypatch.setattr("sys.argv", ["mlmkit", "pretrain", *args])
        try:
            main()
            code = 0
        except SystemExit as done:
            code = done.code
        return code, capsys.readouterr()

    code, out = cli("--resume", "--run-dir", str(run_dir), "--override", "lr=0.1")
    assert code == 1 and "--lr" in out.err and "Traceback" not in out.err
    assert len(out.err.strip().splitlines()) == 1
    code, out = cli("--resume", "--run-dir", str(run_dir), "--override", "halt_after=1", "--override",
                    "eval_every=0", "--json", "--no-progress")
    assert code == 0, out.err
    assert json.loads(out.out)["steps"] == 3


def test_restart_starts_over_in_the_same_directory(corpus_file, tmp_path):
    run_dir = tmp_path / "run"
    pretrain(tiny(run_dir, corpus_file, steps=4, save_every=2))
    assert (run_dir / "final").is_dir() and (run_dir / "step-4").is_dir()
    (run_dir / "notes.txt").write_text("mine")
    with pytest.raises(RunError, match="--restart"):
        pretrain(tiny(run_dir, corpus_file, steps=3))
    with pytest.raises(InvalidArgument, match="not both"):
        pretrain(resume=run_dir, restart=True)
    again = pretrain(tiny(run_dir, corpus_file, steps=3), restart=True)
    assert again.summary["steps"] == 3
    assert not (run_dir / "step-4").exists() and (run_dir / "notes.txt").read_text() == "mine"
    assert [r["step"] for r in _rows(run_dir) if r["split"] == "train"] == [1, 2, 3]
    # a trained model keeps the presets' positions, and its tokenizer says so (not --seq-len)
    assert json.loads((run_dir / "final" / "config.json").read_text())[
        "max_position_embeddings"] == 512
    config = json.loads((run_dir / "final" / "tokenizer_config.json").read_text())
    assert config["model_max_length"] == 512
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_every_checkpoint_damaged_then_restart(corpus_file, tmp_path):
    run_dir = tmp_path / "run"
    pretrain(tiny(run_dir, corpus_file, steps=4, save_every=2, halt_after=4))
    for state in list_states(run_dir):
        state.write_bytes(b"damaged")
    with pytest.raises(RunError, match="every training state .* damaged.*--restart"):
        pretrain(resume=run_dir)
    assert pretrain(tiny(run_dir, corpus_file, steps=2), restart=True).final_dir is not None


def test_a_non_finite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(
        corpus_file, tmp_path, monkeypatch):
    from mlmkit.training.objectives.mlm import MLMObjective

    loss = MLMObjective.loss
    calls = {"n": 0}

    def poisoned(self, tensors, totals):
        out = loss(self, tensors, totals)
        calls["n"] += 1
        if calls["n"] == 4:  # the 4th step (one micro-batch a step)
            out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(MLMObjective, "loss", poisoned)
    run_dir = tmp_path / "run"
    with pytest.raises(RunError, match=r"is nan at step 4.*last checkpoint \(step 2\)"):
        pretrain(tiny(run_dir, corpus_file, save_every=2, eval_every=0))
    assert not (run_dir / "final").exists()
    assert [int(p.name[6:14]) for p in list_states(run_dir)] == [2]
    state, _ = load_latest_state(run_dir)
    assert all(torch.isfinite(v).all() for v in state["modules"]["model"].values()
               if v.is_floating_point())
    monkeypatch.setattr(MLMObjective, "loss", loss)
    resumed = pretrain(resume=run_dir)  # the run goes on from its last good state
    assert resumed.summary["steps"] == 6 and resumed.final_dir is not None


@pytest.mark.plots
def test_signal_stops_without_evaluation_or_plots(corpus_file, tmp_path, monkeypatch):
    """The first signal: save after the step, no evaluation at that step, no plots."""
    import mlmkit.pretraining.loop as loop

    real = loop.StopOnSignal

    class SignalAtStep3(real):
        def __init__(self):
            super().__init__(announce=False)

    steps = {"n": 0}
    run_step = loop.Run.step

    def step(self, stop=None):
        run_step(self, stop)
        steps["n"] += 1
        if steps["n"] == 3:  # between steps: the step ends, then the run stops
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(loop, "StopOnSignal", SignalAtStep3)
    monkeypatch.setattr(loop.Run, "step", step)
    run_dir = tmp_path / "run"
    result = pretrain(tiny(run_dir, corpus_file, eval_every=3))
    assert result.summary["stop_reason"] == "SIGTERM" and result.summary["steps"] == 3
    assert not [r for r in result.history if r["split"] == "eval"]  # not evaluated at step 3
    assert not (run_dir / "plots").exists() and not (run_dir / "final").exists()
    assert [int(p.name[6:14]) for p in list_states(run_dir)] == [3]
