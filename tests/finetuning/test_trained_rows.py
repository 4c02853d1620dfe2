"""Training only the embedding rows the training data uses (finetuning/trained_rows.py): the
same run as training the whole matrix, models and checkpoints that hold the whole matrix,
resumes that continue bit for bit, and the embedding its own again after the run."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForSequenceClassification

import mlmkit
from mlmkit.finetuning import trainer as trainer_module
from mlmkit.finetuning.encode import Encoded
from mlmkit.finetuning.trained_rows import trained_rows
from tests.finetuning.samples import write_sst_sample

RUNTIME = {"device": "cpu", "threads": 1, "progress": False}


@pytest.fixture(scope="module")
def sst(shared_data, tmp_path_factory):
    """48 SST-2 training rows (balanced), 24 validation rows."""
    return write_sst_sample(shared_data, tmp_path_factory.mktemp("sst-rows"), 24, 24)


def _common(sst) -> dict:
    return dict(train=sst / "train.tsv", validation=sst / "validation.tsv", epochs=2,
                lr=1e-3, weight_decay=0.1, batch_size=8, max_length=32, precision="fp32",
                select="best", **RUNTIME)


def _training_ids(mlm, sst) -> set[int]:
    lines = (sst / "train.tsv").read_text().splitlines()[1:]
    return {i for line in lines for i in mlm.tokenizer(line.split("\t")[0])["input_ids"]}


@pytest.mark.parametrize("family", ["bert", "modernbert"])
def test_the_run_equals_training_the_whole_matrix(tiny_mlm, sst, monkeypatch, family):
    mlm = tiny_mlm(family)
    start = mlm.model.get_input_embeddings().weight.detach().clone()
    made = []
    monkeypatch.setattr(trainer_module, "trained_rows",
                        lambda *a: made.append(trained_rows(*a)) or made[-1])
    compact = mlmkit.finetune(mlm, "sst2", **_common(sst)).runs[0]
    assert made and made[0] is not None  # the run trained the used rows only
    monkeypatch.setattr(trainer_module.Trainer, "train_used_rows", lambda self, encoded: None)
    dense = mlmkit.finetune(mlm, "sst2", **_common(sst)).runs[0]
    assert [r["train_loss"] for r in compact.history] == pytest.approx(
        [r["train_loss"] for r in dense.history], rel=1e-6)
    assert compact.metrics == dense.metrics
    for (name, x), (_, y) in zip(compact._model.state_dict().items(),
                                 dense._model.state_dict().items(), strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6, msg=name)
    # a token the training rows never hold was decayed (as dense AdamW decays it), not kept
    unused = min(set(range(start.shape[0])) - _training_ids(mlm, sst)
                 - {mlm.tokenizer.pad_token_id})
    row = compact._model.get_input_embeddings().weight[unused].detach()
    assert start[unused].abs().sum() > 0 and not torch.equal(row, start[unused])
    assert torch.allclose(row, start[unused] * (row.norm() / start[unused].norm()), atol=1e-7)


def test_a_resume_with_weight_decay_is_bit_for_bit(tiny_mlm, sst, tmp_path):
    common = _common(sst)
    straight = mlmkit.finetune(tiny_mlm("modernbert"), "sst2", run_dir=tmp_path / "a",
                               **common).runs[0]
    halted = mlmkit.finetune(tiny_mlm("modernbert"), "sst2", run_dir=tmp_path / "b",
                             halt_after=5, **common).runs[0]
    assert halted.status == "interrupted"
    resumed = mlmkit.finetune(tiny_mlm("modernbert"), "sst2", run_dir=tmp_path / "b",
                              resume=True, **common).runs[0]
    assert [r["train_loss"] for r in resumed.history] == \
        [r["train_loss"] for r in straight.history]
    for (name, x), (_, y) in zip(straight._model.state_dict().items(),
                                 resumed._model.state_dict().items(), strict=True):
        assert torch.equal(x, y), name


def test_a_run_saved_training_the_whole_matrix_resumes(tiny_mlm, sst, tmp_path, monkeypatch):
    common = _common(sst)
    straight = mlmkit.finetune(tiny_mlm("bert"), "sst2", **common).runs[0]
    with monkeypatch.context() as dense:  # as an earlier mlmkit saved it
        dense.setattr(trainer_module.Trainer, "train_used_rows", lambda self, encoded: None)
        mlmkit.finetune(tiny_mlm("bert"), "sst2", run_dir=tmp_path / "run", halt_after=5,
                        **common)
    resumed = mlmkit.finetune(tiny_mlm("bert"), "sst2", run_dir=tmp_path / "run",
                              resume=True, **common).runs[0]
    assert resumed.steps == straight.steps and resumed.metrics == straight.metrics
    for (name, x), (_, y) in zip(straight._model.state_dict().items(),
                                 resumed._model.state_dict().items(), strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6, msg=name)


def test_the_embedding_is_its_own_after_the_run(tiny_mlm, sst, tmp_path):
    result = mlmkit.finetune(tiny_mlm("bert"), "sst2", run_dir=tmp_path / "run",
                             **_common(sst)).runs[0]
    embedding = result._model.get_input_embeddings()
    assert "forward" not in vars(embedding) and embedding.weight.requires_grad
    assert not embedding._state_dict_pre_hooks and not embedding._load_state_dict_post_hooks
    saved = AutoModelForSequenceClassification.from_pretrained(tmp_path / "run" / "best")
    assert torch.equal(saved.get_input_embeddings().weight, embedding.weight)


def test_tied_or_frozen_embeddings_train_whole(tiny_mlm):
    mlm = tiny_mlm("bert")
    encoded = Encoded(ids=[[2, 5, 3]], lengths=torch.tensor([3]).numpy(),
                      labels=torch.tensor([0]).numpy(), mask_at=None, truncated=0)
    tied = mlm.model  # a masked LM: its decoder reads every row
    assert trained_rows(tied, encoded, 0) is None
    classifier = trainer_module.methods.build_classifier(mlm, ["a", "b"], 0)
    rows = trained_rows(classifier, encoded, 0)
    assert rows is not None and rows.used.tolist() == [0, 2, 3, 5]
    rows.close()
    classifier.get_input_embeddings().weight.requires_grad_(False)
    assert trained_rows(classifier, encoded, 0) is None

    class Unfound(torch.nn.Module):  # transformers cannot find its embedding
        def get_input_embeddings(self):
            raise NotImplementedError

    assert trained_rows(Unfound(), encoded, 0) is None
