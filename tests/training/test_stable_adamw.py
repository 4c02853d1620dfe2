"""StableAdamW (mlmkit.training.stable_adamw): torch's AdamW when no update is clipped and the
decay is torch's; update clipping divides a tensor's step by its RMS_t = sqrt(mean(g² /
max(v̂, ε²))) when that exceeds 1 (Wortsman et al. 2023); decoupled decay follows lr /
max lr; the state round-trips through state_dict exactly. The resume of a whole training
run with it is in tests/pretraining/test_batch_warmup.py (one pair of runs for both)."""

from __future__ import annotations

import copy

import pytest
import torch

from mlmkit.errors import InvalidArgument
from mlmkit.pretraining.config import PretrainConfig
from mlmkit.training.optimizer import build_optimizer
from mlmkit.training.stable_adamw import StableAdamW

LR, BETAS, EPS = 1e-2, (0.9, 0.98), 1e-6


def make_params(seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(8, 4, generator=generator)),
            torch.nn.Parameter(torch.randn(4, generator=generator))]


def gradients(step: int, shapes, spike: float = 1.0, seed: int = 1):
    """Gradients that shrink step by step (so v̂ stays above g²: no clipping), with the
    first tensor's multiplied by `spike` at step 5."""
    generator = torch.Generator().manual_seed(seed + step)
    out = [torch.randn(shape, generator=generator) * 0.7 ** step for shape in shapes]
    if step == 5:
        out[0] = out[0] * spike
    return out


def run(optimizer, params, steps, spike=1.0):
    for step in range(steps):
        for p, g in zip(params, gradients(step, [p.shape for p in params], spike), strict=True):
            p.grad = g.clone()
        optimizer.step()


@pytest.mark.parametrize("clip_updates", [False, True])
def test_equals_torch_adamw_when_nothing_is_clipped(clip_updates):
    ours, theirs = make_params(), make_params()
    mine = StableAdamW(ours, lr=LR, betas=BETAS, eps=EPS, weight_decay=0.1,
                       clip_updates=clip_updates)
    reference = torch.optim.AdamW(theirs, lr=LR, betas=BETAS, eps=EPS, weight_decay=0.1,
                                  foreach=True)
    for step in range(6):
        run_one = [g.clone() for g in gradients(step, [p.shape for p in ours])]
        for p, q, g in zip(ours, theirs, run_one, strict=True):
            p.grad, q.grad = g.clone(), g.clone()
        mine.step()
        reference.step()
        if clip_updates:  # the premise: no tensor's RMS exceeded 1
            # (at step 1 v̂ = g², so RMS = 1 up to rounding)
            assert mine.last_rms and max(float(r) for r in mine.last_rms) <= 1 + 1e-6
    for p, q in zip(ours, theirs, strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-7)


def test_update_clipping_divides_the_step_by_its_rms():
    """A gradient spike: RMS_t > 1 for that tensor, whose step is the unclipped AdamW step
    divided by RMS_t (so lr_t × RMS_t = lr); the other tensor steps as AdamW."""
    clipped, plain = make_params(), make_params()
    stable = StableAdamW(clipped, lr=LR, betas=BETAS, eps=EPS, clip_updates=True)
    adamw = StableAdamW(plain, lr=LR, betas=BETAS, eps=EPS, clip_updates=False)
    run(stable, clipped, 5, spike=30.0)
    run(adamw, plain, 5, spike=30.0)
    before = [p.detach().clone() for p in clipped]
    grads = gradients(5, [p.shape for p in clipped], spike=30.0)
    for p, q, g in zip(clipped, plain, grads, strict=True):
        p.grad, q.grad = g.clone(), g.clone()
    stable.step()
    adamw.step()
    # RMS_t as the paper defines it, recomputed here from the optimizer's state
    state = stable.state[clipped[0]]
    v_hat = state["exp_avg_sq"] / (1 - BETAS[1] ** 6)
    rms = float((grads[0] ** 2 / v_hat.clamp_min(EPS ** 2)).mean().sqrt())
    assert rms > 1.5
    assert float(stable.last_rms[0]) == pytest.approx(rms, rel=1e-5)
    step_clipped = before[0] - clipped[0].detach()
    step_plain = before[0] - plain[0].detach()
    torch.testing.assert_close(step_clipped, step_plain / rms, rtol=1e-4, atol=1e-6)
    # the bound: the clipped step's RMS in units of Adam's normalised update is lr
    normalised = (state["exp_avg"] / (1 - BETAS[0] ** 6)) / (v_hat.sqrt() + EPS)
    assert float(step_clipped.norm() / normalised.norm()) == pytest.approx(LR / rms, rel=1e-4)
    torch.testing.assert_close(clipped[1], plain[1], rtol=0, atol=0)  # not clipped


