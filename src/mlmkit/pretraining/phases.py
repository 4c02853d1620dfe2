"""Multi-phase training: a run that moves between phases by itself, and resumes inside and
across them exactly.

A phase is a mapping (in a recipe's YAML or the config's `phases` list):

    name: context-extension      # for logs
    steps: 300                   # optimizer steps; the phases' steps add up to --steps
    seq_len: 256                 # tokens per packed block (context extension); default --seq-len
    masking_rate: 0.3            # or [0.3, 0.15]: linear over the phase; default the policy's
    rope_theta: 160000           # RoPE θ from this phase on (RoPE families only)
    mixture: {corpus: 0.7, python-docs: 0.3}   # corpora and weights; `corpus` = --corpus
    lr: {warmup: 0, start: 1.0, end: 0.0, shape: linear}   # this phase's piece of the
                                                           # schedule, as shares of --lr

Everything a phase changes is a function of the step (rate, learning rate, which rows come
from which corpus), or set when the phase is entered (θ, block length), so a resumed run
enters the phase of its step and continues bit-for-bit. Rows of a step are split between a
mixture's corpora in exact proportion (largest remainders), in an order drawn from
(seed, step); each corpus keeps its own shuffled block order, saved in the checkpoint.
"""

from __future__ import annotations

import numpy as np
import torch

from mlmkit.corpus.mixture import shares
from mlmkit.corpus.packing import BlockBatch, BlockOrder, PackedBlocks
from mlmkit.corpus.shards import tokenize_corpus
from mlmkit.errors import InvalidArgument
from mlmkit.models.rope import has_rope, set_rope_theta
from mlmkit.pretraining.data import corpus_documents, unknown_tokens
from mlmkit.pretraining.phase_specs import RUN_CORPUS, Phase, parse_phases, phase_limit


class PhasePlan:
    """Which phase a step is in, and what it asks at that step."""

    def __init__(self, phases: list[Phase]):
        self.phases = phases
        self.starts = np.cumsum([0] + [p.steps for p in phases])

    def index(self, step: int) -> int:
        return int(min(np.searchsorted(self.starts, step, side="right") - 1,
                       len(self.phases) - 1))

    def rate(self, step: int) -> float | None:
        i = self.index(step)
        phase = self.phases[i]
        if phase.masking_rate is None:
            return None
        a, b = phase.masking_rate
        t = (step - self.starts[i]) / max(phase.steps - 1, 1)
        return a + (b - a) * min(max(t, 0.0), 1.0)

    def lr_factor(self, step: int) -> float | None:
        i = self.index(step)
        phase = self.phases[i]
        if phase.lr is None:
            return None
        return phase.lr.factor(int(step - self.starts[i]), phase.steps)


class PhaseRate:
    """A masking policy's rate with each phase's rate put over it (the policy's own rate
    in phases that set none)."""

    def __init__(self, base, plan: PhasePlan):
        self.base, self.plan = base, plan

    def value(self, step: int) -> float:
        rate = self.plan.rate(step)
        return self.base.value(step) if rate is None else rate

    def __call__(self, batch: int, step: int, generator, device) -> torch.Tensor:
        rate = self.plan.rate(step)
        if rate is None:
            return self.base(batch, step, generator, device)
        return torch.full((batch,), rate, dtype=torch.float32, device=device)

    def describe(self) -> str:
        return "per phase"


class PhaseBlocks:
    """The blocks of the phase being trained: its corpora, packed at its length, seen as
    one index space (source k's block j is `offsets[k] + j`)."""

    def __init__(self, sources: list[list], current: int = 0):
        self.sources = sources  # per phase: [PackedBlocks, ...]
        self.current = current

    def offsets(self, phase: int) -> np.ndarray:
        return np.cumsum([0] + [len(b) for b in self.sources[phase]])

    def __len__(self) -> int:
        return int(self.offsets(self.current)[-1])

    @property
    def cropped(self) -> int:
        """Documents of the current phase longer than a block (each read at a window)."""
        return sum(getattr(blocks, "cropped", 0) for blocks in self.sources[self.current])

    def __getitem__(self, indices):
        return self.gather(indices)

    def gather(self, indices, draws=None):
        """The blocks `indices` of the current phase, `draws` handed to their sources."""
        indices = np.asarray(indices, dtype=np.int64)
        offsets = self.offsets(self.current)
        which = np.searchsorted(offsets, indices, side="right") - 1
        parts, rows = [], []
        for k, blocks in enumerate(self.sources[self.current]):
            chosen = np.nonzero(which == k)[0]
            if len(chosen):
                within = indices[chosen] - offsets[k]
                parts.append(blocks[within] if draws is None else
                             blocks.gather(within, np.asarray(draws)[chosen]))
                rows.append(chosen)
        order = torch.from_numpy(np.argsort(np.concatenate(rows), kind="stable"))
        fields = ("input_ids", "attention_mask", "word_starts", "document_ids")
        return BlockBatch(*(torch.cat([getattr(p, f) for p in parts]).index_select(0, order)
                            for f in fields))


