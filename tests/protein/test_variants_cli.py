"""`mlmkit protein variants`: scores written next to the input rows, Spearman against
fitness (checked on BLAT_ECOLX with ESM-1v's published scores), one-line errors naming
the file and line."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from scipy.stats import spearmanr
from typer.testing import CliRunner

import mlmkit
from mlmkit.cli import app
from mlmkit.core.correlation import ranks, spearman, spearman_score

SEQUENCE = "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRV"


def _invoke(args):
    return CliRunner().invoke(app, args)


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_scores_are_written_next_to_the_input_rows(esm_dir, esm_mlm, tmp_path):
    dms = _write(tmp_path / "dms.csv", "mutant,fitness\nK25A,0.5\nT26G:Y28W,-1.0\nM24L,0.1\n"
                 "A27C,0.3\nI29V,-0.2\nK31R,0.0\n")
    fasta = _write(tmp_path / "wt.fasta", f">wt some protein\n{SEQUENCE[:20]}\n{SEQUENCE[20:]}\n")
    out = tmp_path / "out.csv"
    result = _invoke(["protein", "variants", str(esm_dir), "--sequence", fasta, dms,
                      "--offset", "24", "-o", str(out), "--target-field", "fitness",
                      "--device", "cpu", "--bootstrap", "100"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(out.open()))
    assert [r["mutant"] for r in rows] == ["K25A", "T26G:Y28W", "M24L", "A27C", "I29V", "K31R"]
    expected = esm_mlm.variant_effects(SEQUENCE, [r["mutant"] for r in rows], offset=24)
    np.testing.assert_allclose([float(r["score"]) for r in rows], expected, atol=1e-12)
    assert rows[0]["fitness"] == "0.5"
    rho = spearmanr([float(r["score"]) for r in rows], [float(r["fitness"]) for r in rows])
    assert f"{rho.statistic:.4f}" in result.stdout and "n=6" in result.stdout


def test_spearman_matches_scipy_with_ties():
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 5, 200).astype(float), rng.normal(size=200)
    assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    assert list(ranks(np.array([3.0, 1.0, 3.0, 2.0]))) == [3.5, 1.0, 3.5, 2.0]
    score = spearman_score(x, y, n_boot=200, seed=1)
    assert score.low < score.value < score.high
    assert spearman_score(x, y, n_boot=200, seed=1) == score  # seeded


def test_published_esm1v_scores_reproduce_their_spearman(shared_data, monkeypatch, tmp_path,
                                                         esm_dir):
    """A model whose scores are ESM-1v's published column gives that column's Spearman
    against fitness_2500: a check of the reading, ordering and correlation code."""
    path = shared_data / "protein" / "BLAT_ECOLX_Ranganathan2015.csv"
    table = list(csv.DictReader(path.open()))
    published = {row["mutant"]: float(row["esm1v_1"]) for row in table}
    fitness = [float(row["fitness_2500"]) for row in table]
    expected = spearmanr([published[r["mutant"]] for r in table], fitness).statistic

    def published_scores(self, sequence, mutations, **options):
        return np.array([published[m] for m in mutations])

    monkeypatch.setattr(mlmkit.MLM, "variant_effects", published_scores)
    result = _invoke(["protein", "variants", str(esm_dir), "--sequence",
                      str(shared_data / "protein" / "BLAT_ECOLX_wildtype.fasta"), str(path), "--offset", "24", "--target-field", "fitness_2500", "--json",
                      "--device", "cpu", "--bootstrap", "200"])
    assert result.exit_code == 0, result.output
    line = json.loads(result.stdout)
    assert line["spearman"] == pytest.approx(expected, abs=1e-12)
    assert line["n"] == len(table) == 4996
    assert line["low"] < line["spearman"] < line["high"]


@pytest.mark.parametrize("dms, message", [
    ("mutant,fitness\nK25A,1\nA25G,2\n", "dms.csv line 3 ('A25G'): the wild type at 25 is 'K'"),
    ("mutant,fitness\nK25A,1\nK99A,2\n", "dms.csv line 3 ('K99A'): position 99 is outside"),
    ("mutant,fitness\nK25J,1\n", "dms.csv line 2 ('K25J'): 'J' is not an amino-acid letter"),
    ("", "dms.csv is empty"),
    ("mutant,fitness\n", "dms.csv has a header but no rows"),
    ("mutant,fitness\nK25A,1,3\n", "dms.csv line 2: 3 fields, the header has 2"),
    ("variant,fitness\nK25A,1\n", "dms.csv line 1: no 'mutant' column"),
    ("mutant,fitness\nK25A,\n", "dms.csv line 2: fitness is '', not a finite number"),
    ("mutant,fitness\nK25A,1\n,2\n", "dms.csv line 3 (''): no mutation given"),
    ("mutant,mutant\nK25A,K25A\n", "dms.csv line 1: the column 'mutant' appears twice"),
    ('mutant,fitness\n"K25A,1\nK26A,2\n', "dms.csv line 2: a quote opened in this row is "
     "never closed"),
    ('mutant,fitness\nK25A,1\n"K26\nA",2\n', "dms.csv line 3 ('K26\\nA')"),  # where it begins
    ("mutant\tfitness\nK25A\t1\n", "dms.csv line 1: the header is one column holding tabs: "
     "a DMS file is comma-separated"),
    ("mutant;fitness\nK25A;1\n", "holding semicolons"),
])
def test_bad_dms_files_are_one_line_naming_the_row(esm_dir, tmp_path, dms, message):
    path = _write(tmp_path / "dms.csv", dms)
    result = _invoke(["protein", "variants", str(esm_dir), "--sequence", SEQUENCE, path, "--offset", "24", "--target-field", "fitness", "--device", "cpu"])
    assert result.exit_code == 1
    assert message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("arguments, message", [
    (["--bootstrap", "2000000"], "n_boot=2000000 (--bootstrap) must be a whole number"),
    (["--bootstrap", "-1"], "(--bootstrap) must be a whole number"),
    (["--score-field", " "], "--score-field is empty"),
    (["--target-field", "mutant"], "--target-field 'mutant' is the mutation column"),
    (["--target-field", ""], "--target-field is empty"),
])
def test_bad_options_are_refused_before_any_work(esm_dir, tmp_path, arguments, message):
    path = _write(tmp_path / "dms.csv", "mutant,fitness\nK25A,1\nT26G,2\n")
    out = tmp_path / "out.csv"
    result = _invoke(["protein", "variants", str(esm_dir), "--sequence", SEQUENCE, path,
                      "--offset", "24", "-o", str(out), "--device", "cpu", *arguments])
    assert result.exit_code == 1
    assert message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()  # refused before scoring


def test_letters_that_name_a_file_are_refused_as_ambiguous(esm_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "MKV", ">other\nMKTAYIAK\n")
    dms = _write(tmp_path / "dms.csv", "mutant\nK2A\n")
    result = _invoke(["protein", "variants", str(esm_dir), "--sequence", "MKV", dms, "-o",
                      "out.csv", "--device", "cpu"])
    assert result.exit_code == 1
    assert "'MKV' is both a file here and a sequence of letters: write ./MKV" in result.stderr
    result = _invoke(["protein", "variants", str(esm_dir), "--sequence", "./MKV", dms, "-o",
                      "out.csv", "--device", "cpu"])
    assert result.exit_code == 0, result.stderr
    result = _invoke(["protein", "variants", str(esm_dir), "--sequence", "/dev/null", dms,
                      "-o", "out2.csv", "--device", "cpu"])
    assert result.exit_code == 1 and "is not a regular file" in result.stderr
    assert mlmkit.protein.read_sequence(tmp_path / "MKV") == "MKTAYIAK"  # a Path is a file
    _write(tmp_path / "wildtype", ">wt\nMKTAYIAK\n")  # a name in lower case: the file
    assert mlmkit.protein.read_sequence("wildtype") == "MKTAYIAK"


def test_a_byte_order_mark_is_not_part_of_the_first_column(esm_dir, tmp_path):
    """A CSV saved by a spreadsheet starts with a UTF-8 byte-order mark."""
    path = _write(tmp_path / "dms.csv", "\ufeffmutant,fitness\nK25A,1\nT26G,2\n")
    result = _invoke(["protein", "variants", str(esm_dir), "--sequence", SEQUENCE, path,
                      "--offset", "24", "-o", str(tmp_path / "out.csv"), "--device", "cpu"])
    assert result.exit_code == 0, result.stderr
    with open(tmp_path / "out.csv", encoding="utf-8") as f:
        assert [row["mutant"] for row in csv.DictReader(f)] == ["K25A", "T26G"]


@pytest.mark.parametrize("fasta, message", [
    (">wt\n>other\nMKV\n", "wt.fasta line 1: the record 'wt' has no sequence"),
    ("MKV\n", "wt.fasta line 1: sequence before any '>' header"),
    (">a\nMKV\n>b\nMKV\n", "2 records; --sequence takes a FASTA file of one record"),
    (">wt\nMK1V\n", "'1' at residue 3 is not an amino-acid letter"),
    (">wt\n\n", "wt.fasta line 1: the record 'wt' has no sequence"),
    ("", "wt.fasta: no FASTA record"),
])
def test_bad_fasta_files_are_one_line(esm_dir, tmp_path, fasta, message):
    path = _write(tmp_path / "wt.fasta", fasta)
    dms = _write(tmp_path / "dms.csv", "mutant\nK2A\n")
    result = _invoke(["protein", "variants", str(esm_dir), "--sequence", path, dms,
                      "-o", str(tmp_path / "out.csv"), "--device", "cpu"])
    assert result.exit_code == 1
    assert message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_scan_or_the_wild_type_may_come_from_standard_input(esm_dir, esm_mlm, tmp_path):
    """`-` reads standard input; a wild type longer than a file name is letters, not a path."""
    long = (SEQUENCE * 8)[:300]
    dms = "mutant,fitness\nK25A,0.5\nT26G,-1.0\nM24L,0.1\n"
    expected = esm_mlm.variant_effects(long, ["K25A", "T26G", "M24L"], offset=24)
    for args, stdin in (([str(esm_dir), "-", "--sequence", long], dms),
                        ([str(esm_dir), _write(tmp_path / "d.csv", dms), "--sequence", "-"],
                         f">wt\n{long[:100]}\n{long[100:].lower()}\n")):
        result = CliRunner().invoke(app, ["protein", "variants", *args, "--offset", "24",
                                          "-o", "-", "--device", "cpu"], input=stdin)
        assert result.exit_code == 0, result.output
        scores = [float(row["score"]) for row in csv.DictReader(result.stdout.splitlines())]
        np.testing.assert_allclose(scores, expected, atol=1e-12)
    both = _invoke(["protein", "variants", str(esm_dir), "-", "--sequence", "-", "-o", "-"])
    assert both.exit_code == 1 and "both read standard input" in both.output


def test_a_constant_target_is_refused_and_a_nan_correlation_is_null_in_json(esm_dir, tmp_path):
    same = _write(tmp_path / "same.csv", "mutant,fitness\nK25A,1\nT26G,1\nM24L,1\n")
    result = _invoke(["protein", "variants", str(esm_dir), same, "--sequence", SEQUENCE,
                      "--offset", "24", "--target-field", "fitness", "--device", "cpu"])
    assert result.exit_code == 1
    assert "every row of" in result.output and "values that differ" in result.output
    score = spearman_score([1.0, 2.0, 3.0, 4.0], [5.0] * 4, n_boot=0)
    assert score.note == "undefined: one side holds a single value"


def test_names_of_no_file_and_outputs_over_the_wild_type_are_refused(esm_dir, tmp_path,
                                                                     monkeypatch):
    """A lower-case word or a file name that names no file was read as residues (`insulin`:
    the protein INSULIN); `-o` naming the wild type's FASTA overwrote it."""
    monkeypatch.chdir(tmp_path)
    dms = _write(tmp_path / "dms.csv", "mutant\nK2A\n")
    for given in ("insulin", "mysequence.txt", "Wildtype"):
        result = _invoke(["protein", "variants", str(esm_dir), "--sequence", given, dms,
                          "-o", "out.csv", "--device", "cpu"])
        assert result.exit_code == 1, (given, result.output)
        assert ("no such file" in result.stderr or "does not exist" in result.stderr), \
            (given, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1
    fasta = _write(tmp_path / "wt.fasta", ">wt\nMKTAYIAK\n")
    result = _invoke(["protein", "variants", str(esm_dir), "--sequence", fasta, dms, "-o",
                      fasta, "--device", "cpu"])
    assert result.exit_code == 1 and "is also an input" in result.stderr
    assert (tmp_path / "wt.fasta").read_text() == ">wt\nMKTAYIAK\n"
    result = _invoke(["protein", "binders", str(esm_dir), fasta, "--length", "3", "-n", "1",
                      "-o", fasta, "--device", "cpu"])
    assert result.exit_code == 1 and "is also an input" in result.stderr
    assert (tmp_path / "wt.fasta").read_text() == ">wt\nMKTAYIAK\n"
    result = _invoke(["protein", "binders", str(esm_dir), fasta, "--length", "3", "-n", "1",
                      "-o", "-", "--json", "--device", "cpu"])
    assert result.exit_code == 1 and "--json and -o - both write standard output" in \
        result.stderr


def test_dms_files_of_another_kind_are_named_and_headers_kept(esm_dir, tmp_path):
    """Blank lines before the header were 'empty'; a FASTA given as the DMS, a folder and a
    gzipped CSV got misleading lines; the output rewrote the header's spacing."""
    import gzip

    def run(dms, out="out.csv", *more):
        return _invoke(["protein", "variants", str(esm_dir), "--sequence", SEQUENCE, str(dms),
                        "--offset", "24", "-o", str(tmp_path / out), "--device", "cpu", *more])

    blank = _write(tmp_path / "blank.csv", "\n\n mutant ,fitness\nK25A,1\nT26G,2\n")
    result = run(blank)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out.csv").read_text().splitlines()[0] == " mutant ,fitness,score"
    fasta = _write(tmp_path / "wt.fasta", f">wt; a protein\n{SEQUENCE}\n")
    result = run(fasta)
    assert result.exit_code == 1 and "wt.fasta line 1 starts with '>': this is a FASTA " \
        "file, not a DMS CSV" in result.stderr, result.stderr
    (tmp_path / "folder").mkdir()
    result = run(tmp_path / "folder")
    assert result.exit_code == 1 and "folder is a directory" in result.stderr
    (tmp_path / "dms.csv.gz").write_bytes(gzip.compress(b"mutant,fitness\nK25A,1\nT26G,2\n"))
    result = run(tmp_path / "dms.csv.gz", "gz.csv", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"strategy": "masked-marginals", "scores": 2,
                                         "output": str(tmp_path / "gz.csv")}
    assert (tmp_path / "gz.csv").read_text().splitlines()[1].startswith("K25A,1,")


def test_mutations_of_the_wrong_type_and_a_text_tokenizer_are_said(esm_mlm, tiny_mlm):
    """None as the mutations raised a TypeError; a text model's tokenizer scored proteins
    without a word."""
    from mlmkit.errors import InvalidArgument
    from mlmkit.protein.variants import variant_effects

    with pytest.raises(InvalidArgument, match=r"mutations=None: give a mutation string"):
        esm_mlm.variant_effects(SEQUENCE, None)
    scores = esm_mlm.variant_effects(SEQUENCE, np.array(["K2A", "T3G"]))  # an array is fine
    assert scores.shape == (2,)
    with pytest.warns(UserWarning, match="tokenizer does not spell a protein a residue per "
                      "token"):
        variant_effects(tiny_mlm("bert"), SEQUENCE[:12], ["K2A"])  # a text WordPiece
