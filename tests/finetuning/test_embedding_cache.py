"""GradCache (`cached-mnrl`): the loss and every parameter's gradient equal plain MNRL's on
the same batch, without dropout, and with dropout when the RNG state is replayed (and only
then); the RNG is left where one forward pass per mini-batch leaves it."""

from __future__ import annotations

import contextlib
import copy

import numpy as np
import pytest
import torch

from mlmkit.embeddings.losses import ranking_loss
from mlmkit.finetuning import embedding_cache
from mlmkit.finetuning.embedding_cache import cached_backward
from mlmkit.finetuning.embedding_encoder import TrainingEncoder
from mlmkit.training.objectives.mlm import set_dropout

ANCHORS = ["Return the number of items in a container.", "a b", "Open the file.",
           "Raise an error when the file is missing, and say which file it was.", "hello"]
POSITIVES = ["How many items a container holds.", "b a", "The file is opened for reading.",
             "A missing file is an error that names it.", "hello there"]
NEGATIVES = ["Sort the list in place.", "c", "Close the socket.", "Nothing happens.", "bye"]
MINI = 4
DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


def _setup(tiny_mlm, family, dropout, device="cpu"):
    mlm = tiny_mlm(family)
    model = copy.deepcopy(mlm.model).to(device)
    set_dropout(model, dropout)
    model.train()
    encoder = TrainingEncoder(model, mlm.tokenizer.pad_token_id, "mean", "fp32", 8192)
    texts = [ids for column in (ANCHORS, POSITIVES, NEGATIVES)
             for ids in mlm.tokenizer(column)["input_ids"]]
    return model, encoder, texts


def _grads(model) -> dict[str, torch.Tensor]:
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return grads


def _plain(model, encoder, texts, chunked: bool):
    """MNRL in one graph; `chunked`: the texts embedded in cached_backward's mini-batches
    (sorted by length), so dropout draws what the cached passes draw."""
    if chunked:
        lengths = np.array([len(t) for t in texts])
        order = np.argsort(lengths, kind="stable")
        device = next(model.parameters()).device
        vectors = torch.empty(len(texts), model.config.hidden_size, device=device)
        for begin in range(0, len(texts), MINI):
            chunk = order[begin:begin + MINI]
            vectors = vectors.index_put((torch.from_numpy(chunk).to(device),),
                                        encoder([texts[i] for i in chunk]))
    else:
        vectors = encoder(texts)
    loss = ranking_loss(vectors.split(len(ANCHORS)))
    loss.backward()
    return loss.item(), _grads(model)


def _cached(model, encoder, texts):
    loss = cached_backward(encoder, texts, len(ANCHORS), ranking_loss, MINI)
    return loss.item(), _grads(model)


def _assert_equal(ours, theirs):
    assert abs(ours[0] - theirs[0]) < 1e-5, (ours[0], theirs[0])
    assert ours[1].keys() == theirs[1].keys()
    worst = max((ours[1][k] - theirs[1][k]).abs().max().item() for k in ours[1])
    assert worst < 1e-5, worst


@pytest.mark.parametrize("family", ["bert", "modernbert"])
def test_cached_equals_plain_mnrl_without_dropout(tiny_mlm, family):
    model, encoder, texts = _setup(tiny_mlm, family, 0.0)
    _assert_equal(_cached(model, encoder, texts), _plain(model, encoder, texts, chunked=False))


@pytest.mark.parametrize("device", DEVICES)
def test_cached_replays_dropout(tiny_mlm, monkeypatch, device):
    model, encoder, texts = _setup(tiny_mlm, "bert", 0.1, device)
    torch.manual_seed(3)
    reference = _plain(model, encoder, texts, chunked=True)
    after_reference = embedding_cache.rng_state(torch.device(device))
    torch.manual_seed(3)
    _assert_equal(_cached(model, encoder, texts), reference)
    after = embedding_cache.rng_state(torch.device(device))  # the replays drew nothing
    assert all(a is b is None or torch.equal(a, b) for a, b in zip(after, after_reference, strict=True))
    # without the replay the second pass draws other masks: the gradients are wrong
    monkeypatch.setattr(embedding_cache, "replayed",
                        lambda state, device: contextlib.nullcontext())
    torch.manual_seed(3)
    loss, grads = _cached(model, encoder, texts)
    assert abs(loss - reference[0]) < 1e-5
    assert max((grads[k] - reference[1][k]).abs().max().item() for k in grads) > 1e-4
