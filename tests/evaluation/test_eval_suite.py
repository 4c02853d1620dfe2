"""The evaluation suite and comparisons (issue 15): fidelity to eval blimp, per-item outcomes,
bootstrap intervals through mlmkit.core.statistics, McNemar, the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import mlmkit
from mlmkit.errors import InvalidData


@pytest.fixture(scope="module")
def small_data(shared_data, tmp_path_factory):
    """Two BLiMP paradigms and 40 SST-2 validation rows, in the shared layout."""
    root = tmp_path_factory.mktemp("suite-data")
    (root / "blimp").mkdir()
    for name in ("anaphor_gender_agreement", "passive_1"):
        lines = (shared_data / "blimp" / f"{name}.jsonl").read_text().splitlines()[:8]
        (root / "blimp" / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    (root / "sst2").mkdir()
    rows = (shared_data / "sst2" / "validation.tsv").read_text().splitlines()[:41]
    (root / "sst2" / "validation.tsv").write_text("\n".join(rows) + "\n")
    return root


@pytest.fixture(scope="module")
def suite(tiny_mlm, small_data, tmp_path_factory):
    from mlmkit.evaluation import evaluate_suite

    out = tmp_path_factory.mktemp("suite-out")
    result = evaluate_suite(tiny_mlm("bert"), small_data, quick=True, parts="blimp,cloze",
                            run_dir=out, device="cpu", threads=1, progress=False)
    return result, out


def test_suite_blimp_matches_eval_blimp_and_keeps_items(suite, tiny_mlm, small_data):
    from mlmkit.scoring import evaluate_pairs, read_pairs

    result, out = suite
    pairs = read_pairs(small_data / "blimp", limit=6)
    reference = evaluate_pairs(tiny_mlm("bert"), pairs, device="cpu", threads=1)
    assert result.metrics["blimp"] == pytest.approx(reference.overall)
    assert len(result.items["blimp"]["values"]) == reference.n_pairs == 12
    for name, row in reference.by_field.items():
        assert result.metrics[f"blimp/{name}"] == pytest.approx(row["accuracy"])
    for name, row in reference.by_paradigm.items():
        assert result.details["blimp_by_paradigm"][name]["accuracy"] == \
            pytest.approx(row["accuracy"])
    assert len(result.items["cloze_sst2"]["values"]) == 40
    assert result.metrics["cloze_sst2"] == pytest.approx(
        np.mean(result.items["cloze_sst2"]["values"]))
    assert {p.name for p in out.iterdir()} >= {"suite.json", "suite.md", "suite.png"}
    assert "| blimp |" in (out / "suite.md").read_text()


def test_compare_intervals_and_paired_tests(suite):
    from mlmkit.core.statistics import Statistic, bootstrap, ratio
    from mlmkit.evaluation import SuiteResult, compare_suites, load_suite, mcnemar

    a = load_suite(suite[1])
    good = np.ones(200)
    good[:40] = 0  # 80% right
    bad = good.copy()
    bad[40:100] = 0  # 50% right on the same items
    make = lambda name, v, key: SuiteResult(name, True, {"acc": float(v.mean())},  # noqa: E731
                                            items={"acc": {"kind": "mean",
                                                           "values": v.tolist(),
                                                           "key": key}})
    result = compare_suites([make("a", good, "k"), make("b", bad, "k"), make("c", bad, "z")],
                            n_boot=200, seed=3)
    row = result.rows[0]
    expected = bootstrap([Statistic("acc", "overall", ratio(good, None, 1.0), 200)], 200,
                         n_boot=200, seed=3)[0]
    assert (row.values[0]["low"], row.values[0]["high"]) == (expected.low, expected.high)
    paired = row.differences[0]
    assert paired["diff"] == pytest.approx(-0.3) and paired["significant"]
    assert paired["high"] < 0
    # McNemar: 60 discordant pairs, all one way: p = 2 * 0.5**60
    assert paired["p"] == pytest.approx(2 * 0.5 ** 60)
    assert mcnemar([1, 0, 1, 0], [0, 1, 1, 0]) == 1.0
    assert mcnemar([1, 1, 1, 0, 1], [0, 0, 0, 0, 1]) == pytest.approx(2 * 1 / 8)
    assert row.differences[1]["note"].startswith("different items")
    assert row.differences[1]["significant"] is None
    same = compare_suites([a, a], n_boot=100)
    blimp = next(r for r in same.rows if r.metric == "blimp")
    assert blimp.differences[0]["diff"] == 0 and not blimp.differences[0]["significant"]
    assert math.isfinite(blimp.values[0]["low"])
    assert "*" in result.markdown().splitlines()[2]


def test_cli_suite_and_compare(saved_tiny_mlm, small_data, suite, tmp_path):
    from typer.testing import CliRunner

    from mlmkit.cli import app

    runner = CliRunner()
    model = str(saved_tiny_mlm("bert"))
    done = runner.invoke(app, ["eval", "suite", model, "--data", str(small_data), "--quick",
                               "--parts", "blimp", "--threads", "1", "--json", "--offline",
                               "--run-dir", str(tmp_path / "s")])
    assert done.exit_code == 0, done.output
    uncached = runner.invoke(app, ["eval", "suite", "someorg/not-cached-model", "--offline",
                                   "--parts", "pppl", "--threads", "1"])
    assert uncached.exit_code == 1 and "Traceback" not in uncached.output
    assert "'someorg/not-cached-model'" in uncached.stderr and "cached" in uncached.stderr
    assert json.loads(done.stdout)["metrics"]["blimp"] == pytest.approx(
        suite[0].metrics["blimp"])
    compared = runner.invoke(app, ["eval", "compare", str(tmp_path / "s"),
                                   str(suite[1] / "suite.json"), "--bootstrap", "100"])
    assert compared.exit_code == 0, compared.output
    assert "| blimp |" in compared.stdout and "+0.00 pt" in compared.stdout
    (tmp_path / "junk.json").write_text("{}")
    bad = runner.invoke(app, ["eval", "compare", str(tmp_path / "junk.json"),
                              str(tmp_path / "s")])
    assert bad.exit_code == 1 and "not a suite.json" in bad.stderr
    missing = runner.invoke(app, ["eval", "suite", model, "--data", str(tmp_path),
                                  "--parts", "blimp"])
    assert missing.exit_code == 1 and "not a folder holding blimp/" in missing.stderr
    (tmp_path / "sst2").mkdir()
    no_blimp = runner.invoke(app, ["eval", "suite", model, "--data", str(tmp_path),
                                   "--parts", "blimp"])
    assert no_blimp.exit_code == 1 and "has no blimp/ folder" in no_blimp.stderr
    with pytest.raises(InvalidData):
        from mlmkit.evaluation import load_suite

        load_suite(tmp_path / "junk.json")


@pytest.mark.plots
def test_pretrain_logs_the_suite_as_learning_curves(wordpiece_tokenizer, corpus_sample,
                                                    small_data, tmp_path, monkeypatch):
    import torch

    from mlmkit.errors import InvalidArgument
    from mlmkit.evaluation import training
    from mlmkit.pretraining import PretrainConfig

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(corpus_sample[:200]) + "\n")
    values = dict(model="tiny", tokenizer=wordpiece_tokenizer.name_or_path, corpus=str(corpus),
                  seq_len=32, batch_size=4, steps=4, eval_every=2, eval_blocks=2,
                  pppl_sentences=0, save_every=0, fill_mask_examples=0, device="cpu",
                  precision="fp32", threads=1, seed=0, progress=False,
                  suite_data=str(small_data))
    with pytest.raises(InvalidArgument, match="--eval-suite"):
        training.pretrain(PretrainConfig(**values, eval_suite="blimp,nope",
                                         run_dir=str(tmp_path / "x")))
    assert not (tmp_path / "x").exists()
    original, moved = training.suite_record, []

    def watched(run):  # the suite must leave the training RNG and weights as they were
        rng = torch.get_rng_state()
        weights = [p.detach().clone() for p in run.parameters]
        record = original(run)
        moved.append(not torch.equal(rng, torch.get_rng_state()) or any(
            not torch.equal(a, b) for a, b in zip(weights, run.parameters, strict=True)))
        return record

    monkeypatch.setattr(training, "suite_record", watched)
    mlmkit.pretrain(PretrainConfig(**values, eval_suite="blimp", run_dir=str(tmp_path / "r")))
    lines = [json.loads(line) for line in
             (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    suite = [r for r in lines if r.get("split") == "suite"]
    assert [r["step"] for r in suite] == [2, 4] and moved == [False, False]
    assert all(0 <= r["blimp"] <= 1 for r in suite)
    assert (tmp_path / "r" / "plots" / "suite.png").is_file()


def test_elbo_and_facts_parts_equal_their_own_functions(tiny_mlm, small_data, tmp_path):
    """The suite's `elbo` part is the token-weighted mean of `mlmkit.generation.elbo` over its
    python-docs sample, and its `facts` part is the P@1 of `knowledge_probe` on the file."""
    from mlmkit.corpus.python_docs import python_docs
    from mlmkit.evaluation import evaluate_suite
    from mlmkit.evaluation.suite import _sample, _size
    from mlmkit.generation import elbo
    from mlmkit.probe import knowledge_probe

    mlm = tiny_mlm("bert")
    rows = [{"template": "[X] returns a [Y].", "subject": "It", "object": "list"},
            {"template": "[X] is a [Y].", "subject": "This", "object": "file"},
            {"template": "[X] opens the [Y].", "subject": "It", "object": "file"}]
    facts = tmp_path / "facts.jsonl"
    facts.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = evaluate_suite(mlm, small_data, quick=True, parts="elbo,facts", facts=str(facts),
                            device="cpu", threads=1, progress=False)
    pool = [t for t in python_docs("validation") if 5 <= len(t.split()) <= 60]
    chosen = [pool[i] for i in _sample(len(pool), _size("elbo_texts", True))]
    bounds = elbo(mlm, chosen, samples=_size("elbo_samples", True), seed=0, device="cpu",
                  threads=1, progress=False)
    expected = sum(b.nats for b in bounds) / sum(b.n_tokens for b in bounds)
    assert result.metrics["elbo_nats_per_token"] == pytest.approx(expected, rel=1e-9)
    probed = [f for f in knowledge_probe(mlm, str(facts), device="cpu", threads=1,
                                         progress=False).facts if f.rank is not None]
    assert probed
    assert result.metrics["facts_p@1"] == pytest.approx(
        sum(f.rank == 1 for f in probed) / len(probed))
    assert len(result.items["facts_p@1"]["values"]) == len(probed)


def test_pppl_scores_whole_held_out_texts_and_says_blank_lines(tiny_mlm, small_data, tmp_path):
    """A --texts line over 2,000 characters was cut to 2,000 silently; blank lines were
    dropped silently."""
    import mlmkit
    from mlmkit.evaluation import evaluate_suite

    mlm = tiny_mlm("bert")
    long = "Return" + " " * 2000 + "the items."  # cut at 2,000 characters: 'Return'
    path = tmp_path / "held-out.txt"
    path.write_text(f"Return the items.\n\n{long}\n", encoding="utf-8")
    with pytest.warns(UserWarning, match=r"1 blank line\(s\) of the texts file .* skipped"):
        result = evaluate_suite(mlm, small_data, parts="pppl", texts=str(path), device="cpu",
                                threads=1, progress=False)
    whole = mlmkit.score(mlm, ["Return the items.", long])
    assert sorted(result.items["pppl"]["weights"]) == sorted(s.n_tokens for s in whole)


def test_pretrain_eval_suite_data_and_eval_every_are_checked_before_the_run(
        tmp_path, small_data, wordpiece_tokenizer):
    """A --suite-data without the parts' folders failed after the first evaluation, leaving
    a half-written run directory, and named --data; --eval-suite with --eval-every 0 never
    ran the suite, silently (acceptance check H1)."""
    from mlmkit.errors import InvalidArgument, PathError
    from mlmkit.evaluation.training import SuiteEvaluation
    from mlmkit.pretraining import PretrainConfig
    from mlmkit.pretraining.run import build_run as build_without_hook

    def build_run(config):
        return build_without_hook(config, evaluation=SuiteEvaluation())

    values = dict(model="tiny", steps=4, seq_len=32, eval_every=2, progress=False,
                  tokenizer=wordpiece_tokenizer.name_or_path, threads=1,
                  run_dir=str(tmp_path / "run"))
    with pytest.raises(PathError, match=r"'/no/such/data' \(--suite-data\) is not a folder"):
        build_run(PretrainConfig(**values, eval_suite="blimp", suite_data="/no/such/data"))
    (tmp_path / "only-sst2" / "sst2").mkdir(parents=True)
    with pytest.raises(PathError, match=r"no blimp/ folder for the blimp part.*--eval-suite"):
        build_run(PretrainConfig(**values, eval_suite="blimp",
                                 suite_data=str(tmp_path / "only-sst2")))
    with pytest.raises(InvalidArgument, match="--eval-every 0 asks for none"):
        build_run(PretrainConfig(**{**values, "eval_every": 0}, eval_suite="blimp",
                                 suite_data=str(small_data)))
    # facts needs a facts file, which pretrain has no flag for (it failed mid-run, naming
    # --facts; review of the session's change)
    with pytest.raises(InvalidArgument, match="the facts part needs a facts file"):
        build_run(PretrainConfig(**values, eval_suite="blimp,facts", suite_data=str(small_data)))
    # pretraining does not import the suite: without the hook, eval_suite is refused
    with pytest.raises(InvalidArgument, match="needs the evaluation suite"):
        build_without_hook(PretrainConfig(**values, eval_suite="blimp",
                                          suite_data=str(small_data)))
    assert not (tmp_path / "run").exists()


def test_suite_blimp_names_a_pair_with_no_token_to_score(tiny_mlm, small_data, tmp_path):
    """A sentence of special tokens only gets no score: the pair counts as wrong, said once by
    pair and paradigm (the library's own warning named an index into an internal list)."""
    import json
    import shutil
    import warnings

    from mlmkit.evaluation import evaluate_suite

    data = tmp_path / "data"
    shutil.copytree(small_data, data)
    path = data / "blimp" / "passive_1.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[2]["sentence_bad"] = tiny_mlm("bert").tokenizer.sep_token
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = evaluate_suite(tiny_mlm("bert"), data, quick=True, parts="blimp",
                                device="cpu", threads=1, progress=False)
    said = [str(w.message) for w in caught if "no token to score" in str(w.message)]
    assert said == ["blimp: 1 pair(s) with a sentence that has no token to score count as "
                    "wrong (first: pair 8, paradigm 'passive_1')"]
    assert result.items["blimp"]["values"][8] == 0.0
