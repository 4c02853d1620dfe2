"""The GPU paths, on a CUDA device against the CPU: scores and fill-mask of every family,
sampling, training (bf16 autocast, ELECTRA, diffusion, exact resume), serving, and the fast
pretraining paths (masks drawn on the device = the CPU's, prefetched batches, unpadded
attention = each document alone, compiled layers = eager, exact resume).

Skipped where there is no GPU (CI has none); run them where there is one:
`python -m pytest tests/test_cuda.py` (benchmarks/gpu_check.sh does, on the device
machine). `MLMKIT_TEST_DEVICE=cpu python -m pytest tests/test_cuda.py` runs the same tests
on the CPU (a minute or two), so they are known to work before a GPU runs them; the few
that need a GPU's kernel (FlexAttention's backward pass) skip there. Each test builds its
own device copy of a tiny model, so the session's CPU fixtures stay on the CPU."""
from __future__ import annotations

import copy
import math
import os

import pytest
import torch

import mlmkit
from mlmkit.models import LoadedMLM
from tests.conftest import FAMILY_TOKENIZER
from tests.pretraining.test_pretrain import tiny_config, weights

# The device the tests run on: a CUDA GPU where there is one; MLMKIT_TEST_DEVICE=cpu runs
# the same tests (and their assertions) on the CPU, so the GPU paths are checked on any
# machine before a GPU runs them.
DEVICE = os.environ.get("MLMKIT_TEST_DEVICE") or ("cuda" if torch.cuda.is_available() else "")
pytestmark = pytest.mark.skipif(not DEVICE,
                                reason="needs a CUDA GPU (or MLMKIT_TEST_DEVICE=cpu)")

# A test of what exists on a GPU alone (its kernels, its memory gauge, CUDA graphs): skipped
# under MLMKIT_TEST_DEVICE=cpu too.
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="CUDA-only: the kernel or gauge exists on a GPU alone")

TEXTS = ["Return the list of items.", "Open the file for reading and writing.",
         "The value of the first argument is returned when the second one is missing."]


def on_gpu(mlm: LoadedMLM) -> LoadedMLM:
    return LoadedMLM(model=copy.deepcopy(mlm.model).to(DEVICE), tokenizer=mlm.tokenizer,
               name=mlm.name)


def device_config(run_dir, tokenizer, **overrides):
    """The tiny pretraining config on DEVICE, eager unless a test asks for compiled layers
    (a GPU run may compile by default: each compile costs seconds the test does not need)."""
    return tiny_config(run_dir, tokenizer, **{"device": DEVICE, "compile_layers": False,
                                              **overrides})


def close(a: float, b: float, relative: float) -> bool:
    return abs(a - b) <= relative * max(1.0, abs(a))


@pytest.mark.parametrize("family", sorted(FAMILY_TOKENIZER))
def test_scores_on_the_gpu_equal_the_cpu(tiny_mlm, family):
    cpu = tiny_mlm(family)
    gpu = on_gpu(cpu)
    expected = {}
    for metric in ("pll", "pll_word_l2r"):
        expected[metric] = mlmkit.score(cpu, TEXTS, metric=metric, per_token=True,
                                        device="cpu")
        got = mlmkit.score(gpu, TEXTS, metric=metric, per_token=True)
        assert gpu.device.type == DEVICE
        for a, b in zip(expected[metric], got, strict=True):
            assert close(a.pll, b.pll, 1e-4), (family, metric, a.pll, b.pll)
            assert [t.token for t in a.tokens] == [t.token for t in b.tokens]
    half = mlmkit.score(gpu, TEXTS, metric="pll", precision="bf16")
    for a, b in zip(expected["pll"], half, strict=True):  # bf16: near the float32 score
        assert math.isfinite(b.pll) and close(a.pll, b.pll, 0.05), (family, a.pll, b.pll)


