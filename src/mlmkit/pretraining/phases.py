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

import math
from dataclasses import dataclass

import numpy as np
import torch

from mlmkit.errors import InvalidArgument

PHASE_KEYS = ("name", "steps", "seq_len", "masking_rate", "rope_theta", "mixture", "lr")
LR_KEYS = ("warmup", "start", "end", "shape")
LR_SHAPES = ("linear", "cosine", "sqrt", "constant")
RUN_CORPUS = "corpus"  # a mixture's name for the run's --corpus


@dataclass(frozen=True)
class LRPiece:
    """A phase's learning rate, as shares of the peak: 0 → `start` over `warmup` steps,
    then `start` → `end` along `shape` (sqrt: 1 − sqrt, the decay of ModernBERT's
    last phase)."""

    warmup: int = 0
    start: float = 1.0
    end: float = 1.0
    shape: str = "linear"

    def factor(self, step_in_phase: int, steps: int) -> float:
        if step_in_phase < self.warmup:
            return self.start * (step_in_phase + 1) / self.warmup
        rest = max(steps - self.warmup, 1)
        t = min((step_in_phase - self.warmup) / rest, 1.0)
        if self.shape == "constant":
            t = 0.0
        elif self.shape == "cosine":
            t = 0.5 * (1 - math.cos(math.pi * t))
        elif self.shape == "sqrt":
            t = math.sqrt(t)
        return self.start + (self.end - self.start) * t


@dataclass(frozen=True)
class Phase:
    name: str
    steps: int
    seq_len: int
    masking_rate: tuple[float, float] | None
    rope_theta: float | None
    mixture: tuple[tuple[str, float], ...]
    lr: LRPiece | None

    def describe(self) -> str:
        parts = [f"{self.steps} steps", f"seq_len {self.seq_len}"]
        if self.masking_rate is not None:
            a, b = self.masking_rate
            parts.append(f"masking {a:g}" + (f"→{b:g}" if b != a else ""))
        if self.rope_theta is not None:
            parts.append(f"RoPE θ {self.rope_theta:g}")
        if len(self.mixture) > 1 or self.mixture[0][0] != RUN_CORPUS:
            parts.append("mixture " + ", ".join(f"{c} {w:g}" for c, w in self.mixture))
        if self.lr is not None:
            parts.append(f"lr {self.lr.start:g}→{self.lr.end:g} ({self.lr.shape}"
                         + (f", warmup {self.lr.warmup}" if self.lr.warmup else "") + ")")
        return f"{self.name}: " + ", ".join(parts)


def _number(where: str, value, low: float, high: float, *, whole: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            value) or not low <= value <= high or (whole and not float(value).is_integer()):
        kind = "a whole number" if whole else "a number"
        raise InvalidArgument(f"{where}={value!r} must be {kind} between {low:g} and {high:g}")
    return int(value) if whole else float(value)


