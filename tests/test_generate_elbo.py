"""The masked-diffusion ELBO: Monte-Carlo estimators against exact enumeration over masks."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from mlmkit.errors import MlmkitError
from mlmkit.generate import elbo
from mlmkit.generate.canvas import special_wrap, text_ids
from mlmkit.generate.elbo import draw_masks, masked_nll

TEXT = "Return the list."


def exact_nelbo(mlm, text: str) -> float:
    """sum_l (1/l) mean_{|S|=l} sum_{i in S} -log p(x_i | x_S masked), every subset S."""
    content = text_ids(mlm.tokenizer, text)
    prefix, suffix = special_wrap(mlm.tokenizer)
    n = len(content)
    subsets = [s for size in range(1, n + 1) for s in itertools.combinations(range(n), size)]
    masked = torch.zeros(len(subsets), n, dtype=torch.bool)
    for row, subset in enumerate(subsets):
        masked[row, list(subset)] = True
    with torch.inference_mode():
        nll = masked_nll(mlm, torch.tensor(prefix + content + suffix), masked, len(prefix), 64)
    sizes = masked.sum(1)
    return math.fsum(float(v) / int(k) / math.comb(n, int(k)) for v, k in zip(nll, sizes,
                                                                            strict=True))


@pytest.mark.parametrize("method", ["count", "time"])
def test_monte_carlo_matches_exact_enumeration(tiny_mlm, method):
    mlm = tiny_mlm("bert")
    exact = exact_nelbo(mlm, TEXT)
    result = elbo(mlm, TEXT, samples=512, method=method, seed=1)
    assert result.n_tokens == len(text_ids(mlm.tokenizer, TEXT)) <= 6
    assert result.stderr > 0
    assert abs(result.nats - exact) < 4 * result.stderr
    assert result.nats_per_token == pytest.approx(result.nats / result.n_tokens)
    assert result.perplexity_bound == pytest.approx(math.exp(result.nats_per_token))


def test_the_diffusion_training_loss_has_the_elbo_as_expectation(tiny_mlm):
    """MDLM's loss, (1/t) sum over masked tokens of cross-entropy from the full model's
    logits, with t ~ U(0, 1) and each token masked with probability t, averages to the
    exact NELBO."""
    mlm = tiny_mlm("roberta")
    exact = exact_nelbo(mlm, TEXT)
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
        logp = torch.log_softmax(mlm.model(input_ids=inputs).logits.double(), -1)
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
    b = elbo(mlm, [TEXT, "A list."], samples=16, seed=3, batch_rows=5)
    assert [x.nats for x in a] == pytest.approx([x.nats for x in b], abs=1e-4)


def test_elbo_bad_input(tiny_mlm):
    mlm = tiny_mlm("bert")
    with pytest.raises(MlmkitError, match="text 1 is empty"):
        elbo(mlm, "")
    with pytest.raises(MlmkitError, match="at most 128"):
        elbo(mlm, "word " * 200)
    with pytest.raises(MlmkitError, match="--samples"):
        elbo(mlm, TEXT, samples=0)
    with pytest.raises(MlmkitError, match="time"):
        elbo(mlm, TEXT, method="bogus")
