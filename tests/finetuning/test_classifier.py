"""After fine-tuning: the run kept by default, predictions and metrics of the classifier it
saved (Python and CLI), and the refusals that point to the right command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import mlmkit
from mlmkit.cli import app
from mlmkit.errors import InvalidArgument, ModelError, PathError
from mlmkit.finetuning import default_run_dir, evaluate_classifier, load_classifier, predict
from tests.finetuning.samples import write_sst_sample

RUNTIME = {"device": "cpu", "threads": 1, "progress": False}


@pytest.fixture(scope="module")
def sst(shared_data, tmp_path_factory):
    """A small SST-2 sample: 64 training rows (balanced), 30 validation rows."""
    return write_sst_sample(shared_data, tmp_path_factory.mktemp("sst-classifier"), 32, 30)


@pytest.fixture(scope="module")
def fine_tuned(tiny_mlm, sst, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("ft") / "sst2"
    result = mlmkit.finetune(tiny_mlm("bert"), "sst2", train=sst / "train.tsv",
                             validation=sst / "validation.tsv", epochs=1, run_dir=run_dir,
                             **RUNTIME)
    return result, run_dir


def test_predict_gives_labels_and_probabilities(fine_tuned):
    result, run_dir = fine_tuned
    best = run_dir / "best"
    one = predict(best, "a gripping and funny film", **RUNTIME)
    assert one.label in ("negative", "positive")
    assert sum(one.probabilities.values()) == pytest.approx(1.0)
    assert one.score == max(one.probabilities.values())
    many = predict(best, ["dull", "a gripping and funny film"], **RUNTIME)
    assert len(many) == 2 and many[1].label == one.label  # a list gives a list, in order
    assert many[1].score == pytest.approx(one.score, abs=1e-6)  # padded beside a shorter one
    assert set(one.to_dict()) == {"label", "score", "probabilities"}
    clf = load_classifier(best, device="cpu", threads=1)
    assert clf.labels == ["negative", "positive"]
    again = predict(clf, "dull", progress=False)  # a bound classifier passes through
    assert again.label == many[0].label and again.score == pytest.approx(many[0].score, abs=1e-6)


def test_a_classifier_saved_without_its_tokenizer_takes_one_given(fine_tuned, tmp_path):
    _, run_dir = fine_tuned
    best, bare = run_dir / "best", tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        (bare / name).write_bytes((best / name).read_bytes())
    with pytest.raises(ModelError):
        predict(bare, "dull", **RUNTIME)
    want = predict(best, "dull", **RUNTIME)
    got = predict(bare, "dull", tokenizer=best, **RUNTIME)
    assert got.label == want.label and got.score == pytest.approx(want.score, abs=1e-6)
    result = CliRunner().invoke(app, ["predict", str(bare), "-", "--tokenizer", str(best),
                                      "--threads", "1"], input="dull\n")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[0])["label"] == want.label


def test_evaluate_matches_the_metrics_finetune_reported(fine_tuned, sst):
    result, run_dir = fine_tuned
    evaluation = evaluate_classifier(run_dir / "best", sst / "validation.tsv", task="sst2",
                                     **RUNTIME)
    assert evaluation.examples == 30
    assert evaluation.metrics["accuracy"] == pytest.approx(result.metrics["accuracy"])
    assert np.sum(evaluation.confusion) == 30
    assert json.loads(evaluation.to_json())["task"] == "sst2"
    assert "accuracy" in evaluation.summary()


def test_classifier_refusals_name_the_right_fix(fine_tuned, saved_tiny_mlm, sst, tmp_path):
    _, run_dir = fine_tuned
    with pytest.raises(ModelError, match=r"not a fine-tuned classifier.*mlmkit finetune"):
        predict(saved_tiny_mlm("bert"), "text", **RUNTIME)
    with pytest.raises(ModelError, match=r"fine-tuning run: pass its model"):
        predict(run_dir, "text", **RUNTIME)
    with pytest.raises(PathError, match="does not exist"):
        predict(tmp_path / "nothing", "text", **RUNTIME)
    with pytest.raises(InvalidArgument, match=r"labels of task mnli"):
        evaluate_classifier(run_dir / "best", sst / "validation.tsv", task="mnli", **RUNTIME)
    with pytest.raises(InvalidArgument, match=r"name the task"):
        evaluate_classifier(run_dir / "best", sst / "validation.tsv", **RUNTIME)
    with pytest.raises(InvalidArgument, match=r"texts\[0\]"):
        predict(run_dir / "best", [3], **RUNTIME)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    with pytest.raises(ModelError, match=r"cannot read the config"):
        predict(broken, "text", **RUNTIME)


def test_zero_epochs_points_to_eval_classify(tiny_mlm, sst):
    with pytest.raises(InvalidArgument, match=r"eval classify.*mlmkit predict"):
        mlmkit.finetune(tiny_mlm("bert"), "sst2", train=sst / "train.tsv", epochs=0,
                        **RUNTIME)


def test_the_run_directory_has_a_readme(fine_tuned):
    _, run_dir = fine_tuned
    text = (run_dir / "README.md").read_text()
    for part in ("best/", "metrics.json", "checkpoints/state-N.pt", "--resume",
                 f"mlmkit predict {run_dir}/best", "mlmkit eval classify",
                 "AutoModelForSequenceClassification"):
        assert part in text, part


def test_default_run_dir_never_overwrites_a_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert default_run_dir("sst2") == Path("runs/finetune/sst2")
    (tmp_path / "runs/finetune/sst2/best").mkdir(parents=True)
    assert default_run_dir("sst2") == Path("runs/finetune/sst2-2")
    assert default_run_dir("sst2", resume=True) == Path("runs/finetune/sst2")
    assert default_run_dir("my/task") == Path("runs/finetune/my-task")


def test_cli_finetune_keeps_the_model_then_predict_and_eval_classify_use_it(
        saved_tiny_mlm, sst, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    args = ["finetune", str(saved_tiny_mlm("bert")), "--task", "sst2", "--train",
            str(sst / "train.tsv"), "--validation", str(sst / "validation.tsv"), "--epochs",
            "1", "--threads", "1"]
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    best = Path("runs/finetune/sst2/best")
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    assert AutoModelForSequenceClassification.from_pretrained(best).config.num_labels == 2
    assert AutoTokenizer.from_pretrained(best) is not None
    assert "mlmkit predict runs/finetune/sst2/best" in done.stderr
    again = runner.invoke(app, args)  # a second run goes beside the first
    assert again.exit_code == 0, again.output
    assert Path("runs/finetune/sst2-2/best").is_dir()

    (tmp_path / "texts.txt").write_text("a gripping film\ndull\n")
    out = runner.invoke(app, ["predict", str(best), "texts.txt", "--threads", "1"])
    assert out.exit_code == 0, out.output
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [line["text"] for line in lines] == ["a gripping film", "dull"]
    assert all(line["label"] in ("negative", "positive") for line in lines)
    piped = runner.invoke(app, ["predict", str(best), "-", "-o", "p.jsonl", "--threads", "1"],
                          input="a gripping film\n")
    assert piped.exit_code == 0, piped.output
    assert json.loads(Path("p.jsonl").read_text())["label"] == lines[0]["label"]

    (tmp_path / "pairs.jsonl").write_text(json.dumps({"a": "x", "b": "y"}) + "\n")
    pairs = runner.invoke(app, ["predict", str(best), "pairs.jsonl", "--text-field", "a,b",
                                "--threads", "1"])  # a single-text classifier given pairs
    assert pairs.exit_code == 1 and "fine-tuned on single texts and is given pairs" in \
        pairs.stderr, pairs.output

    evaluated = runner.invoke(app, ["eval", "classify", str(best), "--task", "sst2",
                                    str(sst / "validation.tsv"), "--threads", "1", "--json"])
    assert evaluated.exit_code == 0, evaluated.output
    metrics = json.loads(evaluated.stdout)["metrics"]
    reported = json.loads(Path("runs/finetune/sst2/metrics.json").read_text())["metrics"]
    assert metrics["accuracy"] == pytest.approx(reported["accuracy"])

    wrong = runner.invoke(app, ["predict", str(saved_tiny_mlm("bert")), "texts.txt"])
    assert wrong.exit_code == 1 and "not a fine-tuned classifier" in wrong.stderr


def test_a_prompt_fine_tuned_model_predicts_and_evaluates(tiny_mlm, sst, tmp_path):
    """--method prompt saves a masked LM with prompt.json: predict and eval classify score
    its label words at the mask, and reproduce the accuracy finetune reported."""
    tok = tiny_mlm("bert").tokenizer
    found = [w for w in ("the", "and", "of", "to", "is", "in")
             if len(tok(" " + w, add_special_tokens=False)["input_ids"]) == 1]
    result = mlmkit.finetune(tiny_mlm("bert"), "sst2", method="prompt", epochs=1,
                             verbalizer={"negative": found[0], "positive": found[1]},
                             train=sst / "train.tsv", validation=sst / "validation.tsv",
                             run_dir=tmp_path / "prompt", **RUNTIME)
    best = tmp_path / "prompt" / "best"
    assert (best / "prompt.json").is_file()
    one = predict(best, "a gripping and funny film", **RUNTIME)
    assert one.label in ("negative", "positive")
    assert sum(one.probabilities.values()) == pytest.approx(1.0)
    evaluation = evaluate_classifier(best, sst / "validation.tsv", task="sst2", **RUNTIME)
    assert evaluation.metrics["accuracy"] == pytest.approx(result.metrics["accuracy"])
    assert "mlmkit predict" in (tmp_path / "prompt" / "README.md").read_text()


def test_pairs_are_classified_with_their_segments_as_transformers_does(tiny_mlm, tmp_path):
    """A BERT-type classifier reads a pair's token type ids: predict passes them as the
    tokenizer makes them, so its probabilities are those of the saved checkpoint in
    transformers."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from mlmkit.finetuning.methods import build_classifier

    mlm = tiny_mlm("bert")
    model = build_classifier(mlm, ["no", "yes"], 0).eval()
    model.save_pretrained(tmp_path / "clf")
    mlm.tokenizer.save_pretrained(tmp_path / "clf")
    config = tmp_path / "clf" / "tokenizer_config.json"  # as BERT's on the hub: segments
    config.write_text(json.dumps({**json.loads(config.read_text()), "model_input_names": [
        "input_ids", "token_type_ids", "attention_mask"]}))
    pairs = [("the cat sat", "on the mat"), ("a dog", "ran far away today"), ("x", "y")]
    hf_model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "clf").eval()
    hf_tokenizer = AutoTokenizer.from_pretrained(tmp_path / "clf")
    inputs = hf_tokenizer([a for a, _ in pairs], [b for _, b in pairs], padding=True,
                          return_tensors="pt")
    assert "token_type_ids" in inputs
    with torch.no_grad():
        expected = hf_model(**inputs).logits.double().softmax(-1).numpy()
    got = load_classifier(tmp_path / "clf", device="cpu").predict(pairs)
    probabilities = np.array([[p.probabilities["no"], p.probabilities["yes"]] for p in got])
    np.testing.assert_allclose(probabilities, expected, atol=1e-5)