def parse_phases(raw, *, total_steps: int | None, seq_len: int, max_seq_len: int,
                 rope: bool | None, objective: str = "mlm") -> list[Phase]:
    """The config's `phases` list, checked field by field (errors name `phases[i].field`).

    `rope`: whether the run's model has RoPE (None: not known yet, checked at build time).
    """
    if not isinstance(raw, list) or not raw:
        raise InvalidArgument("phases must be a non-empty list of mappings (see "
                              "mlmkit.pretraining.phases)")
    phases = []
    for i, item in enumerate(raw):
        where = f"phases[{i}]"
        if not isinstance(item, dict):
            raise InvalidArgument(f"{where} must be a mapping of {', '.join(PHASE_KEYS)}")
        unknown = sorted(set(item) - set(PHASE_KEYS))
        if unknown:
            raise InvalidArgument(f"{where}: unknown field(s) {unknown}; valid: "
                                  f"{list(PHASE_KEYS)}")
        if "steps" not in item:
            raise InvalidArgument(f"{where}: give its steps")
        steps = _number(f"{where}.steps", item["steps"], 1, 10**15, whole=True)
        length = _number(f"{where}.seq_len", item.get("seq_len", seq_len), 8, max_seq_len,
                         whole=True)
        rate = item.get("masking_rate")
        if rate is not None:
            if objective == "diffusion":
                raise InvalidArgument(f"{where}.masking_rate: the diffusion objective draws "
                                      "its own rate per sequence; drop masking_rate")
            pair = rate if isinstance(rate, (list, tuple)) else [rate, rate]
            if len(pair) != 2:
                raise InvalidArgument(f"{where}.masking_rate={rate!r}: a rate or [start, end]")
            rate = tuple(_number(f"{where}.masking_rate", r, 0.0, 1.0) for r in pair)
            if min(rate) <= 0:
                raise InvalidArgument(f"{where}.masking_rate={item['masking_rate']!r} must "
                                      "be above 0")
        theta = item.get("rope_theta")
        if theta is not None:
            theta = _number(f"{where}.rope_theta", theta, 1.0, 1e12)
            if rope is False:
                raise InvalidArgument(f"{where}.rope_theta: the run's model family has no "
                                      "RoPE (absolute or relative positions); use a RoPE "
                                      "family (modernbert, ettin, mmbert, eurobert, neobert) "
                                      "or drop rope_theta")
        mixture = item.get("mixture", {RUN_CORPUS: 1.0})
        if not isinstance(mixture, dict) or not mixture:
            raise InvalidArgument(f"{where}.mixture must map corpora to weights, e.g. "
                                  "{corpus: 0.7, python-docs: 0.3}")
        weights = []
        for name, weight in mixture.items():
            if not isinstance(name, str) or not name.strip():
                raise InvalidArgument(f"{where}.mixture: {name!r} is not a corpus name")
            weights.append((name, _number(f"{where}.mixture[{name}]", weight, 0.0, 1e9)))
        total = sum(w for _, w in weights)
        if total <= 0:
            raise InvalidArgument(f"{where}.mixture: the weights add up to 0")
        mixture = tuple((n, w / total) for n, w in weights if w > 0)
        lr = item.get("lr")
        if lr is not None:
            if not isinstance(lr, dict) or set(lr) - set(LR_KEYS):
                raise InvalidArgument(f"{where}.lr must be a mapping of {', '.join(LR_KEYS)}")
            shape = lr.get("shape", "linear")
            if shape not in LR_SHAPES:
                raise InvalidArgument(f"{where}.lr.shape={shape!r}: use one of "
                                      f"{list(LR_SHAPES)}")
            lr = LRPiece(warmup=_number(f"{where}.lr.warmup", lr.get("warmup", 0), 0, steps,
                                        whole=True),
                         start=_number(f"{where}.lr.start", lr.get("start", 1.0), 0.0, 1.0),
                         end=_number(f"{where}.lr.end", lr.get("end", lr.get("start", 1.0)),
                                     0.0, 1.0),
                         shape=shape)
        name = item.get("name", f"phase {i + 1}")
        if not isinstance(name, str):
            raise InvalidArgument(f"{where}.name={name!r} must be text")
        phases.append(Phase(name, steps, length, rate, theta, mixture, lr))
    with_lr = [p.lr is not None for p in phases]
    if any(with_lr) and not all(with_lr):
        raise InvalidArgument("phases: give every phase an lr piece, or none (then --schedule "
                              "runs over the whole budget)")
    added = sum(p.steps for p in phases)
    if total_steps is None:
        raise InvalidArgument("phases need a --steps budget (their steps add up to it), not "
                              "--tokens or --time")
    if added != total_steps:
        raise InvalidArgument(f"phases: their steps add up to {added} "
                              f"({' + '.join(str(p.steps) for p in phases)}), not --steps "
                              f"{total_steps}: make them add up")
    return phases


