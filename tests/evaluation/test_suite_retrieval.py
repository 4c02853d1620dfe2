"""The suite's retrieval part: NDCG@10, MRR@10 and Recall@100 on a BEIR folder, equal to
pytrec_eval's on the same run, with per-query values that `eval compare` pairs."""

from __future__ import annotations

import json

import pytest
from beir_fixture import build_beir

import mlmkit
from mlmkit.errors import InvalidArgument, PathError
from mlmkit.evaluation import compare_suites, evaluate_retrieval, evaluate_suite
from mlmkit.evaluation.ranking_metrics import ranked
from mlmkit.evaluation.retrieval import read_qrels
from mlmkit.evaluation.suite import DEFAULT_PARTS


@pytest.fixture(scope="module")
def beir(shared_data, tmp_path_factory):
    return build_beir(shared_data / "stsb", tmp_path_factory.mktemp("beir") / "stsb-beir")


def _pytrec_per_query(run, qrels) -> dict[str, dict[str, float]]:
    """pytrec_eval's per-query NDCG@10, MRR@10 (recip_rank of the top 10) and Recall@100."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    deep = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"}).evaluate(run)
    top10 = {q: {d: scores[d] for d in ranked(scores)[:10]} for q, scores in run.items()}
    shallow = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    return {q: {"ndcg@10": deep[q]["ndcg_cut_10"], "mrr@10": shallow[q]["recip_rank"],
                "recall@100": deep[q]["recall_100"]} for q in deep}


def test_retrieval_part_equals_pytrec_eval_and_pairs_queries(beir, tiny_mlm, shared_data):
    bert = mlmkit.load(tiny_mlm("bert"), threads=1)
    result = evaluate_suite(bert, shared_data, parts="retrieval", retrieval=beir,
                            progress=False)
    run = evaluate_retrieval(bert, beir / "corpus.jsonl", beir / "queries.jsonl",
                             beir / "qrels").run
    expected = _pytrec_per_query(run, read_qrels(beir / "qrels" / "test.tsv"))
    queries = list(run)  # the qrels' order: the order of the suite's per-query values
    for metric in ("ndcg@10", "mrr@10", "recall@100"):
        name = f"retrieval_{metric}"
        values = [expected[q][metric] for q in queries]
        assert result.metrics[name] == pytest.approx(sum(values) / len(values), abs=1e-9)
        assert result.items[name]["values"] == pytest.approx(values, abs=1e-9)
    assert result.details["retrieval"] == {"data": str(beir), "queries": 40,
                                           "documents": 120}
    assert "retrieval" not in DEFAULT_PARTS

    roberta = mlmkit.load(tiny_mlm("roberta"), threads=1)
    other = evaluate_suite(roberta, shared_data, retrieval=beir, parts="retrieval",
                           quick=True, progress=False)
    comparison = compare_suites([result, other], n_boot=200).to_dict()
    rows = {row["metric"]: row for row in comparison["rows"]}
    difference = rows["retrieval_ndcg@10"]["differences"][0]
    assert difference["low"] is not None and difference["low"] <= difference["diff"] \
        <= difference["high"]  # the same 40 queries (quick keeps up to 300): paired
    assert difference["diff"] == pytest.approx(
        other.metrics["retrieval_ndcg@10"] - result.metrics["retrieval_ndcg@10"])


def test_quick_keeps_the_same_queries_for_every_model(beir, tiny_mlm, shared_data,
                                                      monkeypatch):
    """A quick run scores a seeded subset of the queries, the same subset every time. (Its
    values need not be a subset of the full run's: a query's vector depends by float
    rounding on the batch it is embedded with, and a tiny random model's scores hold
    near-ties that rounding can reorder.)"""
    from mlmkit.evaluation import suite as suite_module

    asked = []  # the query ids of each retrieval run
    retrieve = suite_module.retrieve
    monkeypatch.setattr(suite_module, "retrieve",
                        lambda mlm, data, **kw: asked.append(list(data.queries))
                        or retrieve(mlm, data, **kw))
    bert = mlmkit.load(tiny_mlm("bert"), threads=1)
    full = evaluate_suite(bert, shared_data, retrieval=beir, parts="retrieval",
                          progress=False)
    monkeypatch.setitem(suite_module.SIZES, "retrieval_queries", (10, None))
    quick = [evaluate_suite(bert, shared_data, retrieval=beir, parts="retrieval", quick=True,
                            progress=False) for _ in range(2)]
    values = [q.items["retrieval_mrr@10"]["values"] for q in quick]
    assert len(values[0]) == 10 and values[0] == values[1]
    assert quick[0].items["retrieval_mrr@10"]["key"] == quick[1].items["retrieval_mrr@10"]["key"]
    assert quick[0].items["retrieval_mrr@10"]["key"] != full.items["retrieval_mrr@10"]["key"]
    assert len(asked[1]) == 10 and asked[1] == asked[2] and set(asked[1]) < set(asked[0])


def test_retrieval_part_is_checked_before_any_work(beir, tiny_mlm, shared_data, tmp_path):
    bert = tiny_mlm("bert")
    with pytest.raises(InvalidArgument, match="needs a BEIR folder"):
        evaluate_suite(bert, shared_data, parts="retrieval", progress=False)
    with pytest.raises(InvalidArgument, match="no retrieval part"):
        evaluate_suite(bert, shared_data, parts="sts", retrieval=beir, progress=False)
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "corpus.jsonl").write_text((beir / "corpus.jsonl").read_text())
    with pytest.raises(PathError, match="queries.jsonl, qrels/test.tsv"):
        evaluate_suite(bert, shared_data, retrieval=tmp_path / "half", progress=False)


def test_cli_suite_retrieval_and_compare(beir, saved_tiny_mlm, shared_data, tmp_path):
    from typer.testing import CliRunner

    from mlmkit.cli import app

    runner = CliRunner()
    done = runner.invoke(app, ["eval", "suite", str(saved_tiny_mlm("bert")), "--parts",
                               "retrieval", "--retrieval", str(beir), "--data",
                               str(shared_data), "--threads", "1", "--json",
                               "--run-dir", str(tmp_path / "a")])
    assert done.exit_code == 0, done.output
    assert set(json.loads(done.stdout)["metrics"]) == {
        "retrieval_ndcg@10", "retrieval_mrr@10", "retrieval_recall@100"}
    # a model without a suite.json: compare runs its suite with --parts and --retrieval
    compared = runner.invoke(app, ["eval", "compare", str(tmp_path / "a"),
                                   str(saved_tiny_mlm("bert")), "--parts", "retrieval",
                                   "--retrieval", str(beir), "--data", str(shared_data),
                                   "--threads", "1", "--bootstrap", "100"])
    assert compared.exit_code == 0, compared.output
    line = next(r for r in compared.stdout.splitlines() if r.startswith("| retrieval_ndcg@10"))
    assert line.count("[") == 3 and "+0.00 pt [+0.00, +0.00]" in line  # paired by query
