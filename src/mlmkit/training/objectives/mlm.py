"""Masked language modelling with sparse prediction: the head runs only at masked positions.

Any masking policy of `mlmkit.masking` chooses the positions and corrupts them; the loss
is the cross-entropy at those positions, through the model layer's `masked_logits`
primitive, divided by the number of masked tokens of the whole optimizer step.
"""

from __future__ import annotations

from pathlib import Path

import torch

from mlmkit.masking import build_policy
from mlmkit.masking.config import parse_masking_option
from mlmkit.models import LoadedMLM, build_mlm, masked_logits
from mlmkit.models.cross_entropy import cross_entropy_top1
from mlmkit.models.fast_modernbert import use_fast_layers
from mlmkit.models.regional_compile import compile_layers, has_layer_list
from mlmkit.models.static_positions import capacity, fixed_capacity_positions, logits_at
from mlmkit.models.unpadded import unpadded_kernel, unpadded_logits, unpadded_mlm_loss
from mlmkit.models.varlen_attention import use_varlen_attention, varlen_usable
from mlmkit.scoring.masked_copies import score_token_ids
from mlmkit.tokenizer import save_tokenizer
from mlmkit.training.objective import LossOutput, Objective, Prepared
from mlmkit.training.objectives.metrics import masked_token_metrics, pseudo_perplexity
from mlmkit.training.runtime import compile_layers_on, compile_mode

EVAL_SEED_OFFSET = 1_000_003  # evaluation masks never coincide with a training step's


def default_masking() -> dict:
    """The default policy: 30% of tokens, whole words, 80% [MASK] / 10% random / 10% kept."""
    return {"units": "whole_word", "rate": 0.3, "corruption": [0.8, 0.1, 0.1]}


def resolve_masking(masking, total_steps: int | None = None):
    """The masking config of a run: a preset name or mapping, with the run's step budget
    (rate schedules such as 30% → 15% need it)."""
    if masking in (None, "default"):
        masking = default_masking()
    else:
        masking = parse_masking_option(masking)
    if isinstance(masking, str):
        masking = {"preset": masking}
    masking = dict(masking)
    if total_steps and "total_steps" not in masking:
        masking["total_steps"] = total_steps
    return masking


def build_masking_policy(config, tokenizer):
    return build_policy(resolve_masking(config.masking, config.steps), tokenizer,
                        stats=config.masking_stats)


def mask_blocks(policy, batch, step: int, seed: int, device=None,
                targets: str = "labels", rows=None) -> dict[str, torch.Tensor]:
    """A `BlockBatch` corrupted by a masking policy, as the tensors an objective trains on:
    the corrupted `input_ids`, `attention_mask`, the chosen positions `mask`, and `labels`
    (the policy's) or `original` (the uncorrupted ids); on `device` when given. With
    `rows` (global row numbers), the counter stream draws the masks."""
    out = policy(batch.input_ids, batch.attention_mask, step=step, seed=seed,
                 word_starts=batch.word_starts, document_ids=batch.document_ids, rows=rows)
    tensors = {"input_ids": out.input_ids, "attention_mask": batch.attention_mask,
               "mask": out.mask,
               targets: out.labels if targets == "labels" else batch.input_ids}
    return {k: v.to(device) for k, v in tensors.items()} if device is not None else tensors


DROPOUT_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout",
                  "attention_dropout", "embedding_dropout", "mlp_dropout", "seq_classif_dropout")


def set_dropout(model: torch.nn.Module, p: float) -> None:
    """Set every dropout of `model` (modules and the config it is saved with) to `p`."""
    for name in DROPOUT_FIELDS:
        if isinstance(getattr(model.config, name, None), float):
            setattr(model.config, name, p)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = p
        for attribute in ("dropout_prob", "attention_dropout", "dropout_p"):
            if isinstance(getattr(module, attribute, None), float):
                setattr(module, attribute, p)


def use_fast_attention(model: torch.nn.Module, runtime) -> None:
    """Eager attention for bf16 training on a CPU: there the fused SDPA kernel's bf16
    backward is slower than the eager kernels', the more so the longer the sequence.
    Elsewhere the model keeps its SDPA attention. Only speed changes, not the model."""
    if runtime.device.type == "cpu" and runtime.precision == "bf16" and hasattr(
            model, "set_attn_implementation"):
        model.set_attn_implementation("eager")


