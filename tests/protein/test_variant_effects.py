"""Variant-effect scores equal the strategies' definitions (one sequence per forward pass,
full logits: esm_reference.py) on a tiny ESM-2, windows included; bad mutations are one
line naming the mutation."""

from __future__ import annotations

import numpy as np
import pytest
from esm_reference import Reference

import mlmkit
import mlmkit.protein.variants as variants_module
from mlmkit.errors import InvalidArgument, InvalidData
from mlmkit.protein import STRATEGIES, residue_window

# 40 residues: fits the tiny model's 64-residue window.
SHORT = "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRV"
# 150 residues: scored in sliding windows.
LONG = (SHORT + "GDGTQDNLSGAEKAVQVKVKALPDAQFEVVHSLAKWKRQTLGQHDFSAGEGLYTHMKALRPDEDRLSPLHS"
        "VYVDQWDWERVMGDGERQFSTLKSTVEAIWAGIKATEAAVSEFGLAP")[:150]


def _mutations(sequence, offset=1):
    """Singles at several positions (two at one position), a double and a triple."""
    out = []
    for index, mutant in ((0, "A"), (3, "W"), (3, "G"), (len(sequence) // 2, "P"),
                          (len(sequence) - 1, "C")):
        if sequence[index] == mutant:
            mutant = "L"
        out.append(f"{sequence[index]}{index + offset}{mutant}")
    i, j, k = 5, len(sequence) // 3, len(sequence) - 8
    out.append(f"{sequence[i]}{i + offset}D:{sequence[j]}{j + offset}E")
    out.append(f"{sequence[i]}{i + offset}H:{sequence[j]}{j + offset}K:"
               f"{sequence[k]}{k + offset}R")
    return [m for m in out if m[0] != m[-1]]


@pytest.fixture(scope="module")
def reference(esm_mlm):
    return Reference(esm_mlm.model, esm_mlm.tokenizer)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("sequence", [SHORT, LONG], ids=["fits", "windows"])
def test_each_strategy_equals_its_definition(esm_mlm, reference, strategy, sequence):
    mutations = _mutations(sequence, offset=24)
    got = esm_mlm.variant_effects(sequence, mutations, strategy=strategy, offset=24)
    expected = reference.score(strategy, sequence, mutations, offset=24)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    assert got.dtype == np.float64 and got.shape == (len(mutations),)


def test_pll_is_exact_in_float32_and_fused_under_bf16(esm_mlm, esm_dir, monkeypatch):
    """float32 PLL runs the model's own operations (`full_forward`: sums of hundreds of
    terms, each the one-copy value); bf16, which rounds every term anyway, the fused
    layers."""
    entered = []
    exact = variants_module.full_forward
    monkeypatch.setattr(variants_module, "full_forward",
                        lambda: entered.append(1) or exact())
    mutations = _mutations(SHORT)
    fp32 = esm_mlm.variant_effects(SHORT, mutations, strategy="pll")
    assert entered == [1]
    bf16 = mlmkit.load(esm_dir, device="cpu", precision="bf16")
    fast = bf16.variant_effects(SHORT, mutations, strategy="pll")
    assert entered == [1]
    np.testing.assert_allclose(fast, fp32, atol=0.5)


def test_scores_do_not_depend_on_the_batching(esm_mlm):
    mutations = _mutations(LONG)
    whole = esm_mlm.variant_effects(LONG, mutations)
    small = esm_mlm.variant_effects(LONG, mutations, batch_tokens=70)
    np.testing.assert_allclose(small, whole, atol=1e-5, rtol=0)


def test_windows_equal_whole_sequence_scoring_where_it_fits(esm_mlm, esm_dir):
    """A sequence that fits the window is scored whole: a model with a larger window (the
    same weights, its rotary positions need no table) gives the same scores."""
    wide = mlmkit.load(esm_dir, device="cpu")
    wide.model.config.max_position_embeddings = 1026
    wide.tokenizer.model_max_length = 1026
    for strategy in STRATEGIES:
        np.testing.assert_allclose(
            wide.variant_effects(SHORT, _mutations(SHORT), strategy=strategy),
            esm_mlm.variant_effects(SHORT, _mutations(SHORT), strategy=strategy),
            atol=1e-5, rtol=0)
    assert residue_window(10, 40, 64) == (0, 40)
    assert residue_window(10, 150, 64) == (0, 64)
    assert residue_window(140, 150, 64) == (86, 150)
    assert residue_window(70, 150, 64) == (38, 102)


def test_masked_marginals_run_one_pass_per_position(esm_mlm, monkeypatch):
    """All substitutions at a position share one masked copy: passes = positions."""
    import mlmkit.protein.variants as variants

    seen = []
    real = variants.run_jobs

    def counting(model, jobs, *args, **kwargs):
        seen.append(len(jobs))
        return real(model, jobs, *args, **kwargs)

    monkeypatch.setattr(variants, "run_jobs", counting)
    scan = [f"{SHORT[i]}{i + 1}{a}" for i in range(10) for a in "ACDEFGHIKLMNPQRSTVWY"
            if a != SHORT[i]]
    scores = esm_mlm.variant_effects(SHORT, scan)
    assert seen == [10] and len(scores) == 190


def test_pll_scores_each_distinct_sequence_once(esm_mlm, monkeypatch):
    """The wild type once per window, a mutant listed twice once: PLL passes are
    residues × distinct sequences, not 2 × residues × variants."""
    import mlmkit.protein.variants as variants
    from mlmkit.models import sparse_last_layer

    seen = []
    real = variants.score_token_ids

    def counting(model, rows, targets, **kwargs):
        seen.append([len(t) for t in targets])
        # the model's own forward: each summed log-probability the one-copy value, bit for bit
        assert sparse_last_layer._FULL_FORWARD.on
        assert kwargs["batch_tokens"] is None  # the engine's default
        return real(model, rows, targets, **kwargs)

    monkeypatch.setattr(variants, "score_token_ids", counting)
    scores = esm_mlm.variant_effects(SHORT, ["K2A", "T3G", "K2A"], strategy="pll")
    assert seen == [[40, 40, 40]]  # K2A, the wild type, T3G
    assert scores[0] == scores[2] and scores[0] != scores[1]


def test_free_function_and_single_string(esm_dir, esm_mlm):
    one = mlmkit.variant_effects(esm_dir, SHORT, "K2A", device="cpu")
    assert one.shape == (1,)
    np.testing.assert_allclose(one, esm_mlm.variant_effects(SHORT, ["K2A"]), atol=1e-6)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_multi_mutant_wider_than_the_window_scores_every_mutation(esm_mlm, strategy):
    """Residues 6 and 143 of 150, 64-residue windows: no window holds both, nor the one of
    their mean position; the double is the sum of its singles, each in its own window."""
    first, second = f"{LONG[5]}6D", f"{LONG[142]}143R"
    double, one, two = esm_mlm.variant_effects(
        LONG, [f"{first}:{second}", first, second], strategy=strategy)
    assert abs(one) > 1e-3 and abs(two) > 1e-3
    assert double == pytest.approx(one + two, abs=1e-5)


@pytest.mark.parametrize("mutation, message", [
    ("A2G", "mutation 1 ('A2G'): the wild type at 2 is 'K', not 'A'"),
    ("K99G", "position 99 is outside the sequence (1..40"),
    ("K2J", "'J' is not an amino-acid letter"),
    ("K2", "'K2' is not a mutation"),
    ("K2*", "'K2*' is a stop or a deletion"), ("K2-", "'K2-' is a stop or a deletion"),
    ("", "no mutation given"),
    ("K2A:K2G", "position 2 is mutated twice"),
    ("K2X", "'X' is an ambiguous code"), ("K2b", "'B' is an ambiguous code"),
    ("K2A::T3G", "an empty part between ':' separators"), ("K2A:", "an empty part"),
    ("K\u0662A", "is not a mutation"), ("K\uff12A", "is not a mutation"),  # non-ASCII 2s
    (42, "of type int, not a mutation"), (b"K2A", "of type bytes, not a mutation"),
    (float("nan"), "no mutation given"),  # an empty cell read by pandas
])
def test_bad_mutations_are_one_line_naming_them(esm_mlm, mutation, message):
    with pytest.raises(InvalidData) as error:
        esm_mlm.variant_effects(SHORT, [mutation])
    assert message in str(error.value) and "\n" not in str(error.value)


def test_bad_arguments(esm_mlm):
    with pytest.raises(InvalidArgument, match="unknown strategy 'best'"):
        esm_mlm.variant_effects(SHORT, ["K2A"], strategy="best")
    with pytest.raises(InvalidData, match="'J' at residue 3"):
        esm_mlm.variant_effects("MKJ", ["K2A"])
    gene = "ATGGCTAGCAAAGGAGAAGAACTTTTCACTGGAGTTGTC"
    with pytest.raises(InvalidData, match="reads as DNA, not a protein"):
        esm_mlm.variant_effects(gene, ["T2A"])
    with pytest.raises(InvalidData, match="reads as RNA, not a protein"):
        esm_mlm.variant_effects(gene.replace("T", "U"), ["U2A"])
    assert np.isfinite(esm_mlm.variant_effects("A" * 30, ["A2G"])).all()  # poly-Ala is a protein
    with pytest.raises(InvalidArgument, match="set once with mlmkit.load"):
        esm_mlm.variant_effects(SHORT, ["K2A"], device="cpu")
