"""Packing token shards into fixed-length blocks, and the deterministic order they are read in.

Two layouts:

- `full` (RoBERTa FULL-SENTENCES): documents are concatenated, each followed by [SEP];
  the stream is cut into chunks of `length - 1` tokens and every block starts with [CLS].
  A document longer than a block continues in the next one; nothing is dropped (the last
  block is padded).
- `document`: one document per block, `[CLS] doc [SEP]` and padding; a document longer
  than `length - 2` tokens is split over consecutive blocks (never cut off).
- `crop` (ESM-2's training): one document per block as `document`, but a document longer
  than `length - 2` tokens is cropped to a window of that many tokens at a random start,
  drawn anew each time the block is read (`gather(indices, draws)`: the training loop
  draws from (seed, step, row), so each epoch sees another window of a long protein and a
  resumed run the same windows as an unbroken one). Without draws (validation) each
  document's window is fixed.

Blocks are gathered lazily from the memory-mapped shards, one vectorised gather per batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mlmkit.corpus.shards import TokenShards
from mlmkit.errors import MlmkitError

PACKINGS = ("full", "document", "crop")


@dataclass
class BlockBatch:
    """A batch of packed blocks: what a masking policy and an objective consume."""

    input_ids: torch.Tensor  # int64 [B, L]
    attention_mask: torch.Tensor  # int64 [B, L], 0 on padding
    word_starts: torch.Tensor  # bool [B, L], True where a token starts a word (specials too)
    document_ids: torch.Tensor  # int64 [B, L], 0, 1, ... within the block; -1 on padding

    def to(self, device) -> BlockBatch:
        return BlockBatch(*(t.to(device, non_blocking=True) for t in
                            (self.input_ids, self.attention_mask, self.word_starts,
                             self.document_ids)))

    @property
    def n_tokens(self) -> int:
        return int(self.attention_mask.sum())


class PackedBlocks:
    """Fixed-length blocks over `shards`; `blocks[indices]` (or `blocks.gather(indices,
    draws)` for `crop`'s random windows) gathers a `BlockBatch`."""

    def __init__(self, shards: TokenShards, length: int, *, cls_id: int, sep_id: int,
                 pad_id: int, packing: str = "full"):
        if packing not in PACKINGS:
            raise MlmkitError(f"unknown packing {packing!r}: use one of {list(PACKINGS)}")
        if length < 4:
            raise MlmkitError(f"--seq-len {length} is too short: use at least 4")
        self.shards, self.length, self.packing = shards, length, packing
        self.cls_id, self.sep_id, self.pad_id = cls_id, sep_id, pad_id
        offsets = shards.doc_offsets
        lengths = np.diff(offsets)
        if packing == "full":
            # Stream position of document i's [SEP]: its end plus the i separators before it.
            self._sep_positions = offsets[1:] + np.arange(len(lengths))
            stream = int(offsets[-1] + len(lengths))
            chunk = length - 1
            self._starts = np.arange(0, stream, chunk, dtype=np.int64)
            self._stream_length = stream
        elif packing == "crop":
            chunk = length - 2
            self._starts = offsets[:-1].astype(np.int64)
            self._sizes = np.minimum(lengths, chunk)
            self._excess = lengths - self._sizes  # start offsets a window can take, minus 1
        else:
            chunk = length - 2
            pieces = (lengths + chunk - 1) // chunk
            doc = np.repeat(np.arange(len(lengths)), pieces)
            first = np.repeat(np.cumsum(pieces) - pieces, pieces)
            within = np.arange(len(doc)) - first
            self._starts = offsets[doc] + within * chunk
            self._sizes = np.minimum(offsets[doc + 1] - self._starts, chunk)

    def __len__(self) -> int:
        return len(self._starts)

    @property
    def cropped(self) -> int:
        """How many documents are longer than a block, so read as a window of it (`crop`)."""
        return int(np.count_nonzero(self._excess)) if self.packing == "crop" else 0

    def __getitem__(self, indices) -> BlockBatch:
        return self.gather(indices)

    def gather(self, indices, draws=None) -> BlockBatch:
        """The blocks `indices`; `draws` (one integer per block, `crop` only) choose the
        windows of documents longer than a block (None: each document's fixed window)."""
        indices = np.atleast_1d(np.asarray(indices, dtype=np.int64))
        if len(indices) and (indices.min() < 0 or indices.max() >= len(self)):
            raise IndexError(f"block index out of range for {len(self)} blocks")
        if self.packing == "full":
            return self._gather_full(indices)
        starts = self._starts[indices]
        if self.packing == "crop":
            starts = starts + self._window_shifts(indices, draws)
        return self._gather_document(indices, starts)

    def _window_shifts(self, indices: np.ndarray, draws) -> np.ndarray:
        """Per block, where its window starts within its document: uniform over the
        possible starts, from a generator seeded by (draw, document)."""
        excess = self._excess[indices]
        draws = np.zeros(len(indices), np.int64) if draws is None else \
            np.asarray(draws, dtype=np.int64).reshape(-1)
        if len(draws) != len(indices):
            raise ValueError(f"{len(draws)} draws for {len(indices)} blocks")
        shifts = np.zeros(len(indices), dtype=np.int64)
        for i in np.nonzero(excess)[0]:
            generator = np.random.default_rng([int(draws[i]) & ((1 << 63) - 1),
                                               int(indices[i])])
            shifts[i] = generator.integers(0, int(excess[i]) + 1)
        return shifts

    def _gather_full(self, indices: np.ndarray) -> BlockBatch:
        chunk = self.length - 1
        position = self._starts[indices][:, None] + np.arange(chunk)[None, :]
        valid = position < self._stream_length
        position = np.minimum(position, self._stream_length - 1)
        seps_before = np.searchsorted(self._sep_positions, position, side="left")
        is_sep = self._sep_positions[np.minimum(seps_before, len(self._sep_positions) - 1)] \
            == position
        token_index = np.minimum(position - seps_before, self.shards.n_tokens - 1)
        ids = np.where(is_sep, self.sep_id, self.shards.tokens[token_index].astype(np.int64))
        starts = is_sep | (self.shards.word_starts[token_index] > 0)
        docs = seps_before - seps_before[:, :1]
        return self._assemble(ids, starts, docs, valid)

    def _gather_document(self, indices: np.ndarray, starts: np.ndarray) -> BlockBatch:
        chunk = self.length - 2
        sizes = self._sizes[indices]
        position = starts[:, None] + np.arange(chunk)[None, :]
        inside = np.arange(chunk)[None, :] < sizes[:, None]
        token_index = np.minimum(position, self.shards.n_tokens - 1)
        ids = np.where(inside, self.shards.tokens[token_index].astype(np.int64), self.pad_id)
        starts = inside & (self.shards.word_starts[token_index] > 0)
        # Append [SEP] right after each block's last token.
        batch = len(indices)
        ids = np.concatenate([ids, np.full((batch, 1), self.pad_id)], axis=1)
        starts = np.concatenate([starts, np.zeros((batch, 1), dtype=bool)], axis=1)
        ids[np.arange(batch), sizes] = self.sep_id
        starts[np.arange(batch), sizes] = True
        valid = np.arange(chunk + 1)[None, :] <= sizes[:, None]
        return self._assemble(ids, starts, np.zeros_like(ids), valid)

    def _assemble(self, ids, starts, docs, valid) -> BlockBatch:
        batch = len(ids)
        ids = np.where(valid, ids, self.pad_id)
        cls = np.full((batch, 1), self.cls_id, dtype=np.int64)
        input_ids = np.concatenate([cls, ids], axis=1)
        attention = np.concatenate([np.ones((batch, 1), dtype=np.int64),
                                    valid.astype(np.int64)], axis=1)
        word_starts = np.concatenate([np.ones((batch, 1), dtype=bool), starts & valid], axis=1)
        document_ids = np.concatenate([np.zeros((batch, 1), dtype=np.int64),
                                       np.where(valid, docs, -1)], axis=1)
        return BlockBatch(torch.from_numpy(input_ids), torch.from_numpy(attention),
                          torch.from_numpy(word_starts), torch.from_numpy(document_ids))


class BlockOrder:
    """A deterministic shuffle of block indices by (seed, epoch); its position is state.

    Every batch has exactly `batch_size` blocks: a batch that runs past the end of an
    epoch continues with the start of the next epoch's permutation. With `world_size`
    ranks each takes an interleaved slice of the same global batch.
    """

    def __init__(self, n_blocks: int, seed: int = 0):
        if n_blocks == 0:
            raise MlmkitError("there are no blocks to train on: the corpus is empty")
        self.n_blocks, self.seed = n_blocks, seed
        self.epoch, self.offset = 0, 0
        self._permutation = self._permute(0)

    def _permute(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.n_blocks)

    def next_indices(self, batch_size: int, rank: int = 0, world_size: int = 1) -> np.ndarray:
        """The next global batch of `batch_size * world_size` blocks, this rank's slice."""
        wanted = batch_size * world_size
        parts = []
        while wanted > 0:
            take = min(wanted, self.n_blocks - self.offset)
            parts.append(self._permutation[self.offset:self.offset + take])
            self.offset += take
            wanted -= take
            if self.offset == self.n_blocks:
                self.epoch += 1
                self.offset = 0
                self._permutation = self._permute(self.epoch)
        return np.concatenate(parts)[rank::world_size]

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "offset": self.offset, "seed": self.seed,
                "n_blocks": self.n_blocks}

    def load_state_dict(self, state: dict) -> None:
        if state["n_blocks"] != self.n_blocks or state["seed"] != self.seed:
            raise MlmkitError(
                f"the saved data position is for {state['n_blocks']} blocks with seed "
                f"{state['seed']}, but this run has {self.n_blocks} blocks with seed "
                f"{self.seed}: resume with the same corpus, tokenizer and settings"
            )
        self.epoch, self.offset = state["epoch"], state["offset"]
        self._permutation = self._permute(self.epoch)