@pytest.mark.parametrize("family", ["bert", "roberta", "modernbert"])
def test_fill_mask_on_the_gpu_equals_the_cpu(tiny_mlm, family):
    cpu = tiny_mlm(family)
    gpu = on_gpu(cpu)
    mask = cpu.tokenizer.mask_token
    texts = [f"Return the {mask} of items.", f"Open the {mask} for {mask} and writing."]
    for mode in ("independent", "joint"):
        expected = mlmkit.fill_mask(cpu, texts, top_k=5, mode=mode, device="cpu")
        got = mlmkit.fill_mask(gpu, texts, top_k=5, mode=mode)
        for a, b in zip(expected, got, strict=True):
            for x, y in zip(a.to_dict()["masks"], b.to_dict()["masks"], strict=True):
                scores = [c["score"] for c in x["candidates"]]
                assert [c["score"] for c in y["candidates"]] == pytest.approx(scores,
                                                                              abs=1e-4)


POLICIES = [dict(steps=8), dict(reveal="threshold", threshold=0.5),
            dict(reveal="factor", factor=2.0), dict(reveal="entropy-bound", entropy_bound=1.0),
            dict(steps=8, remask="cap", sigma=0.1), dict(reveal="threshold", threshold=0.7,
                                                         edit=0.9),
            dict(steps=8, block_length=4), dict(steps=8, block_length=4, block_cache=True),
            dict(steps=8, cfg_scale=1.0),
            dict(reveal="entropy-bound", entropy_bound=64.0, min_gap=3)]


@pytest.mark.parametrize("options", POLICIES, ids=lambda o: ",".join(map(str, o.values())))
def test_sampling_on_the_gpu_is_deterministic_and_counts_its_calls(tiny_mlm, options):
    gpu = on_gpu(tiny_mlm("modernbert"))
    first = mlmkit.generate(gpu, "Return the list", length=8, seed=3, **options)
    again = mlmkit.generate(gpu, "Return the list", length=8, seed=3, **options)
    assert first.to_dict()["text"] == again.to_dict()["text"]
    assert gpu.tokenizer.mask_token not in first.text
    cost = first.to_dict()["cost"]
    assert cost["nfe"] >= 1 and cost["tokens_per_call"] == pytest.approx(8 / cost["nfe"],
                                                                          rel=1e-6)
    filled = mlmkit.infill(gpu, "Return the [MASK:3] of the [MASK] items.", seed=3, **{
        k: v for k, v in options.items() if k not in ("cfg_scale", "block_length",
                                                      "block_cache", "steps")})
    assert gpu.tokenizer.mask_token not in filled.text


def test_training_on_the_gpu_runs_bf16_and_resumes_exactly(tmp_path, fixture_dir,
                                                           wordpiece_tokenizer):
    from mlmkit.pretraining import pretrain
    from mlmkit.training.runtime import build_runtime

    tokenizer = str(fixture_dir / "tok-wordpiece")
    if DEVICE == "cuda":
        assert build_runtime(DEVICE).precision == "bf16"  # auto: native bf16 on the GPU
    tf32 = torch.backends.cuda.matmul.allow_tf32
    for objective in ("mlm", "electra", "diffusion"):
        model = {"electra": "electra-tiny"}.get(objective, "tiny")
        result = pretrain(device_config(tmp_path / objective, tokenizer,
                                        precision="auto", objective=objective, model=model,
                                        masking="default", steps=6, pppl_sentences=2))
        assert result.summary["status"] == "finished", objective
        losses = [r["loss"] for r in result.history if r.get("split") == "train"]
        assert losses and all(map(math.isfinite, losses)), (objective, losses)
    assert torch.backends.cuda.matmul.allow_tf32 == tf32  # the run's TF32 ended with it
    # exact resume in fp32: halted at 3 of 6 steps, then resumed, equals one straight run
    straight = pretrain(device_config(tmp_path / "straight", tokenizer, steps=6,
                                      pppl_sentences=0))
    pretrain(device_config(tmp_path / "halted", tokenizer, steps=6, halt_after=3,
                           pppl_sentences=0))
    resumed = pretrain(resume=tmp_path / "halted", overrides={"halt_after": None})
    a, b = weights(straight.run_dir), weights(resumed.run_dir)
    worst = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
    print(f"resume on the GPU: largest weight difference {worst:.2e}")
    assert worst <= 1e-5


