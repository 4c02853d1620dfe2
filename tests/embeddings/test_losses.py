"""The contrastive losses equal sentence-transformers' on the same batch: the same loss value
and the same gradients, from the texts through the encoder (mlmkit's length-grouped forward
against sentence-transformers' padded columns)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mlmkit
from mlmkit.embeddings.losses import cosent_loss, matryoshka_loss, ranking_loss
from mlmkit.embeddings.st_directory import save_st_directory
from mlmkit.errors import InvalidArgument
from mlmkit.finetuning.embedding_cache import cached_backward
from mlmkit.finetuning.embedding_encoder import TrainingEncoder, length_groups

ANCHORS = ["Return the number of items in a container.", "a b", "Open the file.",
           "Raise an error when the file is missing, and say which file it was.", "hello"]
POSITIVES = ["How many items a container holds.", "b a", "The file is opened for reading.",
             "A missing file is an error that names it.", "hello there"]
NEGATIVES = ["Sort the list in place.", "c", "Close the socket.", "Nothing happens.", "bye"]
SCORES = [4.5, 1.0, 3.2, 3.2, 0.4]


@pytest.fixture(scope="module", params=["bert", "modernbert"])
def pair(saved_tiny_mlm, tmp_path_factory, request):
    """A sentence-transformers model and mlmkit's model, loaded from one folder (eval mode:
    no dropout, so both sides compute the same function). BERT runs mlmkit's length groups,
    ModernBERT its packed rows."""
    st = pytest.importorskip("sentence_transformers")
    folder = tmp_path_factory.mktemp("st") / "model"
    save_st_directory(mlmkit.load(saved_tiny_mlm(request.param)), folder, pooling="mean")
    reference = st.SentenceTransformer(str(folder), device="cpu").eval()
    mlm = mlmkit.load(folder, device="cpu")
    return reference, mlm


def _reference_loss(reference, loss, columns, labels=None):
    features = [reference.tokenize(column) for column in columns]
    value = loss(features, labels)
    value.backward()
    grad = reference[0].auto_model.get_input_embeddings().weight.grad.clone()
    reference.zero_grad(set_to_none=True)
    return value.item(), grad


def _mlmkit_loss(mlm, function, columns, **options):
    model = mlm.model.eval()
    encoder = TrainingEncoder(model, mlm.tokenizer.pad_token_id, "mean", "fp32", 8192)
    texts = [ids for column in columns for ids in mlm.tokenizer(column)["input_ids"]]
    value = function(encoder(texts).split(len(columns[0])), **options)
    value.backward()
    grad = model.get_input_embeddings().weight.grad.clone()
    model.zero_grad(set_to_none=True)
    return value.item(), grad


def _close(ours, theirs):
    assert abs(ours[0] - theirs[0]) < 1e-5, (ours[0], theirs[0])
    # float32 rounding of two summation orders, relative to the gradient's size
    scale = theirs[1].abs().max()
    assert (ours[1] - theirs[1]).abs().max() <= 1e-5 * scale, \
        ((ours[1] - theirs[1]).abs().max(), scale)


@pytest.mark.parametrize("with_negatives", [False, True])
def test_ranking_loss_equals_multiple_negatives_ranking(pair, with_negatives):
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    reference, mlm = pair
    columns = [ANCHORS, POSITIVES] + ([NEGATIVES] if with_negatives else [])
    theirs = _reference_loss(reference, MultipleNegativesRankingLoss(reference), columns)
    _close(_mlmkit_loss(mlm, ranking_loss, columns), theirs)


def test_cached_ranking_loss_equals_cached_multiple_negatives_ranking(pair):
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
    )

    reference, mlm = pair
    columns = [ANCHORS, POSITIVES, NEGATIVES]
    theirs = _reference_loss(reference, CachedMultipleNegativesRankingLoss(
        reference, mini_batch_size=2), columns)
    model = mlm.model.eval()
    encoder = TrainingEncoder(model, mlm.tokenizer.pad_token_id, "mean", "fp32", 8192)
    texts = [ids for column in columns for ids in mlm.tokenizer(column)["input_ids"]]
    value = cached_backward(encoder, texts, len(ANCHORS), ranking_loss, 2)
    ours = value.item(), model.get_input_embeddings().weight.grad.clone()
    model.zero_grad(set_to_none=True)
    _close(ours, theirs)


def test_cosent_loss_equals_cosent(pair):
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss

    reference, mlm = pair
    labels = torch.tensor(SCORES)
    theirs = _reference_loss(reference, CoSENTLoss(reference), [ANCHORS, POSITIVES], labels)
    ours = _mlmkit_loss(mlm, cosent_loss, [ANCHORS, POSITIVES],
                        scores=torch.tensor(SCORES, dtype=torch.float64))
    _close(ours, theirs)


def test_matryoshka_loss_equals_matryoshka(pair):
    from sentence_transformers.sentence_transformer.losses import (
        MatryoshkaLoss,
        MultipleNegativesRankingLoss,
    )

    reference, mlm = pair
    dims = [128, 32, 8]
    loss = MatryoshkaLoss(reference, MultipleNegativesRankingLoss(reference), dims)
    theirs = _reference_loss(reference, loss, [ANCHORS, POSITIVES, NEGATIVES])

    def ours(columns):
        return matryoshka_loss(ranking_loss, columns, dims)

    _close(_mlmkit_loss(mlm, ours, [ANCHORS, POSITIVES, NEGATIVES]), theirs)


def test_cosent_needs_scores():
    vectors = [torch.randn(3, 4), torch.randn(3, 4)]
    with pytest.raises(InvalidArgument, match="score"):
        cosent_loss(vectors)


def test_cosent_counts_only_the_order_of_the_scores():
    torch.manual_seed(0)
    vectors = [torch.randn(6, 8), torch.randn(6, 8)]
    scores = torch.tensor([0.1, 2.0, 2.0, 3.5, 4.0, 5.0])
    assert torch.allclose(cosent_loss(vectors, scores=scores),
                          cosent_loss(vectors, scores=scores * 10 + 1))


def test_length_groups_cover_every_row_once_within_the_slack():
    lengths = np.array([5, 30, 6, 7, 31, 12, 5, 60, 13, 8])
    groups = length_groups(lengths, max_tokens=10_000)
    assert sorted(np.concatenate(groups).tolist()) == list(range(len(lengths)))
    for group in groups:
        if len(group) > 1:
            assert len(group) * lengths[group].max() <= 1.25 * lengths[group].sum()
    assert all(len(g) * lengths[g].max() <= 40 or len(g) == 1
               for g in length_groups(lengths, max_tokens=40))


@pytest.mark.parametrize("pooling", ["mean", "cls", "max", "weighted-mean"])
def test_training_vectors_equal_embed(pair, pooling, monkeypatch):
    _, mlm = pair
    model = mlm.model.eval()
    texts = ANCHORS + POSITIVES + NEGATIVES
    ids = mlm.tokenizer(texts)["input_ids"]
    monkeypatch.setattr("mlmkit.finetuning.embedding_encoder.PACK_TOKENS", 40)  # several rows
    encoder = TrainingEncoder(model, mlm.tokenizer.pad_token_id, pooling, "fp32", 8192)
    assert encoder.packed == (model.config.model_type == "modernbert")
    expected = mlmkit.embed(mlm, texts, pooling=pooling)
    assert np.abs(encoder(ids).detach().numpy() - expected).max() < 1e-5


def test_pack_rows_fill_rows_longest_first():
    from mlmkit.finetuning.embedding_encoder import pack_rows

    lengths = np.array([5, 30, 6, 7, 31, 12, 5, 60, 13, 8])
    rows = pack_rows(lengths, 40)
    assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
    assert all(lengths[row].sum() <= 40 or len(row) == 1 for row in rows)
    assert rows[0] == [7]  # the longest, alone: longer than a row
