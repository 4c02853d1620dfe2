"""The suite's variants part: Spearman's ρ of zero-shot scores per deep mutational scan,
with per-item outcomes that `eval compare` puts intervals on."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.core.correlation import spearman
from mlmkit.errors import InvalidArgument, InvalidData
from mlmkit.evaluation import compare_suites, evaluate_suite

SEQUENCE = "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQ"


@pytest.fixture()
def scans(tmp_path):
    (tmp_path / "wt.fasta").write_text(f">wt\n{SEQUENCE}\n")
    rows = [f"{SEQUENCE[i]}{i + 24}{a},{(i * 7 + ord(a)) % 11 / 10}"
            for i in range(8) for a in "AGW" if a != SEQUENCE[i]]
    (tmp_path / "scan.csv").write_text("mutant,fitness\n" + "\n".join(rows) + "\n")
    spec = tmp_path / "scans.yaml"
    spec.write_text("- {dms: scan.csv, sequence: wt.fasta, offset: 24, target: fitness}\n")
    return spec


def test_variants_part_reports_spearman_per_scan(esm_mlm, scans):
    result = evaluate_suite(esm_mlm, parts="variants", variants=scans, progress=False)
    item = result.items["variants_spearman_scan"]
    assert result.metrics["variants_spearman_scan"] == pytest.approx(
        spearman(item["values"], item["weights"]))
    assert item["kind"] == "spearman" and len(item["values"]) == 22
    comparison = compare_suites([result, result], n_boot=100)
    assert comparison.to_dict()


def test_a_scans_file_without_the_part_or_a_bad_scan_is_an_error(esm_mlm, scans, tmp_path):
    with pytest.raises(InvalidArgument, match="--parts has no variants part"):
        evaluate_suite(esm_mlm, parts="pppl", variants=scans)
    with pytest.raises(InvalidArgument, match="needs a scans file"):
        evaluate_suite(esm_mlm, parts="variants")
    (tmp_path / "scan.csv").write_text("mutant,fitness\nA24G,1\n")
    with pytest.raises(InvalidData, match="scan.csv line 2 \\('A24G'\\): the wild type at 24"):
        evaluate_suite(esm_mlm, parts="variants", variants=scans)


def test_eval_suite_command_takes_variants(esm_dir, scans):
    result = CliRunner().invoke(app, ["eval", "suite", str(esm_dir), "--parts", "variants",
                                      "--variants", str(scans), "--device", "cpu", "--json"])
    assert result.exit_code == 0, result.output
    assert "variants_spearman_scan" in result.stdout