def test_serving_on_the_gpu_equals_the_python_api(tiny_mlm):
    pytest.importorskip("fastapi", reason="the serve extra (pip install mlmkit[serve])")
    from fastapi.testclient import TestClient

    from mlmkit.serve import ServeConfig, create_app

    gpu = on_gpu(tiny_mlm("bert"))
    with TestClient(create_app({"bert": gpu}, ServeConfig(threads=1))) as client:
        got = client.post("/v1/score", json={"texts": TEXTS}).json()["results"]
        info = client.get("/v1/models").json()["models"][0]
        mask = gpu.tokenizer.mask_token
        fill = client.post("/v1/fill", json={"texts": [f"Return the {mask} of items."]})
    assert info["device"].startswith(DEVICE)
    for a, b in zip(mlmkit.score(gpu, TEXTS), got, strict=True):
        assert close(a.pll, b["pll"], 1e-5)
    assert fill.status_code == 200


@pytest.mark.parametrize("spec", ["bert", "whole_word", "span", "pmi", "diffusion", "upmlm",
                                  "film", "frequency", "tfidf", "informask", "loss"])
def test_counter_stream_masks_on_the_gpu_equal_the_cpu(spec, wordpiece_tokenizer,
                                                       corpus_sample):
    from mlmkit.masking import build_policy, compute_stats

    tok = wordpiece_tokenizer
    needs = spec in ("pmi", "frequency", "tfidf", "informask")
    stats = compute_stats(corpus_sample[:200], tok, min_count=3) if needs else None
    policy = build_policy(spec, tok, stats=stats)
    ids = [i for text in corpus_sample[:100] for i in tok(text, add_special_tokens=False)
           ["input_ids"]][:32 * 64]
    ids = torch.tensor(ids).view(32, 64)
    documents = torch.arange(64).div(20, rounding_mode="floor").expand_as(ids)
    rows = torch.arange(40, 72)
    cpu = policy(ids, step=5, seed=3, rows=rows, document_ids=documents)
    gpu = policy(ids.to(DEVICE), step=5, seed=3, rows=rows.to(DEVICE),
                 document_ids=documents.to(DEVICE))
    for field in ("input_ids", "labels", "mask", "rate"):
        assert torch.equal(getattr(cpu, field), getattr(gpu, field).cpu()), field


def test_counter_stream_run_masks_on_the_gpu_and_resumes_exactly(tmp_path, fixture_dir,
                                                                 wordpiece_tokenizer):
    from mlmkit.pretraining import pretrain

    tokenizer = str(fixture_dir / "tok-wordpiece")
    options = dict(steps=6, pppl_sentences=0, mask_stream="counter")
    straight = pretrain(device_config(tmp_path / "straight", tokenizer, **options))
    pretrain(device_config(tmp_path / "halted", tokenizer, halt_after=3, **options))
    resumed = pretrain(resume=tmp_path / "halted", overrides={"halt_after": None})
    a, b = weights(straight.run_dir), weights(resumed.run_dir)
    assert max(float((a[k].float() - b[k].float()).abs().max()) for k in a) <= 1e-5


@pytest.mark.parametrize("stream", ["row", "counter"])
def test_prefetched_batches_on_the_gpu_equal_the_step_built_ones(stream, tmp_path,
                                                                 fixture_dir,
                                                                 wordpiece_tokenizer):
    from mlmkit.corpus.packing import BlockOrder
    from mlmkit.pretraining.data import prepare_rows, rank_rows
    from mlmkit.pretraining.prefetch import BatchProducer
    from mlmkit.training.objectives.mlm import MLMObjective
    from mlmkit.training.runtime import build_runtime
    from tests.pretraining.test_mask_stream import _blocks

    runtime = build_runtime(DEVICE, "fp32")
    config = device_config(tmp_path, str(fixture_dir / "tok-wordpiece"))
    objective = MLMObjective(config, wordpiece_tokenizer, runtime)
    blocks = _blocks(wordpiece_tokenizer, tmp_path)
    producer = BatchProducer(objective, blocks, depth=2, batch_size=4, runtime=runtime,
                             seed=5, stream=stream)
    order, plain = BlockOrder(len(blocks), seed=1), BlockOrder(len(blocks), seed=1)
    try:
        for step in range(4):
            got, tokens, _ = producer.take(step, order.next_indices(4), order)
            assert all(t.device.type == DEVICE for t in got.tensors.values())
            want, _ = prepare_rows(objective, blocks, plain.next_indices(4),
                                   rank_rows(4, 0, 1), step, 5, stream=stream)
            for key, value in want.tensors.items():
                assert torch.equal(value.cpu(), got.tensors[key].cpu()), (step, key)
    finally:
        producer.close()