def scale_phases(raw: list, steps: int) -> list:
    """A recipe's phases stretched to `steps` (largest remainders, each phase ≥ 1 step;
    lr warmups scale with their phase)."""
    old = [int(p["steps"]) for p in raw]
    total = sum(old)
    if steps < len(old):
        raise InvalidArgument(f"--steps {steps}: the recipe has {len(old)} phases; give at "
                              f"least {len(old)} steps")
    exact = [s * steps / total for s in old]
    new = [max(1, int(e)) for e in exact]
    order = sorted(range(len(old)), key=lambda i: exact[i] - int(exact[i]), reverse=True)
    i = 0
    while sum(new) != steps:
        j = order[i % len(order)]
        if sum(new) < steps:
            new[j] += 1
        elif new[j] > 1:
            new[j] -= 1
        i += 1
    out = []
    for phase, before, count in zip(raw, old, new, strict=True):
        phase = dict(phase, steps=count)
        if isinstance(phase.get("lr"), dict) and phase["lr"].get("warmup"):
            warm = round(phase["lr"]["warmup"] * count / max(before, 1))
            phase["lr"] = dict(phase["lr"], warmup=min(warm, count))
        out.append(phase)
    return out


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

    def __getitem__(self, indices):
        from mlmkit.corpus.packing import BlockBatch

        indices = np.asarray(indices, dtype=np.int64)
        offsets = self.offsets(self.current)
        which = np.searchsorted(offsets, indices, side="right") - 1
        parts, rows = [], []
        for k, blocks in enumerate(self.sources[self.current]):
            chosen = np.nonzero(which == k)[0]
            if len(chosen):
                parts.append(blocks[indices[chosen] - offsets[k]])
                rows.append(chosen)
        order = torch.from_numpy(np.argsort(np.concatenate(rows), kind="stable"))
        fields = ("input_ids", "attention_mask", "word_starts", "document_ids")
        return BlockBatch(*(torch.cat([getattr(p, f) for p in parts]).index_select(0, order)
                            for f in fields))


class PhaseOrder:
    """The rows of each step, split between the phase's corpora in exact proportion; each
    corpus of each phase has its own shuffled order (all saved in the checkpoint)."""

    def __init__(self, plan: PhasePlan, blocks: PhaseBlocks, seed: int):
        from mlmkit.corpus.packing import BlockOrder

        self.plan, self.blocks, self.seed = plan, blocks, seed
        self.orders = [[BlockOrder(len(b), seed=seed + 7919 * k) for k, b in enumerate(phase)]
                       for phase in blocks.sources]
        self.step = 0  # the step whose rows are drawn next (set by the run)
        self.last_counts: dict[str, int] = {}

    def counts(self, phase: int, batch_size: int) -> list[int]:
        from mlmkit.corpus.mixture import shares

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
                from mlmkit.models.rope import set_rope_theta

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
    from mlmkit.corpus.packing import PackedBlocks
    from mlmkit.corpus.shards import tokenize_corpus
    from mlmkit.pretraining.data import corpus_documents

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
    from mlmkit.models.rope import has_rope

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


def phase_limit(config) -> int:
    """The longest block a phase may ask: the model's positions."""
    from mlmkit.models.presets import PRESET_POSITIONS
    from mlmkit.pretraining.config import init_positions

    if config.init is not None:
        return init_positions(config.init) or PRESET_POSITIONS
    return PRESET_POSITIONS


def check_config_phases(config) -> None:
    """The config's phases, checked with what the config alone tells (PretrainConfig.validate):
    steps adding up to --steps, lengths within the model's positions, a RoPE θ only on a RoPE
    family (an --init model is checked when it is loaded)."""
    from mlmkit.models.presets import ROPE_FAMILIES, parse_preset

    if config.recipe is not None and (not isinstance(config.recipe, str)
                                      or not config.recipe.strip()):
        raise InvalidArgument(f"recipe={config.recipe!r} must be a recipe name")
    rope = None
    if config.init is None:
        family, _ = parse_preset(config.model)
        rope = family in ROPE_FAMILIES
    parse_phases(config.phases, total_steps=config.steps, seq_len=config.seq_len,
                 max_seq_len=phase_limit(config), rope=rope, objective=config.objective)
