"""Rates (schedules, per-row priors, stratified diffusion time) and weighted sampling."""

from __future__ import annotations

import math

import pytest
import torch

from mlmkit.masking import build_policy
from mlmkit.masking.rates import BetaRate, DiffusionRate, UniformRate
from mlmkit.masking.seeding import generator_for


def ordinary_ids(tokenizer, shape, seed=0):
    special = set(tokenizer.all_special_ids)
    pool = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
    return pool[torch.randint(len(pool), shape, generator=torch.Generator().manual_seed(seed))]


@pytest.mark.parametrize("schedule, step, expected", [
    ("linear", 0, 0.3), ("linear", 50, 0.225), ("linear", 100, 0.15), ("linear", 500, 0.15),
    ("cosine", 0, 0.3), ("cosine", 50, 0.225), ("cosine", 25, 0.15 + 0.15 * (1 + math.cos(math.pi / 4)) / 2),
    ("cosine", 100, 0.15),
])
def test_schedule_values(wordpiece_tokenizer, schedule, step, expected):
    config = {"rate": {"schedule": schedule, "start": 0.3, "end": 0.15}, "total_steps": 100}
    policy = build_policy(config, wordpiece_tokenizer)
    out = policy(ordinary_ids(wordpiece_tokenizer, (4, 200)), step=step)
    assert torch.allclose(out.rate, torch.full((4,), expected), atol=1e-6)
    assert torch.all(out.mask.sum(1) == round(expected * 200))


def test_step_schedule(wordpiece_tokenizer):
    config = {"rate": {"schedule": "step", "values": [0.4, 0.3, 0.15], "milestones": [10, 20]}}
    policy = build_policy(config, wordpiece_tokenizer)
    ids = ordinary_ids(wordpiece_tokenizer, (2, 100))
    got = [float(policy(ids, step=s).rate[0]) for s in (0, 9, 10, 19, 20, 1000)]
    assert got == pytest.approx([0.4, 0.4, 0.3, 0.3, 0.15, 0.15])


def test_stratified_diffusion_time_has_one_draw_per_interval():
    rate = DiffusionRate(eps=1e-3)
    for step in range(5):
        t = rate(64, step, generator_for(0, step, "cpu"), "cpu").double()
        cells = torch.floor((t - 1e-3) / (1 - 1e-3) * 64).long()
        assert torch.equal(cells.sort().values, torch.arange(64))
        assert t.min() >= 1e-3 and t.max() <= 1
    a = rate(64, 0, generator_for(0, 0, "cpu"), "cpu")
    assert not torch.equal(a, a.sort().values)  # shuffled over the rows


def test_diffusion_policy_masks_each_row_at_its_time(wordpiece_tokenizer):
    policy = build_policy("diffusion", wordpiece_tokenizer)
    out = policy(ordinary_ids(wordpiece_tokenizer, (32, 2000)), seed=5)
    realised = out.mask.float().mean(1)
    assert torch.allclose(realised, out.rate, atol=0.04)  # Bernoulli(t) per token, L = 2000
    assert torch.all(out.input_ids[out.mask] == wordpiece_tokenizer.mask_token_id)


def test_per_row_priors_have_the_right_moments():
    g = generator_for(1, 0, "cpu")
    u = UniformRate(0.1, 0.5)(20_000, 0, g, "cpu").double()
    assert abs(u.mean() - 0.3) < 0.005 and abs(u.var() - 0.4 ** 2 / 12) < 0.001
    assert u.min() >= 0.1 and u.max() <= 0.5
    for a, b in ((2.0, 5.0), (0.5, 0.5)):
        x = BetaRate(a, b)(20_000, 0, g, "cpu").double()
        mean, var = a / (a + b), a * b / ((a + b) ** 2 * (a + b + 1))
        assert abs(x.mean() - mean) < 0.01 and abs(x.var() - var) < 0.005


def test_weighted_sampling_prefers_heavy_tokens_in_proportion(wordpiece_tokenizer):
    """Loss weights 3:1 → the one token chosen per row is the heavy kind 3/4 of the time
    (Gumbel top-k), and heavy tokens are 3× as likely under Bernoulli counts."""
    tok = wordpiece_tokenizer
    light, heavy = (int(i) for i in ordinary_ids(tok, (1, 2), seed=3)[0])
    ids = torch.tensor([[light, heavy] * 20] * 4000)
    for count, rate in (("exact", 1 / 40), ("bernoulli", 0.05)):
        policy = build_policy({"weights": {"name": "loss", "decay": 0.0}, "rate": rate,
                               "count": count}, tok)
        policy.update_losses(torch.tensor([light, heavy]), torch.tensor([1.0, 3.0]))
        out = policy(ids, seed=7)
        if count == "exact":
            assert torch.all(out.mask.sum(1) == 1)
        share = (out.labels == heavy).sum() / out.mask.sum()
        assert abs(share - 0.75) < 0.02, count
        assert abs(out.mask.float().mean() - rate) < 0.004


def test_loss_ema_update(wordpiece_tokenizer):
    policy = build_policy({"weights": {"name": "loss", "decay": 0.5}}, wordpiece_tokenizer)
    table = policy.weights.table.clone()
    policy.update_losses(torch.tensor([7, 7, 9]), torch.tensor([1.0, 3.0, 5.0]))
    policy.weights.end_step()  # the table moves once per optimizer step
    new = policy.weights.table
    assert new[7] == pytest.approx(0.5 * table[7] + 0.5 * 2.0)
    assert new[9] == pytest.approx(0.5 * table[9] + 0.5 * 5.0)
    assert new[8] == table[8]
