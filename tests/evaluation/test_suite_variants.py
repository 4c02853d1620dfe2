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


def test_eval_compare_takes_variants_and_pretraining_refuses_the_part(esm_dir, scans):
    """Two models compared on a scan (the same model twice: a zero difference); a
    pretraining run cannot name a scans file, so --eval-suite variants is refused before
    training, not after the first steps."""
    result = CliRunner().invoke(app, ["eval", "compare", str(esm_dir), str(esm_dir),
                                      "--parts", "variants", "--variants", str(scans),
                                      "--device", "cpu", "--bootstrap", "50"])
    assert result.exit_code == 0, result.output
    assert "variants_spearman_scan" in result.stdout
    from mlmkit.errors import InvalidArgument
    from mlmkit.evaluation.training import SuiteEvaluation
    from mlmkit.pretraining.config import PretrainConfig

    for part, what in (("variants", "scans file"), ("retrieval", "BEIR folder")):
        with pytest.raises(InvalidArgument, match=f"the {part} part needs a {what}, which a "
                           "training run has no flag for"):
            SuiteEvaluation().check(PretrainConfig(eval_suite=f"blimp,{part}"))


@pytest.mark.parametrize("entry, message", [
    ("{dms: scan.csv, sequence: wt.fasta, offset: '24', target: fitness}",
     "scan 1's offset is '24': give the number"),
    ("{dms: scan.csv, sequence: wt.fasta, offset: 1.5, target: fitness}",
     "scan 1's offset is 1.5"),
    ("{dms: scan.csv, sequence: null, target: fitness}", "scan 1's sequence is None"),
    ("{dms: scan.csv, sequence: wt.seq, target: fitness}",
     "scan 1's sequence 'wt.seq': no such FASTA file"),
    ("{dms: scan.csv, sequence: wt.fasta, offset: 24, target: fitness, mutation_column: m}",
     "scan 1 has unknown key\\(s\\) mutation_column: a scan takes dms"),
    ("{dms: scan.csv, sequence: wt.fasta, offset: 24, target: fitness, mutation_col: mut}",
     "no 'mut' column .*: name it with mutation_col: in .*scans.yaml"),
    ("{dms: scan.csv, sequence: two.fasta, offset: 24, target: fitness}",
     "2 records; .*scans.yaml: scan 1's sequence takes a FASTA file of one record"),
    ("{dms: same.csv, sequence: wt.fasta, offset: 24, target: fitness}",
     "scan 1's target fitness: every row of .*same.csv holds 0.5: Spearman's ρ needs"),
    ("{dms: scan.csv, sequence: wt.fasta, offset: 1, target: fitness}",
     "check the sequence and scan 1's offset in .*scans.yaml$"),
    ("{dms: nosuch.csv, sequence: wt.fasta, offset: 24, target: fitness}",
     "scans.yaml: scan 1's dms 'nosuch.csv': no such file in .* \\(paths are relative to "
     "the scans file\\)"),
    ("{dms: scan.csv, sequence: wt.fasta, offset: 24, target: fit}",
     "scans.yaml: scan 1's target 'fit' is not a column of .*scan.csv \\(its columns: "),
    ("{dms: scan.csv, sequence: wt.fasta, offset: 24, target: fitness, name: 'my scan/1'}",
     "scan 1's name 'my scan/1' becomes a metric's name"),
])
def test_a_bad_scan_entry_is_one_line_naming_it(scans, entry, message):
    from mlmkit.errors import MlmkitError
    from mlmkit.evaluation.suite import read_scans

    (scans.parent / "two.fasta").write_text(f">a\n{SEQUENCE}\n>b\n{SEQUENCE}\n")
    (scans.parent / "same.csv").write_text("mutant,fitness\nM24A,0.5\nK25A,0.5\n")
    scans.write_text(f"- {entry}\n")
    with pytest.raises(MlmkitError, match=message):
        read_scans(scans)


def test_scans_read_their_files_beside_the_scans_file_and_need_names_of_their_own(
        scans, tmp_path, monkeypatch):
    from mlmkit.evaluation.suite import read_scans

    (tmp_path / "wt.seq").write_text(f">wt\n{SEQUENCE.lower()}\n")  # no FASTA suffix
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "scan.csv").write_text((tmp_path / "scan.csv").read_text())
    scans.write_text("- {dms: scan.csv, sequence: wt.seq, offset: 24, target: fitness}\n")
    monkeypatch.chdir("/")
    assert read_scans(scans)[0].sequence == SEQUENCE
    scans.write_text("- {dms: scan.csv, sequence: wt.seq, offset: 24, target: fitness}\n"
                     "- {dms: sub/scan.csv, sequence: wt.seq, offset: 24, target: fitness}\n")
    with pytest.raises(InvalidData, match="scans 1 and 2 are both named 'scan'"):
        read_scans(scans)


def test_a_sequence_file_named_in_letters_is_read_from_the_scans_folder(scans, tmp_path,
                                                                      monkeypatch):
    """A scans file names its wild type by a file beside it when one is there, even one
    named like a sequence (`GFP`), wherever the suite runs from."""
    from mlmkit.evaluation.suite import read_scans

    (tmp_path / "GFP").write_text(f">wt\n{SEQUENCE}\n")
    scans.write_text("- {dms: scan.csv, sequence: GFP, offset: 24, target: fitness}\n")
    for folder in (tmp_path, "/"):
        monkeypatch.chdir(folder)
        spec = "scans.yaml" if folder == tmp_path else scans
        assert read_scans(spec)[0].sequence == SEQUENCE
