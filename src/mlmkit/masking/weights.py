"""Which ones: a weight per token, so units are sampled in proportion to their mean weight.

- `uniform`: every unit alike (None: the sampler skips the weights altogether);
- `frequency`: rare tokens more often (WSBERT), weight (count + 1)^-alpha;
- `loss`: tokens the model finds hard more often (WSBERT-loss / adaptive masking): an EMA
  table of per-token training loss, fed by `policy.update_losses` per micro-batch and
  updated once per optimizer step (`end_step`) from all micro-batches and processes;
- `tfidf`: important terms more often (ROM): (1 + log tf in the document) × idf;
- `bm25`: important terms more often (ROM) by the BM25 term weight, whose tf saturates
  (k1) and is normalised by the document's length (b);
- `informask`: informative tokens more often (InforMask): exp(informativeness / temperature),
  informativeness being a token's mean PMI with its contexts in the corpus.
The statistics come from `mlmkit mask stats` (see `mlmkit.masking.stats`).
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from mlmkit.errors import MlmkitError
from mlmkit.masking.lookup import lookup, take
from mlmkit.masking.registry import WEIGHTS


def _need(stats, name: str):
    if stats is None:
        raise MlmkitError(f"{name} weights need corpus statistics: run `mlmkit mask stats CORPUS "
                          "TOKENIZER -o DIR` and pass stats=DIR")
    return stats


class Weights:
    PARAMS: dict = {}
    name = "weights"
    learns = False  # True: the weights change with training (batches can't be built ahead)

    def __init__(self, **_):
        self._cache: dict = {}

    def _table(self, device) -> torch.Tensor:
        key = str(device)
        if key not in self._cache:
            self._cache[key] = self.table.to(device)
        return self._cache[key]

    def token_weights(self, input_ids, maskable, document_ids):
        """Float [B, L] of positive weights, or None for uniform."""
        table = self._table(input_ids.device)
        return lookup(table, input_ids)

    def update(self, token_ids, losses) -> None:
        """Only the loss weights learn."""

    def end_step(self, reduce: bool = True) -> None:
        """Called once per optimizer step, after the step (only the loss weights learn)."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def describe(self) -> str:
        return self.name


@WEIGHTS.register("uniform")
class UniformWeights(Weights):
    name = "uniform"

    def token_weights(self, input_ids, maskable, document_ids):
        return None


@WEIGHTS.register("frequency")
class FrequencyWeights(Weights):
    PARAMS = {"alpha": 0.5}
    name = "frequency"

    def __init__(self, alpha=0.5, stats=None, **_):
        super().__init__()
        self.alpha = float(alpha)
        counts = _need(stats, "frequency").token_counts.double()
        self.table = ((counts + 1.0) ** -self.alpha).float()

    def describe(self) -> str:
        return f"frequency(alpha={self.alpha:g})"


@WEIGHTS.register("informask")
class InformaskWeights(Weights):
    PARAMS = {"temperature": 1.0}
    name = "informask"

    def __init__(self, temperature=1.0, stats=None, **_):
        super().__init__()
        self.temperature = float(temperature)
        if self.temperature <= 0:
            raise MlmkitError(f"informask weights: temperature={temperature} must be positive")
        score = _need(stats, "informask").informativeness.double()
        score = score - score.max()  # exp without overflow; only ratios matter
        self.table = torch.exp(score / self.temperature).float().clamp(min=1e-30)

    def describe(self) -> str:
        return f"informask(temperature={self.temperature:g})"


