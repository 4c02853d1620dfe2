"""The masked-diffusion ELBO: Monte-Carlo estimators against exact enumeration over masks."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from mlmkit.errors import MlmkitError
from mlmkit.generation import elbo
from mlmkit.generation.canvas import special_wrap, text_ids
from mlmkit.generation.elbo import draw_masks, masked_nll

TEXT = "Return the list."


def brute_force_nll(mlm, text: str, parameterization: str) -> dict[tuple[int, ...], float]:
    """For every non-empty subset S of the content tokens: sum_{i in S} -log p(x_i | x with S
    masked), from the full model's logits (SUBS: the [MASK] logit at -inf), one subset at
    a time."""
    tok = mlm.tokenizer
    content = text_ids(tok, text)
    prefix, suffix = special_wrap(tok)
    full = torch.tensor(prefix + content + suffix)
    n = len(content)
    values = {}
    for size in range(1, n + 1):
        for subset in itertools.combinations(range(n), size):
            cols = [len(prefix) + i for i in subset]
            inputs = full.clone()
            inputs[cols] = tok.mask_token_id
            with torch.no_grad():
                logits = mlm.model(input_ids=inputs.unsqueeze(0)).logits[0].double()
            if parameterization == "subs":
                logits[:, tok.mask_token_id] = -math.inf
            logp = torch.log_softmax(logits, -1)
            values[subset] = -math.fsum(float(logp[c, full[c]]) for c in cols)
    return values


def exact_nelbo(mlm, text: str, parameterization: str = "subs") -> float:
    """sum_l (1/l) mean_{|S|=l} nll(S): the discrete form, every subset enumerated."""
    values = brute_force_nll(mlm, text, parameterization)
    n = max(len(s) for s in values)
    return math.fsum(v / len(s) / math.comb(n, len(s)) for s, v in values.items())


def continuous_time_nelbo(mlm, text: str, parameterization: str = "subs") -> float:
    """MDLM's integral over t in (0, 1) of (1/t) E_{x_t}[sum_masked nll], each token masked
    with probability t: the integrand is a polynomial of degree N - 1 in t, so Gauss-Legendre
    with N nodes integrates it exactly."""
    values = brute_force_nll(mlm, text, parameterization)
    n = max(len(s) for s in values)
    nodes, weights = np.polynomial.legendre.leggauss(n)
    t, w = (nodes + 1) / 2, weights / 2
    integrand = sum(v * t ** (len(s) - 1) * (1 - t) ** (n - len(s)) for s, v in values.items())
    return float((w * integrand).sum())


def test_subs_nll_of_every_masking_pattern_equals_the_full_model(tiny_mlm):
    mlm = tiny_mlm("bert")
    tok = mlm.tokenizer
    content = text_ids(tok, TEXT)
    prefix, suffix = special_wrap(tok)
    for parameterization in ("subs", "softmax"):
        want = brute_force_nll(mlm, TEXT, parameterization)
        masked = torch.zeros(len(want), len(content), dtype=torch.bool)
        for row, subset in enumerate(want):
            masked[row, list(subset)] = True
        got = masked_nll(mlm, torch.tensor(prefix + content + suffix), masked, len(prefix),
                         parameterization=parameterization, batch_tokens=64)
        assert got.dtype == torch.float64
        assert got.tolist() == pytest.approx(list(want.values()), abs=1e-5)


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_the_exact_bound_discrete_and_continuous_time_agree(tiny_mlm, family):
    mlm = tiny_mlm(family)
    subs = exact_nelbo(mlm, TEXT, "subs")
    assert continuous_time_nelbo(mlm, TEXT, "subs") == pytest.approx(subs, rel=1e-9)
    plain = exact_nelbo(mlm, TEXT, "softmax")
    assert 0 < subs < plain  # a random model puts mass on [MASK]: SUBS is tighter


@pytest.mark.parametrize("parameterization", ["subs", "softmax"])
@pytest.mark.parametrize("method", ["count", "time"])
def test_monte_carlo_matches_exact_enumeration(tiny_mlm, method, parameterization):
    mlm = tiny_mlm("bert")
    exact = exact_nelbo(mlm, TEXT, parameterization)
    result = elbo(mlm, TEXT, samples=512, method=method, seed=1,
                  parameterization=parameterization)
    assert result.n_tokens == len(text_ids(mlm.tokenizer, TEXT)) <= 6
    assert result.stderr > 0 and result.parameterization == parameterization
    assert abs(result.nats - exact) < 4 * result.stderr
    assert result.nats_per_token == pytest.approx(result.nats / result.n_tokens)
    assert result.perplexity_bound == pytest.approx(math.exp(result.nats_per_token))


def test_subs_is_the_default(tiny_mlm):
    mlm = tiny_mlm("bert")
    default = elbo(mlm, TEXT, samples=8, seed=2)
    assert default.nats == elbo(mlm, TEXT, samples=8, seed=2, parameterization="subs").nats
    assert default.nats < elbo(mlm, TEXT, samples=8, seed=2, parameterization="softmax").nats
    record = default.to_dict()
    assert record["parameterization"] == "subs" and record["nats_per_token"] > 0


def test_the_diffusion_training_loss_has_the_elbo_as_expectation(tiny_mlm):
    """MDLM's loss, (1/t) sum over masked tokens of cross-entropy from the full model's
    SUBS logits (the objective's `subs_logits`), with t ~ U(0, 1) and each token masked with
    probability t, averages to the exact (SUBS) NELBO."""
    from mlmkit.training.objectives.diffusion import subs_logits

    mlm = tiny_mlm("roberta")
    exact = exact_nelbo(mlm, TEXT, "subs")
    tokenizer = mlm.tokenizer
    ids = torch.tensor(tokenizer(TEXT)["input_ids"])
    content = torch.zeros(len(ids), dtype=torch.bool)
    content[1:-1] = True
    generator = torch.Generator().manual_seed(4)
    draws = 600
    t = torch.rand(draws, 1, generator=generator, dtype=torch.float64)
    masked = (torch.rand(draws, len(ids), generator=generator, dtype=torch.float64) < t) & content
    inputs = ids.repeat(draws, 1).masked_fill(masked, tokenizer.mask_token_id)
    with torch.inference_mode():
        logits = subs_logits(mlm.model(input_ids=inputs).logits, tokenizer.mask_token_id)
        logp = torch.log_softmax(logits.double(), -1)
    nll = -logp.gather(2, ids.repeat(draws, 1).unsqueeze(2)).squeeze(2)
    losses = (nll * masked).sum(1) / t.squeeze(1)
    stderr = float(losses.std() / math.sqrt(draws))
    assert abs(float(losses.mean()) - exact) < 4 * stderr


def test_count_masks_are_stratified_and_weighted():
    masked, weights = draw_masks(5, 10, "count", torch.Generator().manual_seed(0))
    counts = masked.sum(1)
    assert counts.min() >= 1 and counts.max() <= 5
    assert counts.tolist() == sorted(counts.tolist())  # one stratum per sample, in order
    torch.testing.assert_close(weights, 5 / counts.double())
    masked, weights = draw_masks(5, 8, "time", torch.Generator().manual_seed(0))
    assert weights.dtype == torch.float64 and (weights >= 1).all()


def test_elbo_is_seeded_and_batched_consistently(tiny_mlm):
    mlm = tiny_mlm("modernbert")
    a = elbo(mlm, [TEXT, "A list."], samples=16, seed=3)
    b = elbo(mlm, [TEXT, "A list."], samples=16, seed=3, batch_tokens=40)
    assert [x.nats for x in a] == pytest.approx([x.nats for x in b], abs=1e-4)


def test_elbo_bad_input(tiny_mlm):
    mlm = tiny_mlm("bert")
    with pytest.raises(MlmkitError, match="text 1 is empty"):
        elbo(mlm, "")
    with pytest.raises(MlmkitError, match="at most 128"):
        elbo(mlm, "word " * 200)
    with pytest.raises(MlmkitError, match=r"samples=0 \(--samples\)"):
        elbo(mlm, TEXT, samples=0)
    with pytest.raises(MlmkitError, match="time"):
        elbo(mlm, TEXT, method="bogus")
    with pytest.raises(MlmkitError, match="softmax"):
        elbo(mlm, TEXT, parameterization="plain")
    with pytest.raises(MlmkitError, match="no texts"):
        elbo(mlm, [])


def test_whole_numbers_given_as_floats_run_as_ints(tiny_mlm):
    from mlmkit.generation import fill_mask

    mlm = tiny_mlm("bert")  # checks.count accepts 4.0: torch once got the float (TypeError)
    assert elbo(mlm, TEXT, samples=4.0, seed=3.0).nats == elbo(mlm, TEXT, samples=4,
                                                                 seed=3).nats
    assert fill_mask(mlm, "a [MASK] b", top_k=2.0).to_dict() == \
        fill_mask(mlm, "a [MASK] b", top_k=2).to_dict()