def build_run_model(config, tokenizer, runtime, init_model=None):
    """The run's masked LM: `init_model` (continued pretraining) or a fresh preset, with the
    run's dropout, the runtime's fastest attention (unpadded: FlexAttention when asked, else
    the varlen kernel where it runs, else SDPA with a document mask) and ModernBERT's fast
    rotary and GeGLU backward (`models.fast_modernbert`), on the run's device."""
    model = init_model if init_model is not None else build_mlm(
        config.model, tokenizer, seed=config.seed)  # the preset's positions, not --seq-len
    if config.dropout is not None:
        set_dropout(model, config.dropout)
    use_fast_attention(model, runtime)
    if getattr(config, "flex_attention", False):  # unpadded rows through FlexAttention
        model.set_attn_implementation("flex_attention")
    elif getattr(config, "unpadded", False) and varlen_usable(model, runtime.device,
                                                              runtime.precision):
        use_varlen_attention(model)  # each document a sequence of FlashAttention's varlen
    use_fast_layers(model)
    if compile_layers_on(config, runtime.device):  # regional torch.compile, layer by layer
        if getattr(config, "compile_layers", None) is not None or has_layer_list(model):
            compile_layers(model, **compile_mode(config))  # asked, or a default that fits
    return model.to(runtime.device)


def sparse_mlm_loss(model, input_ids, attention_mask, mask, labels, label_smoothing: float):
    """Summed cross-entropy, correct top-1 count, targets and per-token losses (masked only)."""
    # bf16 logits are read as they are: the loss is computed in float32 (no float32 copy)
    logits = masked_logits(model, input_ids, attention_mask, mask)
    targets = labels[mask]
    per_token, top1 = cross_entropy_top1(logits, targets, label_smoothing)
    return per_token.sum(), (top1 == targets).sum(), targets, per_token


def static_sparse_mlm_loss(model, input_ids, attention_mask, mask, labels,
                           label_smoothing: float, slots: int):
    """`sparse_mlm_loss` with the masked positions in `slots` fixed slots
    (`mlmkit.models.static_positions`): every shape is fixed by the batch's and `slots`,
    so a compiled step can be replayed as a CUDA graph. The invalid slots' losses are
    weighted zero; the per-token losses and targets come back with all `slots` entries,
    the valid ones first."""
    index, valid = fixed_capacity_positions(mask, slots)
    logits = logits_at(model, input_ids, attention_mask, index)
    targets = torch.where(valid, labels.reshape(-1).index_select(0, index), 0)
    per_token, top1 = cross_entropy_top1(logits, targets, label_smoothing)
    per_token = per_token * valid
    return per_token.sum(), ((top1 == targets) & valid).sum(), targets, per_token


def _unpadded_log_probs(model, input_ids, documents, mask):
    """`masked_log_probs` with attention within each document (`documents`: the indexed
    mask, each token's document number, 0 on padding)."""
    return unpadded_logits(model, input_ids, documents, mask).float().log_softmax(-1)


