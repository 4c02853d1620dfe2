"""Masked diffusion: the loss is the hand-computed 1/t-weighted cross-entropy, t is
stratified, [MASK] is never predicted, and a tiny run's NELBO is finite and falls."""

from __future__ import annotations

import math

import pytest
import torch
import transformers

from mlmkit.errors import MlmkitError
from mlmkit.masking import build_policy
from mlmkit.pretraining import PretrainConfig, pretrain
from mlmkit.training.objectives.diffusion import subs_logits, weighted_nll


def test_loss_equals_the_hand_computed_weighted_cross_entropy(tiny_mlm):
    mlm = tiny_mlm("bert")
    tok, model = mlm.tokenizer, mlm.model
    original = torch.randint(5, len(tok), (3, 12))
    attention = torch.ones_like(original)
    attention[2, 9:] = 0
    mask = torch.zeros_like(original, dtype=torch.bool)
    mask[0, [1, 4]] = True
    mask[1, [2, 3, 5, 7]] = True
    mask[2, [6]] = True
    t = torch.tensor([0.2, 0.5, 0.9])
    inputs = original.masked_fill(mask, tok.mask_token_id)
    with torch.no_grad():
        weighted, _ = weighted_nll(model, inputs, attention, mask, original[mask], t,
                                   tok.mask_token_id)
        logits = model(input_ids=inputs, attention_mask=attention).logits.double()
    logits[..., tok.mask_token_id] = -math.inf
    log_probs = torch.log_softmax(logits, -1)
    expected = 0.0
    for row, col in mask.nonzero().tolist():  # the reference: one term at a time
        expected += -float(log_probs[row, col, original[row, col]]) / float(t[row])
    assert float(weighted) == pytest.approx(expected, rel=1e-5)


def test_stratified_times_have_one_draw_per_interval(wordpiece_tokenizer):
    policy = build_policy("diffusion", wordpiece_tokenizer)
    eps, batch = policy.rate.eps, 16
    ids = torch.randint(5, len(wordpiece_tokenizer), (batch, 24))
    out = policy(ids, torch.ones_like(ids), step=3, seed=1)
    cells = torch.floor((out.rate.double() - eps) / (1 - eps) * batch).long()
    assert sorted(cells.tolist()) == list(range(batch))
    # mask-only corruption, and each row masked near its own t
    assert (out.input_ids[out.mask] == wordpiece_tokenizer.mask_token_id).all()
    assert torch.corrcoef(torch.stack([out.rate, out.mask.float().mean(1)]))[0, 1] > 0.8


def test_the_mask_token_is_never_predicted():
    logits = torch.randn(64, 20)
    logits[:, 3] = 50.0  # the model would love to predict [MASK]
    subs = subs_logits(logits, mask_id=3)
    assert (subs.argmax(-1) != 3).all()
    assert torch.isneginf(torch.log_softmax(subs, -1)[:, 3]).all()
    others = [i for i in range(20) if i != 3]
    assert torch.equal(subs[:, others], logits[:, others])


def _config(run_dir, tokenizer_path, **overrides) -> PretrainConfig:
    values = dict(objective="diffusion", model="tiny", tokenizer=tokenizer_path, seq_len=32,
                  batch_size=16, steps=30, lr=3e-3, warmup=0.1, eval_every=10, eval_blocks=8,
                  pppl_sentences=0, save_every=0, log_every=5, run_dir=str(run_dir),
                  progress=False, fill_mask_examples=0, threads=1, precision="fp32")
    values.update(overrides)
    return PretrainConfig(**values)


def test_tiny_run_nelbo_is_finite_and_decreases(tmp_path, fixture_dir, wordpiece_tokenizer):
    result = pretrain(_config(tmp_path / "run", str(fixture_dir / "tok-wordpiece")))
    evals = [r for r in result.history if r["split"] == "eval"]
    assert len(evals) == 3
    for record in evals:
        assert math.isfinite(record["nelbo"]) and record["nelbo"] > 0
        assert record["ppl_bound"] == pytest.approx(math.exp(record["nelbo"]))
    assert evals[-1]["nelbo"] < evals[0]["nelbo"]
    model = transformers.AutoModelForMaskedLM.from_pretrained(result.final_dir)
    assert isinstance(model, transformers.BertForMaskedLM)  # an ordinary masked LM


def test_a_masking_policy_that_is_not_mask_only_is_refused(tmp_path, fixture_dir,
                                                           wordpiece_tokenizer):
    with pytest.raises(MlmkitError, match="masking diffusion"):
        pretrain(_config(tmp_path / "bad", str(fixture_dir / "tok-wordpiece"),
                         masking="bert"))
    assert not (tmp_path / "bad" / "final").exists()