def test_a_prefetching_gpu_run_resumes_exactly(tmp_path, fixture_dir, wordpiece_tokenizer):
    from mlmkit.pretraining import pretrain

    tokenizer = str(fixture_dir / "tok-wordpiece")
    options = dict(steps=6, pppl_sentences=0, mask_stream="counter")
    straight = pretrain(device_config(tmp_path / "straight", tokenizer, **options))
    pretrain(device_config(tmp_path / "halted", tokenizer, halt_after=3, prefetch=2, **options))
    resumed = pretrain(resume=tmp_path / "halted", overrides={"halt_after": None})
    assert 0.0 <= resumed.summary["data_wait_share"] <= 1.0
    a, b = weights(straight.run_dir), weights(resumed.run_dir)
    assert max(float((a[k].float() - b[k].float()).abs().max()) for k in a) <= 1e-5


@pytest.mark.parametrize("kind, attention", [
    ("modernbert", "sdpa"), ("modernbert", "eager"), ("eurobert", "sdpa"),
    ("modernbert", "flex_attention"), ("eurobert", "flex_attention")])
def test_unpadded_attention_on_the_device_equals_each_document_alone(kind, attention):
    """Documents packed into one row (no padding, per-document attention) get, on the
    device, the hidden states each gets alone in a padded batch on the CPU."""
    from mlmkit.models.unpadded import unpadded_hidden
    from tests.models.test_unpadded import tiny_model

    if attention == "flex_attention" and DEVICE == "cpu":
        pytest.skip("FlexAttention compiles for half a minute on a CPU "
                    "(tests/models/test_unpadded.py runs it there, marked slow)")
    lengths = [7, 19, 4, 12]
    cpu = tiny_model(kind, "sdpa")
    device = copy.deepcopy(cpu).to(DEVICE)
    device.set_attn_implementation(attention)
    ids = torch.randint(4, 100, (1, sum(lengths)), generator=torch.Generator().manual_seed(2))
    documents = torch.cat([torch.full((n,), i + 1) for i, n in enumerate(lengths)])[None]
    # each document alone: one padded row per document, on the CPU
    padded = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    attention_mask = torch.zeros_like(padded)
    for row, piece in enumerate(ids[0].split(lengths)):
        padded[row, :len(piece)], attention_mask[row, :len(piece)] = piece, 1
    with torch.no_grad():
        packed = unpadded_hidden(device, ids.to(DEVICE), documents.to(DEVICE)).cpu()
        alone = cpu.model(input_ids=padded, attention_mask=attention_mask).last_hidden_state
    tolerance = 1e-5 if DEVICE == "cpu" else 2e-4  # GPU kernels sum in another order
    for row, piece in enumerate(packed[0].split(lengths)):
        torch.testing.assert_close(piece, alone[row, :len(piece)], rtol=tolerance,
                                   atol=tolerance)


