"""SPLADE training's loss equals sentence-transformers' SpladeLoss(
SparseMultipleNegativesRankingLoss) on the same model and batch: the loss value and the
gradients, from the texts through the MLM head (mlmkit's length groups against
sentence-transformers' padded columns, MLMTransformer + SpladePooling)."""

from __future__ import annotations

import copy

import pytest
import torch

import mlmkit
from mlmkit.embeddings.splade import (
    active_dims,
    flops,
    regularizer_weight,
    splade_loss,
    splade_vectors,
)
from mlmkit.finetuning.embedding_sparse import SparseTrainingEncoder
from mlmkit.training.objectives.mlm import set_dropout

QUERIES = ["Return the number of items in a container.", "a b", "Open the file.",
           "Raise an error when the file is missing, and say which file it was."]
POSITIVES = ["How many items a container holds.", "b a", "The file is opened for reading.",
             "A missing file is an error that names it."]
NEGATIVES = ["Sort the list in place.", "c", "Close the socket.", "Nothing happens."]
WEIGHTS = {"query_weight": 0.003, "document_weight": 0.002}  # large: the regulariser counts


@pytest.mark.parametrize("family", ["bert", "modernbert"])
def test_loss_and_gradients_equal_sentence_transformers(saved_tiny_mlm, family):
    st = pytest.importorskip("sentence_transformers.sparse_encoder")
    modules = pytest.importorskip("sentence_transformers.sparse_encoder.modules")
    folder = str(saved_tiny_mlm(family))
    reference = st.SparseEncoder(modules=[modules.MLMTransformer(folder),
                                          modules.SpladePooling("max")], device="cpu")
    reference.double().train()  # float64: dot products over the vocabulary reach 1e3
    set_dropout(reference[0].auto_model, 0.0)  # the same function on both sides
    loss = st.losses.SpladeLoss(
        reference, st.losses.SparseMultipleNegativesRankingLoss(reference),
        document_regularizer_weight=WEIGHTS["document_weight"],
        query_regularizer_weight=WEIGHTS["query_weight"])
    columns = (QUERIES, POSITIVES, NEGATIVES)
    parts = loss([reference.tokenize(column) for column in columns], None)
    theirs = sum(parts.values())
    theirs.backward()
    net = reference[0].auto_model
    their_grads = {k: p.grad for k, p in net.named_parameters() if p.grad is not None}

    mlm = mlmkit.load(folder, device="cpu")
    model = copy.deepcopy(mlm.model).double().train()
    set_dropout(model, 0.0)
    encoder = SparseTrainingEncoder(model, mlm.tokenizer.pad_token_id, "fp32", 8192)
    texts = [ids for column in columns for ids in mlm.tokenizer(column)["input_ids"]]
    ours = splade_loss(encoder(texts).split(len(QUERIES)), **WEIGHTS)
    ours.backward()
    assert abs(ours.item() - theirs.item()) < 1e-5, (ours.item(), theirs.item())
    assert parts["document_regularizer_loss"].item() > 1e-3  # the regulariser is in both
    our_grads = {k: p.grad for k, p in model.named_parameters() if p.grad is not None}
    assert our_grads.keys() == their_grads.keys()
    worst = max((our_grads[k] - their_grads[k]).abs().max().item() for k in our_grads)
    assert worst < 1e-5, worst


def test_the_vectors_equal_embed_sparse_and_the_pieces(tiny_mlm):
    mlm = tiny_mlm("bert")
    ids = mlm.tokenizer(QUERIES, padding=True, return_tensors="pt")
    with torch.inference_mode():
        vectors = splade_vectors(mlm.model, ids["input_ids"], ids["attention_mask"])
    for row, vector in zip(vectors, mlmkit.embed_sparse(mlm, QUERIES, top_k=10_000),
                           strict=True):
        assert sorted(row.nonzero().squeeze(1).tolist()) == sorted(vector.token_ids)
        assert torch.allclose(row[vector.token_ids], torch.tensor(vector.weights), atol=1e-5)
    assert active_dims(vectors) == pytest.approx((vectors > 0).sum(1).float().mean().item())
    batch = torch.tensor([[1.0, 0.0, 2.0], [3.0, 0.0, 0.0]])
    assert flops(batch).item() == pytest.approx(2.0 ** 2 + 1.0 ** 2)


def test_the_regulariser_weight_rises_quadratically():
    assert regularizer_weight(3.0, 0, 30) == 0.0
    assert regularizer_weight(3.0, 5, 30) == pytest.approx(3.0 * (5 / 10) ** 2)
    assert regularizer_weight(3.0, 10, 30) == 3.0
    assert regularizer_weight(3.0, 0, 30, warmup=0.0) == 3.0