class MLMObjective(Objective):
    """BERT/RoBERTa-style MLM over packed blocks."""

    name = "mlm"
    prepare_ahead = True  # prepare is a pure function of (batch, step, seed): prefetchable

    def __init__(self, config, tokenizer, runtime, init_model=None):
        super().__init__(config, tokenizer, runtime)
        self.model = build_run_model(config, tokenizer, runtime, init_model)
        self.policy = build_masking_policy(config, tokenizer)
        self._loss_fn = sparse_mlm_loss
        self._static = False  # the masked positions in fixed slots (compiled CUDA graphs)
        self._unpadded = bool(getattr(config, "unpadded", False))
        if self._unpadded:  # attention within each document, no padding
            self._loss_fn = unpadded_mlm_loss
        self._eval_batches = None

    @property
    def modules(self) -> dict[str, torch.nn.Module]:
        return {"model": self.model}

    def compile(self) -> None:
        """The loss (model included) compiled; with --cuda-graphs for fixed shapes: the
        masked positions in fixed slots, each slot count recorded as a graph once."""
        if getattr(self.config, "cuda_graphs", False):
            self._static = True
            self._loss_fn = torch.compile(static_sparse_mlm_loss, dynamic=False,
                                          **compile_mode(self.config))
        else:
            self._loss_fn = torch.compile(self._loss_fn, dynamic=True)

    def _mask(self, batch, step: int, seed: int, device=None,
              rows=None) -> dict[str, torch.Tensor]:
        tensors = mask_blocks(self.policy, batch, step, seed, device, targets="labels",
                              rows=rows)
        if self._unpadded:  # the indexed mask: each token's document number, 0 on padding
            tensors["attention_mask"] = (batch.document_ids + 1).to(tensors["input_ids"].device)
        return tensors

    def prepare(self, batch, step: int, seed: int | None = None, rows=None) -> Prepared:
        # The policy derives its randomness from (seed, step): the masks of a resumed run
        # are those of an uninterrupted one.
        tensors = self._mask(batch, step, self.config.seed if seed is None else seed,
                             rows=rows)
        return Prepared(tensors=tensors, counts={"masked": float(tensors["mask"].sum())})

    def loss(self, tensors: dict[str, torch.Tensor], totals: dict[str, float]) -> LossOutput:
        t = tensors
        total = max(totals["masked"], 1.0)
        if self._static:  # fixed slots: the masked count is read once, on the host
            count = int(t["mask"].sum())
            # packed blocks without padding attend without a mask (as `masked_logits` does)
            attention = None if bool(t["attention_mask"].all()) else t["attention_mask"]
            loss_sum, correct, targets, per_token = self._loss_fn(
                self.model, t["input_ids"], attention, t["mask"], t["labels"],
                self.config.label_smoothing, capacity(count, t["mask"].numel()))
            targets, per_token = targets[:count], per_token[:count]
        else:
            loss_sum, correct, targets, per_token = self._loss_fn(
                self.model, t["input_ids"], t["attention_mask"], t["mask"], t["labels"],
                self.config.label_smoothing)
        update = getattr(self.policy, "update_losses", None)
        if update is not None:  # loss-based masking learns which tokens are hard
            update(targets.detach(), per_token.detach())
        return LossOutput(loss=loss_sum / total,
                          metrics={"loss": loss_sum.detach() / total,
                                   "accuracy": correct.float() / total})

    def evaluate(self, blocks: list, sentences: list[list[int]]) -> dict[str, float]:
        if self._eval_batches is None:  # masks fixed once: every evaluation sees the same
            seed = self.config.seed + EVAL_SEED_OFFSET
            self._eval_batches = [self._mask(b, step=0, seed=seed + i, device=self.runtime.device)
                                  for i, b in enumerate(blocks)]
        was_training = self.model.training
        self.model.eval()
        try:
            metrics = masked_token_metrics(self.model, self._eval_batches, self.runtime.autocast,
                                           _unpadded_log_probs if self._unpadded else None)
            if sentences:
                scores = score_sentences(LoadedMLM(self.model, self.tokenizer), sentences,
                                         self.runtime)
                metrics["pppl"] = pseudo_perplexity(scores)
        finally:
            self.model.train(was_training)
        return metrics

    def save_pretrained(self, directory: str | Path) -> None:
        directory = Path(directory)
        self.model.save_pretrained(directory)
        save_tokenizer(self.tokenizer, directory)  # a class transformers 4.x loads too

    def describe(self) -> str:
        describe = getattr(self.policy, "describe", None)
        text = f"MLM, masking: {describe() if describe else resolve_masking(self.config.masking)}"
        if self._unpadded:
            text += f"; unpadded attention: {unpadded_kernel(self.model)}"
        return text


def score_sentences(mlm: LoadedMLM, sentences: list[list[int]], runtime):
    """PLL of every token of every sentence (float64), through the scoring engine."""
    tok = mlm.tokenizer
    wrapped = [[tok.cls_token_id, *ids, tok.sep_token_id] for ids in sentences]
    return score_token_ids(mlm, wrapped, metric="pll", precision=runtime.precision)