def test_unpadded_training_through_flex_attention_equals_the_masked_kernel(
        tmp_path, tokenizer_factory, fixture_dir):
    from mlmkit.pretraining import pretrain

    if DEVICE == "cpu":
        pytest.skip("FlexAttention has no backward pass on a CPU")
    tokenizer_factory("bpe")
    options = dict(model="modernbert-tiny", unpadded=True, steps=4,
                   pppl_sentences=0, dropout=0.0, masking="default")
    tokenizer = str(fixture_dir / "tok-bpe")
    masked = pretrain(device_config(tmp_path / "masked", tokenizer, **options))
    flex = pretrain(device_config(tmp_path / "flex", tokenizer, flex_attention=True, **options))
    a, b = ([r["loss"] for r in run.history if r["split"] == "train"] for run in (masked, flex))
    assert len(a) == len(b) and all(close(x, y, 1e-3) for x, y in zip(a, b, strict=True))


def test_compiled_layers_on_the_gpu_train_as_the_eager_ones(tmp_path, fixture_dir,
                                                            wordpiece_tokenizer):
    from mlmkit.pretraining import pretrain

    tokenizer = str(fixture_dir / "tok-wordpiece")
    runs = [pretrain(device_config(tmp_path / str(flag), tokenizer, dropout=0.0,
                                   steps=4, pppl_sentences=0, compile_layers=flag,
                                   mask_stream="counter", prefetch=2))
            for flag in (False, True)]
    a, b = ([r["loss"] for r in run.history if r["split"] == "train"] for run in runs)
    assert all(close(x, y, 1e-3) for x, y in zip(a, b, strict=True))


# -- unpadded attention (attn)
UNPADDED_KINDS = ("modernbert", "eurobert", "bert", "roberta", "xlm-roberta", "electra")


@needs_cuda
@pytest.mark.parametrize("kind", UNPADDED_KINDS)
@pytest.mark.parametrize("kernel", ["varlen", "flex_attention"])
def test_unpadded_kernels_on_the_gpu_equal_the_document_mask(kind, kernel):
    """PyTorch's varlen FlashAttention kernel and FlexAttention's block mask on packed rows
    (with padding) against SDPA with the document mask, at bf16: loss and gradients."""
    from mlmkit.models.unpadded import unpadded_logits
    from mlmkit.models.varlen_attention import varlen_available
    from tests.models.test_unpadded import tiny_config, tiny_model, two_packed_rows

    if kernel == "varlen" and not (varlen_available()
                                   and torch.cuda.get_device_capability() >= (8, 0)):
        pytest.skip("this torch or GPU has no varlen FlashAttention kernel")
    ids, documents, read = (t.cuda() for t in two_packed_rows(tiny_config(kind).pad_token_id)[:3])
    results = []
    for attention in ("sdpa", kernel):
        model = tiny_model(kind, attention).cuda().train()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = unpadded_logits(model, ids, documents, read)
        loss = torch.nn.functional.cross_entropy(logits.float(), ids[read], reduction="sum")
        loss.backward()
        results.append((float(loss), torch.cat([p.grad.flatten() for p in model.parameters()
                                                if p.grad is not None])))
    (masked, masked_grad), (fast, fast_grad) = results
    assert close(masked, fast, 2e-2)
    assert float((masked_grad - fast_grad).norm()) <= 5e-2 * float(masked_grad.norm())


@needs_cuda
@pytest.mark.parametrize("model, tokenizer", [("bert-tiny", "wordpiece"),
                                              ("modernbert-tiny", "bpe")])
def test_unpadded_gpu_training_runs_the_varlen_kernel_as_flex_attention_does(
        tmp_path, tokenizer_factory, fixture_dir, model, tokenizer):
    """`pretrain --unpadded` at bf16 on a GPU picks the varlen kernel by itself; its losses
    follow those of the same run through FlexAttention."""
    from mlmkit.models.varlen_attention import varlen_available
    from mlmkit.pretraining import pretrain

    if not (varlen_available() and torch.cuda.get_device_capability() >= (8, 0)):
        pytest.skip("this torch or GPU has no varlen FlashAttention kernel")
    tokenizer_factory(tokenizer)
    options = dict(model=model, unpadded=True, device="cuda", precision="bf16", steps=4,
                   pppl_sentences=0, dropout=0.0, masking="default")
    path = str(fixture_dir / f"tok-{tokenizer}")
    varlen = pretrain(tiny_config(tmp_path / "varlen", path, **options))
    flex = pretrain(tiny_config(tmp_path / "flex", path, flex_attention=True, **options))
    assert "varlen FlashAttention" in varlen.summary["objective"]
    assert "FlexAttention" in flex.summary["objective"]
    a, b = ([r["loss"] for r in run.history if r["split"] == "train"] for run in (varlen, flex))
    assert len(a) == len(b) and all(close(x, y, 2e-2) for x, y in zip(a, b, strict=True))


