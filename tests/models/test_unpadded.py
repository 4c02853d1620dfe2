"""Unpadded attention (issue 19, mlmkit.models.unpadded): documents packed into one row
with no padding give each document the hidden states it gets alone (ModernBERT with its
local window, sdpa, eager and FlexAttention; EuroBERT/NeoBERT's classes); `pretrain --unpadded` trains
with the documents of each row kept apart; other families and settings are refused."""

from __future__ import annotations

import pytest
import torch
import transformers

from mlmkit.errors import InvalidArgument
from mlmkit.models.unpadded import document_positions, unpadded_hidden, unpadded_logits
from mlmkit.pretraining import PretrainConfig
from mlmkit.pretraining.run import build_run

LENGTHS = [5, 9, 3]  # three documents in one row, no padding


def tiny_model(kind: str, attention: str):
    torch.manual_seed(0)
    if kind == "modernbert":  # a local window of ±2 tokens, shorter than a document
        config = transformers.ModernBertConfig(
            vocab_size=100, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
            num_attention_heads=2, local_attention=4, global_attn_every_n_layers=2,
            max_position_embeddings=64, pad_token_id=0, sep_token_id=2, cls_token_id=1,
            bos_token_id=1, eos_token_id=2)
    else:
        config = transformers.EuroBertConfig(
            vocab_size=100, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
            pad_token_id=0, bos_token_id=1, eos_token_id=2, mask_token_id=3)
    config._attn_implementation = attention
    return transformers.AutoModelForMaskedLM.from_config(config).eval()


@pytest.mark.parametrize("kind, attention", [
    ("modernbert", "sdpa"), ("modernbert", "eager"), ("eurobert", "sdpa"),
    # FlexAttention with a document block mask (forward only on a CPU; compiled on first use)
    pytest.param("modernbert", "flex_attention", marks=pytest.mark.slow),
    pytest.param("eurobert", "flex_attention", marks=pytest.mark.slow)])
def test_each_document_as_if_alone(kind, attention):
    model = tiny_model(kind, attention)
    ids = torch.randint(4, 100, (1, sum(LENGTHS)), generator=torch.Generator().manual_seed(1))
    documents = torch.cat([torch.full((n,), i + 1) for i, n in enumerate(LENGTHS)])[None]
    assert document_positions(documents).tolist() == [[*range(5), *range(9), *range(3)]]
    with torch.no_grad():
        packed = unpadded_hidden(model, ids, documents)
        crossing = model.model(input_ids=ids).last_hidden_state
        start = 0
        for n in LENGTHS:
            alone = model.model(input_ids=ids[:, start:start + n]).last_hidden_state
            torch.testing.assert_close(packed[:, start:start + n], alone, rtol=1e-5, atol=1e-5)
            start += n
        assert (crossing - packed).abs().max() > 1e-3  # without it documents mix
        read = torch.zeros_like(ids, dtype=torch.bool)
        read[0, [1, 7, 15]] = True
        logits = unpadded_logits(model, ids, documents, read)
        alone = model(input_ids=ids[:, 5:14]).logits[0, 2]
        torch.testing.assert_close(logits[1], alone, rtol=1e-5, atol=1e-5)


def run_config(tmp_path, tokenizer_dir, **extra) -> PretrainConfig:
    values = {"model": "modernbert-tiny", "tokenizer": tokenizer_dir, "unpadded": True,
              "run_dir": str(tmp_path / "run"), "steps": 2, "seq_len": 64, "batch_size": 2,
              "eval_every": 0, "eval_blocks": 2, "pppl_sentences": 0, "save_every": 0,
              "progress": False, "fill_mask_examples": 0, "threads": 1, "precision": "fp32"}
    return PretrainConfig(**{**values, **extra})


def test_pretrain_unpadded_keeps_the_documents_of_a_row_apart(tmp_path, tokenizer_factory,
                                                              fixture_dir):
    tokenizer_factory("bpe")
    corpus = tmp_path / "short.jsonl"  # documents shorter than a row: several per row
    corpus.write_text("".join(f'{{"text": "Return the value {i} of the list and stop."}}\n'
                              for i in range(60)), encoding="utf-8")
    run = build_run(run_config(tmp_path, str(fixture_dir / "tok-bpe"), corpus=str(corpus)))
    seen, loss_fn = [], run.objective._loss_fn
    run.objective._loss_fn = lambda *args: seen.append(args) or loss_fn(*args)
    run.step()
    model, ids, documents, mask, _, _ = seen[0]
    assert loss_fn.__name__ == "unpadded_mlm_loss"
    assert documents.max() > 1 and documents.min() >= 1  # several documents, no padding
    loss = float(run.window.sums["loss"])
    with torch.no_grad():  # the same step's loss with documents attending each other
        from mlmkit.training.objectives.mlm import sparse_mlm_loss

        crossing = sparse_mlm_loss(model, ids, torch.ones_like(ids), mask, seen[0][4], 0.0)
    assert loss == pytest.approx(float(crossing[0]) / float(mask.sum()), rel=0.5)
    assert abs(loss - float(crossing[0]) / float(mask.sum())) > 1e-6


@pytest.mark.parametrize("change, message", [
    ({"model": "bert-tiny"}, r"--unpadded: --model family 'bert' has no unpadded attention"),
    ({"objective": "electra", "model": "electra-tiny"}, "--unpadded trains --objective mlm"),
    ({"packing": "document"}, "use --packing full"),
    ({"flex_attention": True, "unpadded": False}, "--flex-attention is the kernel of unpadded"),
    ({"flex_attention": True}, "FlexAttention has no backward pass on a CPU"),
    ({"flex_attention": True, "dropout": 0.1}, "no attention dropout"),
])
def test_refused_in_one_line_before_any_work(tmp_path, change, message):
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
