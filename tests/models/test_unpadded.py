"""Unpadded attention (mlmkit.models.unpadded, mlmkit.models.varlen_attention): documents
packed into rows with no padding give each document the hidden states, loss and gradients
it gets alone in a padded batch, in every supported family (ModernBERT with its local
window, EuroBERT/NeoBERT's classes, BERT, RoBERTa, XLM-R and ELECTRA with their absolute
positions restarted per document) and kernel (sdpa, eager, FlexAttention's forward, the
varlen path with a reference kernel standing in for the CUDA one); `pretrain --unpadded`
trains with the documents of each row kept apart; other families and settings are refused
in one line."""

from __future__ import annotations

import pytest
import torch
import transformers

from mlmkit.errors import InvalidArgument
from mlmkit.models import varlen_attention
from mlmkit.models.unpadded import (
    ABSOLUTE_MODEL_TYPES,
    document_positions,
    unpadded_hidden,
    unpadded_logits,
)
from mlmkit.models.varlen_attention import (
    VARLEN_ATTENTION,
    document_layout,
    use_varlen_attention,
)
from mlmkit.pretraining import PretrainConfig
from mlmkit.pretraining.run import build_run

LENGTHS = [5, 9, 3]  # three documents in one row, no padding
KINDS = ("modernbert", "eurobert", "bert", "roberta", "xlm-roberta", "electra")


def reference_varlen(query, key, value, cu_seq_lens, max_length, scale, window_size,
                     enable_gqa):
    """What PyTorch's CUDA varlen kernel computes, in float32 on any device: each sequence
    of the flat [T, H, D] stream attends only itself (within ±window_size[0] when >= 0)."""
    out = torch.empty_like(query)
    for start, end in zip(cu_seq_lens[:-1].tolist(), cu_seq_lens[1:].tolist(), strict=True):
        assert end - start <= max_length
        q, k, v = (x[start:end].transpose(0, 1) for x in (query, key, value))
        mask = None
        if window_size[0] >= 0:
            index = torch.arange(end - start)
            mask = (index[:, None] - index[None, :]).abs() <= window_size[0]
        out[start:end] = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, scale=scale, enable_gqa=enable_gqa).transpose(0, 1)
    return out


@pytest.fixture
def reference_kernel(monkeypatch):
    """The varlen path on the CPU: the reference in place of the CUDA-only kernel."""
    monkeypatch.setattr(varlen_attention, "_kernel", reference_varlen)


def tiny_config(kind: str):
    common = dict(vocab_size=100, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                  num_attention_heads=2, max_position_embeddings=64, pad_token_id=0)
    no_dropout = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if kind == "modernbert":  # a local window of ±2 tokens, shorter than a document
        return transformers.ModernBertConfig(
            **{**common, "num_hidden_layers": 3}, local_attention=4, global_attn_every_n_layers=2,
            sep_token_id=2, cls_token_id=1, bos_token_id=1, eos_token_id=2)
    if kind == "eurobert":
        return transformers.EuroBertConfig(**common, num_key_value_heads=2, bos_token_id=1,
                                           eos_token_id=2, mask_token_id=3)
    if kind == "bert":
        return transformers.BertConfig(**common, **no_dropout)
    if kind in ("roberta", "xlm-roberta"):  # positions start after the padding index 1
        cls = transformers.RobertaConfig if kind == "roberta" else transformers.XLMRobertaConfig
        return cls(**{**common, "pad_token_id": 1, "max_position_embeddings": 66}, **no_dropout)
    return transformers.ElectraConfig(**common, embedding_size=32, **no_dropout)


def tiny_model(kind: str, attention: str):
    torch.manual_seed(0)
    config = tiny_config(kind)
    config._attn_implementation = "sdpa" if attention == "varlen" else attention
    model = transformers.AutoModelForMaskedLM.from_config(config).eval()
    if attention == "varlen":
        use_varlen_attention(model)
    return model


def encoder_of(model):
    return getattr(model, ABSOLUTE_MODEL_TYPES.get(model.config.model_type, "model"))