class PhaseOrder:
    """The rows of each step, split between the phase's corpora in exact proportion; each
    corpus of each phase has its own shuffled order (all saved in the checkpoint)."""

    def __init__(self, plan: PhasePlan, blocks: PhaseBlocks, seed: int):
        self.plan, self.blocks, self.seed = plan, blocks, seed
        self.orders = [[BlockOrder(len(b), seed=seed + 7919 * k) for k, b in enumerate(phase)]
                       for phase in blocks.sources]
        self.step = 0  # the step whose rows are drawn next (set by the run)
        self.last_counts: dict[str, int] = {}

    def counts(self, phase: int, batch_size: int) -> list[int]:
        return shares([w for _, w in self.plan.phases[phase].mixture], batch_size)

    def next_indices(self, batch_size: int, rank: int = 0, world_size: int = 1) -> np.ndarray:
        phase = self.plan.index(self.step)
        offsets = self.blocks.offsets(phase)
        counts = self.counts(phase, batch_size)
        parts = [self.orders[phase][k].next_indices(n) + offsets[k] if n else
                 np.zeros(0, dtype=np.int64) for k, n in enumerate(counts)]
        rows = np.concatenate(parts)
        rows = rows[np.random.default_rng([self.seed, self.step, 11]).permutation(len(rows))]
        names = [name for name, _ in self.plan.phases[phase].mixture]
        self.last_counts = dict(zip(names, counts, strict=True))
        return rows[rank::world_size]

    def state_dict(self) -> dict:
        return {"phases": [[o.state_dict() for o in phase] for phase in self.orders]}

    def load_state_dict(self, state: dict) -> None:
        for phase, saved in zip(self.orders, state["phases"], strict=True):
            for order, one in zip(phase, saved, strict=True):
                order.load_state_dict(one)


class PhaseRuntime:
    """What a run with phases holds: the plan, the blocks and order of every phase, and
    which phase's settings are applied to the model."""

    def __init__(self, plan: PhasePlan, blocks: PhaseBlocks, order: PhaseOrder,
                 modules: list[torch.nn.Module], say=None):
        self.plan, self.blocks, self.order, self.modules = plan, blocks, order, modules
        self.applied: int | None = None
        self.say = say

    def enter(self, step: int) -> None:
        """Before training step `step`: switch to its phase when it is a new one."""
        index = self.plan.index(step)
        self.order.step = step
        self.blocks.current = index
        if index == self.applied:
            return
        phase = self.plan.phases[index]
        theta = next((p.rope_theta for p in reversed(self.plan.phases[:index + 1])
                      if p.rope_theta is not None), None)
        for model in self.modules:
            if theta is not None:
                set_rope_theta(model, theta)
            if theta is not None or any(p.rope_theta for p in self.plan.phases):
                # a RoPE model's config states the context it was trained (extended) to
                model.config.max_position_embeddings = max(
                    p.seq_len for p in self.plan.phases[:index + 1])
        self.applied = index
        if self.say is not None:
            self.say(f"phase {index + 1}/{len(self.plan.phases)} at step {step}: "
                     f"{phase.describe()}")

    def lr_factor(self, step: int) -> float | None:
        return self.plan.lr_factor(step)


def phase_sources(config, tokenizer, data, phases: list[Phase], show_progress: bool):
    """Per phase, its corpora packed at its length (token shards tokenized once per corpus,
    cached as the run's own)."""
    shards = {RUN_CORPUS: data.train_shards, config.corpus: data.train_shards}
    pack = dict(cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id,
                pad_id=tokenizer.pad_token_id, packing=config.packing)
    packed: dict[tuple[str, int], PackedBlocks] = {}
    sources = []
    for phase in phases:
        row = []
        for name, _ in phase.mixture:
            if name not in shards:
                documents = corpus_documents(name, "train", config.field,
                                             config.validation_share)
                shards[name] = tokenize_corpus(documents, tokenizer, name=f"{name} (train)",
                                               settings={"format": "shards-v1"},
                                               show_progress=show_progress)
                unknown_tokens(shards[name], tokenizer, [name])  # a corpus it cannot read
            key = (name if name != config.corpus else RUN_CORPUS, phase.seq_len)
            if key not in packed:
                packed[key] = PackedBlocks(shards[name], phase.seq_len, **pack)
            if len(packed[key]) == 0:
                raise InvalidArgument(f"phase {phase.name!r}: corpus {name!r} holds no block "
                                      f"of {phase.seq_len} tokens")
            row.append(packed[key])
        sources.append(row)
    return sources


def attach_phases(run, say=None) -> PhaseRuntime:
    """Give a built run (before its state is loaded) its phases: the data of every phase,
    the per-phase order (saved as the run's data order), the masking rate and the model
    changes at phase starts. Raises InvalidArgument before anything is written."""
    config = run.config
    models = [m for m in run.objective.modules.values() if hasattr(m, "config")]
    rope = all(has_rope(m) for m in models) if models else None
    phases = parse_phases(config.phases, total_steps=config.steps, seq_len=config.seq_len,
                          max_seq_len=phase_limit(config), rope=rope,
                          objective=config.objective)
    plan = PhasePlan(phases)
    sources = phase_sources(config, run.tokenizer, run.data, phases,
                            show_progress=config.progress and run.is_main)
    blocks = PhaseBlocks(sources)
    order = PhaseOrder(plan, blocks, config.seed)
    if any(p.masking_rate is not None for p in phases):
        policy = getattr(run.objective, "policy", None)
        if policy is None or not hasattr(policy, "rate"):
            raise InvalidArgument(f"phases: the {config.objective} objective has no masking "
                                  "rate to set; drop masking_rate")
        policy.rate = PhaseRate(policy.rate, plan)
    runtime = PhaseRuntime(plan, blocks, order, models, say=say)
    run.data.train = blocks
    run.order = order
    run.phases = runtime
    return runtime


