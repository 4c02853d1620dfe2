"""RetroMAE (Xiao et al. 2022): MLM on the encoder plus a one-layer decoder that rebuilds a
much more heavily masked copy of each block from the encoder's [CLS] vector alone.

The encoder sees the block masked by the run's policy and is trained with the usual MLM
loss. The decoder's input is the sentence vector (the encoder's last hidden state at
position 0, the [CLS] token that starts every packed block) followed by the embeddings of a
second copy of the block in which `decoder_masking_rate` (50-70% in the paper) of the tokens
are [MASK]; its one transformer layer and the encoder's own MLM head predict the tokens
masked in that copy. With so little left to read, the decoder has to lean on the sentence
vector, which pushes the encoder to pack the block's content into [CLS] -- the vector a
retrieval model then uses.

The decoder (its layer, learned positions and norms; token embeddings and head are shared
with the encoder) exists only during pretraining: the exported checkpoint is the encoder's
plain masked LM, loadable anywhere the MLM objective's output is. Blocks should hold one
text each (`--packing document` or `crop`), so that [CLS] summarises one text.
"""

from __future__ import annotations

import torch
from torch import nn

from mlmkit.errors import InvalidArgument
from mlmkit.masking import build_policy
from mlmkit.models import adapter_for
from mlmkit.models.cross_entropy import cross_entropy_top1
from mlmkit.training.objective import LossOutput, Prepared
from mlmkit.training.objectives.mlm import MLMObjective

DECODER_SEED_OFFSET = 7_919  # the decoder's masks never repeat the encoder's of a step


def decoder_masking(rate: float) -> dict:
    """The decoder copy's policy: `rate` of the tokens, each replaced by [MASK]."""
    return {"units": "tokens", "rate": rate, "count": "exact",
            "corruption": [1.0, 0.0, 0.0]}


class RetroMAEDecoder(nn.Module):
    """One pre-norm transformer layer over [sentence vector, token embeddings + positions]."""

    def __init__(self, hidden: int, heads: int, intermediate: int, max_positions: int):
        super().__init__()
        self.positions = nn.Embedding(max_positions, hidden)
        self.input_norm = nn.LayerNorm(hidden)
        self.layer = nn.TransformerEncoderLayer(hidden, heads, intermediate, dropout=0.0,
                                                activation="gelu", batch_first=True,
                                                norm_first=True)
        self.output_norm = nn.LayerNorm(hidden)

    def forward(self, sentence: torch.Tensor, embeddings: torch.Tensor,
                attention_mask: torch.Tensor) -> torch.Tensor:
        """Hidden states [B, L, d]: position 0 holds the sentence vector [B, d] in place of
        the copy's [CLS] embedding; padding (attention_mask 0) is never attended to."""
        length = embeddings.shape[1]
        x = torch.cat([sentence[:, None].to(embeddings.dtype), embeddings[:, 1:]], dim=1)
        x = self.input_norm(x + self.positions(torch.arange(length, device=x.device)))
        return self.output_norm(self.layer(x, src_key_padding_mask=attention_mask == 0))


class RetroMAEObjective(MLMObjective):
    """MLM on the encoder + [CLS]-conditioned reconstruction by a one-layer decoder."""

    name = "retromae"

    def __init__(self, config, tokenizer, runtime, init_model=None):
        if getattr(config, "unpadded", False):
            raise InvalidArgument("--objective retromae does not run --unpadded: its decoder "
                                  "reads each block's [CLS]; drop --unpadded")
        super().__init__(config, tokenizer, runtime, init_model)
        self.adapter = adapter_for(self.model)
        model_config = self.model.config
        self.decoder = RetroMAEDecoder(
            model_config.hidden_size, model_config.num_attention_heads,
            model_config.intermediate_size,
            max(config.seq_len, getattr(model_config, "max_position_embeddings", 0)),
        ).to(runtime.device)
        self.decoder_policy = build_policy(decoder_masking(config.decoder_masking_rate),
                                           tokenizer)

    @property
    def modules(self) -> dict[str, nn.Module]:
        return {"model": self.model, "decoder": self.decoder}

    def compile(self) -> None:
        return None  # the encoder's hidden states at every position: no sparse loss to compile

    def prepare(self, batch, step: int, seed: int | None = None, rows=None) -> Prepared:
        seed = self.config.seed if seed is None else seed
        tensors = self._mask(batch, step, seed, rows=rows)
        copy = self.decoder_policy(batch.input_ids, batch.attention_mask, step=step,
                                   seed=seed + DECODER_SEED_OFFSET,
                                   word_starts=batch.word_starts,
                                   document_ids=batch.document_ids, rows=rows)
        tensors.update(decoder_input_ids=copy.input_ids, decoder_mask=copy.mask,
                       original=batch.input_ids)
        return Prepared(tensors=tensors, counts={
            "masked": float(tensors["mask"].sum()),
            "decoder_masked": float(copy.mask.sum())})

    def loss(self, tensors: dict[str, torch.Tensor], totals: dict[str, float]) -> LossOutput:
        t, smoothing = tensors, self.config.label_smoothing
        hidden = self.adapter.encode(self.model, t["input_ids"], t["attention_mask"])
        targets = t["labels"][t["mask"]]
        per_token, top1 = cross_entropy_top1(self.adapter.head(self.model, hidden[t["mask"]]),
                                             targets, smoothing)
        encoder_loss = per_token.sum() / max(totals["masked"], 1.0)
        embeddings = self.model.get_input_embeddings()(t["decoder_input_ids"])
        decoded = self.decoder(hidden[:, 0], embeddings, t["attention_mask"])
        decoder_targets = t["original"][t["decoder_mask"]]
        decoder_per_token, decoder_top1 = cross_entropy_top1(
            self.adapter.head(self.model, decoded[t["decoder_mask"]]), decoder_targets,
            smoothing)
        decoder_loss = decoder_per_token.sum() / max(totals["decoder_masked"], 1.0)
        return LossOutput(loss=encoder_loss + decoder_loss, metrics={
            "loss": encoder_loss.detach(),
            "accuracy": (top1 == targets).sum().float() / max(totals["masked"], 1.0),
            "decoder_loss": decoder_loss.detach(),
            "decoder_accuracy": (decoder_top1 == decoder_targets).sum().float()
            / max(totals["decoder_masked"], 1.0)})

    def describe(self) -> str:
        return (f"RetroMAE (decoder masking {self.config.decoder_masking_rate:.0%}), encoder "
                + super().describe())