@pytest.mark.parametrize("kind, attention", [
    *[(kind, attention) for kind in KINDS for attention in ("sdpa", "eager", "varlen")],
    # FlexAttention with a document block mask (forward only on a CPU; compiled on first
    # use, seconds each): one family of each position kind, rotary and learned absolute;
    # tests/test_cuda.py runs it for every family on a GPU
    *[pytest.param(kind, "flex_attention", marks=pytest.mark.slow)
      for kind in ("modernbert", "bert")]])
def test_each_document_as_if_alone(kind, attention, reference_kernel):
    model = tiny_model(kind, attention)
    encoder = encoder_of(model)
    ids = torch.randint(4, 100, (1, sum(LENGTHS)), generator=torch.Generator().manual_seed(1))
    documents = torch.cat([torch.full((n,), i + 1) for i, n in enumerate(LENGTHS)])[None]
    assert document_positions(documents).tolist() == [[*range(5), *range(9), *range(3)]]
    with torch.no_grad():
        packed = unpadded_hidden(model, ids, documents)
        crossing = encoder(input_ids=ids).last_hidden_state
        start = 0
        for n in LENGTHS:
            alone = encoder(input_ids=ids[:, start:start + n]).last_hidden_state
            torch.testing.assert_close(packed[:, start:start + n], alone, rtol=1e-5, atol=1e-5)
            start += n
        assert (crossing - packed).abs().max() > 1e-3  # without it documents mix
        read = torch.zeros_like(ids, dtype=torch.bool)
        read[0, [1, 7, 15]] = True
        logits = unpadded_logits(model, ids, documents, read)
        alone = model(input_ids=ids[:, 5:14]).logits[0, 2]
        torch.testing.assert_close(logits[1], alone, rtol=1e-5, atol=1e-5)


def test_the_varlen_layout_makes_each_document_and_each_pad_a_sequence():
    documents = torch.tensor([[1, 1, 2, 2, 2, 0, 0], [1, 1, 1, 1, 1, 1, 1],
                              [1, 2, 3, 3, 3, 3, 0]])
    layout = document_layout(documents)
    # rows never join (row 1's document 1 follows row 0's padding), pads stand alone
    assert layout["cu_seq_lens_q"].tolist() == [0, 2, 5, 6, 7, 14, 15, 16, 20, 21]
    assert layout["cu_seq_lens_q"].dtype == torch.int32
    assert layout["max_length_q"] == 7  # the row length: no value read back from a device


def two_packed_rows(pad: int, length: int = 16):
    """Two packed rows of random documents (the second ending in two pads): token ids,
    the indexed mask, ~30% of the document tokens to read, and the documents' tokens."""
    rows = [[7, 4, 5], [10, 4]]  # document lengths of each packed row
    generator = torch.Generator().manual_seed(2)
    ids = torch.full((2, length), pad)
    documents = torch.zeros((2, length), dtype=torch.long)
    texts = []
    for r, lengths in enumerate(rows):
        at = 0
        for number, n in enumerate(lengths, start=1):
            text = torch.randint(4, 100, (n,), generator=generator)
            ids[r, at:at + n], documents[r, at:at + n] = text, number
            texts.append(text)
            at += n
    read = (torch.rand(ids.shape, generator=generator) < 0.3) & (documents > 0)
    read[0, 0] = True
    return ids, documents, read, texts


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("attention", ["sdpa", "varlen"])
def test_loss_and_gradients_equal_the_padded_batch_of_documents(kind, attention,
                                                                reference_kernel):
    """Two packed rows (the second ending in padding) against the same documents one per
    row of a padded batch: the MLM loss at the same tokens and every parameter's gradient."""
    pad = tiny_config(kind).pad_token_id
    ids, documents, read, texts = two_packed_rows(pad)
    targets = ids.clone()

    packed_model = tiny_model(kind, attention).train()
    logits = unpadded_logits(packed_model, ids, documents, read)
    packed_loss = torch.nn.functional.cross_entropy(logits, targets[read], reduction="sum")
    packed_loss.backward()

    padded_model = tiny_model(kind, "sdpa").train()
    width = max(len(t) for t in texts)
    batch = torch.full((len(texts), width), pad)
    attention_mask = torch.zeros_like(batch)
    where = torch.zeros_like(batch, dtype=torch.bool)
    flat_read = read[documents > 0].split([len(t) for t in texts])
    for i, text in enumerate(texts):
        batch[i, :len(text)], attention_mask[i, :len(text)] = text, 1
        where[i, :len(text)] = flat_read[i]
    alone = padded_model(input_ids=batch, attention_mask=attention_mask).logits[where]
    padded_loss = torch.nn.functional.cross_entropy(alone, batch[where], reduction="sum")
    padded_loss.backward()

    torch.testing.assert_close(packed_loss, padded_loss, rtol=1e-5, atol=1e-5)
    gradients = dict(padded_model.named_parameters())
    for name, parameter in packed_model.named_parameters():
        if parameter.grad is not None or gradients[name].grad is not None:
            torch.testing.assert_close(parameter.grad, gradients[name].grad, rtol=1e-4,
                                       atol=1e-5, msg=name)