def test_predict_counts_cut_inputs_and_refuses_what_the_model_was_not_trained_on(
        fine_tuned, tiny_mlm, tmp_path):
    """Inputs cut at the length are counted (a warning in Python, a line and a JSON field
    in the CLI); an empty input file is refused; a pair model refuses single texts and a
    single-text model pairs."""
    _, run_dir = fine_tuned
    best = run_dir / "best"
    long_text = " ".join(["a gripping and funny film"] * 60)
    with pytest.warns(UserWarning, match=r"1 of 2 input\(s\) longer than 128 tokens were cut"):
        predict(best, [long_text, "dull"], **RUNTIME)
    clf = load_classifier(best, device="cpu", threads=1)
    _, truncated = clf.predict_rows([(long_text,), ("dull",)], progress=False)
    assert truncated == 1
    runner = CliRunner()
    (tmp_path / "texts.txt").write_text(f"{long_text}\n\ndull\n")
    out = runner.invoke(app, ["predict", str(best), str(tmp_path / "texts.txt"), "-o",
                              str(tmp_path / "out.jsonl"), "--threads", "1", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["truncated"] == 1 and json.loads(out.stdout)["texts"] == 3
    assert "1 of 3 input(s) longer than 128 tokens were cut" in out.stderr
    assert "1 input(s) are empty" in out.stderr  # kept in its place, and said
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 3
    (tmp_path / "none.txt").write_text("")
    empty = runner.invoke(app, ["predict", str(best), str(tmp_path / "none.txt")])
    assert empty.exit_code == 1 and "holds no texts" in empty.stderr
    assert empty.stderr.count("\n") == 1, empty.stderr

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a\tb\tlabel\n" + "".join(f"one {i}\ttwo {i}\t{'yes' if i % 2 else 'no'}\n"
                                               for i in range(12)))
    mlmkit.finetune(tiny_mlm("bert"), "mine", text_field="a,b", label_field="label",
                    train=pairs, validation=pairs, epochs=1, run_dir=tmp_path / "pair",
                    **RUNTIME)
    pair_model = tmp_path / "pair" / "best"
    assert predict(pair_model, ("one", "two"), **RUNTIME).label in ("no", "yes")
    with pytest.raises(InvalidArgument, match="fine-tuned on pairs of texts and is given "
                       "single texts"):
        predict(pair_model, "one", **RUNTIME)