@WEIGHTS.register("tfidf")
class TfidfWeights(Weights):
    """tf counts the token within its own document of the (packed) row."""

    name = "tfidf"

    def __init__(self, stats=None, **_):
        super().__init__()
        stats = _need(stats, "tfidf")
        df = stats.doc_freq.double()
        self.table = (torch.log((1.0 + stats.n_docs) / (1.0 + df)) + 1.0).float()
        self.size = df.numel()

    def token_weights(self, input_ids, maskable, document_ids):
        idf = self._table(input_ids.device)
        ids = input_ids.clamp(0, self.size - 1)
        # Number the documents of the batch 0, 1, ... (a new one at each row start and each
        # change of document id), so that one key names a token in a document.
        new_document = torch.zeros_like(ids, dtype=torch.bool)
        new_document[:, :1] = True
        if document_ids is not None:
            new_document[:, 1:] = document_ids[:, 1:] != document_ids[:, :-1]
        documents = int(new_document.sum())
        # int32 keys where they fit: half the bytes to sort and to unique
        small = documents * self.size < 2**31
        dtype = torch.int32 if small else torch.int64
        document = new_document.view(-1).cumsum(0, dtype=dtype) - 1
        key = document * self.size + ids.view(-1).to(dtype)
        distinct, inverse, counts = torch.unique(key, return_inverse=True, return_counts=True)
        tf_weight = self._tf_weight(counts.float(), distinct // self.size, document, documents,
                                    maskable)
        return tf_weight.index_select(0, inverse).view(ids.shape) * take(idf, ids)

    def _tf_weight(self, tf, tf_document, document, documents, maskable):
        """The weight of each distinct (document, token) from its count `tf` (`tf_document`:
        its document; `document`: the document of each position; `documents`: how many)."""
        return 1.0 + torch.log(tf)


@WEIGHTS.register("bm25")
class BM25Weights(TfidfWeights):
    """idf × tf·(k1 + 1) / (tf + k1·(1 − b + b·len/avglen)), per token of a document.

    tf counts the token within its own document of the (packed) row and len is that
    document's maskable tokens there (all of its tokens when the caller gives no maskable
    mask); avglen is the corpus's mean document length in tokens. idf is BM25's
    log(1 + (N − df + 0.5) / (df + 0.5)), positive even for a token in every document. The
    defaults k1=0.9, b=0.4 are Anserini's for passage retrieval: a weight that saturates fast
    in tf and is mildly normalised by length, so the idf (stop-words low) dominates.
    """

    PARAMS = {"k1": 0.9, "b": 0.4}
    name = "bm25"

    def __init__(self, k1=0.9, b=0.4, stats=None, **_):
        Weights.__init__(self)
        stats = _need(stats, "bm25")
        self.k1, self.b = float(k1), float(b)
        if self.k1 < 0 or not 0.0 <= self.b <= 1.0:
            raise MlmkitError(f"bm25 weights: k1={k1} must be ≥ 0 and b={b} in [0, 1]")
        df = stats.doc_freq.double()
        n_docs = float(stats.n_docs)
        idf = torch.log1p((n_docs - df + 0.5) / (df + 0.5))
        self.table = idf.float().clamp(min=1e-6)  # a positive weight for every token
        self.size = df.numel()
        self.average_length = max(stats.n_tokens / max(stats.n_docs, 1), 1.0)

    def _tf_weight(self, tf, tf_document, document, documents, maskable):
        counted = (torch.ones_like(document, dtype=torch.float32) if maskable is None
                   else maskable.reshape(-1).float())
        lengths = torch.zeros(documents, dtype=torch.float32, device=tf.device)
        lengths.index_add_(0, document.long(), counted)
        length = lengths.index_select(0, tf_document.long())
        norm = self.k1 * (1.0 - self.b + self.b * length / self.average_length)
        return tf * (self.k1 + 1.0) / (tf + norm)

    def describe(self) -> str:
        return f"bm25(k1={self.k1:g}, b={self.b:g})"


