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

DupMAE (Liu et al. 2023) adds a second decoding task for the ordinary tokens' states, so
that they too carry the block's content (`dupmae_weight` > 0): the encoder's hidden states of
every non-special token go through the MLM head to vocabulary logits, are max-pooled over
positions into one vector z of the block, and z predicts the block's bag of words -- the
distinct tokens of the uncorrupted input -- with a multi-label softmax loss,
-Σ_{t ∈ BoW} log softmax(z)_t. mlmkit averages that over each block's distinct tokens and
then over blocks, and adds it weighted by `dupmae_weight` to the two MLM losses.
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
        self.dupmae_weight = float(getattr(config, "dupmae_weight", 0.0))
        self.special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)

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
        counts = {"masked": float(tensors["mask"].sum()),
                  "decoder_masked": float(copy.mask.sum())}
        if self.dupmae_weight:
            words = self.bag_of_words_positions(batch.input_ids, batch.attention_mask)
            tensors["words"] = words.to(tensors["mask"].device)
            counts["blocks"] = float(words.any(dim=1).sum())
        return Prepared(tensors=tensors, counts=counts)

    def bag_of_words_positions(self, input_ids, attention_mask) -> torch.Tensor:
        """Bool [B, L]: the real tokens (not padding, not special) of each block."""
        special = torch.isin(input_ids, self.special_ids.to(input_ids.device))
        return attention_mask.bool() & ~special

    def bag_of_words_loss(self, hidden, original, words, blocks: float) -> torch.Tensor:
        """DupMAE's term: summed over blocks, divided by `blocks` (of all micro-batches)."""
        logits = self.adapter.head(self.model, hidden).float()  # [B, L, V]
        logits = logits.masked_fill(~words[..., None], float("-inf"))
        pooled = logits.amax(dim=1)  # [B, V]; -inf for a block without words
        present = torch.zeros_like(pooled, dtype=torch.int32).scatter_reduce_(
            1, original.masked_fill(~words, 0), words.int(), "amax").bool()  # the bag of words
        has_words = words.any(dim=1)
        log_probs = torch.log_softmax(pooled[has_words], dim=-1)
        bag = present[has_words]
        per_block = -(log_probs.masked_fill(~bag, 0.0)).sum(1) / bag.sum(1)
        return per_block.sum() / max(blocks, 1.0)

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
        metrics = {
            "loss": encoder_loss.detach(),
            "accuracy": (top1 == targets).sum().float() / max(totals["masked"], 1.0),
            "decoder_loss": decoder_loss.detach(),
            "decoder_accuracy": (decoder_top1 == decoder_targets).sum().float()
            / max(totals["decoder_masked"], 1.0)}
        total = encoder_loss + decoder_loss
        if self.dupmae_weight:
            bow_loss = self.bag_of_words_loss(hidden, t["original"], t["words"],
                                              totals["blocks"])
            total = total + self.dupmae_weight * bow_loss
            metrics["bow_loss"] = bow_loss.detach()
        return LossOutput(loss=total, metrics=metrics)

    def describe(self) -> str:
        dupmae = f", DupMAE bag of words × {self.dupmae_weight:g}" if self.dupmae_weight else ""
        return (f"RetroMAE (decoder masking {self.config.decoder_masking_rate:.0%}{dupmae}), "
                "encoder " + super().describe())
