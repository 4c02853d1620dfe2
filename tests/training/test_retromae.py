"""RetroMAE: the decoder's copy is masked apart from the encoder's, its predictions read the
sentence vector, its loss trains the encoder through [CLS], a tiny run lowers both losses,
and the saved model is a plain masked LM."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import torch
import transformers

from mlmkit.errors import InvalidArgument
from mlmkit.pretraining import PretrainConfig, pretrain
from mlmkit.training.objectives.retromae import RetroMAEDecoder, RetroMAEObjective

WORDS = "the value of the function is returned when the list is empty".split()


def _config(fixture_dir, corpus, run_dir, **overrides) -> PretrainConfig:
    settings = dict(
        objective="retromae", model="tiny", tokenizer=str(fixture_dir / "tok-wordpiece"),
        corpus=str(corpus), validation_share=0.1, packing="document", seq_len=32,
        batch_size=8, steps=16, lr=3e-3, warmup=0.1, eval_every=0, eval_blocks=4,
        pppl_sentences=0, save_every=0, log_every=2, run_dir=str(run_dir), progress=False,
        fill_mask_examples=0, threads=1, precision="fp32")
    return PretrainConfig(**{**settings, **overrides})


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = random.Random(0)
    lines = [" ".join(WORDS[(start + j) % len(WORDS)] for j in range(20))
             for start in (rng.randrange(len(WORDS)) for _ in range(300))]
    path = tmp_path_factory.mktemp("retromae") / "pattern.txt"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _objective(fixture_dir, corpus, tmp_path, wordpiece_tokenizer, **overrides):
    runtime = SimpleNamespace(device=torch.device("cpu"), precision="fp32",
                              autocast=torch.autocast("cpu", enabled=False))
    config = _config(fixture_dir, corpus, tmp_path / "unused", **overrides)
    return RetroMAEObjective(config, wordpiece_tokenizer, runtime)


def test_decoder_copy_is_masked_apart_and_its_loss_reaches_the_encoder(
        fixture_dir, corpus, tmp_path, wordpiece_tokenizer):
    objective = _objective(fixture_dir, corpus, tmp_path, wordpiece_tokenizer,
                           decoder_masking_rate=0.6)
    tok = wordpiece_tokenizer
    ids = tok([" ".join(WORDS)] * 4, return_tensors="pt")["input_ids"]
    batch = SimpleNamespace(input_ids=ids, attention_mask=torch.ones_like(ids),
                            word_starts=torch.ones_like(ids, dtype=torch.bool),
                            document_ids=torch.zeros_like(ids))
    prepared = objective.prepare(batch, step=0)
    t = prepared.tensors
    maskable = ids.shape[1] - 2  # [CLS] and [SEP] are never masked
    assert prepared.counts["decoder_masked"] == pytest.approx(0.6 * maskable * 4, abs=4)
    assert not t["decoder_mask"][:, 0].any() and not t["mask"][:, 0].any()
    assert not torch.equal(t["decoder_mask"], t["mask"])  # a second, separate draw
    assert (t["decoder_input_ids"][t["decoder_mask"]] == tok.mask_token_id).all()
    assert torch.equal(t["original"], ids)

    out = objective.loss(t, prepared.counts)
    assert set(out.metrics) == {"loss", "accuracy", "decoder_loss", "decoder_accuracy"}
    assert float(out.loss.detach()) == pytest.approx(float(out.metrics["loss"] +
                                                  out.metrics["decoder_loss"]))
    # the decoder's loss alone trains the encoder, through [CLS]
    encoder_layer = next(objective.model.base_model.encoder.parameters())
    hidden = objective.adapter.encode(objective.model, t["input_ids"], t["attention_mask"])
    embeddings = objective.model.get_input_embeddings()(t["decoder_input_ids"])
    decoded = objective.decoder(hidden[:, 0], embeddings, t["attention_mask"])
    decoded[t["decoder_mask"]].sum().backward()
    assert encoder_layer.grad is not None and encoder_layer.grad.abs().sum() > 0


def test_decoder_reads_the_sentence_vector_at_every_position():
    torch.manual_seed(0)
    decoder = RetroMAEDecoder(hidden=16, heads=2, intermediate=32, max_positions=8).eval()
    embeddings = torch.randn(1, 6, 16)
    mask = torch.ones(1, 6, dtype=torch.long)
    mask[0, 5] = 0  # padding: never attended to
    first = decoder(torch.randn(1, 16), embeddings, mask)
    second = decoder(torch.randn(1, 16), embeddings, mask)
    assert not torch.allclose(first[0, 1:5], second[0, 1:5])
    changed = embeddings.clone()
    changed[0, 5] += 1.0
    assert torch.allclose(decoder(torch.zeros(1, 16), embeddings, mask)[0, :5],
                          decoder(torch.zeros(1, 16), changed, mask)[0, :5], atol=1e-6)


def test_tiny_run_lowers_both_losses_and_saves_a_plain_masked_lm(fixture_dir, corpus, tmp_path,
                                                                 wordpiece_tokenizer):
    result = pretrain(_config(fixture_dir, corpus, tmp_path / "run"))
    train = [r for r in result.history if r["split"] == "train"]
    assert train[-1]["loss"] < train[0]["loss"]
    assert train[-1]["decoder_loss"] < train[0]["decoder_loss"]
    model = transformers.AutoModelForMaskedLM.from_pretrained(result.final_dir)
    assert not any("decoder.layer" in name for name, _ in model.named_parameters())
    assert "retromae" in (tmp_path / "run" / "config.yaml").read_text()


def test_options_are_checked(fixture_dir, corpus, tmp_path, wordpiece_tokenizer):
    with pytest.raises(InvalidArgument, match="decoder"):
        _config(fixture_dir, corpus, tmp_path / "r", decoder_masking_rate=1.5)
    with pytest.raises(InvalidArgument, match="unpadded"):
        _objective(fixture_dir, corpus, tmp_path, wordpiece_tokenizer, model="modernbert-tiny",
                   unpadded=True)


def test_dupmae_bag_of_words_term_changes_the_loss_and_trains(fixture_dir, corpus, tmp_path,
                                                              wordpiece_tokenizer):
    """The term equals a plain computation of DupMAE's loss, adds to the total with its
    weight, and a tiny run with it lowers it."""
    plain = _objective(fixture_dir, corpus, tmp_path, wordpiece_tokenizer)
    dup = _objective(fixture_dir, corpus, tmp_path, wordpiece_tokenizer, dupmae_weight=0.5)
    dup.model.load_state_dict(plain.model.state_dict())
    dup.decoder.load_state_dict(plain.decoder.state_dict())
    tok = wordpiece_tokenizer
    encoded = tok([" ".join(WORDS), "the list is empty"], padding=True, return_tensors="pt")
    ids, attention = encoded["input_ids"], encoded["attention_mask"]
    batch = SimpleNamespace(input_ids=ids, attention_mask=attention,
                            word_starts=torch.ones_like(ids, dtype=torch.bool),
                            document_ids=torch.zeros_like(ids))
    with torch.no_grad():
        base = plain.loss(plain.prepare(batch, step=0).tensors, plain.prepare(batch, 0).counts)
        prepared = dup.prepare(batch, step=0)
        out = dup.loss(prepared.tensors, prepared.counts)
        hidden = dup.adapter.encode(dup.model, prepared.tensors["input_ids"], attention)
        logits = dup.adapter.head(dup.model, hidden).float()
    assert prepared.counts["blocks"] == 2
    expected = []
    for row in range(2):
        words = [i for i, a in zip(ids[row].tolist(), attention[row].tolist(), strict=True)
                 if a and i not in tok.all_special_ids]
        positions = [c for c in range(ids.shape[1]) if attention[row, c]
                     and int(ids[row, c]) not in tok.all_special_ids]
        pooled = logits[row, positions].amax(0)
        log_probs = torch.log_softmax(pooled, -1)
        expected.append(-sum(log_probs[w] for w in set(words)) / len(set(words)))
    bow = sum(expected) / 2
    assert float(out.metrics["bow_loss"]) == pytest.approx(float(bow), rel=1e-5)
    assert float(out.loss) == pytest.approx(float(base.loss) + 0.5 * float(bow), rel=1e-5)
    assert "bow_loss" not in base.metrics and "DupMAE" in dup.describe()

    result = pretrain(_config(fixture_dir, corpus, tmp_path / "run", steps=6, dupmae_weight=1.0))
    train = [r for r in result.history if r["split"] == "train"]
    assert train[-1]["bow_loss"] < train[0]["bow_loss"]
    with pytest.raises(InvalidArgument, match="dupmae-weight"):
        _config(fixture_dir, corpus, tmp_path / "r", objective="mlm", dupmae_weight=1.0)
