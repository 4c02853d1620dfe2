"""AUL and AULA (Kaneko & Bollegala 2022): score the unmasked sentence.

AUL is the mean log-probability the model gives every token of the sentence when it sees
the whole sentence (no mask), leaving out the first and the last token ([CLS], [SEP]) as
the official code does. AULA weights each token's log-probability by the attention it
receives, averaged over layers, heads and query positions, before the mean. Both compare
the two sentences of a CrowS-Pairs pair as metric.py does (biased when sent_more scores
higher), without rounding. AUL needs one encoder pass per sentence with the head at every
scored token; AULA needs the attention weights, so it runs the full model with eager
attention.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np
import torch

from mlmkit.bias.crows import is_uncased
from mlmkit.bias.crows_data import CrowsPair
from mlmkit.bias.pairs import PairScores
from mlmkit.errors import MlmkitError
from mlmkit.models import masked_log_probs

DEFAULT_BATCH_TOKENS = 4096


@contextlib.contextmanager
def eager_attention(model):
    """Switch a loaded model to eager attention (which returns weights), then back."""
    config = model.config
    previous = getattr(config, "_attn_implementation", None)
    switched = previous not in (None, "eager")
    if switched:
        model.set_attn_implementation("eager")
    try:
        yield model
    finally:
        if switched:
            model.set_attn_implementation(previous)


def _batches(lengths: np.ndarray, batch_tokens: int):
    """Length-sorted index batches whose padded size stays within `batch_tokens`."""
    order = np.argsort(lengths, kind="stable")
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and (end + 1 - start) * lengths[order[end]] <= batch_tokens:
            end += 1
        yield order[start:end]
        start = end


def _pad(sequences: list[list[int]], pad_id: int, device):
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    return ids.to(device), mask.to(device)


def received_attention(attentions, attention_mask: torch.Tensor) -> torch.Tensor:
    """[B, L]: attention each key receives, averaged over layers, heads and real queries."""
    stacked = torch.stack([a.double() for a in attentions])  # [layers, B, H, L, L]
    per_query = stacked.mean(dim=(0, 2))  # [B, L(query), L(key)]
    queries = attention_mask.double()
    return (per_query * queries[:, :, None]).sum(1) / queries.sum(1, keepdim=True)


def aul_sentence_scores(
    model, texts: Sequence[str], *, attention: bool = False, lowercase: bool = False,
    batch_tokens: int | None = None, precision: str = "auto", device=None,
    threads: int | None = None, progress: bool | None = None,
) -> np.ndarray:
    """AUL (or AULA with `attention=True`) of each text, float64, in input order.

    `precision` "bf16" runs the encoder (and the attention weights) under bf16 autocast;
    the log-probabilities and their means stay float64.
    """
    from mlmkit.probe.prepare import prepare_model
    from mlmkit.runtime.devices import autocast
    from mlmkit.runtime.progress import Progress

    mlm, precision = prepare_model(model, device=device, precision=precision, threads=threads,
                                   batch_tokens=batch_tokens)
    batch_tokens = batch_tokens or DEFAULT_BATCH_TOKENS
    tokenizer, net = mlm.tokenizer, mlm.model
    encoded = [tokenizer.encode(t.lower() if lowercase else t, add_special_tokens=True)
               for t in texts]
    for text, ids in zip(texts, encoded, strict=True):
        if len(ids) < 3:
            raise MlmkitError(f"the sentence {text!r} has no token besides its special tokens")
        if len(ids) > mlm.max_length:
            raise MlmkitError(f"the sentence {text!r} has {len(ids)} tokens, more than the "
                              f"model's {mlm.max_length}: AUL scores whole sentences")
    lengths = np.array([len(ids) for ids in encoded], dtype=np.int64)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    scores = np.zeros(len(encoded), dtype=np.float64)
    context = eager_attention(net) if attention else contextlib.nullcontext()
    with torch.inference_mode(), context, autocast(precision, mlm.device), \
            Progress("AULA" if attention else "AUL", len(encoded), "sentences",
                     enabled=progress) as bar:
        for batch in _batches(lengths, batch_tokens):
            ids, mask = _pad([encoded[i] for i in batch], pad, mlm.device)
            n = torch.as_tensor(lengths[batch], device=mlm.device)
            column = torch.arange(ids.shape[1], device=mlm.device)[None, :]
            scored = (column >= 1) & (column < n[:, None] - 1)  # [CLS] … [SEP] left out
            if attention:
                output = net(input_ids=ids, attention_mask=mask, output_attentions=True)
                if not output.attentions:
                    raise MlmkitError(f"{mlm.name!r} returned no attention weights: AULA "
                                      f"needs a model that supports output_attentions")
                log_probs = torch.log_softmax(output.logits.float(), dim=-1)
                token_lp = log_probs.gather(2, ids.unsqueeze(2)).squeeze(2).double()
                weights = received_attention(output.attentions, mask)
                values = torch.where(scored, token_lp * weights, 0.0)
            else:
                log_probs = masked_log_probs(net, ids, mask, scored)
                picked = log_probs.gather(1, ids[scored].unsqueeze(1)).squeeze(1).double()
                values = torch.zeros(ids.shape, dtype=torch.float64, device=mlm.device)
                values[scored] = picked
            means = values.sum(1) / scored.sum(1).double()
            scores[batch] = means.cpu().numpy()
            bar.advance(len(batch))
    return scores


def score_aul(
    model, pairs: Sequence[CrowsPair], *, attention: bool = False,
    lowercase: bool | None = None, batch_tokens: int | None = None, precision: str = "auto",
    device=None, threads: int | None = None, progress: bool | None = None,
) -> PairScores:
    """AUL/AULA of both sentences of every pair, as PairScores (no rounding)."""
    from mlmkit.probe.prepare import prepare_model

    mlm, precision = prepare_model(model, device=device, precision=precision, threads=threads,
                                   batch_tokens=batch_tokens)
    if lowercase is None:
        lowercase = is_uncased(mlm.tokenizer)
    texts = [p.sent_more for p in pairs] + [p.sent_less for p in pairs]
    scores = aul_sentence_scores(mlm, texts, attention=attention, lowercase=lowercase,
                                 batch_tokens=batch_tokens, precision=precision,
                                 progress=progress)
    n = len(pairs)
    return PairScores(
        pairs=list(pairs), sent_more_score=scores[:n], sent_less_score=scores[n:],
        measure="aula" if attention else "aul", model=mlm.name,
        extras={"lowercase": lowercase, "precision": precision},
    )
