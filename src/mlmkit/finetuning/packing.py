"""Fine-tuning without padding: a batch's sequences packed into a few rows, each sequence
attending only to itself (the models layer's unpadded attention, as `pretrain --unpadded`).

A padded batch of short texts is mostly padding unless it is bucketed by length, and
bucketing changes which examples share a step (it costs accuracy). Packed, a batch keeps
its examples (any order, bucketed or not) and the encoder runs on their real tokens only:

- the batch's sequences go into rows of one width (the longest first, each into the
  emptiest row that holds it; as few rows as the tokens need), so the attention of a row
  costs at most that many keys per token, never the whole batch's. The width is fitted to
  each batch (`row_width`): of the multiples of 16 from the longest sequence up to 128, the
  one whose rows hold the fewest slots. A batch of short sentences may fill three rows of
  128 to three quarters and five rows of 64 to over nine tenths: every projection, norm
  and activation runs on the slots, so the slots a batch leaves empty are time spent on
  nothing;
- the indexed mask (each token's sequence number in its row, 0 on padding) keeps attention
  within each sequence and restarts positions per sequence (`models.unpadded`);
- each sequence is pooled as the classifier pools it (its first token; ModernBERT's
  `classifier_pooling` may say the mean of its tokens) and goes through the classifier's
  own head, so the logits equal the padded batch's up to float rounding (without dropout;
  with it, in distribution: the draws differ) and a saved checkpoint is the same
  `AutoModelForSequenceClassification`.

Supported: `head` fine-tuning of the families with unpadded attention, through their own
transformers classifiers: ModernBERT's (ModernBERT, Ettin, mmBERT; first-token or mean
pooling) and those of BERT's shape that read the first token (BERT's pooler, RoBERTa's,
XLM-R's and ELECTRA's classification heads; a pair's token type ids travel packed too).
`supports_packing` says whether a model qualifies; elsewhere batches are padded.

For evaluation, `equal_length_batches` cuts the split sorted by length with the engine's
token-budget cutter: most batches hold rows of one length, which need no padding and no
attention mask, on every family.
"""

from __future__ import annotations

import numpy as np
import torch
from transformers import (
    BertForSequenceClassification,
    ElectraForSequenceClassification,
    RobertaForSequenceClassification,
    XLMRobertaForSequenceClassification,
)

from mlmkit.engine.batching import cut_batches
from mlmkit.finetuning.encode import Encoded
from mlmkit.models.unpadded import UNPADDED_MODEL_TYPES, unpadded_hidden, unpadded_hidden_at

# A packed row is at most this wide unless one sequence is longer (it sets the width then),
# and its width is a multiple of ROW_STEP: the matrix products see a few dozen shapes,
# whose kernels a CPU library builds once and reuses (a width fitted to the token exactly
# would be a new shape almost every step, and building a kernel costs more than the
# padding it saves).
ROW_TOKENS = 128
ROW_STEP = 16
EVAL_MAX_ROWS = 512


def _bert_head(model, first: torch.Tensor) -> torch.Tensor:
    """`BertForSequenceClassification` after its encoder: the pooler (dense, tanh) on the
    first token, dropout, the classifier."""
    return model.classifier(model.dropout(model.bert.pooler(first[:, None])))


def _first_token_head(model, first: torch.Tensor) -> torch.Tensor:
    """RoBERTa's, XLM-R's and ELECTRA's classification heads, which read the first token of
    the [B, L, d] states they are given."""
    return model.classifier(first[:, None])


# transformers' sequence classifiers of BERT's shape -> their computation from the first
# token's last hidden state [n, d] to logits (each class's own forward after its encoder)
FIRST_TOKEN_HEADS = {
    BertForSequenceClassification: _bert_head,
    RobertaForSequenceClassification: _first_token_head,
    XLMRobertaForSequenceClassification: _first_token_head,
    ElectraForSequenceClassification: _first_token_head,
}


def _modernbert_layout(model: torch.nn.Module) -> bool:
    return (getattr(model.config, "classifier_pooling", None) in ("cls", "mean")
            and all(hasattr(model, name) for name in ("model", "head", "drop", "classifier")))


def supports_packing(model: torch.nn.Module) -> bool:
    """Whether `model` (a sequence classifier) can run packed batches: a family with
    unpadded attention whose classifier is ModernBERT's (encoder, head, classifier) or one
    of BERT's shape in `FIRST_TOKEN_HEADS`."""
    config = getattr(model, "config", None)
    if getattr(config, "model_type", None) not in UNPADDED_MODEL_TYPES:
        return False
    return type(model) in FIRST_TOKEN_HEADS or _modernbert_layout(model)


