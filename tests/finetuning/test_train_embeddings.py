"""Embedding training: a run per loss, the sentence-transformers folder it saves, exact
resume after a halt or a signal, the bound method, the checks, and `mlmkit embed train`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

import mlmkit
from mlmkit.cli import app
from mlmkit.errors import InvalidArgument, InvalidData, RunError
from mlmkit.finetuning import embedding_run
from mlmkit.training.signals import StopOnSignal

RUNTIME = {"device": "cpu", "threads": 1, "progress": False}
WORDS = ["open", "the", "file", "read", "list", "sort", "items", "error", "return", "value",
         "a", "string", "number", "close", "socket", "write", "line", "name"]


def _sentence(rng) -> str:
    return " ".join(rng.choice(WORDS, size=int(rng.integers(3, 12))))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Pairs with hard negatives (JSONL), scored pairs (TSV) and single texts (plain)."""
    root = tmp_path_factory.mktemp("embed-data")
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(24):
        anchor = _sentence(rng)
        rows.append({"anchor": anchor, "positive": anchor + " " + str(rng.choice(WORDS)),
                     "negative": _sentence(rng)})
    (root / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    scored = ["sentence1\tsentence2\tscore"]
    for k in range(24):
        first = _sentence(rng)
        second = first if k % 3 == 0 else _sentence(rng)
        scored.append(f"{first}\t{second}\t{5.0 if k % 3 == 0 else float(k % 5)}")
    (root / "sts.tsv").write_text("\n".join(scored) + "\n")
    (root / "texts.txt").write_text("\n".join(_sentence(rng) for _ in range(20)) + "\n")
    return root


def _weights(result) -> dict:
    return {k: v.clone() for k, v in result.model.model.state_dict().items()}


@pytest.mark.parametrize("loss,train,options", [
    ("mnrl", "pairs.jsonl", {}),
    ("cosent", "sts.tsv", {}),
    ("simcse", "texts.txt", {"dropout": 0.1}),
    ("mnrl", "pairs.jsonl", {"matryoshka_dims": "128,32"}),
    ("tsdae", "texts.txt", {}),
])
def test_each_loss_trains_and_saves_a_sentence_transformers_folder(
        saved_tiny_mlm, data, tmp_path, loss, train, options):
    st = pytest.importorskip("sentence_transformers")
    before = mlmkit.load(saved_tiny_mlm("bert")).model.state_dict()
    result = mlmkit.train_embeddings(saved_tiny_mlm("bert"), data / train, loss=loss,
                                     batch_size=8, epochs=2, validation=data / "sts.tsv",
                                     run_dir=tmp_path / "run", pooling="cls", normalize=True,
                                     **options, **RUNTIME)
    assert result.status == "finished" and result.steps == 6 and result.examples == \
        (20 if loss in ("simcse", "tsdae") else 24)
    assert len(result.history) == 2 and set(result.metrics) == {"spearman", "pearson"}
    assert all(np.isfinite(r["train_loss"]) for r in result.history)
    assert result.best_epoch == 1 + int(np.argmax([r["spearman"] for r in result.history]))
    after = result.model.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # it trained
    texts = ["open the file", "sort a list of items"]
    reference = st.SentenceTransformer(result.model_dir, device="cpu").encode(texts)
    ours = mlmkit.load(result.model_dir).embed(texts)  # cls pooling and normalising, as saved
    assert np.abs(ours - reference).max() < 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["metrics"] == pytest.approx(result.metrics)
    # the saved folder is the best epoch, and so is the model in the result
    best = load_file(tmp_path / "run" / "best" / "model.safetensors")
    name = next(k for k in best if k.endswith("word_embeddings.weight"))
    assert torch.equal(best[name], after[name])


@pytest.mark.parametrize("loss,train", [("mnrl", "pairs.jsonl"), ("tsdae", "texts.txt"),
                                        ("splade", "pairs.jsonl")])
def test_a_halted_run_resumes_to_the_same_weights(saved_tiny_mlm, data, tmp_path, loss, train):
    options = {"loss": loss, "batch_size": 8, "epochs": 2, "dropout": 0.1, **RUNTIME}
    whole = mlmkit.train_embeddings(saved_tiny_mlm("bert"), data / train,
                                    run_dir=tmp_path / "whole", **options)
    halted = mlmkit.train_embeddings(saved_tiny_mlm("bert"), data / train,
                                     run_dir=tmp_path / "parts", halt_after=4, **options)
    assert halted.status == "interrupted" and halted.stop_reason == "halt_after"
    assert halted.steps == 4
    resumed = mlmkit.train_embeddings(saved_tiny_mlm("bert"), data / train,
                                      run_dir=tmp_path / "parts", resume=True, **options)
    assert resumed.status == "finished" and resumed.steps == whole.steps
    a, b = _weights(whole), _weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    if loss != "mnrl":
        return
    with pytest.raises(RunError, match="other settings"):
        mlmkit.train_embeddings(saved_tiny_mlm("bert"), data / "pairs.jsonl",
                                run_dir=tmp_path / "parts", resume=True,
                                **{**options, "lr": 1e-3})
    with pytest.raises(RunError, match="already holds"):
        mlmkit.train_embeddings(saved_tiny_mlm("bert"), data / "pairs.jsonl",
                                run_dir=tmp_path / "parts", **options)


class _SignalledAtOnce(StopOnSignal):
    """SIGTERM 'arrives' before the first step ends."""

    def __enter__(self):
        super().__enter__()
        self.requested = "SIGTERM"
        return self


def test_cached_mnrl_trains_as_mnrl_does(saved_tiny_mlm, data):
    """Without dropout the two compute the same gradients (up to float rounding), so the
    steps see the same losses (the weights are not compared entry by entry: AdamW turns
    the rounding noise of gradients that are zero in exact arithmetic, such as the
    attention keys' biases', into steps of the learning rate's size)."""
    options = {"batch_size": 24, "epochs": 2, "dropout": 0.0, **RUNTIME}  # a step an epoch
    runs = [mlmkit.train_embeddings(saved_tiny_mlm("bert"), data / "pairs.jsonl", loss=loss,
                                    **({"mini_batch_size": 5} if loss != "mnrl" else {}),
                                    **options) for loss in ("mnrl", "cached-mnrl")]
    first, second = ([r.history[epoch]["train_loss"] for r in runs] for epoch in (0, 1))
    assert abs(first[0] - first[1]) < 1e-5, first  # the same weights
    assert abs(second[0] - second[1]) < 1e-4, second  # after one step of each


def test_a_signal_saves_the_state_and_exits_143(saved_tiny_mlm, data, tmp_path, monkeypatch):
    monkeypatch.setattr(embedding_run, "StopOnSignal", _SignalledAtOnce)
    done = CliRunner().invoke(app, ["embed", "train", str(saved_tiny_mlm("bert")),
                                    str(data / "pairs.jsonl"), "--batch-size", "8",
                                    "--run-dir", str(tmp_path / "run"), "--threads", "1",
                                    "--device", "cpu"])
    assert done.exit_code == 143, done.output
    assert "--resume" in done.output
    monkeypatch.setattr(embedding_run, "StopOnSignal", StopOnSignal)
    done = CliRunner().invoke(app, ["embed", "train", str(saved_tiny_mlm("bert")),
                                    str(data / "pairs.jsonl"), "--batch-size", "8", "--resume",
                                    "--run-dir", str(tmp_path / "run"), "--threads", "1",
                                    "--device", "cpu", "--json"])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 3 and summary["status"] == "finished"
    assert (tmp_path / "run" / "best" / "modules.json").is_file()


def test_the_bound_method_is_the_function(saved_tiny_mlm, data):
    mlm = mlmkit.load(saved_tiny_mlm("bert"), device="cpu", threads=1)
    options = {"loss": "cosent", "batch_size": 8, "progress": False}
    by_method = mlm.train_embeddings(data / "sts.tsv", **options)
    by_function = mlmkit.train_embeddings(mlm, data / "sts.tsv", precision=mlm.precision,
                                          **options, threads=1)
    a, b = _weights(by_method), _weights(by_function)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not any(torch.equal(mlm.model.state_dict()[k], a[k]) for k in a
                   if k.endswith("word_embeddings.weight"))  # the caller's model is unchanged
    with pytest.raises(InvalidArgument, match="mlmkit.load"):
        mlm.train_embeddings(data / "sts.tsv", device="cpu")


def test_bad_settings_are_one_line_errors(saved_tiny_mlm, data, tmp_path):
    model = saved_tiny_mlm("bert")
    with pytest.raises(InvalidArgument, match="dropout"):  # the tiny model's dropout is 0
        mlmkit.train_embeddings(model, data / "texts.txt", loss="simcse", dropout=0.0,
                                **RUNTIME)
    with pytest.raises(InvalidArgument, match="1..128"):
        mlmkit.train_embeddings(model, data / "pairs.jsonl", matryoshka_dims="512,64",
                                **RUNTIME)
    with pytest.raises(InvalidArgument, match="whole numbers"):
        mlmkit.train_embeddings(model, data / "pairs.jsonl", matryoshka_dims="64,x",
                                **RUNTIME)
    with pytest.raises(InvalidData, match="score"):
        mlmkit.train_embeddings(model, data / "pairs.jsonl", loss="cosent", **RUNTIME)
    with pytest.raises(InvalidData, match="text-field"):
        mlmkit.train_embeddings(model, data / "sts.tsv", text_field="query,doc", **RUNTIME)
    with pytest.raises(InvalidData, match="plain text"):
        mlmkit.train_embeddings(model, data / "texts.txt", loss="mnrl", **RUNTIME)
    with pytest.raises(InvalidArgument, match="run_dir"):
        mlmkit.train_embeddings(model, data / "pairs.jsonl", resume=True, **RUNTIME)
    with pytest.raises(InvalidArgument, match="batch_size"):
        mlmkit.train_embeddings(model, data / "pairs.jsonl", batch_size=1, **RUNTIME)
    with pytest.raises(InvalidArgument, match="score_field"):
        mlmkit.train_embeddings(model, data / "pairs.jsonl", score_field="label", **RUNTIME)
    with pytest.raises(InvalidArgument, match="above batch_size"):
        mlmkit.train_embeddings(model, data / "pairs.jsonl", loss="cached-mnrl", batch_size=8,
                                mini_batch_size=16, **RUNTIME)
    with pytest.raises(InvalidArgument, match="cached-mnrl"):
        mlmkit.train_embeddings(model, data / "pairs.jsonl", mini_batch_size=4, **RUNTIME)
    with pytest.raises(InvalidArgument, match="tsdae"):
        mlmkit.train_embeddings(model, data / "pairs.jsonl", deletion_ratio=0.5, **RUNTIME)
    with pytest.raises(InvalidArgument, match="deletion_ratio"):
        mlmkit.train_embeddings(model, data / "texts.txt", loss="tsdae", deletion_ratio=1.0,
                                **RUNTIME)
    with pytest.raises(InvalidData, match="single texts"):  # tsdae given pairs
        mlmkit.train_embeddings(model, data / "pairs.jsonl", loss="tsdae", **RUNTIME)
    with pytest.raises(InvalidArgument, match="matryoshka"):
        mlmkit.train_embeddings(model, data / "texts.txt", loss="tsdae",
                                matryoshka_dims="64", **RUNTIME)


def test_the_command_line_reports_errors_in_one_line(saved_tiny_mlm, data):
    runner = CliRunner()
    done = runner.invoke(app, ["embed", "train", str(saved_tiny_mlm("bert")),
                               str(data / "texts.txt"), "--loss", "mnrl"])
    assert done.exit_code == 1 and done.output.strip().startswith("error:")
    assert len(done.output.strip().splitlines()) == 1
    for wrong in (["--loss", "cached-mnrl", "--batch-size", "8", "--mini-batch-size", "16"],
                  ["--loss", "tsdae"]):  # a mini-batch above the batch; tsdae given pairs
        done = runner.invoke(app, ["embed", "train", str(saved_tiny_mlm("bert")),
                                   str(data / "pairs.jsonl"), *wrong])
        assert done.exit_code == 1 and len(done.output.strip().splitlines()) == 1, done.output
        assert done.output.startswith("error:")
    done = runner.invoke(app, ["embed", "train", "-h"])
    assert done.exit_code == 0 and "mlmkit embed train ./tiny-bert" in done.output
    assert "--matryoshka-dims" in done.output and "--text-field" in done.output


def test_each_option_is_a_flag_with_its_help():
    import typer

    from mlmkit.cli.embed_train import embed_train_command
    from mlmkit.cli.options import SHARED, command
    from mlmkit.options import default_of, fields_of
    from mlmkit.options.embedding import EmbeddingTraining

    group = typer.Typer()
    command(group, "train", embed_train_command)
    command(group, "other", lambda: None)  # a group of two keeps "train" as a subcommand
    train = typer.main.get_command(group).commands["train"]
    options = {opt: param for param in train.params for opt in param.opts}
    for field in fields_of(EmbeddingTraining):
        if field.name in SHARED:
            continue
        flag = field.metadata.get("flag") or "--" + field.name.replace("_", "-")
        assert flag in options, f"mlmkit embed train lacks {flag}"
        assert options[flag].help == field.metadata["help"]
        assert options[flag].default == default_of(field)


def test_splade_trains_a_sparse_encoder_folder(saved_tiny_mlm, data, tmp_path):
    """The folder holds the MLM with its head: mlmkit's embed_sparse and sentence-transformers'
    SparseEncoder read the same vectors from it; each epoch reports the vectors' non-zeros."""
    st = pytest.importorskip("sentence_transformers.sparse_encoder")
    result = mlmkit.train_embeddings(saved_tiny_mlm("bert"), data / "pairs.jsonl",
                                     loss="splade", batch_size=8, epochs=2, lr=1e-3,
                                     train_limit=16,
                                     validation=data / "sts.tsv", run_dir=tmp_path / "run",
                                     query_regularizer=1e-3, **RUNTIME)
    assert result.status == "finished" and result.steps == 4 and len(result.history) == 2
    assert set(result.metrics) == {"spearman", "pearson", "active_dims"}
    for record in result.history:
        assert np.isfinite(record["train_loss"]) and record["train_active_dims"] > 0
        assert 0 < record["active_dims"] <= result.model.model.config.vocab_size
    texts = ["open the file", "sort a list of items"]
    ours = mlmkit.load(result.model_dir).embed_sparse(texts, top_k=10_000)
    theirs = st.SparseEncoder(result.model_dir, device="cpu").encode(texts,
                                                                     convert_to_tensor=True)
    theirs = theirs.to_dense() if theirs.is_sparse else theirs
    for row, vector in zip(theirs, ours, strict=True):
        assert sorted(row.nonzero().squeeze(1).tolist()) == sorted(vector.token_ids)
        assert torch.allclose(row[vector.token_ids], torch.tensor(vector.weights), atol=1e-5)
    with pytest.raises(mlmkit.errors.ModelError, match="embed_sparse"):
        mlmkit.load(result.model_dir).embed(texts)  # a sparse folder has no dense pooling


def test_splade_misuse_is_a_one_line_error_before_any_work(saved_tiny_mlm, tiny_mlm, data,
                                                           tmp_path):
    model = saved_tiny_mlm("bert")
    with pytest.raises(InvalidArgument, match="scored pairs"):
        mlmkit.train_embeddings(model, data / "sts.tsv", loss="splade", **RUNTIME)
    with pytest.raises(InvalidArgument, match="document_regularizer"):
        mlmkit.train_embeddings(model, data / "pairs.jsonl", loss="splade",
                                document_regularizer=-1.0, **RUNTIME)
    with pytest.raises(InvalidArgument, match="regularizer_warmup"):
        mlmkit.train_embeddings(model, data / "pairs.jsonl", loss="splade",
                                regularizer_warmup=1.5, **RUNTIME)
    with pytest.raises(InvalidArgument, match="--loss splade"):
        mlmkit.train_embeddings(model, data / "pairs.jsonl", query_regularizer=0.1, **RUNTIME)
    with pytest.raises(InvalidArgument, match="normalize"):
        mlmkit.train_embeddings(model, data / "pairs.jsonl", loss="splade", normalize=True,
                                **RUNTIME)
    headless = tmp_path / "encoder-only"  # a BertModel: the encoder without the MLM head
    tiny_mlm("bert").model.base_model.save_pretrained(headless)
    tiny_mlm("bert").tokenizer.save_pretrained(headless)
    with pytest.raises(mlmkit.errors.ModelError, match="no trained MLM head"):
        mlmkit.train_embeddings(headless, data / "pairs.jsonl", loss="splade",
                                run_dir=tmp_path / "run", **RUNTIME)
    assert not (tmp_path / "run").exists()
    done = CliRunner().invoke(app, ["embed", "train", str(model), str(data / "pairs.jsonl"),
                                    "--loss", "splade", "--query-regularizer", "-0.5"])
    assert done.exit_code == 1 and len(done.output.strip().splitlines()) == 1, done.output
    assert done.output.startswith("error:") and "query_regularizer" in done.output
