"""mlmkit's fine-tuning loop against transformers' Trainer, step for step.

Both sides start from the same saved checkpoint as each starts: mlmkit loads it as a masked
LM and builds its classifier; the Trainer's side is a Hugging Face script's,
`set_seed(seed)` then `AutoModelForSequenceClassification.from_pretrained` (BERT's checkpoint
holds a trained pooler, which the masked LM drops and the classifier must still start from).
They train on the same rows in the same order with the same recipe: their per-step training
losses must agree within 1e-5 for 50 steps. That pins down the starting weights (the
pooler, the head's initial draws) and what the recipe is made of (AdamW's betas, epsilon and decay groups, the
warm-up from 0 and the linear decay, the number of steps, gradient clipping, the padding, the
loss, the segments of sentence pairs, the pooling of the family's head; packed batches and
padded ones). Dropout is off: the Trainer's data loader draws from
torch's generator between steps, so the two sides' dropout masks could not be the same draws.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
import torch
from transformers import (
    AutoModelForSequenceClassification,
    BertForPreTraining,
    DataCollatorWithPadding,
    Trainer,
    TrainingArguments,
    set_seed,
)
from transformers.utils import logging as hf_logging

from mlmkit.finetuning.data import Split, TaskData
from mlmkit.finetuning.encode import train_batches
from mlmkit.finetuning.methods import build_classifier
from mlmkit.finetuning.tasks import get_task
from mlmkit.finetuning.trainer import Recipe, decayed_parameters, fine_tune_run
from mlmkit.models import LoadedMLM, as_mlm

ROWS, BATCH, EPOCHS = 196, 8, 2  # 25 steps an epoch (the last batch of 4 rows): 50 steps
# warm-up 0.07 × 50 steps = 3.5: both sides round it up to 4
RECIPE = Recipe(epochs=EPOCHS, lr=5e-4, batch_size=BATCH, max_length=32, warmup=0.07,
                weight_decay=0.01, seed=3)
QUIET = {  # every dropout of a family's config, off
    "bert": ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"),
    "modernbert": ("attention_dropout", "mlp_dropout", "embedding_dropout",
                   "classifier_dropout"),
}


def segmented(tokenizer):
    """A copy of `tokenizer` that returns token type ids, as BERT's on the hub do."""
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    return tokenizer


def quiet(tiny_mlm, family: str, folder, pooling: str | None = None) -> LoadedMLM:
    """A tiny `family` checkpoint with every dropout off, saved in `folder` and loaded from
    there as a masked LM; BERT's is saved as a pretraining checkpoint with a trained pooler
    (as bert-base-uncased is) and its tokenizer gives segments; `pooling`: ModernBERT's
    classifier pooling."""
    source = tiny_mlm(family)
    config = copy.deepcopy(source.model.config)
    for name in QUIET[family]:
        setattr(config, name, 0.0)
    if pooling is not None:
        config.classifier_pooling = pooling
    torch.manual_seed(7)
    model = (BertForPreTraining if family == "bert" else type(source.model))(config)
    missing, _ = model.load_state_dict(source.model.state_dict(), strict=False)
    assert all("pooler" in k or "seq_relationship" in k for k in missing), missing
    model.save_pretrained(folder)
    source.tokenizer.save_pretrained(folder)
    mlm = as_mlm(str(folder), device="cpu")
    return replace(mlm, tokenizer=segmented(mlm.tokenizer)) if family == "bert" else mlm


@pytest.fixture(scope="module")
def quiet_mlm(tiny_mlm, tmp_path_factory) -> LoadedMLM:
    return quiet(tiny_mlm, "bert", tmp_path_factory.mktemp("quiet-bert"))


def test_the_classifier_starts_from_the_checkpoint_s_pooler(quiet_mlm):
    """The masked LM drops BERT's pooler; the classifier reads it from the checkpoint, as
    AutoModelForSequenceClassification.from_pretrained does."""
    assert not any("pooler" in k for k in quiet_mlm.model.state_dict())
    ours = build_classifier(quiet_mlm, ["a", "b"], 0)
    checkpoint = AutoModelForSequenceClassification.from_pretrained(quiet_mlm.source)
    torch.testing.assert_close(ours.bert.pooler.dense.weight,
                               checkpoint.bert.pooler.dense.weight, rtol=0, atol=0)


def test_a_classifier_checkpoint_gets_a_new_head_and_keeps_its_pooler(quiet_mlm, tmp_path):
    """Fine-tuning a fine-tuned classifier again: its trained head is not reused (the
    head is new, as the docs say), its pooler is."""
    trained = build_classifier(quiet_mlm, ["a", "b"], 0)
    with torch.no_grad():
        trained.classifier.weight.add_(1.0)
        trained.bert.pooler.dense.weight.add_(1.0)
    trained.save_pretrained(tmp_path / "classifier")
    quiet_mlm.tokenizer.save_pretrained(tmp_path / "classifier")
    again = build_classifier(as_mlm(str(tmp_path / "classifier"), device="cpu",
                                    allow_untrained_head=True), ["a", "b"], 0)
    torch.testing.assert_close(again.bert.pooler.dense.weight, trained.bert.pooler.dense.weight,
                               rtol=0, atol=0)
    assert (again.classifier.weight - trained.classifier.weight).abs().min() > 0.5