def pack_rows(lengths: np.ndarray, row_tokens: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(row, start) of each sequence and the number of rows: as few rows as the tokens
    need (⌈Σ length / row_tokens⌉, more only when the sequences do not fit), each sequence,
    longest first, into the emptiest row with room. A sequence longer than `row_tokens`
    gets a row of its own."""
    lengths = np.asarray(lengths, dtype=np.int64)
    capacity = max(int(row_tokens), int(lengths.max(initial=1)))
    fill = [0] * max(1, -(-int(lengths.sum()) // capacity))
    row = np.empty(len(lengths), dtype=np.int64)
    start = np.empty(len(lengths), dtype=np.int64)
    for i in np.argsort(-lengths, kind="stable"):
        n = int(lengths[i])
        fits = [r for r in range(len(fill)) if fill[r] + n <= capacity]
        r = min(fits, key=fill.__getitem__) if fits else len(fill)
        if r == len(fill):
            fill.append(0)
        row[i], start[i] = r, fill[r]
        fill[r] += n
    return row, start, len(fill)


def row_width(lengths: np.ndarray, row_tokens: int = ROW_TOKENS,
              step: int = ROW_STEP) -> int:
    """The width of a batch's packed rows: of the multiples of `step` from the longest
    sequence up to `row_tokens`, the one whose rows (`pack_rows`) hold the fewest slots
    (rows × width; the narrower on a tie, its attention is cheaper). A sequence longer
    than `row_tokens` sets the width."""
    lengths = np.asarray(lengths, dtype=np.int64)
    narrowest = -(-max(int(lengths.max(initial=1)), 1) // step) * step
    best = None
    for width in range(narrowest, max(narrowest, int(row_tokens)) + 1, step):
        slots = pack_rows(lengths, width)[2] * width
        if best is None or slots < best[0]:
            best = (slots, width)
    return best[1]


def collate_packed(encoded: Encoded, index: np.ndarray, pad_id: int, device,
                   row_tokens: int = ROW_TOKENS) -> dict:
    """The rows `index` of `encoded` packed (`pack_rows`, rows `row_width` wide, at most
    `row_tokens` unless a sequence is longer): input ids and the indexed mask [rows, width],
    the flat position of each sequence's first token and the sequence of each token (for
    pooling, in `index` order), labels, and the token type ids packed as the ids are where
    `encoded` has them (sentence pairs of models that read segments)."""
    lengths = encoded.lengths[index]
    width = row_width(lengths, row_tokens)
    row, start, rows = pack_rows(lengths, width)
    ends = start + lengths
    ids = np.full((rows, width), pad_id, dtype=np.int64)
    documents = np.zeros((rows, width), dtype=np.int64)
    types = None if encoded.type_ids is None else np.zeros((rows, width), dtype=np.int64)
    number = np.zeros(rows, dtype=np.int64)
    for k, i in enumerate(index):
        ids[row[k], start[k]:ends[k]] = encoded.ids[i]
        number[row[k]] += 1
        documents[row[k], start[k]:ends[k]] = number[row[k]]
        if types is not None:
            types[row[k], start[k]:ends[k]] = encoded.type_ids[i]
    flat = row * width + start
    sequence = np.full(rows * width, -1, dtype=np.int64)
    for k in range(len(index)):
        sequence[flat[k]:flat[k] + lengths[k]] = k
    batch = {"input_ids": torch.from_numpy(ids).to(device),
             "documents": torch.from_numpy(documents).to(device),
             "firsts": torch.from_numpy(flat).to(device),
             "sequence": torch.from_numpy(sequence).to(device),
             "lengths": torch.from_numpy(lengths).to(device),
             "labels": torch.from_numpy(encoded.labels[index]).to(device)}
    if types is not None:
        batch["token_type_ids"] = torch.from_numpy(types).to(device)
    return batch


def packed_logits(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    """[n_sequences, n_labels] logits of a packed batch, through the classifier's pooling,
    head and classifier (the classifier's own forward after its encoder, on packed rows)."""
    types = batch.get("token_type_ids")
    head = FIRST_TOKEN_HEADS.get(type(model))
    if head is not None or model.config.classifier_pooling == "cls":
        # the last layer only at the first tokens, its dropout (BERT's 0.1) drawn there
        first = unpadded_hidden_at(model, batch["input_ids"], batch["documents"],
                                   batch["firsts"], token_type_ids=types,
                                   keep_random_stream=False)
        if head is not None:
            return head(model, first)
        pooled = first
    else:  # ModernBERT's mean over each sequence's tokens (summed in float32)
        hidden = unpadded_hidden(model, batch["input_ids"], batch["documents"])
        flat = hidden.reshape(-1, hidden.shape[-1])
        keep = batch["sequence"] >= 0
        sums = torch.zeros(len(batch["lengths"]), flat.shape[-1], dtype=torch.float32,
                           device=flat.device)
        sums.index_add_(0, batch["sequence"][keep], flat[keep].float())
        pooled = (sums / batch["lengths"][:, None]).to(flat.dtype)
    return model.classifier(model.drop(model.head(pooled)))


def equal_length_batches(lengths: np.ndarray, batch_tokens: int,
                         max_rows: int = EVAL_MAX_ROWS) -> list[np.ndarray]:
    """Evaluation batches: rows sorted by length and cut by the engine's token-budget
    cutter (`engine.batching.cut_batches`), which ends a batch where the length changes
    when that keeps it at least half full; a batch of one length runs unpadded."""
    order = np.argsort(lengths, kind="stable")
    return [order[a:b] for a, b in cut_batches(lengths[order], batch_tokens, max_rows)]


def packed_loss(model: torch.nn.Module, batch: dict, regression: bool) -> torch.Tensor:
    """`methods.head_loss` of a packed batch (float32 loss of any precision)."""
    logits = packed_logits(model, batch).float()
    if regression:
        return torch.nn.functional.mse_loss(logits.squeeze(-1), batch["labels"].float())
    return torch.nn.functional.cross_entropy(logits, batch["labels"])


def packed_outputs(model: torch.nn.Module, batch: dict, regression: bool) -> torch.Tensor:
    """`methods.head_outputs` of a packed batch: class indices (or values)."""
    logits = packed_logits(model, batch)
    return logits.squeeze(-1).float() if regression else logits.argmax(dim=-1)
