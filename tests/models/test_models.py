"""The model layer: presets, loading errors, and the masked_log_probs primitive."""

from __future__ import annotations

import pytest
import torch
import transformers

from mlmkit.errors import MlmkitError
from mlmkit.models import (
    FAMILIES,
    SIZES,
    adapter_for,
    build_mlm,
    load_mlm,
    masked_log_probs,
    masked_logits,
)

ARCHITECTURES = ["bert", "roberta", "xlm-roberta", "distilbert", "albert", "electra",
                 "deberta-v2", "modernbert", "eurobert"]


def _batch(tokenizer):
    texts = ["The module returns a list of names.", "A short one.",
             "Return the value of the attribute, or raise an error when it is missing."]
    return tokenizer(texts, padding=True, return_tensors="pt")


@pytest.mark.parametrize("family", ARCHITECTURES)
@pytest.mark.parametrize("train", [False, True])
def test_masked_log_probs_equals_full_logits(tiny_mlm, family, train):
    mlm = tiny_mlm(family)
    model = mlm.model
    assert adapter_for(model) is not None
    batch = _batch(mlm.tokenizer)
    ids, attn = batch["input_ids"], batch["attention_mask"]
    assert (attn == 0).any(), "the batch must contain padding"
    positions = attn.bool() & (torch.rand(ids.shape, generator=torch.Generator().manual_seed(1)) < 0.5)
    positions[1, 1] = True
    model.train(train)
    try:
        torch.manual_seed(3)
        full = model(input_ids=ids, attention_mask=attn).logits
        expected = torch.log_softmax(full.float(), -1)[positions]
        torch.manual_seed(3)
        got = masked_log_probs(model, ids, attn, positions)
    finally:
        model.eval()
    assert got.shape == (int(positions.sum()), len(mlm.tokenizer))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_pairs_and_mask_give_the_same_rows(tiny_mlm):
    mlm = tiny_mlm("bert")
    batch = _batch(mlm.tokenizer)
    mask = torch.zeros_like(batch["input_ids"], dtype=torch.bool)
    mask[0, 2] = mask[2, 5] = mask[2, 1] = True
    pairs = mask.nonzero()
    with torch.inference_mode():
        a = masked_log_probs(mlm.model, batch["input_ids"], batch["attention_mask"], mask)
        b = masked_log_probs(mlm.model, batch["input_ids"], batch["attention_mask"], pairs)
    torch.testing.assert_close(a, b)


def test_gradients_flow_through_the_primitive(tiny_mlm):
    mlm = tiny_mlm("bert")
    batch = _batch(mlm.tokenizer)
    mask = batch["attention_mask"].bool()
    logits = masked_logits(mlm.model, batch["input_ids"], batch["attention_mask"], mask)
    logits.logsumexp(-1).sum().backward()
    grads = [p.grad for p in mlm.model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    mlm.model.zero_grad(set_to_none=True)


def test_unknown_architecture_falls_back_to_full_logits(tiny_mlm, caplog):
    mlm = tiny_mlm("bert")
    model = mlm.model
    original = model.config.model_type
    batch = _batch(mlm.tokenizer)
    mask = batch["attention_mask"].bool()
    with torch.inference_mode():
        expected = masked_log_probs(model, batch["input_ids"], batch["attention_mask"], mask)
        model.config.model_type = "not-an-architecture"
        try:
            got = masked_log_probs(model, batch["input_ids"], batch["attention_mask"], mask)
        finally:
            model.config.model_type = original
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    assert "no adapter" in caplog.text


def test_bad_positions_are_rejected(tiny_mlm):
    mlm = tiny_mlm("bert")
    batch = _batch(mlm.tokenizer)
    with pytest.raises(ValueError, match="out of range"):
        masked_logits(mlm.model, batch["input_ids"], None, torch.tensor([[0, 999]]))
    with pytest.raises(ValueError, match="shape"):
        masked_logits(mlm.model, batch["input_ids"], None, torch.ones(1, 2, dtype=torch.bool))


@pytest.mark.parametrize("family", ["bert", "roberta", "modernbert"])
def test_presets_build_with_the_tokenizers_vocabulary(wordpiece_tokenizer, family):
    model = build_mlm(f"{family}-tiny", wordpiece_tokenizer, max_length=64)
    assert model.config.vocab_size == len(wordpiece_tokenizer)
    assert model.config.hidden_size == SIZES["tiny"].hidden
    assert isinstance(model, transformers.PreTrainedModel)


def test_preset_errors_list_the_valid_names(wordpiece_tokenizer):
    with pytest.raises(ValueError, match="tiny") as info:
        build_mlm("bert-huge", wordpiece_tokenizer)
    assert "modernbert" in str(info.value)
    assert set(FAMILIES) >= {"bert", "roberta", "modernbert"}


def test_seeded_presets_are_reproducible(wordpiece_tokenizer):
    a = build_mlm("tiny", wordpiece_tokenizer, max_length=64, seed=5)
    b = build_mlm("tiny", wordpiece_tokenizer, max_length=64, seed=5)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)