# -- compiled, fused step (gpustep)


@needs_cuda
def test_fused_optimizers_on_the_gpu_step_as_their_references_on_the_cpu():
    from mlmkit.training.optimizer import build_optimizer
    from mlmkit.training.stable_adamw import StableAdamW

    for kind in ("adamw", "stableadamw"):
        cpu = torch.nn.Linear(32, 16)
        gpu = copy.deepcopy(cpu).cuda()
        fast = build_optimizer({"m": gpu}, lr=1e-2, weight_decay=0.1, betas=(0.9, 0.98),
                               eps=1e-6, device=torch.device("cuda"), kind=kind)
        assert kind != "adamw" or fast.defaults["fused"] is True  # the default on a GPU
        params = list(cpu.parameters())
        reference = (torch.optim.AdamW(params, lr=1e-2, betas=(0.9, 0.98), eps=1e-6,
                                       weight_decay=0.0, foreach=False)
                     if kind == "adamw" else StableAdamW(params, lr=1e-2, foreach=False))
        fast.param_groups[0]["weight_decay"] = 0.0  # the reference decays nothing either
        for step in range(5):
            for p, q in zip(cpu.parameters(), gpu.parameters(), strict=True):
                g = torch.randn(p.shape, generator=torch.Generator().manual_seed(step))
                p.grad, q.grad = g.clone(), g.cuda()
            fast.step()
            reference.step()
        for p, q in zip(cpu.parameters(), gpu.parameters(), strict=True):
            torch.testing.assert_close(q.cpu(), p, rtol=1e-5, atol=1e-6)


@needs_cuda
def test_the_gpu_gauge_measures_and_auto_batch_tokens_fits_the_step(
        tmp_path, fixture_dir, wordpiece_tokenizer, capfd):
    from mlmkit.pretraining.run import build_run
    from mlmkit.training.step_memory import CudaGauge

    gauge = CudaGauge(torch.device("cuda"))
    peak = gauge.peak(lambda: torch.ones(256 << 20, dtype=torch.uint8, device="cuda"))
    assert peak >= 256 << 20 and gauge.budget() > peak
    run = build_run(tiny_config(tmp_path / "auto", str(fixture_dir / "tok-wordpiece"),
                                device="cuda", batch_tokens="auto", pppl_sentences=0))
    assert run.config.grad_accum == 1  # a tiny model's whole step fits a GPU
    assert "--batch-tokens auto: a micro-batch of 8 block(s)" in capfd.readouterr().err
    assert run.state_dict()["micro_batch"] == {"rows": 8, "grad_accum": 1}


@needs_cuda
@pytest.mark.parametrize("options", [{"compile_layers": True, "cuda_graphs": True},
                                     {"compile": True, "cuda_graphs": True}],
                         ids=["layers", "whole-loss"])
def test_cuda_graph_steps_train_as_the_eager_ones(options, tmp_path, fixture_dir):
    from mlmkit.pretraining import pretrain

    tokenizer = str(fixture_dir / "tok-wordpiece")
    common = dict(device="cuda", dropout=0.0, steps=4, pppl_sentences=0, log_every=1,
                  mask_stream="counter")
    eager = pretrain(tiny_config(tmp_path / "eager", tokenizer, compile_layers=False,
                                 **common))
    graphs = pretrain(tiny_config(tmp_path / "graphs", tokenizer, **options, **common))
    a, b = ([r["loss"] for r in run.history if r["split"] == "train"]
            for run in (eager, graphs))
    assert len(a) == len(b) == 4 and all(close(x, y, 1e-3) for x, y in zip(a, b, strict=True))