def _rows(corpus_sample, pairs: bool, regression: bool = False) -> TaskData:
    texts = [t for t in corpus_sample if 10 < len(t) < 400][:2 * ROWS]
    if pairs:
        rows = [(texts[2 * i], texts[2 * i + 1]) for i in range(ROWS)]
    else:
        rows = [(t,) for t in texts[:ROWS]]
    if regression:  # STS-B's shape: a pair's similarity, a number from 0 to 5
        labels = np.array([5.0 * min(len(a), len(b)) / max(len(a), len(b)) for a, b in rows],
                          dtype=np.float32)
        return TaskData(get_task("stsb", "a,b"), None, Split("train", rows, labels, "memory"),
                        None)
    labels = np.array([int(" the " in " ".join(r)) for r in rows], dtype=np.int64)
    task = get_task("pairs", "a,b", "label") if pairs else get_task("sst2")
    names = ["0", "1"] if pairs else list(task.labels)
    return TaskData(task, names, Split("train", rows, labels, "memory"), None)


class FixedOrderTrainer(Trainer):
    """The Trainer, fed mlmkit's data order, recording the loss of each step."""

    def __init__(self, *args, epoch_orders, **kwargs):
        super().__init__(*args, **kwargs)
        self.epoch_orders, self.losses = epoch_orders, []

    def _get_train_sampler(self, train_dataset=None):
        return _EpochOrders(self.epoch_orders)

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        self.losses.append(loss.item())
        return loss


class _EpochOrders(torch.utils.data.Sampler):
    def __init__(self, orders):
        self.orders, self.epoch = orders, 0

    def __len__(self):
        return len(self.orders[0])

    def __iter__(self):
        order = self.orders[self.epoch]
        self.epoch += 1
        return iter(order.tolist())


def _trainer_losses(mlm, data, tmp_path) -> list[float]:
    hf_logging.set_verbosity_error()
    set_seed(RECIPE.seed)
    regression = data.label_names is None  # one output, MSE: the Trainer's for num_labels=1
    model = AutoModelForSequenceClassification.from_pretrained(
        mlm.source, num_labels=1 if regression else len(data.label_names))
    columns = list(zip(*data.train.texts, strict=True))
    enc = mlm.tokenizer(*columns, truncation=True, max_length=RECIPE.max_length)
    kind = float if regression else int
    rows = [{**{k: enc[k][i] for k in enc}, "labels": kind(data.train.labels[i])}
            for i in range(len(data.train))]
    lengths = np.array([len(ids) for ids in enc["input_ids"]])
    orders = [np.concatenate(train_batches(lengths, BATCH, RECIPE.seed, epoch, bucket=False))
              for epoch in range(EPOCHS)]
    args = TrainingArguments(
        output_dir=str(tmp_path / "hf"), per_device_train_batch_size=BATCH,
        learning_rate=RECIPE.lr, num_train_epochs=EPOCHS, warmup_steps=RECIPE.warmup,
        weight_decay=RECIPE.weight_decay, seed=RECIPE.seed, use_cpu=True, report_to="none",
        save_strategy="no", logging_strategy="no", eval_strategy="no",
        dataloader_num_workers=0, disable_tqdm=True)
    trainer = FixedOrderTrainer(model=model, args=args, train_dataset=rows,
                                data_collator=DataCollatorWithPadding(mlm.tokenizer),
                                epoch_orders=orders)
    trainer.train()
    assert trainer.args.max_grad_norm == 1.0 and trainer.args.adam_epsilon == 1e-8
    return trainer.losses


@pytest.mark.parametrize("family, pooling, pairs, packed, regression", [
    ("bert", None, False, None, False), ("bert", None, True, None, False),
    ("bert", None, False, False, False), ("modernbert", "cls", False, None, False),
    ("modernbert", "mean", False, None, False), ("modernbert", "cls", True, None, True),
], ids=["bert", "bert-pairs", "bert-padded", "modernbert-cls", "modernbert-mean",
        "modernbert-pairs-regression"])
def test_per_step_losses_equal_the_trainer_s(tiny_mlm, corpus_sample, tmp_path, family,
                                             pooling, pairs, packed, regression):
    """Packed batches (the default of these families) and padded ones alike; sentence
    pairs; a regression (MSE on one output, as STS-B)."""
    mlm = quiet(tiny_mlm, family, tmp_path / "checkpoint", pooling)
    data = _rows(corpus_sample, pairs, regression)
    ours = []
    fine_tune_run(mlm, data, RECIPE, device=torch.device("cpu"), precision="fp32",
                  packed=packed, on_step=lambda step, loss: ours.append(loss))
    theirs = _trainer_losses(mlm, data, tmp_path)
    assert len(ours) == len(theirs) == 50
    assert len(set(np.round(ours, 3))) > 10  # the losses move: the test compares something
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)


def test_decay_groups_are_the_trainer_s(quiet_mlm, tmp_path):
    model = build_classifier(quiet_mlm, ["a", "b"], 0)
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    assert decayed_parameters(model) == set(Trainer(model=model, args=args)
                                            .get_decay_parameter_names(model))