def test_decoupled_weight_decay_follows_the_schedule_not_the_lr():
    """Zero gradients: only decay moves a weight. Decoupled: θ(1 - λ·lr/max_lr); torch's:
    θ(1 - λ·lr)."""
    for decoupled, expected in ((True, 1 - 0.1 * 0.5), (False, 1 - 0.1 * 0.5 * LR)):
        param = torch.nn.Parameter(torch.ones(3, 3))
        optimizer = StableAdamW([param], lr=LR, weight_decay=0.1, decoupled=decoupled,
                                max_lr=LR)
        optimizer.param_groups[0]["lr"] = LR * 0.5  # half-way down the schedule
        param.grad = torch.zeros(3, 3)
        optimizer.step()
        torch.testing.assert_close(param.detach(), torch.full((3, 3), expected), rtol=0,
                                   atol=1e-7)


def test_state_dict_round_trip_continues_bit_identically():
    a_params, b_params = make_params(), make_params()
    a = StableAdamW(a_params, lr=LR, weight_decay=0.01, decoupled=True)
    run(a, a_params, 3, spike=30.0)
    with torch.no_grad():
        for p, q in zip(b_params, a_params, strict=True):
            p.copy_(q)
    b = StableAdamW(b_params, lr=LR, weight_decay=0.01, decoupled=True)
    b.load_state_dict(copy.deepcopy(a.state_dict()))  # as a checkpoint would hold it
    for step in range(3, 7):  # the spike at step 5 is clipped on both
        for p, q, g in zip(a_params, b_params, gradients(step, [p.shape for p in a_params],
                                                         30.0), strict=True):
            p.grad, q.grad = g.clone(), g.clone()
        a.step()
        b.step()
    assert all(torch.equal(p, q) for p, q in zip(a_params, b_params, strict=True))


def test_build_optimizer_and_config():
    module = torch.nn.Linear(4, 4)
    kinds = {(kind, decoupled): type(build_optimizer(
        {"m": module}, lr=1e-3, weight_decay=0.01, betas=BETAS, eps=EPS,
        device=torch.device("cpu"), kind=kind, decoupled=decoupled)).__name__
        for kind in ("adamw", "stableadamw") for decoupled in (False, True)}
    assert kinds == {("adamw", False): "AdamW", ("adamw", True): "StableAdamW",
                     ("stableadamw", False): "StableAdamW", ("stableadamw", True): "StableAdamW"}
    with pytest.raises(InvalidArgument, match=r"--optimizer\) is not known: use one of "
                                              "adamw, stableadamw"):
        PretrainConfig(optimizer="lamb")
    with pytest.raises(InvalidArgument, match="--decoupled-weight-decay 'yes'"):
        PretrainConfig(decoupled_weight_decay="yes")


def test_fsdp_refuses_it_until_sharded_norms_are_handled():
    from mlmkit.pretraining.run import check_config

    config = PretrainConfig(optimizer="stableadamw", parallel="fsdp", steps=10)
    with pytest.raises(InvalidArgument, match="not supported with --parallel fsdp"):
        check_config(config, world_size=2)
    check_config(config, world_size=1)  # one process: FSDP is not used
