"""Fine-tuning only the rows of the input embedding that the training data uses.

The input embedding is a small encoder's largest matrix (8,192 × 256 of the demo model's
5.5M parameters; 30,522 × 768 of BERT-base's 110M) and a fine-tuning set uses a fraction
of its rows (2,000 SST-2 sentences use 2,473 of the demo model's 8,192 tokens). Trained
densely, every step zero-fills the whole gradient, reads it for the clipping norm and
runs AdamW over every row, but a row whose token is in no training input has a zero
gradient at every step: AdamW's moments stay 0, so its step only decays the row,
θ ← θ·(1 − lr_t·λ).

So the run trains a compact matrix of the used rows (ids are remapped as they enter the
embedding) and keeps the product of the decay factors for the rest. The full matrix is
written (the rest as its starting values times the product, the used rows copied in)
whenever it is read: by a forward outside training (evaluation), and by the model's
`state_dict` (checkpoints, the best epoch, the saved model). The steps equal dense AdamW's
within float rounding: the clipping norm sums in another order, and the decay is the exact
product, where dense AdamW multiplies by 1 − lr_t·λ rounded to float32 at every step (a
drift that grows with the steps). A resumed run restores the product, so it continues bit
for bit however often the matrix was written before its stop; a run saved while the whole
matrix trained resumes from its saved rows.

Used where it is plain: an `nn.Embedding` without `max_norm`, frequency scaling or sparse
gradients, trained, and not tied to another weight (a masked LM's decoder reads every
row)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from mlmkit.finetuning.encode import Encoded


class TrainedRows:
    """The used rows of `embedding` as the trainable tensor `rows`, in place of its weight,
    until `close()`."""

    def __init__(self, embedding: torch.nn.Embedding, used: torch.Tensor):
        weight = embedding.weight
        self.embedding, self.used = embedding, used
        self.start = weight.detach().clone()  # the unused rows are these times `decay`
        self.decay = 1.0
        self.rows = weight.detach()[used].clone().requires_grad_(True)
        self.remap = torch.full((weight.shape[0],), -1, dtype=torch.long, device=weight.device)
        self.remap[used] = torch.arange(len(used), device=weight.device)
        pad = embedding.padding_idx
        self.padding_idx = int(self.remap[pad]) if pad is not None and self.remap[pad] >= 0 \
            else None
        self.stale = False
        weight.requires_grad_(False)
        embedding.forward = self._forward
        self._hooks = [embedding.register_state_dict_pre_hook(lambda *_: self.write()),
                       embedding.register_load_state_dict_post_hook(lambda *_: self.read())]

    def _forward(self, ids: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():  # a training step
            return F.embedding(self.remap[ids], self.rows, self.padding_idx)
        self.write()
        return F.embedding(ids, self.embedding.weight, self.embedding.padding_idx)

    def stepped(self, optimizer: torch.optim.Optimizer) -> None:
        """After each optimizer step: the unused rows' decay, at the step's learning rate
        and the weight decay of the group that holds `rows`."""
        for group in optimizer.param_groups:
            if any(p is self.rows for p in group["params"]):
                self.decay *= 1.0 - float(group["lr"]) * group["weight_decay"]
        self.stale = True

    @torch.no_grad()
    def write(self) -> None:
        """The embedding's weight brought up to date."""
        if self.stale:
            torch.mul(self.start, self.decay, out=self.embedding.weight)
            self.embedding.weight.index_copy_(0, self.used, self.rows.detach())
            self.stale = False

    @torch.no_grad()
    def read(self) -> None:
        """After the weight was loaded (a resume): the used rows from it. The decay so far
        is restored by the caller (`decay`), from the run's saved state."""
        self.rows.copy_(self.embedding.weight[self.used])
        self.stale = False

    @torch.no_grad()
    def adopt_dense(self, optimizer: torch.optim.Optimizer) -> None:
        """After resuming a run saved while the whole matrix trained (an earlier mlmkit):
        its loaded weight holds the unused rows decayed so far, so they are the new start
        (decay 1), and AdamW's moments are cut to the used rows (the others' are 0)."""
        self.start, self.decay = self.embedding.weight.detach().clone(), 1.0
        state = optimizer.state.get(self.rows, {})
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            moment = state.get(key)
            if moment is not None and moment.shape[0] == self.start.shape[0]:
                state[key] = moment[self.used].clone()

    def __enter__(self) -> TrainedRows:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """The weight written, and the embedding its own again."""
        self.write()
        for hook in self._hooks:
            hook.remove()
        del self.embedding.forward
        self.embedding.weight.requires_grad_(True)


def trained_rows(model: torch.nn.Module, encoded: Encoded, pad_id: int) -> TrainedRows | None:
    """A `TrainedRows` of `model`'s input embedding for the training rows `encoded` (and the
    padding id, which batches add), or None where the embedding is not a plain trained one."""
    try:
        embedding = model.get_input_embeddings()
    except NotImplementedError:  # a model whose embedding transformers cannot find
        return None
    if (type(embedding) is not torch.nn.Embedding or not embedding.weight.requires_grad
            or embedding.max_norm is not None or embedding.scale_grad_by_freq
            or embedding.sparse or _tied(model, embedding)):
        return None
    ids = np.unique(np.concatenate([np.asarray(row, dtype=np.int64) for row in encoded.ids]
                                   + [np.asarray([pad_id], dtype=np.int64)]))
    return TrainedRows(embedding, torch.from_numpy(ids).to(embedding.weight.device))


def _tied(model: torch.nn.Module, embedding: torch.nn.Embedding) -> bool:
    """Whether another module of `model` holds `embedding`'s weight (a tied decoder)."""
    return any(module is not embedding and any(p is embedding.weight for p in
                                               module.parameters(recurse=False))
               for module in model.modules())
