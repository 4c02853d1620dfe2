"""ELECTRA: replaced positions and labels agree, Gumbel samples follow the generator, no
gradient through the sample, a tiny run beats the all-original baseline, both halves load."""

from __future__ import annotations

import random

import pytest
import torch
import transformers

from mlmkit.errors import MlmkitError
from mlmkit.pretraining import PretrainConfig, pretrain
from mlmkit.training.objectives.electra import (
    DISCRIMINATOR_DIR,
    build_electra,
    electra_configs,
    electra_sums,
    gumbel_sample,
    replace_tokens,
)


def test_replaced_labels_agree_with_the_samples():
    original = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 13, 14]])
    mask = torch.tensor([[False, True, True, False, False], [True, False, False, False, True]])
    sampled = torch.tensor([6, 40, 41, 14])  # row-major: (0,1) equals its original
    corrupted, replaced = replace_tokens(original, mask, sampled)
    assert corrupted.tolist() == [[5, 6, 40, 8, 9], [41, 11, 12, 13, 14]]
    assert replaced.tolist() == [[False, False, True, False, False],
                                 [True, False, False, False, False]]
    assert not (replaced & ~mask).any()  # only masked positions can be replaced


def test_gumbel_samples_follow_the_softmax():
    logits = torch.tensor([0.0, 1.0, 2.0, -1.0]).repeat(40_000, 1)
    generator = torch.Generator().manual_seed(0)
    samples = gumbel_sample(logits, generator)
    share = torch.bincount(samples, minlength=4).double() / len(samples)
    assert torch.allclose(share, torch.softmax(logits[0].double(), -1), atol=0.01)


def test_generator_is_a_fraction_of_the_discriminator_and_shares_embeddings(
        wordpiece_tokenizer):
    pair = build_electra("tiny", wordpiece_tokenizer, max_length=64, seed=0)
    gen, disc = pair.generator, pair.discriminator
    assert isinstance(gen, transformers.ElectraForMaskedLM)
    assert isinstance(disc, transformers.ElectraForPreTraining)
    assert gen.config.hidden_size * 4 == disc.config.hidden_size
    assert gen.config.num_hidden_layers == disc.config.num_hidden_layers
    assert gen.electra.embeddings is disc.electra.embeddings
    assert gen.generator_lm_head.weight is disc.electra.embeddings.word_embeddings.weight
    third, _ = electra_configs("electra-small", wordpiece_tokenizer, fraction=1 / 3)
    assert third.hidden_size % third.num_attention_heads == 0
    assert abs(third.hidden_size - 512 / 3) <= 8
    with pytest.raises(MlmkitError, match="electra-SIZE"):
        electra_configs("roberta-tiny", wordpiece_tokenizer)


def test_no_gradient_flows_through_the_sample(wordpiece_tokenizer):
    pair = build_electra("tiny", wordpiece_tokenizer, max_length=64, seed=0)
    original = torch.randint(5, len(wordpiece_tokenizer), (2, 16))
    attention = torch.ones_like(original)
    mask = torch.zeros_like(original, dtype=torch.bool)
    mask[:, 3:9] = True
    masked = original.masked_fill(mask, wordpiece_tokenizer.mask_token_id)
    sums = electra_sums(pair, masked, attention, mask, original,
                        generator=torch.Generator().manual_seed(0))
    sums.rtd_sum.backward(retain_graph=True)
    generator_only = pair.generator.electra.encoder.layer[0].attention.self.query.weight
    assert generator_only.grad is None  # the RTD loss does not reach the generator
    shared = pair.discriminator.electra.embeddings.word_embeddings.weight
    assert shared.grad is not None and shared.grad.abs().sum() > 0
    sums.mlm_sum.backward()
    assert generator_only.grad is not None and generator_only.grad.abs().sum() > 0


@pytest.fixture(scope="module")
def electra_run(tmp_path_factory, wordpiece_tokenizer, fixture_dir):
    """A tiny ELECTRA run on a repetitive corpus, where replaced tokens break a pattern."""
    root = tmp_path_factory.mktemp("electra")
    words = "the value of the function is returned when the list is empty".split()
    rng = random.Random(0)
    lines = []
    for _ in range(400):
        start = rng.randrange(len(words))
        lines.append(" ".join(words[(start + j) % len(words)] for j in range(26)))
    corpus = root / "pattern.txt"
    corpus.write_text("\n".join(lines), encoding="utf-8")
    config = PretrainConfig(
        objective="electra", model="tiny", tokenizer=str(fixture_dir / "tok-wordpiece"),
        corpus=str(corpus), validation_share=0.1, packing="document", seq_len=32,
        batch_size=16, steps=60, lr=3e-3, warmup=0.1, eval_every=0, eval_blocks=16,
        pppl_sentences=0, save_every=0, log_every=5, run_dir=str(root / "run"),
        progress=False, fill_mask_examples=0, threads=1, precision="fp32")
    return pretrain(config)


def test_tiny_run_detects_replaced_tokens_better_than_all_original(electra_run):
    evaluation = electra_run.summary["eval"]
    assert 0 < evaluation["rtd_baseline"] < 1
    assert evaluation["rtd_accuracy"] > evaluation["rtd_baseline"]
    train = [r for r in electra_run.history if r["split"] == "train"]
    assert train[-1]["mlm_loss"] < train[0]["mlm_loss"]


def test_both_halves_load_with_plain_transformers(electra_run):
    final = electra_run.final_dir
    disc = transformers.ElectraForPreTraining.from_pretrained(final / DISCRIMINATOR_DIR)
    gen = transformers.AutoModelForMaskedLM.from_pretrained(final)  # final/ is the MLM
    assert isinstance(gen, transformers.ElectraForMaskedLM)
    tokenizer = transformers.AutoTokenizer.from_pretrained(final)
    assert transformers.AutoTokenizer.from_pretrained(final / DISCRIMINATOR_DIR).vocab == \
        tokenizer.vocab
    assert torch.equal(disc.electra.embeddings.word_embeddings.weight,
                       gen.electra.embeddings.word_embeddings.weight)  # saved shared
    assert torch.equal(gen.generator_lm_head.weight, gen.electra.embeddings.word_embeddings.weight)
    ids = tokenizer("the value of the function", return_tensors="pt")
    with torch.no_grad():
        assert disc(**ids).logits.shape == ids.input_ids.shape
        assert gen(**ids).logits.shape[-1] == len(tokenizer)