def test_a_model_set_to_varlen_still_scores_padded_batches(reference_kernel, tmp_path):
    """Without document boundaries (held-out pseudo-perplexity, scoring) the varlen model
    runs SDPA with the batch's padding mask: the same logits as an SDPA model."""
    varlen, sdpa = tiny_model("bert", "varlen"), tiny_model("bert", "sdpa")
    assert varlen.config._attn_implementation == VARLEN_ATTENTION
    ids = torch.randint(4, 100, (2, 9), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad():
        torch.testing.assert_close(varlen(input_ids=ids, attention_mask=mask).logits,
                                   sdpa(input_ids=ids, attention_mask=mask).logits)
    varlen.save_pretrained(tmp_path)  # the checkpoint loads anywhere: no mlmkit kernel in it
    assert VARLEN_ATTENTION not in (tmp_path / "config.json").read_text(encoding="utf-8")


def run_config(tmp_path, tokenizer_dir, **extra) -> PretrainConfig:
    values = {"model": "modernbert-tiny", "tokenizer": tokenizer_dir, "unpadded": True,
              "run_dir": str(tmp_path / "run"), "steps": 2, "seq_len": 64, "batch_size": 2,
              "eval_every": 0, "eval_blocks": 2, "pppl_sentences": 0, "save_every": 0,
              "progress": False, "fill_mask_examples": 0, "threads": 1, "precision": "fp32"}
    return PretrainConfig(**{**values, **extra})


@pytest.mark.parametrize("model, tokenizer, kernel", [
    ("modernbert-tiny", "bpe", "sdpa"), ("bert-tiny", "wordpiece", "sdpa"),
    ("bert-tiny", "wordpiece", VARLEN_ATTENTION), ("modernbert-tiny", "bpe", VARLEN_ATTENTION)])
def test_pretrain_unpadded_keeps_the_documents_of_a_row_apart(
        tmp_path, tokenizer_factory, fixture_dir, monkeypatch, model, tokenizer, kernel):
    """A short unpadded run of each kind of position (and the varlen path, the reference
    kernel standing in for the CUDA one) trains with the documents of each row apart."""
    from mlmkit.training.objectives import mlm

    if kernel == VARLEN_ATTENTION:  # as on a GPU where the kernel runs
        monkeypatch.setattr(varlen_attention, "_kernel", reference_varlen)
        monkeypatch.setattr(mlm, "varlen_usable", lambda *args: True)
    tokenizer_factory(tokenizer)
    corpus = tmp_path / "short.jsonl"  # documents shorter than a row: several per row
    corpus.write_text("".join(f'{{"text": "Return the value {i} of the list and stop."}}\n'
                              for i in range(60)), encoding="utf-8")
    run = build_run(run_config(tmp_path, str(fixture_dir / f"tok-{tokenizer}"), model=model,
                               corpus=str(corpus), dropout=0.0, steps=3))
    assert run.objective.model.config._attn_implementation == kernel
    assert ("varlen FlashAttention" in run.objective.describe()) == (kernel != "sdpa")
    seen, loss_fn = [], run.objective._loss_fn
    run.objective._loss_fn = lambda *args: seen.append(args) or loss_fn(*args)
    first = [p.detach().clone() for p in run.objective.model.parameters()]
    run.step()
    model, ids, documents, mask, _, _ = seen[0]
    assert loss_fn.__name__ == "unpadded_mlm_loss"
    assert documents.max() > 1 and documents.min() >= 1  # several documents, no padding
    loss = float(run.window.sums["loss"])
    run.step()  # the first step's learning rate is 0 (warm-up): the second one trains
    assert any((a != b).any() for a, b in zip(first, model.parameters(), strict=True))
    with torch.no_grad():  # the same step's loss with documents attending each other
        from mlmkit.training.objectives.mlm import sparse_mlm_loss

        crossing = sparse_mlm_loss(model, ids, torch.ones_like(ids), mask, seen[0][4], 0.0)
    assert loss == pytest.approx(float(crossing[0]) / float(mask.sum()), rel=0.5)
    assert abs(loss - float(crossing[0]) / float(mask.sum())) > 1e-6


@pytest.mark.parametrize("change, message", [
    ({"model": "albert-tiny"}, r"--unpadded: --model family 'albert' has no unpadded attention"),
    ({"objective": "electra", "model": "electra-tiny"}, "--unpadded trains --objective mlm"),
    ({"packing": "document"}, "use --packing full"),
    ({"flex_attention": True, "unpadded": False}, "--flex-attention is the kernel of unpadded"),
    ({"flex_attention": True}, "FlexAttention has no backward pass on a CPU"),
    ({"flex_attention": True, "dropout": 0.1}, "no attention dropout"),
    ({"flex_attention": True, "model": "bert-tiny", "dropout": None},
     "--model bert-tiny trains with attention dropout 0.1 .* add --dropout 0"),
    ({"flex_attention": True, "no_flex": True}, r"torch .* has no FlexAttention .* upgrade "
                                                 "torch or drop --flex-attention"),
])
def test_refused_in_one_line_before_any_work(tmp_path, monkeypatch, change, message):
    from mlmkit.pretraining import run

    if change.pop("no_flex", False):  # a torch older than 2.5
        monkeypatch.setattr(run, "flex_attention_available", lambda: False)
    with pytest.raises(InvalidArgument, match=message) as error:
        build_run(run_config(tmp_path, "unused-tokenizer", **change))
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run").exists()


def test_an_unpadded_run_is_evaluated_as_it_trains(tmp_path, tokenizer_factory, fixture_dir):
    """Held-out blocks are scored with attention within each document too: the evaluation's
    loss equals the training loss function's on the same masked blocks, and differs from
    packed attention across the documents of a row."""
    from mlmkit.models.unpadded import unpadded_mlm_loss
    from mlmkit.training.objectives.mlm import sparse_mlm_loss

    tokenizer_factory("bpe")
    corpus = tmp_path / "short.jsonl"
    corpus.write_text("".join(f'{{"text": "Open the file number {i} and read it."}}\n'
                              for i in range(80)), encoding="utf-8")
    run = build_run(run_config(tmp_path, str(fixture_dir / "tok-bpe"), corpus=str(corpus),
                               validation_share=0.3))
    metrics = run.objective.evaluate(run.validation, [])
    batches = run.objective._eval_batches
    assert any(int(b["attention_mask"].max()) > 1 for b in batches)  # several documents a row
    run.objective.model.eval()  # as the evaluation ran it (no dropout)
    with torch.no_grad():
        within = [unpadded_mlm_loss(run.objective.model, b["input_ids"], b["attention_mask"],
                                    b["mask"], b["labels"], 0.0)[0] for b in batches]
        across = [sparse_mlm_loss(run.objective.model, b["input_ids"],
                                  (b["attention_mask"] > 0).long(), b["mask"], b["labels"],
                                  0.0)[0] for b in batches]
    count = sum(int(b["mask"].sum()) for b in batches)
    assert metrics["masked_tokens"] == count
    assert metrics["loss"] == pytest.approx(float(sum(within)) / count, rel=1e-5)
    assert abs(metrics["loss"] - float(sum(across)) / count) > 1e-5
