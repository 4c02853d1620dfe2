"""Pretraining: packing, schedules, a tiny end-to-end run, exact resume, caches, bad input."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from mlmkit.corpus.packing import BlockOrder, PackedBlocks
from mlmkit.corpus.shards import tokenize_corpus
from mlmkit.errors import InvalidArgument, MlmkitError
from mlmkit.pretraining import PretrainConfig, pretrain
from mlmkit.training.checkpoint import list_states, load_latest_state
from mlmkit.training.schedule import lr_factor


@pytest.fixture(scope="session")
def tokenizer_path(wordpiece_tokenizer, fixture_dir) -> str:
    path = fixture_dir / "tok-wordpiece"
    assert (path / "tokenizer.json").exists()
    return str(path)


def tiny_config(run_dir, tokenizer_path, **overrides) -> PretrainConfig:
    values = dict(model="tiny", tokenizer=tokenizer_path, dropout=0.1, seq_len=32, batch_size=8, steps=12,
                  lr=3e-3, warmup=0.1, eval_every=0, eval_blocks=8, pppl_sentences=4,
                  save_every=0, log_every=2, run_dir=str(run_dir), progress=False,
                  fill_mask_examples=0, threads=1, precision="fp32",
                  masking={"units": "whole_word", "rate": 0.3})
    values.update(overrides)
    return PretrainConfig(**values)


def weights(run_dir) -> dict[str, torch.Tensor]:
    return load_file(str(Path(run_dir) / "final" / "model.safetensors"))


def assert_same_weights(a, b):
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key


# ---- packing and ordering


class _Tok:
    cls_token_id, sep_token_id, pad_token_id = 1, 2, 0


@pytest.fixture()
def shards(wordpiece_tokenizer, tmp_path):
    docs = ["The quick brown fox jumps over the lazy dog.", "A short one.",
            "Return the value of the attribute, or raise an error when it is missing. " * 4]
    return tokenize_corpus(lambda: iter(docs), wordpiece_tokenizer, root=tmp_path,
                           show_progress=False)


def test_full_packing_keeps_every_token_in_order(shards, wordpiece_tokenizer):
    tok = wordpiece_tokenizer
    blocks = PackedBlocks(shards, 16, cls_id=tok.cls_token_id, sep_id=tok.sep_token_id,
                          pad_id=tok.pad_token_id, packing="full")
    batch = blocks[np.arange(len(blocks))]
    assert (batch.input_ids[:, 0] == tok.cls_token_id).all()
    body = batch.input_ids[:, 1:][batch.attention_mask[:, 1:].bool()]
    expected = []
    for i in range(shards.n_documents):
        expected += [*shards.document(i).tolist(), tok.sep_token_id]
    assert body.tolist() == expected  # nothing dropped, nothing reordered
    # document ids rise by one after each [SEP] within a block; padding is -1
    ids, docs = batch.input_ids, batch.document_ids
    assert (docs[batch.attention_mask == 0] == -1).all()
    seps = ids[:, :-1] == tok.sep_token_id
    step = docs[:, 1:] - docs[:, :-1]
    valid = batch.attention_mask[:, 1:].bool()
    assert ((step == 1) == (seps & valid)).all()
    # word starts: the first token and specials start words; not every token does
    assert batch.word_starts[:, 0].all() and not batch.word_starts[batch.attention_mask.bool()].all()


def test_document_packing_splits_long_documents(shards, wordpiece_tokenizer):
    tok = wordpiece_tokenizer
    blocks = PackedBlocks(shards, 16, cls_id=tok.cls_token_id, sep_id=tok.sep_token_id,
                          pad_id=tok.pad_token_id, packing="document")
    lengths = np.diff(shards.doc_offsets)
    assert len(blocks) == int(np.sum((lengths + 13) // 14))
    batch = blocks[np.arange(len(blocks))]
    rows = zip(batch.input_ids, batch.attention_mask, strict=True)
    inner = [row[1:int(m.sum()) - 1].tolist() for row, m in rows]
    assert sum(inner, []) == shards.tokens.tolist()
    assert all(row[int(m.sum()) - 1] == tok.sep_token_id
               for row, m in zip(batch.input_ids.tolist(), batch.attention_mask, strict=True))


def test_block_order_is_deterministic_and_resumable():
    a = BlockOrder(10, seed=3)
    first = [a.next_indices(4).tolist() for _ in range(3)]
    assert sorted(sum(first, [])[:10]) == list(range(10))  # one epoch visits every block once
    b = BlockOrder(10, seed=3)
    b.next_indices(4)
    state = b.state_dict()
    c = BlockOrder(10, seed=3)
    c.load_state_dict(state)
    assert [c.next_indices(4).tolist() for _ in range(2)] == first[1:]
    assert BlockOrder(10, seed=4).next_indices(4).tolist() != first[0]
    ranks = [BlockOrder(10, seed=3).next_indices(2, rank=r, world_size=2).tolist()
             for r in range(2)]
    assert sorted(ranks[0] + ranks[1]) == sorted(first[0])


def test_schedules():
    kw = dict(warmup=0.1)
    assert lr_factor(0.05, schedule="linear", **kw) == pytest.approx(0.5)
    assert lr_factor(0.1, schedule="cosine", **kw) == pytest.approx(1.0)
    assert lr_factor(0.55, schedule="cosine", **kw) == pytest.approx(0.5)
    assert lr_factor(1.0, schedule="linear", **kw) == pytest.approx(0.0)
    assert lr_factor(0.5, schedule="wsd", decay=0.2, **kw) == 1.0
    assert lr_factor(0.9, schedule="wsd", decay=0.2, **kw) == pytest.approx(0.5)
    assert lr_factor(0.9, schedule="constant", **kw) == 1.0


# ---- caches


def test_shard_cache_is_reused_and_keyed_by_tokenizer(wordpiece_tokenizer, bpe_tokenizer,
                                                      tmp_path, monkeypatch):
    import mlmkit.corpus.shards as shards_module

    docs = ["One document with some words.", "Another document, a little longer than that."]
    calls = []
    real = shards_module._write_shards
    monkeypatch.setattr(shards_module, "_write_shards",
                        lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    first = tokenize_corpus(lambda: iter(docs), wordpiece_tokenizer, root=tmp_path,
                            show_progress=False)
    again = tokenize_corpus(lambda: iter(docs), wordpiece_tokenizer, root=tmp_path,
                            show_progress=False)
    assert len(calls) == 1 and again.meta["reused"] and again.path == first.path
    other = tokenize_corpus(lambda: iter(docs), bpe_tokenizer, root=tmp_path,
                            show_progress=False)
    assert len(calls) == 2 and not other.meta["reused"] and other.path != first.path
    assert first.tokens.dtype == np.uint16
    assert np.array_equal(again.tokens, first.tokens)


def test_pieces_removed_by_a_concurrent_build_are_tokenized_again(wordpiece_tokenizer,
                                                                  tmp_path, monkeypatch):
    """Another build of the same corpus joins its shards and removes the shared pieces while
    this one is joining them: this one tokenizes the missing pieces again (or uses the other's
    shards), never fails."""
    import shutil

    import mlmkit.corpus.shards as shards_module

    docs = [f"Document number {i} with a few words." for i in range(40)]
    clean = tokenize_corpus(lambda: iter(docs), wordpiece_tokenizer, root=tmp_path / "a",
                            show_progress=False, piece_documents=8)
    real, calls = shards_module._write_shards, []

    def racing(pieces, *args, **kwargs):
        calls.append(len(pieces))
        if len(calls) == 1:  # the other build removes a piece before this one reads it
            shutil.rmtree(pieces[2])
        return real(pieces, *args, **kwargs)

    monkeypatch.setattr(shards_module, "_write_shards", racing)
    raced = tokenize_corpus(lambda: iter(docs), wordpiece_tokenizer, root=tmp_path / "b",
                            show_progress=False, piece_documents=8)
    assert calls == [5, 5] and not raced.meta["reused"]
    assert np.array_equal(raced.tokens, clean.tokens)


def test_staging_dir_survives_its_parent_being_removed(tmp_path, monkeypatch):
    from pathlib import Path

    from mlmkit.core.staging import staging_dir

    real, removed = Path.mkdir, []

    def mkdir(self, *args, **kwargs):
        if self.name.endswith(".staging") and not removed:  # a concurrent rmdir wins
            removed.append(1)
            self.parent.rmdir()
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    path = staging_dir(tmp_path / "shared" / "piece")
    assert removed and path.is_dir() and path.parent == tmp_path / "shared"


# ---- end to end


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory, tokenizer_path, drawing_plots):
    """An uninterrupted 12-step run (with dropout) that resumed runs must reproduce; it
    draws its plots, which the next test checks."""
    run_dir = tmp_path_factory.mktemp("reference")
    with drawing_plots():
        return pretrain(tiny_config(run_dir, tokenizer_path, eval_every=6))


@pytest.mark.plots
def test_tiny_run_learns_and_saves_a_plain_hf_model(reference_run, tokenizer_path):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    result = reference_run
    train = [r for r in result.history if r["split"] == "train"]
    assert len(train) == 6
    assert np.mean([r["loss"] for r in train[-2:]]) < np.mean([r["loss"] for r in train[:2]])
    evals = [r for r in result.history if r["split"] == "eval"]
    assert [r["step"] for r in evals] == [6, 12]
    assert {"loss", "accuracy", "top5_accuracy", "pppl"} <= set(evals[-1])
    assert evals[-1]["top5_accuracy"] >= evals[-1]["accuracy"]
    model = AutoModelForMaskedLM.from_pretrained(result.final_dir)
    tokenizer = AutoTokenizer.from_pretrained(result.final_dir)
    batch = tokenizer([f"Return the {tokenizer.mask_token} of the list."], return_tensors="pt")
    assert model(**batch).logits.shape[-1] == len(tokenizer)
    run = result.run_dir
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["steps"] == 12
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == len(result.history)
    assert {p.name for p in (run / "plots").glob("*.png")} == {"loss.png", "accuracy.png",
                                                               "lr.png"}
    assert list((run / "tensorboard").glob("events.*"))
    from mlmkit.pretraining.config import load_config

    # config.yaml holds the run's config, field for field (and loads back with --config),
    # the vocabulary being the given tokenizer's
    assert load_config(run / "config.yaml") == tiny_config(run, tokenizer_path, eval_every=6,
                                                           vocab_size=len(tokenizer))
    from mlmkit.models import LoadedMLM
    from mlmkit.pretraining.examples import FillExample, fill_mask_examples

    examples = fill_mask_examples(LoadedMLM(model, tokenizer),
                                  [FillExample("Return the {mask} of the list.", "length"),
                                   FillExample("Open the {mask}.", "file")], top_k=3)
    assert len(examples) == 2 and all(len(c) == 3 and tokenizer.mask_token in t
                                      for t, _, c in examples)


def test_resume_after_halt_is_bit_identical(reference_run, tmp_path, tokenizer_path):
    config = tiny_config(tmp_path / "run", tokenizer_path, eval_every=6, halt_after=5)
    halted = pretrain(config)
    assert halted.interrupted and halted.final_dir is None and halted.summary["steps"] == 5
    resumed = pretrain(resume=tmp_path / "run", overrides={"halt_after": None})
    assert resumed.summary["status"] == "finished"
    assert_same_weights(resumed.run_dir, reference_run.run_dir)
    strip = [{k: v for k, v in r.items() if k not in ("tokens_per_s", "elapsed", "data_wait")}
             for r in resumed.history]
    expected = [{k: v for k, v in r.items() if k not in ("tokens_per_s", "elapsed", "data_wait")}
                for r in reference_run.history]
    assert strip == expected  # the logs of a resumed run read as if it never stopped


@pytest.mark.slow
def test_sigterm_to_a_real_process_then_resume(reference_run, tmp_path, tokenizer_path,
                                                mlmkit_command):
    run_dir = tmp_path / "run"
    config = tiny_config(run_dir, tokenizer_path, eval_every=6)
    config_file = tmp_path / "config.yaml"
    config_file.write_text(config.to_yaml())
    process = subprocess.Popen([*mlmkit_command, "pretrain", "--config",
                                str(config_file), "--log-every", "1"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    metrics = run_dir / "metrics.jsonl"
    deadline = time.time() + 600  # generous: start-up is slow on a loaded machine
    started = False
    while time.time() < deadline and process.poll() is None and not started:
        started = metrics.exists() and metrics.read_text().count("\n") >= 2
        time.sleep(0.05)
    assert started and process.poll() is None, process.stdout.read().decode()
    process.send_signal(signal.SIGTERM)
    output = process.communicate(timeout=60)[0].decode()
    assert process.returncode == 128 + signal.SIGTERM, output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted" and 0 < summary["steps"] < 12, output
    resumed = pretrain(resume=run_dir)
    assert resumed.summary["steps"] == 12
    assert_same_weights(run_dir, reference_run.run_dir)


def test_corrupt_latest_checkpoint_falls_back_to_previous(tmp_path, tokenizer_path, caplog):
    run_dir = tmp_path / "run"
    pretrain(tiny_config(run_dir, tokenizer_path, steps=6, save_every=3, halt_after=6,
                         pppl_sentences=0))
    states = list_states(run_dir)
    assert [int(p.name[6:14]) for p in states] == [6, 3]
    data = states[0].read_bytes()
    states[0].write_bytes(data[: len(data) // 2])  # a truncated copy
    with caplog.at_level(logging.WARNING):
        state, path = load_latest_state(run_dir)
    assert path == states[1] and state["counters"]["step"] == 3
    assert "falling back" in caplog.text
    resumed = pretrain(resume=run_dir, overrides={"halt_after": None})
    assert resumed.summary["steps"] == 6 and resumed.final_dir is not None


# ---- bad input


def test_unknown_preset_and_masking_policy(tmp_path, tokenizer_path):
    with pytest.raises(MlmkitError, match="unknown model preset 'giant'"):
        tiny_config(tmp_path / "a", tokenizer_path, model="giant")
    with pytest.raises(InvalidArgument, match="unknown masking policy 'nonexistent'"):
        pretrain(tiny_config(tmp_path / "b", tokenizer_path, masking="nonexistent"))
    assert not (tmp_path / "b").exists()  # refused before anything was written
    with pytest.raises(InvalidArgument, match="objective.*'nope'.*electra") as raised:
        pretrain(tiny_config(tmp_path / "c", tokenizer_path, objective="nope"))
    assert "mlm" in str(raised.value) and not (tmp_path / "c").exists()


def test_bad_config_is_refused_before_the_run_directory_is_written(tmp_path, tokenizer_path):
    """Checks that need the run (not only the config) come before any file is written."""
    from mlmkit.pretraining.run import build_run

    cases = [  # (overrides, what the message must say)
        (dict(masking={"units": "whole_word", "rate": 0.3, "colour": 1}), "colour"),
        (dict(masking={"units": {"name": "span", "q": 0.2}}), "no parameter.*'q'"),
        (dict(steps=None, time="30s", warmup=5), "--warmup given in steps"),
    ]
    for i, (overrides, message) in enumerate(cases):
        run_dir = tmp_path / f"r{i}"
        with pytest.raises(MlmkitError, match=message):
            build_run(tiny_config(run_dir, tokenizer_path, **overrides))
        assert not run_dir.exists(), overrides


def test_empty_corpus(tmp_path, wordpiece_tokenizer, tokenizer_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    with pytest.raises(MlmkitError, match="empty"):
        pretrain(tiny_config(tmp_path / "run", tokenizer_path, corpus=str(empty)))
    assert not (tmp_path / "run").exists()
    with pytest.raises(MlmkitError, match="empty"):
        tokenize_corpus(lambda: iter([]), wordpiece_tokenizer, root=tmp_path)
    with pytest.raises(MlmkitError, match="empty"):
        tokenize_corpus(lambda: iter(["   ", "\n"]), wordpiece_tokenizer, root=tmp_path,
                        show_progress=False)


def test_resume_with_a_different_config_is_refused(reference_run, tmp_path):
    run_dir = reference_run.run_dir
    before = (run_dir / "config.yaml").read_text()
    states = {p.name: p.stat().st_mtime_ns for p in list_states(run_dir)}
    with pytest.raises(MlmkitError, match="different config.*lr"):
        pretrain(resume=run_dir, overrides={"lr": 0.1})
    with pytest.raises(MlmkitError, match="already holds a run"):
        pretrain(PretrainConfig(**{**reference_run_config(run_dir)}))
    assert (run_dir / "config.yaml").read_text() == before
    assert {p.name: p.stat().st_mtime_ns for p in list_states(run_dir)} == states
    with pytest.raises(MlmkitError, match="no config.yaml"):
        pretrain(resume=tmp_path)


def reference_run_config(run_dir) -> dict:
    import yaml

    return yaml.safe_load((Path(run_dir) / "config.yaml").read_text())


def test_cli_help_documents_the_fields():
    from typer.testing import CliRunner

    from mlmkit.cli import app

    result = CliRunner().invoke(app, ["pretrain", "--help"], terminal_width=200)
    assert result.exit_code == 0
    for text in ("--seq-len", "--masking", "--time", "--resume", "--config", "--precision",
                 "--device", "--threads", "--seed", "--batch-tokens", "--step-tokens", "--json",
                 "mlmkit pretrain --resume", "mlmkit pretrain --model tiny --steps 20"):
        assert text in result.output
    assert result.output.lstrip().startswith("Usage") and "Pretrain a masked LM" in \
        result.output


def test_step_tokens_sets_the_step_and_batch_tokens_only_bounds_the_micro_batch(tmp_path,
                                                                               tokenizer_path):
    """--step-tokens is the step (the old meaning of pretrain's --batch-tokens); --batch-tokens
    is the memory bound of every command: gradient accumulation reaches the same step."""
    from mlmkit.errors import InvalidArgument
    from mlmkit.pretraining.config import PretrainConfig

    assert PretrainConfig(seq_len=32, step_tokens=256).batch_size == 8
    bounded = PretrainConfig(seq_len=32, batch_size=16, batch_tokens=128)
    assert (bounded.batch_size, bounded.grad_accum) == (16, 4)
    assert PretrainConfig(seq_len=32, batch_size=16, batch_tokens=4096).grad_accum == 1
    with pytest.raises(InvalidArgument, match="--step-tokens"):
        PretrainConfig(seq_len=32, step_tokens=100)
    with pytest.raises(InvalidArgument, match="both set the step"):
        PretrainConfig(seq_len=32, step_tokens=256, batch_size=4)
    with pytest.raises(InvalidArgument, match="less than one block"):
        PretrainConfig(seq_len=32, batch_tokens=16)
    # a run config of an older version holds the step as batch_size (its --batch-tokens was
    # turned into batch_size before the config was written): it loads as it was
    from mlmkit.pretraining.config import from_dict

    old = from_dict({"seq_len": 32, "batch_size": 8, "grad_accum": 2}, source="config.yaml")
    assert (old.batch_size, old.grad_accum, old.step_tokens, old.batch_tokens) == (8, 2, None,
                                                                                   None)
    base = dict(steps=2, dropout=0.0, pppl_sentences=0, eval_blocks=1, log_every=1)
    one = pretrain(tiny_config(tmp_path / "one", tokenizer_path, **base))
    one_config = reference_run_config(one.run_dir)
    seq_len, blocks = one_config["seq_len"], one_config["batch_size"]
    bound = pretrain(tiny_config(tmp_path / "bound", tokenizer_path,
                                 batch_tokens=seq_len * blocks // 4, **base))
    assert reference_run_config(bound.run_dir)["grad_accum"] == 4
    losses = [[r["loss"] for r in run.history if r["split"] == "train"] for run in (one, bound)]
    assert np.allclose(losses[0], losses[1], atol=1e-5, rtol=0)


def test_gradient_accumulation_matches_one_big_batch(tmp_path, tokenizer_path):
    base = dict(steps=3, dropout=0.0, pppl_sentences=0, eval_blocks=1, log_every=1)
    one = pretrain(tiny_config(tmp_path / "one", tokenizer_path, **base))
    four = pretrain(tiny_config(tmp_path / "four", tokenizer_path, grad_accum=4, **base))
    losses = [[r["loss"] for r in run.history if r["split"] == "train"] for run in (one, four)]
    assert np.allclose(losses[0], losses[1], atol=1e-5, rtol=0)
    wa, wb = weights(one.run_dir), weights(four.run_dir)
    assert all(torch.allclose(wa[k], wb[k], atol=1e-5) for k in wa)


def test_continued_pretraining_from_a_saved_model(saved_tiny_mlm, tmp_path):
    from transformers import AutoModelForMaskedLM

    init = saved_tiny_mlm("bert")
    result = pretrain(tiny_config(tmp_path / "run", None, init=str(init), steps=4,
                                  pppl_sentences=0, eval_blocks=8))
    before = AutoModelForMaskedLM.from_pretrained(init).state_dict()
    after = AutoModelForMaskedLM.from_pretrained(result.final_dir).state_dict()
    key = "bert.encoder.layer.0.attention.self.query.weight"
    assert before[key].shape == after[key].shape and not torch.equal(before[key], after[key])
    with pytest.raises(MlmkitError, match="longer than --init"):
        pretrain(tiny_config(tmp_path / "long", None, init=str(init), seq_len=4096))


def test_auto_precision_is_bf16_only_where_the_hardware_has_it(monkeypatch):
    from mlmkit.core.devices import resolve_precision as resolve
    from mlmkit.training.runtime import build_runtime

    def resolve_precision(precision, device):
        return resolve(precision, device, task="training")

    cpu = torch.device("cpu")
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx512_bf16": False,
                                                                "amx_bf16": False})
    assert resolve_precision("auto", cpu) == "fp32"
    assert resolve_precision("bf16", cpu) == "bf16"  # asked for: emulated, but honoured
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx512_bf16": True})
    assert resolve_precision("auto", cpu) == "bf16"
    assert build_runtime("cpu", "auto").precision == "bf16"
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"amx_bf16": True})
    assert resolve_precision("auto", cpu) == "bf16"
    assert resolve_precision("fp32", cpu) == "fp32"
    with pytest.raises(MlmkitError, match="precision 'fp16'.*--precision"):
        resolve_precision("fp16", cpu)
    with pytest.raises(MlmkitError, match="use auto, fp32 or bf16"):
        PretrainConfig(precision="fp16")


def test_bf16_run_learns_uses_eager_attention_and_resumes_exactly(tmp_path, tokenizer_path):
    from mlmkit.training.objectives.mlm import build_run_model
    from mlmkit.training.runtime import Runtime

    config = tiny_config(tmp_path / "whole", tokenizer_path, precision="bf16", dropout=0.0,
                         pppl_sentences=0)
    cpu = torch.device("cpu")
    tok = __import__("transformers").AutoTokenizer.from_pretrained(tokenizer_path)
    bf16_model = build_run_model(config, tok, Runtime(device=cpu, precision="bf16"))
    assert bf16_model.config._attn_implementation == "eager"  # the faster kernel on CPU
    fp32_model = build_run_model(config, tok, Runtime(device=cpu, precision="fp32"))
    assert fp32_model.config._attn_implementation == "sdpa"
    whole = pretrain(config)
    losses = [r["loss"] for r in whole.history if r["split"] == "train"]
    assert np.mean(losses[-2:]) < np.mean(losses[:2])
    halted = pretrain(config.replace(run_dir=str(tmp_path / "halted"), halt_after=5))
    assert halted.interrupted
    pretrain(resume=tmp_path / "halted", overrides={"halt_after": None})
    assert_same_weights(tmp_path / "halted", whole.run_dir)
    saved = json.loads((whole.final_dir / "config.json").read_text())
    assert "attn_implementation" not in saved  # the saved model loads with its default


def test_default_model_is_modernbert_mini_and_electra_mini_for_electra(tmp_path,
                                                                        tokenizer_path):
    from transformers import AutoModelForMaskedLM

    assert PretrainConfig().model == "modernbert-mini"
    assert PretrainConfig(objective="electra").model == "electra-mini"
    assert PretrainConfig(objective="diffusion").model == "modernbert-mini"
    assert PretrainConfig(model="small").model == "small"
    result = pretrain(tiny_config(tmp_path / "run", tokenizer_path, model="modernbert-tiny",
                                  steps=4, eval_blocks=4, pppl_sentences=2))
    assert reference_run_config(result.run_dir)["model"] == "modernbert-tiny"
    model = AutoModelForMaskedLM.from_pretrained(result.final_dir)
    assert model.config.model_type == "modernbert"


# ---- extending a run: the learning-rate schedule continues


def train_lrs(history) -> list[float]:
    return [r["lr"] for r in history if r["split"] == "train"]


def test_extending_a_run_continues_the_linear_schedule_without_a_jump(tmp_path,
                                                                      tokenizer_path):
    config = tiny_config(tmp_path / "run", tokenizer_path, steps=12, log_every=1,
                         halt_after=6, pppl_sentences=0, eval_blocks=1)
    pretrain(config)
    extended = pretrain(resume=tmp_path / "run", overrides={"halt_after": None, "steps": 24})
    lrs = train_lrs(extended.history)
    assert len(lrs) == 24 and extended.summary["steps"] == 24
    peak = config.lr
    # the step after the extension uses the rate the 12-step run would have used there
    assert lrs[6] == pytest.approx(peak * lr_factor(6 / 12, schedule="linear", warmup=0.1))
    decay = np.diff(lrs[2:])  # after the warmup: never up (no sawtooth), no jump down
    assert (decay <= 1e-12).all(), lrs
    assert abs(decay[4:]).max() <= abs(decay[:4]).max() + 1e-12  # the rest, stretched
    assert lrs[-1] < 0.1 * peak  # and it still decays to the end of the new budget


def test_extending_a_finished_run_continues_its_decay(tmp_path, tokenizer_path, capsys):
    base = dict(steps=6, log_every=1, pppl_sentences=0, eval_blocks=1)
    config = tiny_config(tmp_path / "zero", tokenizer_path, **base)
    pretrain(config)
    extended = pretrain(resume=tmp_path / "zero", overrides={"steps": 12})
    assert "schedule had finished" in capsys.readouterr().err  # says what it does
    lrs = train_lrs(extended.history)
    assert len(lrs) == 12 and lrs[6] == pytest.approx(lrs[5])  # from the last step's rate
    assert (np.diff(lrs[5:]) <= 1e-12).all() and lrs[-1] < lrs[5] / 4  # down, no sawtooth
    # with a floor (--min-lr) the decay ends at it
    config = tiny_config(tmp_path / "floor", tokenizer_path, min_lr=0.1, **base)
    pretrain(config)
    extended = pretrain(resume=tmp_path / "floor", overrides={"steps": 9})
    lrs = train_lrs(extended.history)
    assert len(lrs) == 9 and lrs[6] == pytest.approx(lrs[5])
    assert (np.diff(lrs[6:]) < 0).all() and lrs[-1] > 0.1 * config.lr


def test_extending_a_wsd_run_continues_its_stable_phase_then_decays_anew(tmp_path,
                                                                         tokenizer_path):
    config = tiny_config(tmp_path / "run", tokenizer_path, steps=10, schedule="wsd",
                         decay=0.2, warmup=0.1, log_every=1, pppl_sentences=0,
                         eval_blocks=1)
    first = pretrain(config)
    first_lrs = train_lrs(first.history)
    assert first_lrs[7] == config.lr and first_lrs[9] < config.lr  # steps 9-10 decayed
    stable = list_states(tmp_path / "run" / "wsd-stable")
    assert [int(p.name[6:14]) for p in stable] == [8]  # kept where the decay began
    extended = pretrain(resume=tmp_path / "run", overrides={"steps": 20})
    lrs = train_lrs(extended.history)
    assert len(lrs) == 20  # continued from step 8: the old decay is not in its history
    assert lrs[:8] == first_lrs[:8]
    assert lrs[8:17] == [config.lr] * 9  # the stable phase goes on, no jump
    assert (np.diff(lrs[16:]) < 0).all() and lrs[-1] < 0.5 * config.lr  # a new decay
    assert [int(p.name[6:14]) for p in list_states(tmp_path / "run" / "wsd-stable")] == [16]


def test_schedule_extension_keeps_the_current_rate():
    from mlmkit.training.schedule import Schedule

    for kind in ("linear", "cosine"):
        old = Schedule(kind, warmup=0.1, min_lr=0.05)
        new = old.extended(0.4, 0.2)  # the budget doubled at 40% of it
        assert new.factor(0.2) == pytest.approx(old.factor(0.4))
        assert new.factor(1.0) == pytest.approx(0.05)
        again = new.extended(0.6, 0.3)  # extended twice
        assert again.factor(0.3) == pytest.approx(new.factor(0.6))
    warm = Schedule("linear", warmup=0.5).extended(0.25, 0.125)  # during warmup
    assert warm.warmup == 0.25 and warm.factor(0.125) == pytest.approx(0.5)
    done = Schedule("cosine", warmup=0.1).extended(1.0, 0.5, last_progress=0.9)  # finished
    assert done.factor(0.5) == pytest.approx(Schedule("cosine", warmup=0.1).factor(0.9))


# ---- the command line


@pytest.mark.slow
def test_cli_writes_status_to_stderr_and_the_summary_to_stdout(tmp_path, tokenizer_path,
                                                               mlmkit_command):
    run_dir = tmp_path / "run"
    base = [*mlmkit_command, "pretrain", "--model", "tiny", "--tokenizer",
            tokenizer_path, "--seq-len", "32", "--steps", "2", "--eval-blocks", "2",
            "--pppl-sentences", "0", "--fill-mask-examples", "0", "--threads", "1",
            "--precision", "fp32", "--seed", "3"]
    command = [*base, "--step-tokens", "256", "--run-dir", str(run_dir), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)  # standard output holds the result only
    assert summary["status"] == "finished" and summary["steps"] == 2
    assert "data:" in done.stderr and "model saved to" in done.stderr
    assert "\x1b[" not in done.stderr  # no colours or cursor codes into a pipe
    saved = reference_run_config(run_dir)
    assert saved["batch_size"] == 8 and saved["seed"] == 3 and saved["threads"] == 1
    bad = subprocess.run([*base, "--step-tokens", "100", "--run-dir", str(tmp_path / "x")],
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode == 1 and bad.stderr.startswith("error: ")
    assert "--step-tokens" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "x").exists()


def test_the_default_budget_is_capped_in_time_where_training_runs_fp32(monkeypatch):
    from mlmkit.pretraining.budget import default_budget

    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx512_bf16": False})
    assert default_budget("cpu") == {"steps": 1000, "time": "10m"}
    assert default_budget("cpu", "bf16") == {"steps": 1000}  # asked for: no cap
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"amx_bf16": True})
    assert default_budget("cpu") == {"steps": 1000}
    assert default_budget("cpu", "fp32") == {"steps": 1000, "time": "10m"}


def test_training_threads_leave_the_cores_other_processes_keep_busy(monkeypatch):
    from mlmkit.training import runtime

    monkeypatch.delenv("MLMKIT_THREADS", raising=False)
    monkeypatch.setattr(runtime, "available_cores", lambda: 4)
    monkeypatch.setattr(runtime.os, "getloadavg", lambda: (0.2, 0.0, 0.0))
    assert runtime.training_threads() == 4
    monkeypatch.setattr(runtime.os, "getloadavg", lambda: (2.6, 0.0, 0.0))
    assert runtime.training_threads() == 1
    monkeypatch.setattr(runtime.os, "getloadavg", lambda: (9.0, 0.0, 0.0))
    assert runtime.training_threads() == 1  # at least one
    assert runtime.training_threads(3) == 3  # --threads wins
    monkeypatch.setenv("MLMKIT_THREADS", "2")
    assert runtime.training_threads() == 2


def test_resume_with_a_budget_the_run_has_passed_is_refused(tmp_path, tokenizer_path):
    """`--resume RUN --steps N` with N below the steps done finished the run at once and
    saved final/ silently (acceptance check H1); a warning then left the smaller budget in
    the state, so a later extension took the schedule as finished (review): it is refused,
    and the run is left as it was."""
    config = tiny_config(tmp_path / "run", tokenizer_path, steps=12, halt_after=6,
                         pppl_sentences=0, eval_blocks=1)
    pretrain(config)
    before = sorted(p.name for p in (tmp_path / "run").rglob("*"))
    with pytest.raises(MlmkitError, match=r"the run is at step 6, which the new budget "
                       r"\(4 steps\) has already reached, so there is nothing to train"):
        pretrain(resume=tmp_path / "run", overrides={"halt_after": None, "steps": 4})
    assert sorted(p.name for p in (tmp_path / "run").rglob("*")) == before
    result = pretrain(resume=tmp_path / "run", overrides={"halt_after": None})
    assert result.summary["steps"] == 12


def test_init_from_a_checkpoint_without_an_mlm_head_with_allow_untrained_head(
        saved_tiny_mlm, tmp_path):
    """The --init error told to pass --allow-untrained-head, which pretrain did not have
    (acceptance check H1): the field and flag exist now and the head is trained."""
    import shutil

    from safetensors.torch import save_file

    headless = tmp_path / "headless"
    shutil.copytree(saved_tiny_mlm("bert"), headless)
    tensors = load_file(str(headless / "model.safetensors"))
    save_file({k: v for k, v in tensors.items() if not k.startswith("cls.")},
              str(headless / "model.safetensors"), metadata={"format": "pt"})
    config = dict(init=str(headless), steps=2, pppl_sentences=0, eval_blocks=8)
    with pytest.raises(MlmkitError, match="no trained MLM head.*--allow-untrained-head"):
        pretrain(tiny_config(tmp_path / "refused", None, **config))
    assert not (tmp_path / "refused").exists()
    result = pretrain(tiny_config(tmp_path / "run", None, allow_untrained_head=True, **config))
    assert result.summary["status"] == "finished" and result.final_dir is not None
    from typer.testing import CliRunner

    from mlmkit.cli import app

    flag = CliRunner().invoke(app, ["pretrain", "--allow-untrained-head", "--steps", "0"])
    assert flag.exit_code == 1 and "steps=0" in flag.stderr  # the flag parsed, not usage 2


def test_tokenizer_file_or_missing_path_is_named(tmp_path, tokenizer_path):
    """--tokenizer DIR/tokenizer.json or a missing path said 'Repo id must be in the form
    ...' (transformers' hub-name check) (acceptance check H1)."""
    from mlmkit.pretraining.run import build_run

    with pytest.raises(MlmkitError, match="is a file: pass the folder that holds it"):
        build_run(tiny_config(tmp_path / "a", str(Path(tokenizer_path) / "tokenizer.json")))
    with pytest.raises(MlmkitError, match="'/no/such/tok' does not exist"):
        build_run(tiny_config(tmp_path / "b", "/no/such/tok"))
    bare = tmp_path / "model-without-tokenizer"
    bare.mkdir()
    (bare / "config.json").write_text('{"model_type": "bert"}')  # transformers would build an
    with pytest.raises(MlmkitError, match="holds no tokenizer files"):  # empty tokenizer
        build_run(tiny_config(tmp_path / "c", str(bare)))
    assert not any((tmp_path / n).exists() for n in ("a", "b", "c"))


def test_resume_in_another_precision_says_the_losses_change(tmp_path, tokenizer_path, capsys):
    """A runtime field, so allowed; but the continuation is no longer the uninterrupted
    run's (acceptance check H1: nothing said so). The state keeps the precision its steps
    ran in ("auto" resolved where they ran), which is what the resumed run compares."""
    from mlmkit.core.devices import resolve_device, resolve_precision

    config = tiny_config(tmp_path / "run", tokenizer_path, steps=8, halt_after=2,
                         pppl_sentences=0, eval_blocks=1, precision="fp32")
    pretrain(config)
    capsys.readouterr()
    pretrain(resume=tmp_path / "run", overrides={"halt_after": 4, "precision": "bf16"})
    assert "the run trained in fp32 and continues in bf16 (--precision bf16 on cpu): " \
        "allowed, but its losses from here are not those of a run that was never " \
        "stopped" in capsys.readouterr().err
    auto = resolve_precision("auto", resolve_device("cpu"), "training")
    pretrain(resume=tmp_path / "run", overrides={"halt_after": 6, "precision": "auto"})
    said = "the run trained in bf16 and continues in fp32" in capsys.readouterr().err
    assert said == (auto == "fp32")  # bf16 where this CPU multiplies bf16 natively
    pretrain(resume=tmp_path / "run", overrides={"halt_after": None, "precision": "auto"})
    assert "continues in" not in capsys.readouterr().err  # the same precision: nothing


def test_a_run_leaves_the_process_tf32_flags_as_it_found_them(tmp_path, tokenizer_path,
                                                              monkeypatch):
    """A run on a GPU allows TF32 matrix products; they stayed on after it, so a score
    computed later in the same process (a notebook: train, then score) moved by ~1e-3.
    The run turns them on here (as build_runtime does on a GPU) and pretrain restores them."""
    import mlmkit.pretraining.loop as loop

    real_train = loop.train

    def train_on_gpu_flags(*args, **kwargs):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        return real_train(*args, **kwargs)

    monkeypatch.setattr(loop, "train", train_on_gpu_flags)
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        pretrain(tiny_config(tmp_path / "run", tokenizer_path, steps=1, pppl_sentences=0,
                             eval_blocks=1))
        assert not torch.backends.cuda.matmul.allow_tf32
        assert not torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_a_sigterm_inside_a_step_drops_it_and_saves_the_last_finished_one(
        reference_run, tmp_path, tokenizer_path, monkeypatch):
    """The first SIGTERM does not wait for a long step to end: it stops inside it, the step
    is undone (data position, random state, metrics), the state of the step before is saved
    and the resumed run is the uninterrupted one, bit for bit."""
    from mlmkit.training.objectives.mlm import MLMObjective

    loss, calls = MLMObjective.loss, []

    def loss_then_signal(self, tensors, totals):
        calls.append(1)
        if len(calls) == 6:  # inside step 6 (one micro-batch per step)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.5)  # a long step: the handler interrupts it
            raise AssertionError("the signal did not stop the step")  # pragma: no cover
        return loss(self, tensors, totals)

    monkeypatch.setattr(MLMObjective, "loss", loss_then_signal)
    run_dir = tmp_path / "run"
    stopped = pretrain(tiny_config(run_dir, tokenizer_path, eval_every=6))
    assert stopped.interrupted and stopped.summary["stop_reason"] == "SIGTERM"
    assert stopped.summary["steps"] == 5  # the step under way was dropped
    monkeypatch.setattr(MLMObjective, "loss", loss)
    resumed = pretrain(resume=run_dir)
    assert resumed.summary["steps"] == 12
    assert_same_weights(run_dir, reference_run.run_dir)
