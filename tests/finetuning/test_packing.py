"""Packed fine-tuning batches: the same logits, loss and gradients as padded batches, and
training through them end to end."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from mlmkit.errors import InvalidArgument
from tests.finetuning.samples import write_sst_sample

RUNTIME = {"device": "cpu", "threads": 1, "progress": False}


@pytest.fixture(scope="module")
def sst(shared_data, tmp_path_factory):
    """64 SST-2 training rows (balanced), 32 validation rows."""
    return write_sst_sample(shared_data, tmp_path_factory.mktemp("sst-packed"), 32, 32)


def test_pack_rows_fills_few_rows_without_overlap():
    from mlmkit.finetuning.packing import pack_rows

    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 60, size=40)
    row, start, rows = pack_rows(lengths, 128)
    assert rows == int(np.ceil(lengths.sum() / 128)) or rows == int(np.ceil(
        lengths.sum() / 128)) + 1
    for r in range(rows):
        spans = sorted((int(s), int(s + n)) for s, n, k in zip(start, lengths, row,
                                                                strict=True) if k == r)
        assert spans[0][0] == 0 and spans[-1][1] <= 128
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))  # no gaps
    # a sequence longer than a row gets a row of its own, as long as it is
    row, start, rows = pack_rows(np.array([200, 10, 10]), 128)
    assert rows == 2 and start[0] == 0 and row[1] == row[2] != row[0]


def test_row_width_leaves_the_fewest_empty_slots():
    from mlmkit.finetuning.packing import pack_rows, row_width

    # sixteen short sentences: 3 rows of 128 would be 23% empty, 5 rows of 64 are 8% empty
    lengths = np.array([14, 9, 38, 22, 11, 17, 30, 8, 12, 25, 19, 6, 15, 27, 21, 20])
    width = row_width(lengths, 128)
    slots = {w: pack_rows(lengths, w)[2] * w for w in range(48, 129, 16)}
    assert width % 16 == 0 and width >= lengths.max()
    assert slots[width] == min(slots.values()) < slots[128]
    assert width == min(w for w, n in slots.items() if n == slots[width])  # narrower on a tie
    assert row_width(np.array([200, 10, 10]), 128) == 208  # a longer sequence sets it
    assert row_width(np.array([3]), 128) == 16


def _classifier(tiny_mlm, pooling: str, family: str = "modernbert"):
    from mlmkit.finetuning import methods

    mlm = tiny_mlm(family)
    model = methods.build_classifier(mlm, ["negative", "positive"], 0)
    model.config.classifier_pooling = pooling
    for module in model.modules():  # BERT's 0.1: equal losses need no random draws
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return mlm, model


TEXTS = [("a fine film , warm and funny",), ("dull",), ("not what i hoped for at all , "
         "and far too long for what it has to say",), ("great",), ("it is , at best , "
         "a curiosity",)]
PAIRS = [("a man plays a guitar", "someone is playing music"), ("dull", "the film bored me"),
         ("it rains in the north of the country today", "the sun shines"), ("great", "fine"),
         ("two dogs run on the beach", "animals are outside")]


@pytest.mark.parametrize("family, pooling, texts", [
    ("modernbert", "cls", TEXTS), ("modernbert", "mean", TEXTS), ("bert", "cls", TEXTS),
    ("bert", "cls", PAIRS), ("roberta", "cls", TEXTS), ("xlm-roberta", "cls", PAIRS),
    ("electra", "cls", TEXTS)], ids=["modernbert-cls", "modernbert-mean", "bert", "bert-pairs",
                                     "roberta", "xlm-roberta-pairs", "electra"])
def test_packed_batches_give_the_padded_logits_loss_and_gradients(tiny_mlm, family, pooling,
                                                                  texts):
    from mlmkit.finetuning import methods
    from mlmkit.finetuning.encode import collate, encode_pairs
    from mlmkit.finetuning.packing import collate_packed, packed_loss, supports_packing

    mlm, model = _classifier(tiny_mlm, pooling, family)
    assert supports_packing(model)
    texts = texts * 6
    labels = np.array([1, 0, 0, 1, 0] * 6)
    encoded = encode_pairs(mlm.tokenizer, texts, labels, 128, methods.takes_segments(model))
    if family == "bert" and len(texts[0]) == 2:  # segments as BERT's tokenizer types them:
        sep = mlm.tokenizer.sep_token_id  # 1 after the first [SEP] (this one writes none)
        types = [[int(sep in ids[:k]) for k in range(len(ids))] for ids in encoded.ids]
        encoded = dataclasses.replace(encoded, type_ids=types)
    index = np.random.default_rng(1).permutation(len(texts))
    device = torch.device("cpu")
    padded = collate(encoded, index, mlm.tokenizer.pad_token_id, device)
    packed = collate_packed(encoded, index, mlm.tokenizer.pad_token_id, device, row_tokens=64)
    assert ("token_type_ids" in packed) == ("token_type_ids" in padded)
    assert packed["input_ids"].shape[0] > 1  # several rows: sequences meet other rows
    width = packed["input_ids"].shape[1]  # fitted to the batch: a multiple of 16, ≤ 64
    assert width % 16 == 0 and width <= 64 and width >= encoded.lengths.max()
    assert packed["input_ids"].numel() < padded["input_ids"].numel()

    def run(loss_of, batch):
        model.zero_grad()
        loss = loss_of(batch)
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()
                               if p.grad is not None}

    model.train()  # dropout 0 (`_classifier`): train mode, deterministic
    want, want_grads = run(lambda b: methods.head_loss(model, b, False), padded)
    last_layer_runs = []
    last = model.model.layers[-1] if family == "modernbert" else \
        model.base_model.encoder.layer[-1]
    hook = last.register_forward_hook(lambda *_: last_layer_runs.append(1))
    got, got_grads = run(lambda b: packed_loss(model, b, False), packed)
    hook.remove()
    # reading first tokens, the last layer runs only there (models.sparse_last_layer)
    assert len(last_layer_runs) == (pooling == "mean")
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert want_grads.keys() == got_grads.keys()
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=padded["input_ids"], attention_mask=padded["attention_mask"],
                       **({"token_type_ids": padded["token_type_ids"]}
                          if "token_type_ids" in padded else {})).logits
        from mlmkit.finetuning.packing import packed_logits

        torch.testing.assert_close(packed_logits(model, packed), logits, atol=1e-5, rtol=1e-5)


def test_training_through_packed_batches_matches_padded_training(tiny_mlm, sst):
    import mlmkit

    common = dict(train=str(sst / "train.tsv"), validation=str(sst / "validation.tsv"),
                  epochs=2, lr=1e-3, batch_size=8, precision="fp32", select="best",
                  **RUNTIME)
    mlm = tiny_mlm("modernbert")
    packed = mlmkit.finetune(mlm, "sst2", **common).runs[0]  # packed by default
    padded = mlmkit.finetune(mlm, "sst2", packed=False, bucket=False, **common).runs[0]
    assert packed.status == padded.status == "finished"
    assert packed.steps == padded.steps == 16
    for a, b in zip(packed.history, padded.history, strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], abs=1e-4)
        assert a["accuracy"] == pytest.approx(b["accuracy"], abs=1 / 32 + 1e-9)


def test_packed_training_is_the_default_only_where_the_model_has_it(tiny_mlm, sst):
    from mlmkit.finetuning.data import load_task_data
    from mlmkit.finetuning.tasks import get_task
    from mlmkit.finetuning.trainer import Recipe, Trainer

    data = load_task_data(get_task("sst2"), train=str(sst / "train.tsv"),
                          validation=str(sst / "validation.tsv"))
    device = torch.device("cpu")
    assert Trainer(tiny_mlm("modernbert"), data, Recipe(), device, "fp32").packed
    assert Trainer(tiny_mlm("bert"), data, Recipe(), device, "fp32").packed
    assert not Trainer(tiny_mlm("distilbert"), data, Recipe(), device, "fp32").packed
    assert not Trainer(tiny_mlm("modernbert"), data, Recipe(), device, "fp32", False).packed
    with pytest.raises(InvalidArgument, match="--packed"):
        Trainer(tiny_mlm("distilbert"), data, Recipe(), device, "fp32", True)


def test_equal_length_batches_cover_each_row_once_within_the_budget():
    from mlmkit.finetuning.packing import equal_length_batches

    lengths = np.random.default_rng(0).integers(2, 40, size=300)
    batches = equal_length_batches(lengths, 256)
    seen = np.concatenate(batches)
    assert sorted(seen.tolist()) == list(range(300))
    for batch in batches:
        assert len(batch) == 1 or len(batch) * lengths[batch].max() <= 256
    one_length = sum(len(set(lengths[b].tolist())) == 1 for b in batches)
    assert one_length >= len(batches) // 2  # most batches need no padding


def test_packed_lora_classifier_reads_its_adapters_in_the_last_layer(tiny_mlm, monkeypatch):
    """With LoRA on ModernBERT's fused QKV projection, the last layer computed at the first
    tokens goes through the adapter as the full layer does: the same loss and gradients."""
    pytest.importorskip("peft")
    from mlmkit.finetuning.encode import encode_pairs
    from mlmkit.finetuning.lora import LoraOptions, add_lora, base_of
    from mlmkit.finetuning.packing import collate_packed, packed_loss

    mlm, model = _classifier(tiny_mlm, "cls")
    model = add_lora(model, LoraOptions(), "head")
    for module in model.modules():  # adapters that start at zero would hide a skipped one
        if hasattr(module, "lora_B"):
            for weight in module.lora_B.values():
                torch.nn.init.normal_(weight.weight, std=0.5)
    texts = [("a fine film , warm and funny",), ("dull",), ("it is , at best , a curiosity",)]
    encoded = encode_pairs(mlm.tokenizer, texts * 4, np.array([1, 0, 0] * 4), 128)
    batch = collate_packed(encoded, np.arange(12), mlm.tokenizer.pad_token_id,
                           torch.device("cpu"))
    base = base_of(model)

    def run(sparse: str):
        monkeypatch.setenv("MLMKIT_SPARSE_LAST_LAYER", sparse)
        model.zero_grad()
        loss = packed_loss(base, batch, False)
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()
                               if p.grad is not None}

    model.train()
    want, want_grads = run("0")
    got, got_grads = run("1")
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert any("lora" in name for name in want_grads)
    assert want_grads.keys() == got_grads.keys()
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


def test_packed_bert_with_dropout_reads_the_last_layer_at_first_tokens_only(tiny_mlm):
    """With BERT's dropout drawing, packed batches still run the last layer only at the
    first tokens (its dropout drawn there), and train: finite loss, gradients everywhere."""
    from mlmkit.finetuning import methods
    from mlmkit.finetuning.encode import encode_pairs
    from mlmkit.finetuning.packing import collate_packed, packed_loss

    mlm = tiny_mlm("bert")
    model = methods.build_classifier(mlm, ["negative", "positive"], 0).train()
    assert model.bert.encoder.layer[-1].output.dropout.p == 0.1  # BERT's default
    encoded = encode_pairs(mlm.tokenizer, TEXTS * 4, np.array([1, 0, 0, 1, 0] * 4), 128)
    batch = collate_packed(encoded, np.arange(20), mlm.tokenizer.pad_token_id,
                           torch.device("cpu"))
    runs = []
    hook = model.bert.encoder.layer[-1].register_forward_hook(lambda *_: runs.append(1))
    torch.manual_seed(0)
    first = packed_loss(model, batch, False)
    first.backward()
    hook.remove()
    assert runs == [] and torch.isfinite(first)
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    torch.manual_seed(1)
    assert packed_loss(model, batch, False) != first  # dropout draws
    model.eval()
    with torch.no_grad():
        torch.manual_seed(2)
        assert packed_loss(model, batch, False) == packed_loss(model, batch, False)
