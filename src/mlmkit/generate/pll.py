"""Pseudo-log-likelihood of token sequences, for choosing among infill candidates.

Uses the scoring engine (`mlmkit.scoring.engine.score_token_ids`) when it is installed;
otherwise a small local one: each sequence copied once per token with that token masked,
the head only at the masked position, log-probs in float64.
"""

from __future__ import annotations

import numpy as np
import torch

from mlmkit.generate.canvas import special_wrap
from mlmkit.models import masked_log_probs


def _local_pll(mlm, token_ids: list[list[int]], batch_rows: int = 64) -> list[np.ndarray]:
    prefix, suffix = special_wrap(mlm.tokenizer)
    mask_id, device = mlm.tokenizer.mask_token_id, mlm.device
    scores = []
    with torch.inference_mode():
        for ids in token_ids:
            full = torch.tensor(prefix + list(ids) + suffix, device=device)
            n = len(ids)
            cols = torch.arange(n, device=device) + len(prefix)
            picked = []
            for start in range(0, n, batch_rows):
                part = cols[start:start + batch_rows]
                rows = torch.arange(len(part), device=device)
                copies = full.repeat(len(part), 1)
                copies[rows, part] = mask_id
                logp = masked_log_probs(mlm.model, copies, None, torch.stack([rows, part], 1))
                picked.append(logp.double().gather(1, full[part].unsqueeze(1)).squeeze(1))
            values = torch.cat(picked).cpu().numpy() if picked else np.zeros(0)
            scores.append(values.astype(np.float64))
    return scores


def token_pll(mlm, token_ids: list[list[int]]) -> list[np.ndarray]:
    """float64 log P(w_i | rest) per content token of each sequence (no special tokens)."""
    try:
        from mlmkit.scoring.engine import score_token_ids
    except ImportError:
        return _local_pll(mlm, token_ids)
    prefix, suffix = special_wrap(mlm.tokenizer)
    full = [prefix + list(ids) + suffix for ids in token_ids]
    targets = [list(range(len(prefix), len(prefix) + len(ids))) for ids in token_ids]
    scores = score_token_ids(mlm, full, targets, metric="pll")
    return [np.asarray(s, dtype=np.float64) for s in scores]