@pytest.mark.parametrize("family", ["bert", "roberta", "modernbert", "deberta-v2"])
def test_load_round_trip(saved_tiny_mlm, tiny_mlm, family):
    loaded = load_mlm(saved_tiny_mlm(family), device="cpu")
    assert loaded.tokenizer.mask_token_id == tiny_mlm(family).tokenizer.mask_token_id
    assert not loaded.model.training
    ids = loaded.tokenizer(["A list of names."], return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        a = loaded.model(input_ids=ids).logits
        b = tiny_mlm(family).model(input_ids=ids).logits
    torch.testing.assert_close(a, b)


def _no_hub(*args, **kwargs):
    raise AssertionError("the hub was asked")


def test_load_errors(tmp_path, monkeypatch, saved_tiny_mlm, wordpiece_tokenizer):
    with pytest.raises(MlmkitError, match="does not exist"):
        load_mlm(tmp_path / "nothing-here")
    # owner/name where 'owner' is a folder here: a local path, refused before any hub lookup
    (tmp_path / "runs").mkdir()
    with monkeypatch.context() as patch:
        patch.chdir(tmp_path)
        patch.setattr(transformers.AutoConfig, "from_pretrained", _no_hub)
        with pytest.raises(MlmkitError, match="'runs/missing' does not exist"):
            load_mlm("runs/missing")
    # a hub name the hub does not give: one line saying so (not "re-export the model")
    def refused(*args, **kwargs):
        raise OSError("no-such-owner/no-such-model is not a valid model identifier")

    from huggingface_hub import constants

    import mlmkit.core.hub as hub

    with monkeypatch.context() as patch:
        patch.setattr(constants, "HF_HUB_OFFLINE", False)  # (the tests run offline)
        patch.setattr(hub, "hub_reachable", lambda timeout=3.0: True)
        patch.setattr(transformers.AutoConfig, "from_pretrained", refused)
        with pytest.raises(MlmkitError, match="the Hugging Face hub did not give its config"):
            load_mlm("no-such-owner/no-such-model")
    # no network: the cache alone, at once (huggingface_hub would retry for ~25 s first)
    modes = []

    def cache_only(*args, **kwargs):
        modes.append(constants.HF_HUB_OFFLINE)
        raise OSError("not in the cache")

    with monkeypatch.context() as patch:
        patch.setattr(constants, "HF_HUB_OFFLINE", False)
        patch.setattr(hub, "hub_reachable", lambda timeout=3.0: False)
        patch.setattr(transformers.AutoConfig, "from_pretrained", cache_only)
        with pytest.raises(MlmkitError, match="nor in the Hugging Face cache, and the hub "
                                              "cannot be reached"):
            load_mlm("no-such-owner/no-such-model")
        assert modes == [True] and not constants.HF_HUB_OFFLINE  # restored afterwards
    with pytest.raises(MlmkitError, match="config.json"):
        load_mlm(tmp_path)
    not_mlm = tmp_path / "gpt2"
    transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100).save_pretrained(not_mlm)
    with pytest.raises(MlmkitError, match="masked-LM head") as info:
        load_mlm(not_mlm)
    assert "bert" in str(info.value)
    no_mask = tmp_path / "no-mask"
    src = saved_tiny_mlm("bert")
    model = transformers.AutoModelForMaskedLM.from_pretrained(src)
    model.save_pretrained(no_mask)
    tok = transformers.AutoTokenizer.from_pretrained(src)
    tok.mask_token = None
    tok.save_pretrained(no_mask)
    with pytest.raises(MlmkitError, match="no mask token"):
        load_mlm(no_mask)


def test_hub_probe_leaves_a_proxy_to_the_libraries_and_is_asked_once(monkeypatch):
    """Behind a proxy the hub's host is not reached directly: the probe said "no network"
    and an uncached model or dataset was refused though the proxy would have served it
    (review of the session's change). The answer is kept for a minute."""
    from mlmkit.core import hub

    calls = []
    monkeypatch.setattr(hub, "_connects", lambda url, timeout: calls.append(url) or False)
    monkeypatch.setattr(hub, "_REACHABLE", {})
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY",
                 "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert hub.hub_reachable() and not calls
    monkeypatch.setenv("NO_PROXY", "huggingface.co")  # the proxy is not used for the hub
    assert not hub.hub_reachable() and len(calls) == 1
    assert not hub.hub_reachable() and len(calls) == 1  # kept, not asked again
