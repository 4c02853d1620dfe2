"""Fine-tuning (issue 15): metrics, data checks, head and prompt runs, few-shot, LoRA, resume."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

from mlmkit.errors import InvalidArgument, InvalidData, ModelError, RunError, UntrainedHead
from tests.finetuning.samples import write_sst_sample

RUNTIME = {"device": "cpu", "threads": 1, "progress": False}


# --- metrics -----------------------------------------------------------------------------

def test_metrics_match_hand_computed_values():
    from mlmkit.finetuning import metrics

    pred, gold = [1, 1, 0, 0, 1, 0], [1, 0, 0, 0, 1, 1]
    # tp 2, fp 1, fn 1, tn 2: F1 = 4/6; MCC = (2*2 - 1*1) / sqrt(3*3*3*3) = 1/3
    assert metrics.f1(pred, gold) == pytest.approx(2 / 3)
    assert metrics.matthews(pred, gold) == pytest.approx(1 / 3)
    assert metrics.accuracy(pred, gold) == pytest.approx(4 / 6)
    assert metrics.matthews([1, 1, 1], [0, 1, 1]) == 0.0  # a constant column
    x, y = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 5.0, 4.0]
    assert metrics.pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1])
    # ranks of y with a tie: 1, 2.5, 4, 2.5
    assert metrics.average_ranks(y).tolist() == [1.0, 2.5, 4.0, 2.5]
    assert metrics.spearman(x, y) == pytest.approx(np.corrcoef([1, 2, 3, 4],
                                                               [1, 2.5, 4, 2.5])[0, 1])


# --- data ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sst(shared_data, tmp_path_factory):
    """A small SST-2 sample: 96 training rows (balanced), 40 validation rows."""
    return write_sst_sample(shared_data, tmp_path_factory.mktemp("sst"), 48, 40)


@pytest.fixture(scope="module")
def words(tiny_mlm):
    """Two whole words the tiny tokenizer spells as one token each (a verbalizer)."""
    tok = tiny_mlm("bert").tokenizer
    found = [w for w in ("the", "and", "of", "to", "is", "in") if
             len(tok(" " + w, add_special_tokens=False)["input_ids"]) == 1]
    return {"negative": found[0], "positive": found[1]}


def test_bad_data_is_a_clear_error(tmp_path, sst):
    from mlmkit.finetuning.data import load_task_data
    from mlmkit.finetuning.tasks import get_task

    task = get_task("sst2")
    with pytest.raises(InvalidData, match=r"no column 'review'.*the columns are 'sentence', "
                       "'label'"):
        load_task_data(get_task("sst2", text_cols="review"), train=sst / "train.tsv")
    (tmp_path / "bad.tsv").write_text("sentence\tlabel\nfine film\t1\nbad film\tmaybe\n")
    with pytest.raises(InvalidData, match=r"bad.tsv' line 3: label 'maybe' is not one the task"):
        load_task_data(task, train=tmp_path / "bad.tsv")
    (tmp_path / "blank.tsv").write_text("sentence\tlabel\nfine film\t1\n \t0\n\t1\n")
    with pytest.warns(UserWarning, match=r"2 row\(s\) of the train split have an empty text "
                      r"column \(first: .*blank.tsv' line 3\)"):
        load_task_data(task, train=tmp_path / "blank.tsv", validation=sst / "validation.tsv")
    (tmp_path / "empty.tsv").write_text("sentence\tlabel\n")
    with pytest.raises(InvalidData, match="train split .* is empty"):
        load_task_data(task, train=tmp_path / "empty.tsv")
    (tmp_path / "sts.jsonl").write_text('{"a": "x", "b": "y", "score": "high"}\n')
    with pytest.raises(InvalidData, match="label 'high' of the regression task .* not a number"):
        load_task_data(get_task("mine", "a,b", "score", regression=True),
                       train=tmp_path / "sts.jsonl")
    with pytest.raises(InvalidArgument, match="not a known task"):
        get_task("nosuchtask")


def test_stsb_reads_a_score_column_unless_another_is_named(tmp_path):
    """GLUE's STS-B calls its label `label`; sentence-transformers' (and the shared data's)
    `score`: the task reads either, and --label-field names another."""
    from mlmkit.finetuning.data import load_task_data
    from mlmkit.finetuning.tasks import get_task

    path = tmp_path / "sts.tsv"
    path.write_text("sentence1\tsentence2\tscore\tgrade\na cat\ta dog\t1.5\t4\n"
                    "a car\ta car\t5.0\t2\n")
    data = load_task_data(get_task("stsb"), train=path, validation=path)
    assert data.train.labels.tolist() == [1.5, 5.0]
    named = load_task_data(get_task("stsb", label_col="grade"), train=path, validation=path)
    assert named.train.labels.tolist() == [4.0, 2.0]
    with pytest.raises(InvalidData, match="no column 'points'"):
        load_task_data(get_task("stsb", label_col="points"), train=path, validation=path)


def test_agnews_validation_is_carved_with_a_fixed_seed(shared_data):
    from mlmkit.finetuning.data import few_shot, load_task_data
    from mlmkit.finetuning.tasks import get_task

    path = shared_data / "agnews" / "train.tsv"
    a = load_task_data(get_task("agnews"), train=path)
    b = load_task_data(get_task("agnews"), train=path)
    assert len(a.validation) == round(0.1 * (len(a.train) + len(a.validation)))
    assert a.validation.texts == b.validation.texts
    assert not set(a.validation.texts) & set(a.train.texts[:2000])
    assert a.label_names == ["World", "Sports", "Business", "Sci/Tech"]
    shots = few_shot(a.train, 4, seed=1, n_labels=4)
    assert np.bincount(shots.labels).tolist() == [4, 4, 4, 4]
    with pytest.raises(InvalidArgument, match="more than the smallest class"):
        few_shot(a.train.subset(range(30)), 29, seed=0, n_labels=4)


# --- runs ----------------------------------------------------------------------------------

def test_head_run_keeps_the_best_epoch_and_counts_truncation(tiny_mlm, sst, tmp_path):
    from transformers import AutoModelForSequenceClassification

    import mlmkit

    result = mlmkit.finetune(tiny_mlm("bert"), "sst2", train=sst / "train.tsv",
                             validation=sst / "validation.tsv", epochs=2, max_length=12,
                             lr=1e-3, run_dir=tmp_path / "run", select="best", **RUNTIME)
    run = result.runs[0]
    assert [r["epoch"] for r in run.history] == [1, 2]
    scores = [r["accuracy"] for r in run.history]
    assert run.metrics["accuracy"] == max(scores)
    assert run.best_epoch == 1 + scores.index(max(scores))
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert written["truncated"]["train"] > 0 and written["truncated"]["train"] == \
        run.truncated["train"]
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "run" / "best").eval()
    assert model.config.id2label == {0: "negative", 1: "positive"}
    # the saved model is the best epoch's: it reproduces the reported accuracy
    from mlmkit.finetuning.data import load_task_data
    from mlmkit.finetuning.tasks import get_task

    data = load_task_data(get_task("sst2"), train=sst / "train.tsv",
                          validation=sst / "validation.tsv")
    tok = tiny_mlm("bert").tokenizer
    enc = tok([t[0] for t in data.validation.texts], truncation=True, max_length=12,
              padding=True, return_tensors="pt")
    with torch.no_grad():
        predicted = model(**enc).logits.argmax(-1).numpy()
    assert np.mean(predicted == data.validation.labels) == pytest.approx(run.metrics["accuracy"])
    # the predictions kept for eval compare are the best epoch's (reused, not recomputed)
    assert np.mean(run._predictions == predicted) == 1.0


def test_the_last_epoch_is_kept_and_a_test_split_leaves_train_whole(tiny_mlm, sst, tmp_path):
    import mlmkit

    common = dict(epochs=2, max_length=16, lr=1e-3, **RUNTIME)
    result = mlmkit.finetune(tiny_mlm("bert"), "sst2", train=sst / "train.tsv",
                             validation=sst / "validation.tsv", **common)
    run = result.runs[0]
    # every epoch's training loss; the validation split scores the last epoch only
    assert [r["epoch"] for r in run.history] == [1, 2] and run.best_epoch == 2
    assert "accuracy" not in run.history[0] and run.metrics == {
        "accuracy": run.history[1]["accuracy"]}
    # a test split scores the run: no validation split is carved, every row is trained on
    tested = mlmkit.finetune(tiny_mlm("bert"), "sst2", train=sst / "train.tsv",
                             test=sst / "validation.tsv", **common)
    run = tested.runs[0]
    assert run.examples == {"train": 96, "test": 40} and run.metrics == {}
    assert 0 <= run.test_metrics["accuracy"] <= 1
    assert "test accuracy" in tested.summary() and run.steps == 2 * 12  # 96 rows, batch 8
    # nothing else to score: 10% is carved, as before
    carved = mlmkit.finetune(tiny_mlm("bert"), "sst2", train=sst / "train.tsv", **common)
    assert carved.runs[0].examples == {"train": 86, "validation": 10}
    with pytest.raises(InvalidArgument, match="select"):
        mlmkit.finetune(tiny_mlm("bert"), "sst2", train=sst / "train.tsv", select="worst",
                        **common)


def test_pairs_carry_token_type_ids_to_models_that_read_them(tiny_mlm):
    from mlmkit.finetuning.encode import collate, encode_pairs

    tok = copy.deepcopy(tiny_mlm("bert").tokenizer)  # as BERT's on the hub: segments
    tok.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    labels = np.array([0, 1])
    enc = encode_pairs(tok, [("one two", "three"), ("four", "five six")], labels, 32,
                       segments=True)
    batch = collate(enc, np.array([0, 1]), tok.pad_token_id, "cpu")
    first = batch["input_ids"][0].tolist()
    seps = [i for i, t in enumerate(first) if t == tok.sep_token_id]
    assert batch["token_type_ids"][0].tolist()[:seps[0] + 1] == [0] * (seps[0] + 1)
    assert set(batch["token_type_ids"][0].tolist()[seps[0] + 1:seps[1] + 1]) == {1}
    single = encode_pairs(tok, [("one two",)], labels[:1], 32, segments=True)
    assert single.type_ids is None
    assert encode_pairs(tok, [("a", "b")], labels[:1], 32).type_ids is None


def test_kill_and_resume_is_exact(tiny_mlm, sst, tmp_path):
    import mlmkit

    common = dict(train=sst / "train.tsv", validation=sst / "validation.tsv", epochs=2,
                  lr=1e-3, max_length=32, **RUNTIME)
    straight = mlmkit.finetune(tiny_mlm("bert"), "sst2", run_dir=tmp_path / "a", **common)
    halted = mlmkit.finetune(tiny_mlm("bert"), "sst2", run_dir=tmp_path / "b", halt_after=9,
                             **common)
    assert halted.runs[0].status == "interrupted" and halted.runs[0].steps == 9
    with pytest.raises(RunError, match="already holds a run"):
        mlmkit.finetune(tiny_mlm("bert"), "sst2", run_dir=tmp_path / "b", **common)
    at_the_end = mlmkit.finetune(tiny_mlm("bert"), "sst2", run_dir=tmp_path / "c",
                                 halt_after=24, **common)  # the last step: it finishes
    assert at_the_end.runs[0].status == "finished" and at_the_end.runs[0].steps == 24
    resumed = mlmkit.finetune(tiny_mlm("bert"), "sst2", run_dir=tmp_path / "b", resume=True,
                              **common)
    a, b = straight.runs[0], resumed.runs[0]
    assert b.steps == a.steps == 24
    assert [r["train_loss"] for r in b.history] == [r["train_loss"] for r in a.history]
    assert b.metrics == a.metrics
    for (name, x), (_, y) in zip(a._model.state_dict().items(), b._model.state_dict().items(),
                                 strict=True):
        assert torch.equal(x, y), name


def test_prompt_few_shot_over_seeds_and_errors(tiny_mlm, sst, words):
    import mlmkit

    result = mlmkit.finetune(tiny_mlm("bert"), "sst2", method="prompt", shots=4, seeds=2,
                             epochs=2, verbalizer=words, train=sst / "train.tsv",
                             validation=sst / "validation.tsv", **RUNTIME)
    assert [r.seed for r in result.runs] == [0, 1] == result.seeds
    accuracies = [r.metrics["accuracy"] for r in result.runs]
    assert result.metrics["accuracy"] == pytest.approx(np.mean(accuracies))
    assert result.std["accuracy"] == pytest.approx(np.std(accuracies, ddof=1))
    assert all(r.examples["train"] == 8 for r in result.runs)
    with pytest.raises(InvalidArgument, match="more than the smallest class"):
        mlmkit.finetune(tiny_mlm("bert"), "sst2", method="prompt", shots=49, verbalizer=words,
                        train=sst / "train.tsv", validation=sst / "validation.tsv", **RUNTIME)
    with pytest.raises(InvalidArgument, match="regression task needs --method head"):
        mlmkit.finetune(tiny_mlm("bert"), "stsb", method="prompt", train=sst / "train.tsv",
                        **RUNTIME)
    from transformers import BertModel

    encoder = BertModel(tiny_mlm("bert").model.config)
    with pytest.raises(ModelError, match="no MLM head"):
        mlmkit.finetune((encoder, tiny_mlm("bert").tokenizer), "sst2", method="prompt",
                        train=sst / "train.tsv", **RUNTIME)


def test_lora_adapter_loads_with_peft_and_merges(tiny_mlm, sst, tmp_path, saved_tiny_mlm):
    import peft
    from transformers import AutoModelForSequenceClassification

    import mlmkit

    common = dict(train=sst / "train.tsv", validation=sst / "validation.tsv", epochs=1,
                  lr=1e-3, lora=True, lora_rank=4, **RUNTIME)
    base_dir = saved_tiny_mlm("bert")
    result = mlmkit.finetune(str(base_dir), "sst2", run_dir=tmp_path / "lora", **common)
    run = result.runs[0]
    trainable = sum(p.numel() for p in run._model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in run._model.parameters())
    assert trainable < total / 5
    adapter = tmp_path / "lora" / "best"
    assert (adapter / "adapter_config.json").is_file()
    base = AutoModelForSequenceClassification.from_pretrained(base_dir, num_labels=2)
    loaded = peft.PeftModel.from_pretrained(base, adapter).eval()
    data = mlmkit.finetuning.data.load_task_data(mlmkit.finetuning.get_task("sst2"),
                                                train=sst / "train.tsv",
                                                validation=sst / "validation.tsv")
    tok = tiny_mlm("bert").tokenizer
    enc = tok([t[0] for t in data.validation.texts], truncation=True, max_length=128,
              padding=True, return_tensors="pt")
    with torch.no_grad():
        predicted = loaded(**enc).logits.argmax(-1).numpy()
    assert np.mean(predicted == data.validation.labels) == pytest.approx(run.metrics["accuracy"])
    merged = mlmkit.finetune(str(base_dir), "sst2", run_dir=tmp_path / "merged",
                             merge_lora=True, **common)
    assert not (tmp_path / "merged" / "best" / "adapter_config.json").exists()
    full = AutoModelForSequenceClassification.from_pretrained(tmp_path / "merged" / "best")
    with torch.no_grad():
        again = full.eval()(**enc).logits.argmax(-1).numpy()
    assert np.mean(again == data.validation.labels) == pytest.approx(
        merged.runs[0].metrics["accuracy"])


def test_cli_finetune_json_and_errors(saved_tiny_mlm, sst, tmp_path):
    from typer.testing import CliRunner

    from mlmkit.cli import app

    runner = CliRunner()
    model = str(saved_tiny_mlm("bert"))
    (tmp_path / "topics.jsonl").write_text("".join(
        json.dumps({"body": f"text number {i} here", "topic": "ab"[i % 2]}) + "\n"
        for i in range(40)))
    done = runner.invoke(app, ["finetune", model, "--task", "topics", "--train",
                               str(tmp_path / "topics.jsonl"), "--text-field", "body",
                               "--label-field", "topic", "--epochs", "1", "--threads", "1",
                               "--json"])
    assert done.exit_code == 0, done.output
    out = json.loads(done.stdout)
    assert out["task"] == "topics" and out["runs"][0]["examples"] == {"train": 36,
                                                                       "validation": 4}
    bad = runner.invoke(app, ["finetune", model, "--task", "topics", "--train",
                              str(tmp_path / "topics.jsonl"), "--text-field", "text",
                              "--label-field", "topic"])
    assert bad.exit_code == 1
    assert "no column 'text'" in bad.stderr and "'body', 'topic'" in bad.stderr
    assert "Traceback" not in bad.output


# --- datasets names: --offline -----------------------------------------------------------

def test_offline_reads_the_local_cache_only_and_restores_the_settings(tmp_path, monkeypatch,
                                                                      saved_tiny_mlm):
    """A tiny dataset prepared into a temporary datasets cache (as a download leaves it).
    offline=True reads it without one call to the hub and leaves no setting behind; without
    it, datasets tries the hub first (here refused), as it normally does; a name that is not
    cached is one line under --offline."""
    import datasets
    import huggingface_hub.constants as hub
    from datasets.packaged_modules.csv.csv import Csv
    from typer.testing import CliRunner

    from mlmkit.cli import app
    from mlmkit.errors import PathError
    from mlmkit.finetuning.data import load_task_data
    from mlmkit.finetuning.tasks import get_task

    files = {}
    for split, n in (("train", 12), ("validation", 4)):
        files[split] = str(tmp_path / f"{split}.csv")
        (tmp_path / f"{split}.csv").write_text("sentence,label\n" + "".join(
            f"{split} sentence {i},{i % 2}\n" for i in range(n)))
    cache = tmp_path / "hf-datasets"
    Csv(cache_dir=str(cache), dataset_name="tiny_sst", config_name="default", hash="0" * 16,
        data_files=files).download_and_prepare()
    for folder in (cache / "tiny_sst").glob("default-*"):  # the name a hub download gets
        folder.rename(folder.with_name("default"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    calls = []

    def refused(*args, **kwargs):
        calls.append(kwargs.get("repo_id", args[0] if args else None))
        raise ConnectionError("no network in tests")

    monkeypatch.setattr(datasets.load.HfApi, "hf_hub_download", refused)
    monkeypatch.setattr(datasets.load.HfApi, "dataset_info", refused)
    sst2 = get_task("sst2")
    data = load_task_data(sst2, dataset="tiny_sst", offline=True)
    assert calls == []
    assert data.train.texts[:2] == [("train sentence 0",), ("train sentence 1",)]
    assert len(data.train) == 12 and len(data.validation) == 4
    assert data.train.labels.tolist()[:4] == [0, 1, 0, 1]
    assert hub.HF_HUB_OFFLINE is False and datasets.config.HF_HUB_OFFLINE is False
    assert "HF_DATASETS_OFFLINE" not in __import__("os").environ
    import mlmkit.core.hub

    monkeypatch.setattr(mlmkit.core.hub, "hub_reachable", lambda timeout=3.0: True)
    online = load_task_data(sst2, dataset="tiny_sst")  # normal: the hub first, then the cache
    assert calls == ["tiny_sst"] * 2 and online.validation.texts == data.validation.texts
    with pytest.raises(PathError, match="neither a file nor in the local Hugging Face datasets "
                       "cache .* --offline forbids"):
        load_task_data(sst2, dataset="not_cached_here", offline=True)
    runner = CliRunner()
    done = runner.invoke(app, ["finetune", str(saved_tiny_mlm("bert")), "--task", "sst2",
                               "--dataset", "tiny_sst", "--offline", "--epochs", "1",
                               "--threads", "1", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["runs"][0]["examples"] == {"train": 12, "validation": 4}
    missing = runner.invoke(app, ["finetune", str(saved_tiny_mlm("bert")), "--task", "sst2",
                                  "--dataset", "not_cached_here", "--offline"])
    assert missing.exit_code == 1 and "Traceback" not in missing.output
    assert "error: --dataset 'not_cached_here'" in missing.stderr and \
        "--offline" in missing.stderr
    assert len(calls) == 2 and hub.HF_HUB_OFFLINE is False
    # no network (the hub's host refuses the connection): the cache at once, one line
    monkeypatch.setattr(mlmkit.core.hub, "hub_reachable", lambda timeout=3.0: False)
    assert load_task_data(sst2, dataset="tiny_sst").train.texts == data.train.texts
    with pytest.raises(PathError, match="not in the local Hugging Face datasets cache .* the "
                       "hub cannot be reached"):
        load_task_data(sst2, dataset="not_cached_here")
    assert len(calls) == 2 and hub.HF_HUB_OFFLINE is False  # no hub call, settings restored


# --- acceptance check H1: zero settings, stopped runs --------------------------------------

@pytest.mark.parametrize("setting, flag", [("epochs", "--epochs"), ("lr", "--lr"),
                                           ("batch_size", "--batch-size")])
def test_zero_epochs_lr_or_batch_is_refused_not_replaced_by_the_default(tiny_mlm, sst,
                                                                        setting, flag):
    """0 was read as 'not given' (`epochs or 3`): the run trained 3 epochs, at lr 4e-5 or
    batch 16, silently."""
    import mlmkit

    with pytest.raises(InvalidArgument, match=rf"{setting}=0.* \({flag}\)"):
        mlmkit.finetune(tiny_mlm("bert"), "sst2", train=sst / "train.tsv",
                        validation=sst / "validation.tsv", **{setting: 0}, **RUNTIME)


def test_cli_finetune_stopped_by_a_signal_exits_128_plus_it(saved_tiny_mlm, sst, tmp_path,
                                                           monkeypatch):
    """A run stopped by SIGTERM/SIGINT saved its state but did not finish: exit 143/130 as
    pretrain does (it exited 0, so `finetune ... && next` went on)."""
    from typer.testing import CliRunner

    from mlmkit.cli import app
    from mlmkit.finetuning import trainer
    from mlmkit.training import signals

    class Signalled(signals.StopOnSignal):
        def __enter__(self):
            super().__enter__()
            self.requested = "SIGTERM"
            return self

    monkeypatch.setattr(trainer, "StopOnSignal", Signalled)
    done = CliRunner().invoke(app, ["finetune", str(saved_tiny_mlm("bert")), "--task", "sst2",
                                    "--train", str(sst / "train.tsv"), "--validation",
                                    str(sst / "validation.tsv"), "--epochs", "1", "--threads",
                                    "1", "--run-dir", str(tmp_path / "run"), "--json"])
    assert done.exit_code == 143, done.output
    out = json.loads(done.stdout)
    assert out["runs"][0]["status"] == "interrupted"
    assert out["runs"][0]["stop_reason"] == "SIGTERM"


@pytest.mark.parametrize("extra, match", [
    ({"neutral": "in"}, r"names label\(s\) \['neutral'\] that the task does not have"),
    ({"positive": ["and", "of"]}, r"gives label 'positive' 2 words \['and', 'of'\].*keep one"),
])
def test_prompt_verbalizer_extra_labels_or_words_are_refused(tiny_mlm, sst, words, extra,
                                                             match):
    """A label the task lacks and the second word of a label were ignored silently (only
    each label's first word was trained and scored)."""
    import mlmkit

    verbalizer = {**{k: [v] for k, v in words.items()}, **extra}
    with pytest.raises(InvalidArgument, match=match):
        mlmkit.finetune(tiny_mlm("bert"), "sst2", method="prompt", shots=2, epochs=1,
                        verbalizer=verbalizer, train=sst / "train.tsv",
                        validation=sst / "validation.tsv", **RUNTIME)


def test_train_file_and_dataset_name_together_are_refused(sst):
    """--dataset was ignored silently when --train was given (acceptance check H1)."""
    from mlmkit.finetuning.data import load_task_data
    from mlmkit.finetuning.tasks import get_task

    with pytest.raises(InvalidArgument, match="both name the training data: give one"):
        load_task_data(get_task("sst2"), train=sst / "train.tsv", dataset="glue:sst2",
                       offline=True)


def test_resume_after_the_training_file_changed_in_place_is_refused(tiny_mlm, sst, tmp_path):
    """Same path, same row count, other rows: the resume went on silently on other data
    (acceptance check H1); the state now holds a digest of each split's rows."""
    import mlmkit

    train = tmp_path / "train.tsv"
    train.write_text((sst / "train.tsv").read_text())
    common = dict(train=train, validation=sst / "validation.tsv", epochs=1, max_length=32,
                  run_dir=tmp_path / "run", **RUNTIME)
    mlmkit.finetune(tiny_mlm("bert"), "sst2", halt_after=2, **common)
    lines = train.read_text().splitlines()
    lines[1] = "an edited row\t" + lines[1].rsplit("\t", 1)[1]
    train.write_text("\n".join(lines) + "\n")
    with pytest.raises(RunError, match=r"other settings \(train_content: 'sha256:"):
        mlmkit.finetune(tiny_mlm("bert"), "sst2", resume=True, **common)


def test_several_seeds_stopped_before_a_seed_s_first_evaluation(tiny_mlm, sst, tmp_path,
                                                                 monkeypatch):
    """Ctrl-C in the second seed before its first epoch ended: KeyError 'accuracy' and a
    traceback (the mean over seeds read the stopped seed's empty metrics) (H1)."""
    import mlmkit
    from mlmkit.finetuning import trainer
    from mlmkit.training import signals

    entered = []

    class SecondSeedSignalled(signals.StopOnSignal):
        def __enter__(self):
            super().__enter__()
            entered.append(1)
            if len(entered) == 2:
                self.requested = "SIGINT"
            return self

    monkeypatch.setattr(trainer, "StopOnSignal", SecondSeedSignalled)
    result = mlmkit.finetune(tiny_mlm("bert"), "sst2", seeds=2, epochs=1, max_length=32,
                             train=sst / "train.tsv", validation=sst / "validation.tsv",
                             run_dir=tmp_path / "run", **RUNTIME)
    assert [r.status for r in result.runs] == ["finished", "interrupted"]
    assert result.runs[1].metrics == {} and result.runs[1].stop_reason == "SIGINT"
    assert result.metrics == result.runs[0].metrics
    # the summary says what the mean is over (it said "2 seed(s)" with a "± 0.0000")
    summary = result.summary()
    assert "mean of 1 of 2 seed(s); seed" in summary and "was stopped" in summary
    assert "±" not in summary


def test_resume_errors_say_what_finetune_can_do(tiny_mlm, sst, tmp_path):
    """The resume errors told to use --restart, which finetune does not have (H1)."""
    import mlmkit

    common = dict(train=sst / "train.tsv", validation=sst / "validation.tsv", epochs=1,
                  max_length=32, run_dir=tmp_path / "run", **RUNTIME)
    with pytest.raises(RunError, match="no training state.*start a new run there without "
                       "--resume") as missing:
        mlmkit.finetune(tiny_mlm("bert"), "sst2", resume=True, **common)
    assert "--restart" not in str(missing.value)
    mlmkit.finetune(tiny_mlm("bert"), "sst2", halt_after=2, **common)
    for state in (tmp_path / "run" / "checkpoints").glob("state-*.pt"):
        state.write_bytes(b"damaged")
    damaged_match = r"is damaged .*remove .*checkpoints to start over"
    with pytest.raises(RunError, match=damaged_match) as damaged:
        mlmkit.finetune(tiny_mlm("bert"), "sst2", resume=True, **common)
    assert "--restart" not in str(damaged.value)


def test_a_max_length_beyond_the_model_is_said_not_lowered_silently(tiny_mlm, sst, tmp_path):
    import mlmkit

    mlm = tiny_mlm("bert")
    with pytest.warns(UserWarning, match=rf"max_length=100000 \(--max-length\) is more than "
                      rf"the model's {mlm.max_length} positions"):
        mlmkit.finetune(mlm, "sst2", train=sst / "train.tsv", validation=sst /
                        "validation.tsv", epochs=1, max_length=100_000, **RUNTIME)


@pytest.mark.parametrize("asked, trains, evaluates", [("auto", "bf16", "fp32"),
                                                      ("bf16", "bf16", "bf16"),
                                                      ("fp32", "fp32", "fp32")])
def test_auto_trains_in_bf16_where_native_and_evaluates_in_fp32(tiny_mlm, sst, monkeypatch,
                                                               asked, trains, evaluates):
    """The metrics a run reports are those `eval classify` gives its model (fp32 under
    `auto`); bf16 asked for is bf16 throughout."""
    import mlmkit
    import mlmkit.core.devices as devices
    import mlmkit.finetuning.trainer as trainer

    monkeypatch.setattr(devices, "native_bf16", lambda device: True)
    seen = []
    real = trainer.autocast
    monkeypatch.setattr(trainer, "autocast",
                        lambda precision, device: seen.append(precision) or real(
                            precision, device))
    monkeypatch.setattr(trainer.Trainer, "predict", _recording_predict(trainer, seen))
    mlmkit.finetune(tiny_mlm("bert"), "sst2", train=sst / "train.tsv",
                    validation=sst / "validation.tsv", epochs=1, lr=1e-3, max_length=32,
                    train_limit=32, precision=asked, **RUNTIME)
    assert set(seen[:seen.index("predict")]) == {trains}
    assert set(seen[seen.index("predict") + 1:]) == {evaluates}


def _recording_predict(trainer, seen):
    real = trainer.Trainer.predict

    def predict(self, encoded, batch_tokens):
        seen.append("predict")
        return real(self, encoded, batch_tokens)
    return predict


def test_a_resume_keeps_the_model_precision_and_batches_of_the_run(tiny_mlm, sst, tmp_path,
                                                                   capsys):
    """A resume in another precision or batch layout, or from another model (of the same
    shapes too, or with another tokenizer), would not continue the run: each is one line
    (another model was a 55-line traceback; one of the same shapes trained on)."""
    import mlmkit

    common = dict(train=sst / "train.tsv", validation=sst / "validation.tsv", epochs=1,
                  max_length=32, run_dir=tmp_path / "run", **RUNTIME)
    mlmkit.finetune(tiny_mlm("bert"), "sst2", halt_after=2, precision="fp32", **common)
    with pytest.raises(RunError, match=r"other settings \(precision: 'fp32' then, 'bf16'"):
        mlmkit.finetune(tiny_mlm("bert"), "sst2", resume=True, precision="bf16", **common)
    with pytest.raises(RunError, match=r"other settings \(packed: True then, False now"):
        mlmkit.finetune(tiny_mlm("bert"), "sst2", resume=True, precision="fp32",
                        packed=False, **common)
    another = r"other settings \(model \(weights and vocabulary\): 'sha256:"
    with pytest.raises(RunError, match=another):
        mlmkit.finetune(tiny_mlm("modernbert"), "sst2", resume=True, precision="fp32",
                        **common)
    # the same shapes, other weights: it would train on silently
    bert = tiny_mlm("bert")
    nudged = copy.deepcopy(bert.model)
    with torch.no_grad():
        for weight in nudged.parameters():
            weight.add_(0.01)
    with pytest.raises(RunError, match=another):
        mlmkit.finetune((nudged, bert.tokenizer), "sst2", resume=True, precision="fp32",
                        **common)
    # the same weights, another vocabulary (ids that mean other words)
    shuffled = copy.deepcopy(bert.tokenizer)
    shuffled.add_tokens(["zzzqx"])
    with pytest.raises(RunError, match=another):
        mlmkit.finetune((bert.model, shuffled), "sst2", resume=True, precision="fp32",
                        **common)
    mlmkit.finetune(tiny_mlm("bert"), "sst2", resume=True, precision="fp32", **common)


def test_a_multi_seed_run_is_resumed_through_its_own_folder(tiny_mlm, sst, tmp_path, capsys):
    """The stop line named the seed's folder, which resumed as a new multi-seed run inside
    it; a resume of a folder without states started over."""
    import mlmkit

    common = dict(train=sst / "train.tsv", validation=sst / "validation.tsv", epochs=1,
                  max_length=32, seeds=2, device="cpu", threads=1)
    run = tmp_path / "run"
    mlmkit.finetune(tiny_mlm("bert"), "sst2", halt_after=2, run_dir=run, progress=None,
                    **common)
    assert f"continue with --resume --run-dir {run}\n" in capsys.readouterr().err
    with pytest.raises(RunError, match=r"holds no fine-tuning state of seeds 0-1"):
        mlmkit.finetune(tiny_mlm("bert"), "sst2", resume=True, run_dir=run / "seed-0",
                        progress=False, **common)
    resumed = mlmkit.finetune(tiny_mlm("bert"), "sst2", resume=True, run_dir=run,
                              progress=False, **common)
    assert [r.status for r in resumed.runs] == ["finished", "finished"]


def test_switches_and_prompt_settings_are_checked(tiny_mlm, sst):
    import mlmkit

    common = dict(train=sst / "train.tsv", validation=sst / "validation.tsv", epochs=1,
                  max_length=32, **RUNTIME)
    with pytest.raises(InvalidArgument, match="are the prompt method's"):
        mlmkit.finetune(tiny_mlm("bert"), "sst2", verbalizer={"negative": "bad",
                                                               "positive": "good"}, **common)
    with pytest.raises(InvalidArgument, match="bucket='yes'"):
        mlmkit.finetune(tiny_mlm("bert"), "sst2", bucket="yes", **common)
    with pytest.raises(InvalidArgument, match="packed=1"):
        mlmkit.finetune(tiny_mlm("bert"), "sst2", packed=1, **common)


def test_bf16_asked_on_hardware_without_it_is_said_once(monkeypatch):
    """bf16 where the hardware only emulates it trains slower than fp32: said once a
    process (a job prepares a device many times), never for `auto`."""
    import warnings

    from mlmkit.core import devices

    monkeypatch.setattr(devices, "native_bf16", lambda device: False)
    monkeypatch.setattr(devices, "_EMULATED", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert devices.prepare("cpu", "auto", task="training")[1] == "fp32"
        for _ in range(3):
            assert devices.prepare("cpu", "bf16", task="training")[1] == "bf16"
    assert [str(w.message)[:40] for w in caught] == ["precision bf16 on cpu, which does not mu"]


def test_a_classifier_is_read_at_the_length_it_was_fine_tuned_at(tiny_mlm, sst, tmp_path):
    """finetune --max-length 24 reported metrics on inputs cut at 24; eval classify cut the
    saved model's at 128 by default, and gave other numbers."""
    import mlmkit
    from mlmkit.finetuning.classifier import load_classifier

    result = mlmkit.finetune(tiny_mlm("bert"), "sst2", train=sst / "train.tsv",
                             validation=sst / "validation.tsv", epochs=1, max_length=24,
                             run_dir=tmp_path / "run", **RUNTIME)
    best = tmp_path / "run" / "best"
    classifier = load_classifier(best, device="cpu")
    assert classifier.cut_length() == 24 and classifier.cut_length(64) == 64
    evaluation = classifier.evaluate(sst / "validation.tsv", task="sst2")
    assert evaluation.max_length == 24
    assert evaluation.metrics["accuracy"] == pytest.approx(result.runs[0].metrics["accuracy"])


def test_a_resume_reads_the_same_file_by_another_path(tiny_mlm, sst, tmp_path, monkeypatch):
    import mlmkit

    common = dict(validation=sst / "validation.tsv", epochs=1, max_length=32,
                  run_dir=tmp_path / "run", **RUNTIME)
    mlmkit.finetune(tiny_mlm("bert"), "sst2", train=sst / "train.tsv", halt_after=2, **common)
    monkeypatch.chdir(sst)  # the same file, named from its folder
    resumed = mlmkit.finetune(tiny_mlm("bert"), "sst2", train="train.tsv", resume=True,
                              **common)
    assert resumed.runs[0].status == "finished"


def test_the_bound_model_fine_tunes_in_its_runtime(saved_tiny_mlm, sst, monkeypatch):
    """`mlmkit.load(...).finetune(task, ...)` is `mlmkit.finetune` with the bound device,
    precision and threads; a runtime keyword in the call is refused, as in every method."""
    import mlmkit

    options = dict(train=sst / "train.tsv", validation=sst / "validation.tsv", epochs=1,
                   max_length=32, progress=False)
    mlm = mlmkit.load(saved_tiny_mlm("bert"), device="cpu", threads=1, precision="fp32")
    calls, free_function = [], mlmkit.finetune
    monkeypatch.setattr(mlmkit, "finetune", lambda *a, **k: calls.append(k) or
                        free_function(*a, **k))
    bound = mlm.finetune("sst2", **options)
    assert {k: calls[0][k] for k in ("device", "precision", "threads")} == {
        "device": "cpu", "precision": "fp32", "threads": 1}
    monkeypatch.undo()
    free = mlmkit.finetune(saved_tiny_mlm("bert"), "sst2", device="cpu", threads=1,
                           precision="fp32", **options)
    assert bound.metrics == free.metrics and bound.runs[0].history == free.runs[0].history
    with pytest.raises(InvalidArgument, match=r"MLM.finetune\(\) takes task options only: "
                       "precision= is the model's"):
        mlm.finetune("sst2", precision="bf16", **options)


def test_a_checkpoint_without_an_mlm_head_resumes(tiny_mlm, sst, tmp_path):
    """An encoder checkpoint (BertModel: no MLM head, a pooler) loads with a head drawn anew
    at each load; the resume's check of the model leaves those draws out, and the
    classifier starts from the checkpoint's pooler each time."""
    from transformers import BertModel

    import mlmkit

    bert = tiny_mlm("bert")
    encoder = BertModel(bert.model.config)
    encoder.load_state_dict(bert.model.bert.state_dict(), strict=False)
    folder = tmp_path / "encoder"
    encoder.save_pretrained(folder)
    bert.tokenizer.save_pretrained(folder)
    common = dict(train=sst / "train.tsv", validation=sst / "validation.tsv", epochs=1,
                  max_length=32, run_dir=tmp_path / "run", precision="fp32", **RUNTIME)
    whole = mlmkit.finetune(str(folder), "sst2", **{**common, "run_dir": tmp_path / "whole"})
    mlmkit.finetune(str(folder), "sst2", halt_after=2, **common)
    resumed = mlmkit.finetune(str(folder), "sst2", resume=True, **common)
    assert resumed.metrics == whole.metrics
    # the prompt method reads the MLM head, which this checkpoint lacks
    with pytest.raises(UntrainedHead, match="--method prompt reads the masked-LM head"):
        mlmkit.finetune(str(folder), "sst2", method="prompt",
                        **{**common, "run_dir": tmp_path / "prompt"})


def test_missing_mixed_or_single_class_labels_are_refused(tmp_path, sst):
    """A task of your own took an empty, NaN or null label as a class of its own and 1 and
    1.0 as two classes; a named task trained on one class only ran (its accuracy was the
    validation split's share of that class)."""
    from mlmkit.finetuning.data import load_task_data
    from mlmkit.finetuning.tasks import get_task

    mine = get_task("mine", "text", "y")
    for label, shown in (("", "''"), ("nan", "'nan'")):
        (tmp_path / "t.tsv").write_text(f"text\ty\na\tneg\nb\tpos\nc\t{label}\n")
        with pytest.raises(InvalidData, match=rf"t.tsv' line 4: the label is missing "
                           rf"\({shown}\); fill it in or drop the row"):
            load_task_data(mine, train=tmp_path / "t.tsv")
    (tmp_path / "t.jsonl").write_text('{"text": "a", "y": "neg"}\n{"text": "b", "y": null}\n')
    with pytest.raises(InvalidData, match=r"t.jsonl' line 2: the label is missing \(None\)"):
        load_task_data(mine, train=tmp_path / "t.jsonl")
    (tmp_path / "n.tsv").write_text("text\ty\na\t0\nb\t1\nc\t1.0\nd\t0\n")
    with pytest.raises(InvalidData, match=r"labels '1' \(.*line 3\) and '1.0' \(.*line 4\) "
                       r"are one number written two ways: .* all 1\)"):
        load_task_data(mine, train=tmp_path / "n.tsv")
    (tmp_path / "v.tsv").write_text("text\ty\na\tneg\nb\t\n")  # in validation too
    (tmp_path / "ok.tsv").write_text("text\ty\na\tneg\nb\tpos\n")
    with pytest.raises(InvalidData, match=r"v.tsv' line 3: the label is missing"):
        load_task_data(mine, train=tmp_path / "ok.tsv", validation=tmp_path / "v.tsv")

    (tmp_path / "one.tsv").write_text("sentence\tlabel\nfine\t1\ngood\t1\n")
    with pytest.raises(InvalidData, match=r"one.tsv\) holds one class only \('positive' of "
                       r"task sst2's 'negative', 'positive'\)"):
        load_task_data(get_task("sst2"), train=tmp_path / "one.tsv",
                       validation=sst / "validation.tsv")
    (tmp_path / "two.tsv").write_text("text\tlabel\nwar\t0\ngoal\t1\n")
    with pytest.warns(UserWarning, match=r"has no example of 'Business', 'Sci/Tech' \(task "
                      r"agnews\): the model will never predict it"):
        load_task_data(get_task("agnews"), train=tmp_path / "two.tsv",
                       validation=tmp_path / "two.tsv")


def test_inputs_refused_before_the_model_loads(tiny_mlm, sst, tmp_path, monkeypatch):
    """Standard input named for two splits said the second was empty; a list given as a
    file failed inside the reader, after the model had loaded."""
    import mlmkit
    import mlmkit.finetuning.api as api

    monkeypatch.setattr(api, "as_mlm", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(InvalidArgument, match=r"--train and --validation all read standard "
                       r"input \(-\), which holds one split"):
        mlmkit.finetune("unused", "sst2", train="-", validation="-", **RUNTIME)
    with pytest.raises(InvalidArgument, match=r"train=list: give the train file's path"):
        mlmkit.finetune("unused", "sst2", train=[str(sst / "train.tsv")], **RUNTIME)


def test_a_run_dir_holding_a_finished_run_or_a_pretraining_run_is_refused(tiny_mlm, sst,
                                                                          tmp_path):
    """A finished run whose checkpoints were removed was overwritten silently; a resume in a
    pretraining run's folder listed every setting as changed."""
    import shutil

    import mlmkit
    from mlmkit.training import checkpoint

    common = dict(train=sst / "train.tsv", validation=sst / "validation.tsv", epochs=1,
                  max_length=32, **RUNTIME)
    run = tmp_path / "run"
    mlmkit.finetune(tiny_mlm("bert"), "sst2", run_dir=run, **common)
    shutil.rmtree(run / "checkpoints")
    before = (run / "best" / "model.safetensors").read_bytes()
    with pytest.raises(RunError, match="already holds a run: resume it"):
        mlmkit.finetune(tiny_mlm("bert"), "sst2", run_dir=run, **common)
    assert (run / "best" / "model.safetensors").read_bytes() == before
    other = tmp_path / "pretraining"
    checkpoint.save_state(other, 5, {"config": {"model": "bert-tiny", "steps": 10}})
    with pytest.raises(RunError, match=r"holds another kind of run, not a fine-tuning run "
                       r"\(a pretraining run, perhaps\)"):
        mlmkit.finetune(tiny_mlm("bert"), "sst2", run_dir=other, resume=True, **common)


def test_cli_stop_of_a_multi_seed_run_names_the_run_s_folder(saved_tiny_mlm, sst, tmp_path):
    """The stop line of the CLI named the stopped seed's folder, which does not resume."""
    from typer.testing import CliRunner

    from mlmkit.cli import app

    run = tmp_path / "run"
    args = ["finetune", str(saved_tiny_mlm("bert")), "--task", "sst2", "--train",
            str(sst / "train.tsv"), "--validation", str(sst / "validation.tsv"), "--epochs",
            "1", "--seeds", "2", "--max-length", "32", "--threads", "1", "--run-dir", str(run)]
    first = CliRunner().invoke(app, [*args, "--halt-after", "2"])  # stops in seed 0
    assert first.exit_code == 0, first.output
    assert f"continue with --resume --run-dir {run}\n" in first.stdout
    assert "seed-" not in first.stdout.split("interrupted")[1]
