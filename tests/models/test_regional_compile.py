"""Regional compilation (--compile-layers): each encoder layer compiled on its own gives
the eager loss and gradients (within float32 noise), the layer list found in each family."""

from __future__ import annotations

import copy

import pytest
import torch

from mlmkit.errors import MlmkitError
from mlmkit.models import build_mlm
from mlmkit.models.regional_compile import compile_layers, encoder_layers
from mlmkit.training.objectives.mlm import sparse_mlm_loss


@pytest.mark.parametrize("preset, tokenizer", [("tiny", "wordpiece"),
                                               ("modernbert-tiny", "bpe")])
def test_the_layer_list_of_each_family(preset, tokenizer, tokenizer_factory):
    model = build_mlm(preset, tokenizer_factory(tokenizer), seed=0)
    assert len(encoder_layers(model)) == model.config.num_hidden_layers
    with pytest.raises(MlmkitError, match="--compile-layers"):
        encoder_layers(torch.nn.Linear(2, 2))


def _loss_and_grads(model, ids, mask, labels):
    model.zero_grad(set_to_none=True)
    loss = sparse_mlm_loss(model, ids, torch.ones_like(ids), mask, labels, 0.0)[0]
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()
                           if p.grad is not None}


@pytest.mark.slow
def test_compiled_layers_train_as_the_eager_ones(wordpiece_tokenizer):
    eager = build_mlm("tiny", wordpiece_tokenizer, seed=0).train()
    for module in eager.modules():  # dropout draws differ between eager and compiled code
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    compiled = copy.deepcopy(eager)
    assert compile_layers(compiled) == eager.config.num_hidden_layers
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, len(wordpiece_tokenizer), (4, 32), generator=generator)
    mask = torch.rand(4, 32, generator=generator) < 0.3
    labels = torch.where(mask, ids, torch.full_like(ids, -100))
    want = _loss_and_grads(eager, ids, mask, labels)
    try:
        got = _loss_and_grads(compiled, ids, mask, labels)
    except Exception as error:  # no C++ toolchain or an inductor limit on this machine
        pytest.skip(f"torch.compile does not work here: {type(error).__name__}")
    torch.testing.assert_close(got[0], want[0], rtol=1e-4, atol=1e-5)
    assert got[1].keys() == want[1].keys()
    for name in want[1]:
        torch.testing.assert_close(got[1][name], want[1][name], rtol=1e-3, atol=1e-5)
    assert list(compiled.state_dict()) == list(eager.state_dict())  # names unchanged


@pytest.mark.slow
def test_a_run_with_compiled_layers_trains_as_an_eager_one(tmp_path, wordpiece_tokenizer,
                                                          fixture_dir):
    from mlmkit.pretraining import pretrain
    from tests.pretraining.test_pretrain import tiny_config

    tokenizer = str(fixture_dir / "tok-wordpiece")
    runs = [pretrain(tiny_config(tmp_path / str(flag), tokenizer, dropout=0.0, steps=4,
                                 pppl_sentences=0, compile_layers=flag))
            for flag in (False, True)]
    losses = [[r["loss"] for r in run.history if r["split"] == "train"] for run in runs]
    assert losses[0] == pytest.approx(losses[1], rel=1e-4)
