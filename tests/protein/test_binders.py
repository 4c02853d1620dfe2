"""Binder design by masked infilling (PepMLM): seeded binders of the asked length at either
terminus, each scored by the PLL of its residues given the target (equal to masking one
residue per forward pass with the full logits)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import transformers
from esm_reference import Reference
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.errors import InvalidArgument, InvalidData
from mlmkit.protein.alphabet import RARE, RESIDUES, STANDARD

TARGET = "MKTAYIAKQRQISFVKSHFSRQ"


@pytest.mark.parametrize("terminus", ["C", "N"])
def test_binders_are_scored_by_the_pll_of_their_region(esm_mlm, terminus):
    binders = esm_mlm.design_binders(TARGET, 5, 3, terminus=terminus, seed=3)
    assert len(binders) == 3
    assert [b.pseudo_perplexity for b in binders] == sorted(b.pseudo_perplexity
                                                            for b in binders)
    reference = Reference(esm_mlm.model, esm_mlm.tokenizer)
    for b in binders:
        assert len(b.sequence) == 5 and set(b.sequence) <= set(RESIDUES)
        whole = TARGET + b.sequence if terminus == "C" else b.sequence + TARGET
        start = len(TARGET) if terminus == "C" else 0
        expected = sum(reference._log_probs(whole, masked_at=i)[i + 1,
                                                                reference._id(whole[i])]
                       for i in range(start, start + 5))
        assert b.pll == pytest.approx(expected, abs=1e-5)
        assert b.pseudo_perplexity == pytest.approx(np.exp(-b.pll / 5))
    again = esm_mlm.design_binders(TARGET, 5, 3, terminus=terminus, seed=3)
    assert [b.sequence for b in again] == [b.sequence for b in binders]


def test_binders_hold_the_standard_residues_unless_all_are_asked_for(esm_mlm):
    """A random model samples rare letters often: by default none reaches a binder."""
    standard = "".join(b.sequence for b in esm_mlm.design_binders(TARGET, 12, 16, seed=0))
    assert set(standard) <= set(STANDARD)
    every = "".join(b.sequence for b in esm_mlm.design_binders(TARGET, 12, 16, seed=0,
                                                               residues="all"))
    assert set(every) <= set(RESIDUES) and set(every) & set(RARE)


def test_a_hub_tokenizer_s_gaps_are_never_sampled(tmp_path):
    """transformers' EsmTokenizer (the hub checkpoints') counts only five specials: the gap
    symbols are ordinary tokens there, and still never reach a binder."""
    import mlmkit
    from mlmkit.models import build_mlm
    from mlmkit.protein import VOCABULARY, protein_tokenizer

    (tmp_path / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    hub = transformers.EsmTokenizer(str(tmp_path / "vocab.txt"))
    assert "-" not in hub.all_special_tokens
    model = build_mlm("esm2-tiny", protein_tokenizer(), seed=0).eval()
    mlm = mlmkit.load((model, hub), device="cpu")
    for residues, letters in (("standard", STANDARD), ("all", RESIDUES)):
        binders = mlm.design_binders(TARGET, 12, 16, seed=0, residues=residues)
        assert set("".join(b.sequence for b in binders)) <= set(letters)


def test_bad_binder_arguments(esm_mlm):
    with pytest.raises(InvalidArgument, match="terminus='X'"):
        esm_mlm.design_binders(TARGET, 5, terminus="X")
    with pytest.raises(InvalidArgument, match="residues='rare'"):
        esm_mlm.design_binders(TARGET, 5, residues="rare")
    with pytest.raises(InvalidArgument, match="length"):
        esm_mlm.design_binders(TARGET, 0)
    with pytest.raises(InvalidData, match="'J' at residue 2"):
        esm_mlm.design_binders("MJK", 4)
    with pytest.raises(InvalidArgument, match=r"the target \(60 residues\) and a binder of 5 "
                       r"\(--length\) take 67 tokens, more than the model's 66"):
        esm_mlm.design_binders("M" * 60, 5)
    with pytest.raises(InvalidData, match="the target sequence is a NoneType"):
        esm_mlm.design_binders(None, 4)


def test_a_target_file_of_several_records_names_the_target(esm_dir, tmp_path):
    fasta = tmp_path / "two.fasta"
    fasta.write_text(f">a\n{TARGET}\n>b\n{TARGET}\n")
    result = CliRunner().invoke(app, ["protein", "binders", str(esm_dir), str(fasta),
                                      "--length", "4", "-n", "2", "--device", "cpu"])
    assert result.exit_code == 1 and "2 records; TARGET takes a FASTA file of one record" \
        in result.output, result.output


def test_binders_command(esm_dir, tmp_path):
    result = CliRunner().invoke(app, ["protein", "binders", str(esm_dir), TARGET,
                                      "--length", "4", "-n", "2", "--seed", "1", "--json",
                                      "--device", "cpu"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(rows) == 2 and all(len(r["sequence"]) == 4 for r in rows)
    out = tmp_path / "binders.csv"
    result = CliRunner().invoke(app, ["protein", "binders", str(esm_dir), TARGET,
                                      "--length", "4", "-n", "2", "--seed", "1", "-o",
                                      str(out), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert out.read_text().splitlines()[0] == "binder,pll,pseudo_perplexity"


def test_binders_take_the_sampler_options_of_infill(esm_dir, esm_mlm):
    """Adaptive reveal with its threshold, from Python and the command line alike; a bad
    sampler option is one line before the model loads."""
    expected = [b.sequence for b in esm_mlm.design_binders(
        TARGET, 6, 3, seed=2, reveal="threshold", threshold=0.3)]
    result = CliRunner().invoke(app, ["protein", "binders", str(esm_dir), TARGET, "--length",
                                      "6", "-n", "3", "--seed", "2", "--reveal", "threshold",
                                      "--threshold", "0.3", "--json", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["sequence"] for line in result.stdout.splitlines()] == expected
    bad = CliRunner().invoke(app, ["protein", "binders", "no-such-model", TARGET, "--length",
                                   "6", "--reveal", "threshold", "--threshold", "2"])
    assert bad.exit_code == 1 and "--threshold" in bad.output