@WEIGHTS.register("loss")
class LossWeights(Weights):
    """EMA of each token's training loss; tokens never seen keep the initial log(V).

    The table changes once per optimizer step: `update` collects the per-token losses of
    every micro-batch, `end_step` (called by the objective after the optimizer step) sums
    them over all processes (torch.distributed, when initialised) and blends each token's
    mean loss into the table. The table is therefore the same for any --grad-accum and on
    every rank, and a token seen k times in a step moves the EMA once, by its mean.
    """

    PARAMS = {"decay": 0.99, "power": 1.0}
    name = "loss"
    learns = True

    def __init__(self, decay=0.99, power=1.0, vocab_size=None, **_):
        super().__init__()
        self.decay, self.power = float(decay), float(power)
        if not 0.0 <= self.decay < 1.0:
            raise MlmkitError(f"loss weights: decay={decay} must be in [0, 1)")
        self.table = torch.full((int(vocab_size),), math.log(vocab_size), dtype=torch.float32)
        self.updates = 0
        self._sums: torch.Tensor | None = None  # float64 [V]: losses of this step so far
        self._counts: torch.Tensor | None = None  # float64 [V]: how many

    def _table(self, device) -> torch.Tensor:
        if self.table.device != torch.device(device):
            self.table = self.table.to(device)
        return self.table

    def token_weights(self, input_ids, maskable, document_ids):
        if self._sums is not None:  # a caller that never ended its step: end it here
            self.end_step(reduce=False)
        table = self._table(input_ids.device)
        weights = lookup(table, input_ids).clamp(min=1e-6)
        return weights if self.power == 1.0 else weights ** self.power

    def update(self, token_ids, losses) -> None:
        """Collect per-token losses of one micro-batch (applied at `end_step`)."""
        ids = token_ids.reshape(-1).long()
        if ids.numel() == 0:
            return
        table = self._table(ids.device)
        ids = ids.clamp(0, table.numel() - 1)
        if self._sums is None:
            self._sums = torch.zeros(table.numel(), dtype=torch.float64, device=ids.device)
            self._counts = torch.zeros(table.numel(), dtype=torch.float64, device=ids.device)
        self._sums.index_add_(0, ids, losses.reshape(-1).detach().to(ids.device, torch.float64))
        self._counts.index_add_(0, ids, torch.ones(ids.numel(), dtype=torch.float64,
                                                   device=ids.device))

    def end_step(self, reduce: bool = True) -> None:
        """Blend the step's mean loss per token into the table, once; with `reduce`, the
        sums of every process first (every rank must call this on the same step)."""
        table = self.table
        sums, counts = self._sums, self._counts
        if reduce and _distributed():
            both = (torch.stack([sums, counts]) if sums is not None
                    else torch.zeros(2, table.numel(), dtype=torch.float64, device=table.device))
            dist.all_reduce(both)  # every rank joins, even one without masked tokens
            sums, counts = both[0], both[1]
        self._sums = self._counts = None
        if sums is None:
            return
        seen = counts > 0
        mean = (sums / counts.clamp(min=1)).to(table.device).float()
        blended = self.decay * table + (1.0 - self.decay) * mean
        self.table = torch.where(seen.to(table.device), blended, table)
        self.updates += 1

    def state_dict(self) -> dict:
        state = {"table": self.table.detach().cpu().clone(), "updates": self.updates}
        if self._sums is not None:  # saved mid-step (normally the step has ended)
            state["pending"] = (self._sums.cpu().clone(), self._counts.cpu().clone())
        return state

    def load_state_dict(self, state: dict) -> None:
        table = torch.as_tensor(state["table"], dtype=torch.float32)
        if table.shape != self.table.shape:
            raise MlmkitError(f"loss-weight table of {tuple(table.shape)} does not fit this "
                              f"vocabulary of {self.table.numel()}: resume with the same tokenizer")
        self.table = table.to(self.table.device)
        self.updates = int(state.get("updates", 0))
        pending = state.get("pending")
        self._sums, self._counts = ((pending[0].to(self.table.device),
                                     pending[1].to(self.table.device))
                                    if pending is not None else (None, None))

    def describe(self) -> str:
        return f"loss EMA(decay={self.decay:g})"


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
