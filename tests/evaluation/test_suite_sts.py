"""The suite's sts part: Spearman's ρ of the cosine of STS-B validation pairs, equal to
`evaluate_sts`, with per-pair outcomes that `eval compare` puts intervals on."""

from __future__ import annotations

import pytest

import mlmkit
from mlmkit.evaluation import compare_suites, evaluate_suite
from mlmkit.evaluation.sts import evaluate_sts
from mlmkit.evaluation.suite import DEFAULT_PARTS


def test_sts_part_equals_evaluate_sts_and_compares(tiny_mlm, shared_data, tmp_path):
    mlm = mlmkit.load(tiny_mlm("bert"), threads=1)
    result = evaluate_suite(mlm, shared_data, parts="sts", quick=True, progress=False)
    expected = evaluate_sts(mlm, shared_data / "stsb" / "validation.tsv", limit=500)
    assert result.metrics["sts_spearman"] == pytest.approx(expected.spearman, abs=1e-9)
    item = result.items["sts_spearman"]
    assert item["kind"] == "spearman" and len(item["values"]) == 500
    assert "sts_spearman" in result.markdown() and "%" not in result.markdown().split(
        "sts_spearman")[1].split("\n")[0]
    comparison = compare_suites([result, result], n_boot=50)
    assert comparison.to_dict()
    assert "sts" not in DEFAULT_PARTS  # an embedding model's number: asked for by name
