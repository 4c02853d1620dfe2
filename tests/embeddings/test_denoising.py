"""TSDAE's parts: the noise draws what sentence-transformers' `DenoisingAutoEncoderDataset.
delete` draws from the same generator; the decoder is sentence-transformers' (BERT family:
the causal-LM class with cross-attention, encoder weights tied) and the loss equals
`DenoisingAutoEncoderLoss` on the same inputs, value and gradients; other families get a
one-layer BERT decoder sharing the token embeddings."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import torch

import mlmkit
from mlmkit.embeddings.denoising import (
    build_decoder,
    delete_words,
    keep_words,
    reconstruction_loss,
)
from mlmkit.embeddings.st_directory import save_st_directory
from mlmkit.finetuning.embedding_encoder import TrainingEncoder

NOISY = ["open file", "the number items", "read"]
ORIGINAL = ["open the file now", "return the number of items", "read a line of text please"]


class _Generator:
    """numpy's legacy `rand(n)` / `choice(n)` calls, drawn from a Generator."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def rand(self, n):
        return self.rng.random(n)

    def choice(self, n):
        return self.rng.choice(n)


@pytest.mark.parametrize("ratio", [0.6, 0.95])
def test_the_noise_draws_what_sentence_transformers_draws(monkeypatch, ratio):
    from sentence_transformers.sentence_transformer.datasets.denoising_auto_encoder import (
        DenoisingAutoEncoderDataset,
    )

    # their words come from NLTK (not installed here): the same split on both sides
    nltk = types.ModuleType("nltk")
    nltk.word_tokenize = str.split
    treebank = types.ModuleType("nltk.tokenize.treebank")
    treebank.TreebankWordDetokenizer = lambda: types.SimpleNamespace(detokenize=" ".join)
    for name, module in (("nltk", nltk), ("nltk.tokenize", types.ModuleType("t")),
                         ("nltk.tokenize.treebank", treebank)):
        monkeypatch.setitem(sys.modules, name, module)
    words = "one two three four five six seven eight nine ten".split()
    for seed in range(30):
        n = 1 + seed % len(words)
        theirs_rng = _Generator(seed)
        monkeypatch.setattr(np.random, "rand", theirs_rng.rand)
        monkeypatch.setattr(np.random, "choice", theirs_rng.choice)
        theirs = DenoisingAutoEncoderDataset.delete(" ".join(words[:n]), del_ratio=ratio)
        keep = keep_words(n, ratio, np.random.default_rng(seed))
        assert theirs == " ".join(np.array(words[:n])[keep])


def test_delete_words_keeps_whole_words_and_special_tokens():
    ids = [101, 7, 8, 9, 10, 11, 102]
    words = [None, 0, 0, 1, 2, 2, None]  # word 0 and word 2 are two tokens each
    for seed in range(20):
        kept = delete_words(ids, words, 0.6, np.random.default_rng(seed))
        assert kept[0] == 101 and kept[-1] == 102 and len(kept) > 2
        assert (7 in kept) == (8 in kept) and (10 in kept) == (11 in kept)
    assert delete_words(ids, words, 0.0, np.random.default_rng(0)) == ids
    same = [delete_words(ids, words, 0.6, np.random.default_rng([0, 1, 5])) for _ in range(2)]
    assert same[0] == same[1]


@pytest.fixture(scope="module")
def reference(saved_tiny_mlm, tmp_path_factory):
    """sentence-transformers' model and DenoisingAutoEncoderLoss on a BERT folder, and
    mlmkit's model of the same folder (eval mode: no dropout on either side)."""
    st = pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer.losses import DenoisingAutoEncoderLoss

    folder = tmp_path_factory.mktemp("tsdae") / "model"
    save_st_directory(mlmkit.load(saved_tiny_mlm("bert")), folder, pooling="mean")
    model = st.SentenceTransformer(str(folder), device="cpu")
    loss = DenoisingAutoEncoderLoss(model, tie_encoder_decoder=True)
    model.eval()
    loss.decoder.eval()
    return model, loss, mlmkit.load(folder, device="cpu")


def test_the_loss_equals_denoising_auto_encoder_loss(reference):
    model, loss, mlm = reference
    features = [model.tokenize(NOISY), model.tokenize(ORIGINAL)]
    theirs = loss(features, None)
    theirs.backward()
    their_grad = model[0].auto_model.get_input_embeddings().weight.grad.clone()
    model.zero_grad(set_to_none=True)
    loss.decoder.zero_grad(set_to_none=True)

    encoder_model = mlm.model.eval()
    decoder = build_decoder(encoder_model, tie=True).eval()
    # the same decoder: theirs is loaded from the folder too, only its cross-attention is new
    missing = decoder.load_state_dict(loss.decoder.state_dict(), strict=True)
    assert not missing.missing_keys
    encoder = TrainingEncoder(encoder_model, mlm.tokenizer.pad_token_id, "mean", "fp32", 8192)
    vectors = encoder(mlm.tokenizer(NOISY)["input_ids"])
    ours = reconstruction_loss(decoder, vectors, features[1]["input_ids"],
                               mlm.tokenizer.pad_token_id)
    ours.backward()
    our_grad = encoder_model.get_input_embeddings().weight.grad.clone()
    encoder_model.zero_grad(set_to_none=True)
    assert abs(ours.item() - theirs.item()) < 1e-5
    assert (our_grad - their_grad).abs().max() <= 1e-5 * their_grad.abs().max()


def test_the_decoder_is_tied_to_the_encoder(tiny_mlm):
    model = tiny_mlm("bert").model
    decoder = build_decoder(model, tie=True)
    shared = {id(p) for p in model.parameters()}
    own = [name for name, p in decoder.named_parameters() if id(p) not in shared]
    # only the cross-attention and the output head's transform are the decoder's own
    assert own and all("crossattention" in name or name.startswith("cls.") for name in own)
    assert decoder.get_output_embeddings().weight is model.get_input_embeddings().weight
    # untied: a copy of the same values
    untied = build_decoder(model, tie=False)
    assert not {id(p) for p in untied.parameters()} & shared
    assert torch.equal(untied.get_input_embeddings().weight, model.get_input_embeddings().weight)


def test_other_families_get_a_one_layer_decoder(tiny_mlm):
    mlm = tiny_mlm("modernbert")
    decoder = build_decoder(mlm.model, tie=True)
    assert decoder.config.num_hidden_layers == 1
    assert decoder.get_input_embeddings().weight is mlm.model.get_input_embeddings().weight
    encoder = TrainingEncoder(mlm.model, mlm.tokenizer.pad_token_id, "mean", "fp32", 8192)
    ids = mlm.tokenizer(ORIGINAL, padding=True, return_tensors="pt")["input_ids"]
    loss = reconstruction_loss(decoder, encoder(mlm.tokenizer(NOISY)["input_ids"]), ids,
                               mlm.tokenizer.pad_token_id)
    loss.backward()
    assert torch.isfinite(loss)
    layer = next(p for n, p in mlm.model.named_parameters() if "layers.0" in n)
    assert layer.grad is not None and layer.grad.abs().sum() > 0  # through the vector
    mlm.model.zero_grad(set_to_none=True)
