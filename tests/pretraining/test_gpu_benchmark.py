"""The GPU section of benchmarks/pretrain.py (mlmkit at its GPU settings vs HF Trainer at
its best) in its smoke mode on the CPU: tiny models, a few steps, no compiling. It runs
on a GPU only when a session has one, so this keeps its code from breaking in between;
and its list of mlmkit settings degrades to what the installed mlmkit accepts."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from mlmkit.pretraining import PretrainConfig

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))  # the script imports its neighbour flops.py
    try:
        spec = importlib.util.spec_from_file_location("pretrain_benchmark",
                                                      BENCHMARKS / "pretrain.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclass looks its module up there
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("pretrain_benchmark", None)
        sys.path.remove(str(BENCHMARKS))


def test_the_gpu_section_runs_both_systems_in_smoke_mode_on_the_cpu(
        bench, tmp_path, wordpiece_tokenizer, fixture_dir):
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"Return the value {i} of the list, or "
                                                  "raise an error when it is missing."}) + "\n"
                              for i in range(120)), encoding="utf-8")
    out = tmp_path / "rows.json"
    bench.main(["--device", "cpu", "--smoke", "--threads", "1",  # --device: the gpu section
                "--tokenizer", str(fixture_dir / "tok-wordpiece"), "--corpus", str(corpus),
                "--seq-lens", "32", "--step-tokens", "64", "--json", str(out)])
    rows = json.loads(out.read_text())
    assert [(r["model"], r["system"]) for r in rows] == [
        ("ModernBERT-tiny", "HF Trainer"), ("ModernBERT-tiny", "mlmkit"),
        ("BERT-tiny", "HF Trainer"), ("BERT-tiny", "mlmkit")]
    for row in rows:
        assert "error" not in row, row  # a failing run gives a row with its error
        assert row["tokens_per_s"] > 0 and 0 < row["mfu"] < 1 and row["peak_memory"] > 0
        assert (row["seq_len"], row["batch_size"], row["device"]) == (32, 2, "cpu")
    ours = [r for r in rows if r["system"] == "mlmkit"]
    for row in ours:
        assert 0 <= row["data_wait"] <= 1
        assert row["settings"]["mask_stream"] == "counter" and row["settings"]["prefetch"] == 2
        assert row["settings"]["compile_layers"] is False  # smoke: nothing compiles
        # FlexAttention has no backward pass on a CPU: refused by the run, left out, noted
        assert "flex_attention" not in row["settings"]
        assert any(n.startswith("--flex-attention: refused") for n in row["notes"])
    assert ours[0]["settings"]["unpadded"] is True  # ModernBERT trains unpadded


def test_a_setting_this_mlmkit_lacks_is_left_out_with_a_note(bench, monkeypatch):
    monkeypatch.setattr(bench, "MLMKIT_GPU_SETTINGS", [
        ("mask_stream", "counter"), ("no_such_setting", True), ("prefetch", -1),
        ("compile_layers", True)])
    applied, notes = bench.mlmkit_gpu_settings(PretrainConfig(model="tiny"), compile=True)
    assert applied == {"mask_stream": "counter", "compile_layers": True}
    assert notes[0] == "--no-such-setting: not in this mlmkit, left out"
    assert notes[1].startswith("--prefetch: refused, left out")
    applied, notes = bench.mlmkit_gpu_settings(PretrainConfig(model="tiny"), compile=False)
    assert "--compile-layers: left out (--no-compile)" in notes
    assert applied["compile"] is False and applied["compile_layers"] is False


def test_the_setting_a_run_refuses_is_the_first_flag_its_error_names(bench):
    applied = {"unpadded": True, "flex_attention": True}
    error = ValueError("--flex-attention is the kernel of unpadded attention: add "
                       "--unpadded or drop --flex-attention")
    assert bench.refused_setting(error, applied) == "flex_attention"
    assert bench.refused_setting(ValueError("--unpadded: no such family"), applied) == \
        "unpadded"
    assert bench.refused_setting(ValueError("out of memory"), applied) is None
