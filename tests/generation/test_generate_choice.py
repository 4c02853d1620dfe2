"""Token choice and confidence: argmax at temperature 0, sampling frequencies (chi-square),
float64 Gumbel noise, top-k / top-p, and the three confidence measures."""

from __future__ import annotations

import math

import pytest
import torch

from mlmkit.core.gumbel import uniform_to_gumbel
from mlmkit.errors import MlmkitError
from mlmkit.generation.choose import ChoiceConfig, choose_tokens, filter_logits
from mlmkit.generation.confidence import CONFIDENCES, confidence


def chi_square_p_value(statistic: float, dof: int) -> float:
    """P(X >= statistic) for X ~ chi-square(dof): the regularised upper incomplete gamma
    Q(dof/2, x/2), by its recurrence in steps of 2 from dof = 1 or 2 (no scipy)."""
    half = statistic / 2
    if dof % 2 == 0:
        q, term, k = math.exp(-half), math.exp(-half), 1
        for k in range(1, dof // 2):
            term *= half / k
            q += term
        return q
    q = math.erfc(math.sqrt(half))
    term = math.sqrt(half) * math.exp(-half) / math.gamma(1.5)
    for k in range(1, (dof + 1) // 2):
        q += term
        term *= half / (k + 0.5)
    return q


def test_chi_square_helper_matches_known_quantiles():
    # Known 95% quantiles of chi-square: dof 1: 3.841, 2: 5.991, 3: 7.815, 4: 9.488, 5: 11.07.
    for dof, quantile in [(1, 3.841), (2, 5.991), (3, 7.815), (4, 9.488), (5, 11.070)]:
        assert chi_square_p_value(quantile, dof) == pytest.approx(0.05, abs=5e-4)


def test_temperature_zero_is_argmax():
    logits = torch.randn(50, 300, generator=torch.Generator().manual_seed(1))
    got = choose_tokens(logits, ChoiceConfig(temperature=0.0), torch.Generator().manual_seed(2))
    assert torch.equal(got, logits.argmax(-1))


def test_sample_frequencies_match_softmax_including_a_1e7_token():
    rare = 1e-7
    probs = torch.tensor([0.4, 0.25, 0.2, 0.1, 0.05 - rare, rare], dtype=torch.float64)
    logits = probs.log().float()
    generator = torch.Generator().manual_seed(7)
    draws, chunk = 2_000_000, 500_000
    counts = torch.zeros(len(probs), dtype=torch.float64)
    for _ in range(draws // chunk):  # vectorised: one call per half-million draws
        tokens = choose_tokens(logits.expand(chunk, -1), ChoiceConfig(temperature=1.0), generator)
        counts += torch.bincount(tokens, minlength=len(probs)).double()
    expected = probs * draws
    # The rare token's expected count (0.2) is too small for its own cell: pool it.
    observed = torch.cat([counts[:4], counts[4:].sum(0, keepdim=True)])
    pooled = torch.cat([expected[:4], expected[4:].sum(0, keepdim=True)])
    statistic = float(((observed - pooled) ** 2 / pooled).sum())
    assert chi_square_p_value(statistic, dof=len(observed) - 1) > 1e-3
    assert counts[5] <= 4  # Poisson(0.2): P(X > 4) < 1e-5
    assert counts.sum() == draws


def test_temperature_flattens_the_distribution():
    probs = torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64)
    temperature = 2.0
    generator = torch.Generator().manual_seed(3)
    tokens = choose_tokens(probs.log().float().expand(200_000, -1),
                           ChoiceConfig(temperature=temperature), generator)
    counts = torch.bincount(tokens, minlength=3).double()
    expected = torch.softmax(probs.log() / temperature, -1) * 200_000
    statistic = float(((counts - expected) ** 2 / expected).sum())
    assert chi_square_p_value(statistic, dof=2) > 1e-3


def test_gumbel_noise_is_float64_and_untruncated():
    largest_below_one = torch.tensor(1.0, dtype=torch.float64).nextafter(torch.tensor(0.0,
                                                                   dtype=torch.float64))
    assert uniform_to_gumbel(largest_below_one).dtype == torch.float64
    assert float(uniform_to_gumbel(largest_below_one)) > 36  # float32 noise stops at 16.6
    u = torch.tensor(1 - 1e-7, dtype=torch.float64)
    assert float(uniform_to_gumbel(u)) == pytest.approx(-math.log(-math.log1p(-1e-7)), rel=1e-9)


def test_top_k_and_top_p_keep_the_right_tokens():
    logits = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    assert torch.isfinite(filter_logits(logits, 2, None)).tolist() == [[True, True, False, False]]
    assert torch.isfinite(filter_logits(logits, None, 0.5)).tolist() == [[True, False, False,
                                                                          False]]
    assert torch.isfinite(filter_logits(logits, None, 0.79)).tolist() == [[True, True, False,
                                                                           False]]
    assert torch.isfinite(filter_logits(logits, None, 0.81)).tolist() == [[True, True, True,
                                                                           False]]
    generator = torch.Generator().manual_seed(0)
    tokens = choose_tokens(logits.expand(5000, -1), ChoiceConfig(1.0, top_k=2), generator)
    assert set(tokens.tolist()) == {0, 1}


def test_bad_choice_settings_are_rejected():
    with pytest.raises(MlmkitError, match="temperature"):
        ChoiceConfig(temperature=-1)
    with pytest.raises(MlmkitError, match="top-k"):
        ChoiceConfig(top_k=0)
    with pytest.raises(MlmkitError, match="top-p"):
        ChoiceConfig(top_p=1.5)


def test_confidence_measures():
    probs = torch.tensor([[0.6, 0.3, 0.1], [0.4, 0.4, 0.2]], dtype=torch.float64)
    tokens = torch.tensor([1, 0])
    logits = probs.log().float()
    torch.testing.assert_close(confidence("prob", logits, tokens),
                               torch.tensor([0.3, 0.4], dtype=torch.float64))
    torch.testing.assert_close(confidence("margin", logits, tokens),
                               torch.tensor([0.3, 0.0], dtype=torch.float64), atol=1e-7, rtol=0)
    entropy = -(probs * probs.log()).sum(-1)
    torch.testing.assert_close(confidence("entropy", logits, tokens), -entropy)
    assert set(CONFIDENCES) == {"prob", "margin", "entropy"}
    with pytest.raises(MlmkitError, match="margin"):
        confidence("nope", logits, tokens)
