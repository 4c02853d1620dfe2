"""STS correlations and BEIR retrieval metrics: equal to scipy's and pytrec_eval's figures."""

from __future__ import annotations

import numpy as np
import pytest
from beir_fixture import build_beir

import mlmkit
from mlmkit.core.correlation import spearman
from mlmkit.errors import InvalidData
from mlmkit.evaluation import evaluate_retrieval, evaluate_sts, write_run
from mlmkit.evaluation.ranking_metrics import mean_metrics, per_query, ranked
from mlmkit.evaluation.retrieval import read_qrels, search
from mlmkit.evaluation.sts import cosine_rows, read_sts_pairs


@pytest.fixture(scope="module")
def beir(shared_data, tmp_path_factory):
    return build_beir(shared_data / "stsb", tmp_path_factory.mktemp("beir") / "stsb-beir")


def _pytrec_means(run, qrels):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"})
    deep = evaluator.evaluate(run)
    top10 = {q: {d: scores[d] for d in ranked(scores)[:10]} for q, scores in run.items()}
    shallow = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    queries = sorted(deep)
    return {"ndcg@10": np.mean([deep[q]["ndcg_cut_10"] for q in queries]),
            "recall@100": np.mean([deep[q]["recall_100"] for q in queries]),
            "mrr@10": np.mean([shallow[q]["recip_rank"] for q in queries])}


def test_sts_correlations_equal_scipy(shared_data, tiny_mlm):
    stats = pytest.importorskip("scipy.stats")
    mlm = tiny_mlm("bert")
    data = shared_data / "stsb" / "validation.tsv"
    result = evaluate_sts(mlm, data, limit=200)
    firsts, seconds, gold = read_sts_pairs(data, limit=200)
    vectors = mlmkit.embed(mlm, firsts + seconds)
    similarity = cosine_rows(vectors[:200], vectors[200:])
    assert result.pairs == 200
    assert abs(result.spearman - stats.spearmanr(similarity, gold).statistic) < 1e-12
    assert abs(result.pearson - stats.pearsonr(similarity, gold).statistic) < 1e-12


def test_spearman_with_ties_equals_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 5, 300).astype(float), rng.random(300).round(1)
    assert abs(spearman(a, b) - stats.spearmanr(a, b).statistic) < 1e-12


def test_retrieval_metrics_equal_pytrec_eval(beir, tiny_mlm):
    result = evaluate_retrieval(tiny_mlm("bert"), beir / "corpus.jsonl", beir / "queries.jsonl",
                                beir / "qrels")
    qrels = read_qrels(beir / "qrels" / "test.tsv")
    expected = _pytrec_means(result.run, qrels)
    assert result.queries == 40 and result.documents == 120
    assert abs(result.ndcg_at_10 - expected["ndcg@10"]) < 1e-9
    assert abs(result.mrr_at_10 - expected["mrr@10"]) < 1e-9
    assert abs(result.recall_at_100 - expected["recall@100"]) < 1e-9
    assert all(len(scores) == 100 for scores in result.run.values())  # top-100 of 120


def test_metrics_with_ties_and_unjudged_queries_equal_pytrec_eval():
    rng = np.random.default_rng(1)
    qrels = {f"q{i}": {f"d{j}": int(rng.integers(0, 4)) for j in rng.choice(300, 12)}
             for i in range(30)}
    qrels["q-none"] = {"d1": 0}
    run = {q: {f"d{j}": float(rng.integers(0, 20)) for j in range(300)} for q in qrels}
    del run["q3"]  # a judged query without a run is left out, as trec_eval does
    means = mean_metrics(per_query(run, qrels))
    expected = _pytrec_means(run, qrels)
    for name, value in expected.items():
        assert abs(means[name] - value) < 1e-9, name


def test_search_is_exact_top_k():
    rng = np.random.default_rng(2)
    queries, documents = rng.random((5, 8), dtype=np.float32), rng.random((70, 8),
                                                                          dtype=np.float32)
    import mlmkit.evaluation.retrieval as retrieval

    old = retrieval.DOCUMENT_CHUNK
    retrieval.DOCUMENT_CHUNK = 16  # several blocks, merged
    try:
        scores, rows = search(queries, documents, 10)
    finally:
        retrieval.DOCUMENT_CHUNK = old
    full = queries @ documents.T
    expected = np.argsort(-full, axis=1, kind="stable")[:, :10]
    assert np.array_equal(rows, expected)
    assert np.allclose(scores, np.take_along_axis(full, expected, 1))


def test_run_file_and_bad_qrels(beir, tiny_mlm, tmp_path):
    result = evaluate_retrieval(tiny_mlm("bert"), beir / "corpus.jsonl", beir / "queries.jsonl",
                                beir / "qrels" / "test.tsv", top_k=5)
    write_run(result.run, tmp_path / "run.trec")
    lines = (tmp_path / "run.trec").read_text().splitlines()
    assert len(lines) == 40 * 5 and lines[0].split()[1:4:2] == ["Q0", "1"]
    bad = tmp_path / "qrels.tsv"
    bad.write_text("query-id\tcorpus-id\tscore\nq999\td1\t1\n")
    with pytest.raises(InvalidData, match="query 'q999' .* is not in"):
        evaluate_retrieval(tiny_mlm("bert"), beir / "corpus.jsonl", beir / "queries.jsonl", bad)
