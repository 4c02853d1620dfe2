"""The compiled, fused step's parts that a CPU can check: the GPU defaults (regional
compile on with --device cuda), --cuda-graphs refused where it cannot hold (a CPU first of
all, in one line), the fixed-slot gather of masked positions giving the dynamic loss,
and --batch-tokens auto: a micro-batch measured (here on a faked device) that trains as
that --grad-accum given by hand, leaves no trace of its trials, and is kept on resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.errors import InvalidArgument
from mlmkit.models.regional_compile import has_layer_list
from mlmkit.models.static_positions import capacity, fixed_capacity_positions
from mlmkit.pretraining import PretrainConfig, micro_batch, pretrain
from mlmkit.pretraining import run as run_module
from mlmkit.pretraining.data import prepare_rows, rank_rows
from mlmkit.pretraining.run import build_run
from mlmkit.pretraining.static_shapes import check_static_shapes
from mlmkit.training.checkpoint import load_latest_state
from mlmkit.training.objectives.mlm import MLMObjective, static_sparse_mlm_loss
from mlmkit.training.runtime import build_runtime, compile_layers_on, compile_mode
from tests.pretraining.test_mask_stream import _blocks
from tests.pretraining.test_pretrain import assert_same_weights, tiny_config

CUDA, CPU = torch.device("cuda"), torch.device("cpu")


@pytest.fixture(scope="module")
def tokenizer_path(wordpiece_tokenizer, fixture_dir) -> str:
    return str(fixture_dir / "tok-wordpiece")


# ---- the defaults a GPU user expects


def test_compile_layers_is_on_by_default_on_a_gpu_only():
    config = PretrainConfig(steps=1)
    assert config.compile_layers is None  # config.yaml says "auto" as null
    assert compile_layers_on(config, CUDA, compiler_ready=True)
    assert not compile_layers_on(config, CUDA, compiler_ready=False)  # no triton, old GPU
    assert not compile_layers_on(config, CPU)
    assert not compile_layers_on(config.replace(compile=True), CUDA, True)  # the whole loss
    assert not compile_layers_on(config.replace(compile_layers=False), CUDA, True)
    assert compile_layers_on(config.replace(compile_layers=True), CPU)
    assert has_layer_list(torch.nn.Sequential(torch.nn.ModuleList([torch.nn.Linear(2, 2)])))
    assert not has_layer_list(torch.nn.Linear(2, 2))  # the default leaves it eager
    assert compile_mode(config) == {}
    graphs = compile_mode(config.replace(cuda_graphs=True))["options"]
    assert graphs["triton.cudagraphs"] and graphs["triton.cudagraph_skip_dynamic_graphs"]
    with pytest.raises(InvalidArgument, match="--compile-layers 'yes': use true or false"):
        config.replace(compile_layers="yes")


# ---- --cuda-graphs


def test_cuda_graphs_on_a_cpu_is_refused_in_one_line_before_any_work(tmp_path,
                                                                       tokenizer_path):
    with pytest.raises(InvalidArgument, match="^--cuda-graphs: CUDA graphs need a GPU and "
                                              "this run is on cpu"):
        PretrainConfig(steps=1, device="cpu", cuda_graphs=True)
    if not torch.cuda.is_available():  # --device auto that resolves to the CPU
        with pytest.raises(InvalidArgument, match="^--cuda-graphs: CUDA graphs need a GPU"):
            build_run(tiny_config(tmp_path / "run", tokenizer_path, device="auto",
                                  cuda_graphs=True))
        assert not (tmp_path / "run").exists()
    result = CliRunner().invoke(app, ["pretrain", "--cuda-graphs", "--device", "cpu",
                                      "--run-dir", str(tmp_path / "cli")])
    assert result.exit_code == 1 and "--cuda-graphs" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "cli").exists()


@pytest.mark.parametrize("change,words", [
    ({"unpadded": True, "model": "modernbert-tiny"}, "--cuda-graphs with --unpadded"),
    ({"batch_warmup_tokens": 100}, "--cuda-graphs with --batch-warmup-tokens"),
    ({"objective": "diffusion"}, "--cuda-graphs trains --objective mlm only"),
    ({"compile_layers": False}, "--cuda-graphs replays compiled code"),
])
def test_cuda_graphs_refuse_what_changes_shape(change, words):
    base = PretrainConfig(steps=10, device="cuda", cuda_graphs=True)
    check_static_shapes(base, CUDA, True)  # packed blocks, layers compiled by default: fine
    check_static_shapes(base.replace(compile_layers=False, compile=True), CUDA, True)
    with pytest.raises(InvalidArgument, match=words):
        check_static_shapes(base.replace(**change), CUDA, True)


def test_capacities_are_few_and_coarse():
    assert capacity(0, 4096) == 64 and capacity(64, 4096) == 64 and capacity(65, 4096) == 128
    # 30% of 64 × 1,024 tokens: one granule of 1,024 holds the count's spread
    assert {capacity(n, 65536) for n in range(19500, 19900)} == {19456 + 1024}
    assert capacity(10, 32) == 32 and capacity(32, 32) == 32  # never more than the tokens
    mask = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 1]], dtype=torch.bool)
    index, valid = fixed_capacity_positions(mask, 6)
    assert index.tolist() == [1, 2, 4, 7, 0, 0] and valid.tolist() == [1, 1, 1, 1, 0, 0]


def test_fixed_slots_give_the_dynamic_loss_and_gradients(tmp_path, tokenizer_path,
                                                         wordpiece_tokenizer):
    runtime = build_runtime("cpu", "fp32", threads=1)
    objective = MLMObjective(tiny_config(tmp_path, tokenizer_path, dropout=0.0),
                             wordpiece_tokenizer, runtime)
    blocks = _blocks(wordpiece_tokenizer, tmp_path)
    prepared, _ = prepare_rows(objective, blocks, np.arange(4) % len(blocks),
                               rank_rows(4, 0, 1), 0, 5)
    tensors = prepared.tensors

    def step():
        objective.model.zero_grad(set_to_none=True)
        out = objective.loss(tensors, prepared.counts)
        out.loss.backward()
        return out, {n: p.grad.clone() for n, p in objective.model.named_parameters()}

    dynamic, dynamic_grads = step()
    objective._static, objective._loss_fn = True, static_sparse_mlm_loss  # eager, as compiled
    static, static_grads = step()
    count = int(tensors["mask"].sum())
    assert capacity(count, tensors["mask"].numel()) > count  # invalid slots were there
    torch.testing.assert_close(static.loss, dynamic.loss)
    assert float(static.metrics["accuracy"]) == float(dynamic.metrics["accuracy"])
    for name, grad in dynamic_grads.items():
        torch.testing.assert_close(static_grads[name], grad, rtol=1e-4, atol=1e-6)


# ---- --batch-tokens auto


def test_auto_batch_tokens_are_read_and_refused_where_they_cannot_hold():
    assert PretrainConfig(steps=1, batch_tokens=" AUTO").batch_tokens == "auto"
    bounded = PretrainConfig(steps=1, batch_size=8, seq_len=32, batch_tokens="64")
    assert bounded.batch_tokens == 64 and bounded.grad_accum == 4  # the flag's text
    with pytest.raises(InvalidArgument, match="--batch-tokens 'lots': give a number"):
        PretrainConfig(steps=1, batch_tokens="lots")
    auto = PretrainConfig(steps=10, batch_tokens="auto", batch_size=12, grad_accum=2)
    with pytest.raises(InvalidArgument, match="--batch-tokens auto with --batch-warmup"):
        micro_batch.check_auto_batch(auto.replace(batch_warmup_tokens=100), 1)
    with pytest.raises(InvalidArgument, match="--batch-tokens auto with --parallel fsdp"):
        micro_batch.check_auto_batch(auto.replace(parallel="fsdp"), 2)
    longer = [{"steps": 5}, {"steps": 5, "seq_len": 256}]
    with pytest.raises(InvalidArgument, match="a phase trains on blocks of 256 tokens"):
        micro_batch.check_auto_batch(auto.replace(phases=longer), 1)
    micro_batch.check_auto_batch(auto, 1)
    # micro-batches that keep the step and at least the given accumulation
    assert micro_batch.micro_batch_candidates(auto, 1) == [1, 2, 3, 4, 6]
    assert micro_batch.micro_batch_candidates(auto, 2) == [1, 2, 3]


class FakeGpu:
    """A device whose memory the test decides: each trial runs, its peak is faked below."""

    name = "GPU memory"

    def budget(self) -> int:
        return 10**12

    def peak(self, trial) -> int:
        trial()
        return 0


def test_a_measured_micro_batch_trains_as_its_grad_accum_given_by_hand(
        tmp_path, tokenizer_path, monkeypatch, capfd):
    real = micro_batch.largest_micro_batch

    def two_rows_fit(candidates, peak, budget, reserve):  # peak = 1,000 + 100 per row
        return real(candidates, lambda rows: peak(rows) + 1000 + 100 * rows,
                    1000 + 100 * 2 + reserve, reserve)

    monkeypatch.setattr(micro_batch, "gauge_for", lambda device: (FakeGpu(), None))
    monkeypatch.setattr(micro_batch, "largest_micro_batch", two_rows_fit)
    monkeypatch.setattr(run_module, "plots_installed", lambda: False)  # seconds of plotting
    estimated = []  # the shape-based memory estimate: not asked once the step is measured
    monkeypatch.setattr(run_module, "check_step_memory", lambda *a, **k: estimated.append(1))
    corpus = tmp_path / "corpus.txt"  # small: two runs read it
    corpus.write_text("".join(f"Return the value {i} of the attribute, or raise an error "
                              f"when the key {i % 7} is missing.\n" for i in range(300)))
    settings = {"steps": 3, "pppl_sentences": 0, "eval_blocks": 2, "corpus": str(corpus)}
    pretrain(tiny_config(tmp_path / "auto", tokenizer_path, batch_tokens="auto", **settings))
    assert "--batch-tokens auto: a micro-batch of 2 block(s) (64 tokens) per process, " \
           "--grad-accum 4" in capfd.readouterr().err
    state, _ = load_latest_state(tmp_path / "auto")
    assert state["micro_batch"] == {"rows": 2, "grad_accum": 4}
    assert state["config"]["batch_tokens"] == "auto" and not estimated
    # the trials left no trace (dropout's random state, gradients, the weights)
    pretrain(tiny_config(tmp_path / "by-hand", tokenizer_path, grad_accum=4, **settings))
    assert_same_weights(tmp_path / "auto", tmp_path / "by-hand")
    assert estimated


def test_a_resumed_run_keeps_its_measured_micro_batch(monkeypatch, capfd):
    def not_again(*args):
        raise AssertionError("a resumed run measured again")

    monkeypatch.setattr(micro_batch, "measure_micro_batch", not_again)
    config = PretrainConfig(steps=10, batch_size=8, batch_tokens="auto")
    runtime = build_runtime("cpu", "fp32", threads=1)
    saved = {"micro_batch": {"rows": 2, "grad_accum": 4}}
    resumed, measured = micro_batch.fit_micro_batch(config, runtime, None, None, saved)
    assert resumed.grad_accum == 4 and measured
    assert "the micro-batch measured when the run started, 2 block(s), --grad-accum 4" \
        in capfd.readouterr().err
    given = config.replace(batch_tokens=None)
    assert micro_batch.fit_micro_batch(given, runtime, None, None, saved) == (given, False)
