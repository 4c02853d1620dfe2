"""A training run as one object: `build_run(config) -> Run`.

`Run` holds what a run is made of — model(s) inside the objective, optimizer, data order,
learning-rate schedule, counters and the window of metrics since the last log line —
with `state_dict()` / `load_state_dict()` for exact resume, and `step()`, one optimizer
step. `build_run` checks the whole config and builds everything, and writes nothing into
the run directory: `Run.open_directory` does that, once the run is known to be sound.
`mlmkit.pretraining.loop.pretrain` drives it.

Everything random derives from the config's seed, and the state holds the RNG states and
the data position, so a resumed run continues bit-for-bit.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from mlmkit.core.progress import status, warn
from mlmkit.core.run_layout import step_folder_name
from mlmkit.core.staging import write_text as atomic_write_text  # fsynced, umask
from mlmkit.corpus.packing import BlockOrder
from mlmkit.errors import InvalidArgument, MlmkitError, RunError
from mlmkit.masking.config import check_masking
from mlmkit.models import load_mlm
from mlmkit.models.preset_table import input_tokens, parse_preset
from mlmkit.models.unpadded import (
    ROTARY_FAMILIES,
    check_unpadded_family,
    check_unpadded_model,
    flex_attention_available,
)
from mlmkit.models.varlen_attention import attention_dropout
from mlmkit.pretraining.budget import Budget
from mlmkit.pretraining.config import AUTO, MAX_VOCAB_SIZE, MIN_VOCAB_SIZE, PretrainConfig
from mlmkit.pretraining.data import (
    build_data,
    eval_blocks,
    global_counts,
    prepare_rows,
    rank_rows,
    resolve_tokenizer,
)
from mlmkit.pretraining.extension import STABLE_DIR, continuation
from mlmkit.pretraining.guards import batch_repeats_warning, check_step_memory, tiny_lr_warning
from mlmkit.pretraining.hooks import EvaluationHook
from mlmkit.pretraining.micro_batch import check_auto_batch, fit_micro_batch
from mlmkit.pretraining.phases import attach_phases
from mlmkit.pretraining.plots import plots_installed
from mlmkit.pretraining.prefetch import BatchProducer, can_prefetch, prefetch_depth
from mlmkit.pretraining.run_readme import write_run_readme
from mlmkit.pretraining.run_state import (
    check_fingerprints,
    check_finite,
    clear_run,
    drop_tokenizer_files,
    fingerprints,
    resume_config,
    run_tokenizer,
    save_run_tokenizer,
    stored_config,
)
from mlmkit.pretraining.static_shapes import check_static_shapes
from mlmkit.training.checkpoint import (
    list_states,
    load_latest_state,
    prune_step_dirs,
    remove_leftovers,
    save_model_dir,
    save_state,
)
from mlmkit.training.fsdp import (
    enable_activation_checkpointing,
    export_final,
    load_sharded,
    save_run,
    save_sharded,
)
from mlmkit.training.fsdp import evaluate as evaluate_sharded
from mlmkit.training.launch import build_runtime_from_env
from mlmkit.training.metrics_log import MetricsLog
from mlmkit.training.objective import Objective
from mlmkit.training.objectives import OBJECTIVES, build_objective
from mlmkit.training.optimizer import build_optimizer
from mlmkit.training.runtime import Runtime, threads_chosen_by_load
from mlmkit.training.schedule import Schedule
from mlmkit.training.signals import StepInterrupted, StopOnSignal

DEFAULT_RUN_DIR = Path("runs/pretrain")


@dataclass
class TrainState:
    """Counters of the run (saved with the checkpoint)."""

    step: int = 0
    tokens: int = 0
    elapsed: float = 0.0  # seconds spent in training steps (not evaluation or saving)
    stable_step: int | None = None  # WSD: the step whose state was kept as the stable one


class MetricsWindow:
    """Metrics summed over the steps since the last log line (float64), with their tokens
    and seconds; `flush` turns them into one log record's averages."""

    def __init__(self):
        self.sums: dict[str, torch.Tensor] = {}
        self.count = 0
        self.tokens, self.seconds, self.data_seconds = 0, 0.0, 0.0

    def add(self, metrics: dict[str, torch.Tensor]) -> None:
        """One micro-step's metric contributions (shares of the step's value)."""
        for key, value in metrics.items():
            self.sums[key] = self.sums.get(key, 0.0) + value.detach().double()

    def end_step(self, tokens: int, seconds: float, data_seconds: float = 0.0) -> None:
        self.count += 1
        self.tokens += tokens
        self.seconds += seconds
        self.data_seconds += data_seconds

    def flush(self, runtime: Runtime) -> dict[str, float]:
        """The mean of each metric over the window's steps and processes; then empty."""
        values = {k: runtime.sum(float(v)) / self.count for k, v in self.sums.items()}
        values["tokens_per_s"] = self.tokens / max(self.seconds, 1e-9)
        # the share of the steps' time spent building or waiting for their batches
        values["data_wait"] = self.data_seconds / max(self.seconds, 1e-9)
        self.__init__()
        return values

    def state_dict(self) -> dict:
        return {"sums": {k: float(v) for k, v in self.sums.items()}, "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        self.sums = {k: torch.tensor(v, dtype=torch.float64) for k, v in state["sums"].items()}
        self.count = state["count"]


@dataclass
class Run:
    """Everything a training run is made of, and one optimizer step of it."""

    config: PretrainConfig
    run_dir: Path
    runtime: Runtime
    tokenizer: object
    data: object  # mlmkit.pretraining.data.PretrainData
    validation: list
    objective: Objective
    optimizer: torch.optim.Optimizer
    order: BlockOrder
    budget: Budget
    schedule: Schedule
    state: TrainState = field(default_factory=TrainState)
    window: MetricsWindow = field(default_factory=MetricsWindow)
    history: list[dict] = field(default_factory=list)
    resumed: bool = False
    log: MetricsLog | None = None
    last_lr: float = 0.0
    last_grad_norm: float | None = None
    restart: bool = False  # --restart: the old run in run_dir is removed when it opens
    last_saved: int | None = None  # the step of the newest training state on disk
    phases: object = None  # mlmkit.pretraining.phases.PhaseRuntime when the config has phases
    plots: bool = False  # matplotlib and tensorboard are installed: plots and TensorBoard logs
    data_seconds: float = 0.0  # this process's time reading and masking its rows
    step_seconds: float = 0.0  # this process's time in steps (since it started or resumed)
    producer: BatchProducer | None = None  # --prefetch: the next steps' batches, built ahead

    # ---- what the loop asks
    @property
    def is_main(self) -> bool:
        return self.runtime.is_main

    @property
    def parameters(self) -> list[torch.nn.Parameter]:
        """The trainable parameters, each once (modules may share some)."""
        seen, params = set(), []
        for module in self.objective.modules.values():
            for p in module.parameters():
                if p.requires_grad and id(p) not in seen:
                    seen.add(id(p))
                    params.append(p)
        return params

    @property
    def prefetch(self) -> int:
        """The steps built ahead: --prefetch, or the default of the run's device."""
        return prefetch_depth(self.config.prefetch, self.runtime.device)

    @property
    def micro_batch(self) -> int:
        return self.batch_size() // self.config.grad_accum // self.runtime.world_size

    def batch_size(self) -> int:
        """This step's global batch: --batch-size, or during a batch-size warm-up a batch
        that grows with the tokens trained on (`batch_warmup_size`)."""
        return batch_warmup_size(self.config, self.state.tokens, self.runtime.world_size)

    def progress(self) -> float:
        return self.budget.progress(self.state.step, self.state.tokens, self.state.elapsed)

    def done(self) -> bool:
        return self.progress() >= 1.0

    def learning_rate(self) -> float:
        piece = self.phases.lr_factor(self.state.step) if self.phases is not None else None
        return self.config.lr * (self.schedule.factor(self.progress()) if piece is None
                                 else piece)

    # ---- one optimizer step
    def interruptible(self) -> bool:
        """Whether a signal may drop a step under way (`StopOnSignal.abortable`): one
        process (the others would wait in a collective) building its batches in the step
        (a prefetching thread has moved on to later ones)."""
        return self.runtime.world_size == 1 and not self.prefetch

    def step(self, stop: StopOnSignal | None = None) -> None:
        """Train on the next global batch: corrupt it, forward and backward this process's
        micro-batches (losses divided by the step's totals), clip, update.

        With `stop` (and `interruptible()`), a first signal during the batch or the forward
        and backward passes raises `StepInterrupted` at once, with the step undone (data
        position, random state, metrics, gradients): the state is that of the last
        finished step, which the loop then saves."""
        state = self.state
        started = time.perf_counter()
        if self.phases is not None:  # the phase of this step: its data, θ, rate
            self.phases.enter(state.step)
        self.last_lr = lr = self.learning_rate()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        if stop is None or not self.interruptible():
            n_tokens, waited = self._forward_backward()
        else:
            before = self._step_snapshot()
            try:
                with stop.abortable():
                    n_tokens, waited = self._forward_backward()
            except StepInterrupted:
                self._undo_step(before)
                raise
        self._update(started, n_tokens, waited)

    def _step_snapshot(self) -> dict:
        """What the abortable part of a step moves: cheap to copy (two counters, the RNG
        state, the metric sums)."""
        return {"order": self.order.state_dict(), "rng": _rng_state(self.runtime),
                "window": dict(self.window.sums), "data_seconds": self.data_seconds}

    def _undo_step(self, before: dict) -> None:
        self.order.load_state_dict(before["order"])
        _set_rng_state(before["rng"], self.runtime)
        self.window.sums = before["window"]
        self.data_seconds = before["data_seconds"]
        self.optimizer.zero_grad(set_to_none=True)

    def _forward_backward(self) -> tuple[int, float]:
        """Read and corrupt this step's batch, forward and backward each micro-batch;
        (the step's tokens, the seconds spent building or waiting for the batch)."""
        config, runtime, state = self.config, self.runtime, self.state
        # this rank reads, masks and collates only its rows (train/data.py: prepare_rows)
        batch_size = self.batch_size()  # --batch-size, or smaller in a batch warm-up
        indices = self.order.next_indices(batch_size)
        data_started = time.perf_counter()
        producer = self.batch_producer()
        if producer is not None:  # built ahead on a thread: only the wait counts
            prepared, n_tokens, waited = producer.take(state.step, indices, self.order)
        else:
            prepared, n_tokens = prepare_rows(
                self.objective, self.data.train, indices,
                rank_rows(batch_size, runtime.rank, runtime.world_size), state.step,
                config.seed, stream=config.mask_stream, device=runtime.device)
            waited = time.perf_counter() - data_started
        self.data_seconds += waited
        totals, n_tokens = global_counts(runtime, prepared.counts, n_tokens)
        micro = torch.arange(len(prepared.tensors["input_ids"])).split(self.micro_batch)
        for i, rows in enumerate(micro):
            if config.cuda_graphs:  # a new replay: the last one's outputs were read
                torch.compiler.cudagraph_mark_step_begin()
            with runtime.no_sync(self.objective, last_micro_step=i == len(micro) - 1):
                tensors = prepared.rows(rows, runtime.device)
                with runtime.autocast():
                    out = self.objective.loss(tensors, totals)
                out.loss.backward()
            self.window.add(out.metrics)
        return n_tokens, waited

    def _update(self, started: float, n_tokens: int, waited: float) -> None:
        """Clip, check and apply the gradients; count the step."""
        config, runtime, state = self.config, self.runtime, self.state
        # the gradient norm (the same on every process after DDP's all-reduce) is checked
        # every step: a NaN/inf loss or gradient stops the run before the update
        norm = torch.nn.utils.clip_grad_norm_(self.parameters,
                                              config.clip if config.clip > 0 else math.inf)
        if hasattr(norm, "full_tensor"):  # FSDP: a sharded (DTensor) norm
            norm = norm.full_tensor()
        self.last_grad_norm = float(norm) if config.clip > 0 else None
        check_finite(float(norm), "gradient norm (the loss or a gradient overflowed)",
                     state.step, self.run_dir, self.last_saved)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.objective.after_step(state.step)
        state.step += 1
        state.tokens += n_tokens
        if state.step % config.log_every == 0 or self.done():
            runtime.synchronize()
        # the slowest process's step time, so that time budgets end on the same step
        seconds = runtime.max(time.perf_counter() - started)
        state.elapsed += seconds
        self.window.end_step(n_tokens, seconds, waited)
        self.step_seconds += seconds

    def batch_producer(self) -> BatchProducer | None:
        """The background producer of --prefetch (started at the first step), or None when
        batches are built in the step (no --prefetch, or `can_prefetch` says why not)."""
        if self.producer is None and self.prefetch and can_prefetch(
                self.config, self.objective, self.phases) is None:
            self.producer = BatchProducer(
                self.objective, self.data.train, depth=self.prefetch,
                batch_size=self.config.batch_size, runtime=self.runtime,
                seed=self.config.seed, stream=self.config.mask_stream)
        return self.producer

    def stop_producer(self) -> None:
        if self.producer is not None:
            self.producer.close()
            self.producer = None

    # ---- records
    def record(self, record: dict) -> None:
        """Keep a metrics record (rank 0 writes it to metrics.jsonl and TensorBoard)."""
        if self.log is not None:
            self.log.log(record)
        else:
            self.history.append(record)

    def train_record(self) -> dict:
        """The log record of the steps since the last one (averaged over the window)."""
        values = self.window.flush(self.runtime)
        rate = values.pop("tokens_per_s")
        record = {"step": self.state.step, "split": "train", **values, "lr": self.last_lr,
                  "tokens": self.state.tokens, "tokens_per_s": rate,
                  "elapsed": self.state.elapsed}
        if self.last_grad_norm is not None:
            record["grad_norm"] = self.last_grad_norm
        if self.is_main:
            self.record(record)
        if not math.isfinite(values.get("loss", 0.0)):
            raise MlmkitError(f"the loss is {values['loss']} at step {self.state.step}: "
                              "lower --lr or use --precision fp32")
        return record

    def evaluate(self) -> dict:
        """Held-out metrics (rank 0 only; the other ranks go on to the next step)."""
        with torch.random.fork_rng(devices=[]):  # evaluation never moves the training RNG
            if getattr(self.runtime, "sharded", False):  # FSDP: every rank (train/fsdp.py)
                metrics = evaluate_sharded(self)
                metrics = metrics if self.is_main else {}
            else:
                metrics = (self.objective.evaluate(self.validation, self.data.sentences)
                           if self.is_main else {})
        record = {"step": self.state.step, "split": "eval", **metrics}
        if self.is_main and metrics:
            self.record(record)
        return record

    # ---- state
    def state_dict(self, weights: bool = True) -> dict:
        """Everything needed to continue bit-for-bit (the checkpoint's content); without
        `weights` (FSDP: DCP writes them) no modules or optimizer."""
        return {
            **({"modules": {n: m.state_dict() for n, m in self.objective.modules.items()},
                "optimizer": self.optimizer.state_dict()} if weights else {}),
            "objective": self.objective.state_dict(),
            "data": self.order.state_dict(), "counters": vars(self.state).copy(),
            "history": list(self.log.history if self.log is not None else self.history),
            "rng": _rng_state(self.runtime), "config": self.config.to_dict(),
            "schedule": self.schedule.state_dict(),
            # what resume compares against (run_state): the token ids' sources
            "fingerprints": fingerprints(self.tokenizer, self.data),
            # metrics of steps since the last log line, so that line averages the same steps
            "pending": self.window.state_dict(),
            # a batch-size warm-up's sizes round to grad-accum x processes (batch_warmup_size)
            "processes": self.runtime.world_size,
            # the precision the steps ran in ("auto" resolved on their device)
            "precision": self.runtime.precision,
            # --batch-tokens auto: the measured micro-batch, which a resume keeps
            **({"micro_batch": {"rows": self.config.batch_size // self.config.grad_accum
                                // self.runtime.world_size,
                                "grad_accum": self.config.grad_accum}}
               if self.config.batch_tokens == AUTO else {}),
        }

    def load_state_dict(self, state: dict) -> None:
        if "sharded" in state:  # saved under FSDP: re-sharded for this run (train/fsdp.py)
            load_sharded(self, state)
        else:
            for name, module in self.objective.modules.items():
                module.load_state_dict(state["modules"][name])
            self.optimizer.load_state_dict(state["optimizer"])
        saved_world = state.get("processes", self.runtime.world_size)
        if (self.config.batch_warmup_tokens and saved_world != self.runtime.world_size
                and state["counters"]["tokens"] < self.config.batch_warmup_tokens):
            raise InvalidArgument(
                f"this run was saved inside its batch-size warm-up on {saved_world} "
                f"process(es), whose batch sizes round to --grad-accum x processes: resume it "
                f"on {saved_world} process(es) (after the warm-up any number works)")
        self.objective.load_state_dict(state["objective"])
        self.order.load_state_dict(state["data"])
        self.state = TrainState(**state["counters"])
        self.history = list(state["history"])
        self.window.load_state_dict(state["pending"])
        if "schedule" in state:
            self.schedule = Schedule.from_state(state["schedule"])
        _set_rng_state(state["rng"], self.runtime)
        self.resumed = True
        before = state.get("precision")  # None: a state of an older version
        if before is not None and before != self.runtime.precision and self.is_main:
            warn(f"--resume {str(self.run_dir)!r}: the run trained in {before} and continues "
                 f"in {self.runtime.precision} (--precision {self.config.precision} on "
                 f"{self.runtime.device.type}): allowed, but its losses from here are not "
                 "those of a run that was never stopped")

    # ---- the run directory (rank 0)
    def open_directory(self) -> None:
        """Create the run directory, write config.yaml and open the metrics log."""
        if not self.is_main:
            return
        if self.restart:
            clear_run(self.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        remove_leftovers(self.run_dir)  # what killed saves left behind
        save_run_tokenizer(self.tokenizer, self.run_dir)  # resume loads this one
        atomic_write_text(self.run_dir / "config.yaml", self.config_record())
        write_run_readme(self.run_dir, self.config)
        self.plots = plots_installed()  # without them: one warning, metrics.jsonl only
        self.log = MetricsLog(self.run_dir, self.history,
                              resume_step=self.state.step if self.resumed else None,
                              tensorboard=self.plots)

    def config_record(self) -> str:
        """config.yaml: the config (which `--config` accepts back), under comments that say
        what `auto` and the defaults resolved to on this machine."""
        runtime = self.runtime
        threads = (f", {torch.get_num_threads()} CPU thread(s)"
                   + (" (the usable cores less those the load average said were busy)"
                      if threads_chosen_by_load(self.config.threads) else "")
                   if runtime.device.type == "cpu" else "")
        return (f"# the config of this run (mlmkit pretrain --config accepts it back)\n"
                f"# resolved here: device {runtime.device}, precision {runtime.precision}"
                f"{threads}, {runtime.world_size} process(es); tokenizer of "
                f"{len(self.tokenizer):,} tokens\n" + self.config.to_yaml())

    def save(self, with_model_dir: bool = False) -> None:
        """Save the training state (and a step-N model folder)."""
        if getattr(self.runtime, "sharded", False):  # FSDP: every rank writes (DCP)
            return save_run(self, with_model_dir)
        if not self.is_main:
            return
        save_state(self.run_dir, self.state.step, self.state_dict(),
                   keep=self.config.keep_checkpoints)
        self.last_saved = self.state.step
        if with_model_dir:
            save_model_dir(self.save_step_model,
                           self.run_dir / step_folder_name(self.state.step))
        prune_step_dirs(self.run_dir, self.config.keep_checkpoints)

    def save_step_model(self, directory: Path) -> None:
        """The model of this step in Hugging Face format, without the tokenizer: the run
        stores it once, in RUN/tokenizer/ (`mlmkit.load` finds it from a step folder)."""
        self.objective.save_pretrained(directory)
        drop_tokenizer_files(directory, self.run_dir)

    def keep_stable_state(self) -> bool:
        """WSD: at the first step of the decay, keep the state as the end of the stable
        phase, the point an extension of the run continues from. True when it did."""
        if self.state.stable_step is not None or not self.schedule.in_decay(self.progress()):
            return False
        self.state.stable_step = self.state.step
        if getattr(self.runtime, "sharded", False):  # FSDP: every rank writes (DCP)
            save_sharded(self, self.run_dir / STABLE_DIR, keep=1)
        elif self.is_main:
            save_state(self.run_dir / STABLE_DIR, self.state.step, self.state_dict(), keep=1)
        return True

    def save_final(self) -> Path | None:
        """The final model folder in Hugging Face format (with the run's config)."""
        def save(directory: Path) -> None:
            self.objective.save_pretrained(directory)
            atomic_write_text(Path(directory) / "mlmkit_pretrain.yaml", self.config.to_yaml())

        if getattr(self.runtime, "sharded", False):  # FSDP: full weights gathered first
            return export_final(self, save)
        if not self.is_main:
            return None
        return save_model_dir(save, self.run_dir / "final")


def batch_warmup_size(config: PretrainConfig, tokens: int, world_size: int = 1) -> int:
    """The global batch of a step that starts after `tokens` tokens.

    Batch-size warm-up (ModernBERT: 768 → 4,608 sequences over the first 50B tokens): the
    batch grows linearly from `batch_warmup_start` (default --batch-size / 8) to
    --batch-size over the first `batch_warmup_tokens` tokens, rounded down to a multiple of
    grad-accum × processes so every micro-step of every process gets the same number of
    rows. A function of the run's token count (which the checkpoint holds) and of
    grad-accum × processes: a resumed run takes the same batches on the same number of
    processes (`Run.load_state_dict` refuses another number inside the warm-up).
    """
    full, total = config.batch_size, config.batch_warmup_tokens
    if not total or tokens >= total:
        return full
    unit = config.grad_accum * world_size
    start = config.batch_warmup_start or full // 8
    start = max(unit, start // unit * unit)
    size = start + (full - start) * tokens // total
    return min(full, max(start, size // unit * unit))


def _rng_state(runtime: Runtime) -> dict:
    state = {"torch": torch.get_rng_state()}
    if runtime.device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(runtime.device)
    return state


def _set_rng_state(state: dict, runtime: Runtime) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and runtime.device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], runtime.device)


# ---- building a run


def holds_run(run_dir: Path) -> bool:
    return bool(list_states(run_dir)) or (run_dir / "final").exists()


def free_run_dir(base: Path) -> Path:
    """`base`, or `base-2`, `base-3`, ... : the first that holds no run yet."""
    candidate, number = base, 1
    while holds_run(candidate):
        number += 1
        candidate = base.with_name(f"{base.name}-{number}")
    return candidate


def prepare_run(config: PretrainConfig | None, resume: str | Path | None,
                overrides: dict | None = None, restart: bool = False
                ) -> tuple[PretrainConfig, Path, dict | None]:
    """The config, run directory and (when resuming) the training state to continue from.

    A new run refuses a directory that already holds a run (unless `restart`); a resumed
    run continues the config stored in its checkpoint, refusing a change to a field of
    what is studied (model, data, masking, optimizer), by name; budget, evaluation and
    runtime fields may change (see `mlmkit.pretraining.run_state`). Nothing is written.
    """
    overrides = dict(overrides or {})
    if resume is None:
        if config is None:
            config = PretrainConfig(**overrides)
        elif overrides:
            config = config.replace(**overrides)
        if config.run_dir is None:  # --restart: the default directory itself
            config = config.replace(run_dir=str(DEFAULT_RUN_DIR if restart
                                                else free_run_dir(DEFAULT_RUN_DIR)))
        run_dir = Path(config.run_dir)
        if holds_run(run_dir) and not restart:
            raise RunError(f"run directory {str(run_dir)!r} already holds a run: continue "
                           f"it with --resume --run-dir {run_dir}, start it over with --restart, or "
                           "choose another --run-dir")
        return config, run_dir, None
    if restart:
        raise InvalidArgument("give --resume or --restart, not both: --restart starts the "
                              "run over, --resume continues it")
    run_dir = Path(resume)
    if not (run_dir / "config.yaml").is_file() and not list_states(run_dir):
        raise RunError(f"--resume {str(run_dir)!r}: no config.yaml there; it is not a run "
                       "directory of mlmkit pretrain")
    state, _ = load_latest_state(run_dir)
    config = resume_config(stored_config(state, run_dir), config, overrides, run_dir)
    return config, run_dir, state


def recorded_vocabulary(config: PretrainConfig, tokenizer) -> PretrainConfig:
    """The config with `vocab_size` the size of the tokenizer the run uses (a --tokenizer or
    --init one, or the one it trained, rounded up to a multiple of 64), so that config.yaml
    records what was used. A protein alphabet (fewer than 64 symbols) leaves it as given."""
    size = len(tokenizer)
    if size == config.vocab_size or not MIN_VOCAB_SIZE <= size <= MAX_VOCAB_SIZE:
        return config
    return config.replace(vocab_size=size)


def check_flex_attention(config: PretrainConfig, device) -> None:
    """--flex-attention: a torch with FlexAttention, unpadded rows, a device with
    FlexAttention's backward pass, and no attention dropout (transformers' FlexAttention
    path has none; the BERT-shaped presets keep 0.1 unless --dropout says otherwise)."""
    if not flex_attention_available():
        raise InvalidArgument(f"--flex-attention: torch {torch.__version__} has no "
                              "FlexAttention (torch 2.5 or newer): upgrade torch or drop "
                              "--flex-attention")
    if not config.unpadded:
        raise InvalidArgument("--flex-attention is the kernel of unpadded attention: add "
                              "--unpadded or drop --flex-attention")
    if config.dropout:
        raise InvalidArgument(f"--flex-attention with --dropout {config.dropout}: "
                              "FlexAttention has no attention dropout; use --dropout 0")
    if config.dropout is None and config.init is None and \
            parse_preset(config.model)[0] not in ROTARY_FAMILIES:
        raise InvalidArgument(f"--flex-attention: --model {config.model} trains with "
                              "attention dropout 0.1 and FlexAttention has none: add "
                              "--dropout 0")
    if device is not None and torch.device(device).type == "cpu":
        raise InvalidArgument("--flex-attention: FlexAttention has no backward pass on a "
                              "CPU: train on a GPU (--device cuda) or drop --flex-attention")


def check_config(config: PretrainConfig, world_size: int,
                 evaluation: EvaluationHook | None = None, runtime_device=None) -> None:
    """What the config alone can say is wrong with the run, before any work or writing."""
    if config.eval_suite:  # checked now: the suite first runs after training steps
        if evaluation is None:
            raise InvalidArgument(f"eval_suite={config.eval_suite!r} (--eval-suite) needs the "
                                  "evaluation suite: call mlmkit.pretrain or `mlmkit "
                                  "pretrain`, or pass evaluation=mlmkit.evaluation.training."
                                  "SuiteEvaluation()")
        if not config.eval_every:
            raise InvalidArgument(f"--eval-suite {config.eval_suite!r} runs at each "
                                  "evaluation, and --eval-every 0 asks for none: give "
                                  "--eval-every N")
        evaluation.check(config)
    if config.objective not in OBJECTIVES:
        raise InvalidArgument(f"--objective {config.objective!r} is unknown: use one of "
                              f"{sorted(OBJECTIVES)}")
    if config.batch_size % (config.grad_accum * world_size):
        raise InvalidArgument(f"--batch-size {config.batch_size} is not a multiple of "
                              f"--grad-accum × processes ({config.grad_accum} × {world_size})")
    Schedule.from_config(config)  # e.g. --warmup in steps without a --steps budget
    if config.parallel == "fsdp" and world_size > 1 and (
            config.optimizer != "adamw" or config.decoupled_weight_decay):
        raise InvalidArgument("--optimizer stableadamw and --decoupled-weight-decay are not "
                              "supported with --parallel fsdp yet: use --parallel ddp")
    if config.unpadded:  # packed rows, attention within each document
        if config.objective != "mlm":
            raise InvalidArgument(f"--unpadded trains --objective mlm only, not "
                                  f"{config.objective!r}: drop --unpadded")
        if config.packing != "full":
            raise InvalidArgument("--unpadded packs documents into rows without padding: use "
                                  f"--packing full (not {config.packing})")
        if config.init is None:
            check_unpadded_family(parse_preset(config.model)[0])
    if config.flex_attention:
        check_flex_attention(config, runtime_device)
    check_auto_batch(config, world_size)
    check_static_shapes(config, runtime_device)
    if config.masking not in (None, "default"):
        try:
            check_masking(config.masking, flag_name="--masking", total_steps=config.steps)
        except InvalidArgument:
            raise
        except (MlmkitError, TypeError, KeyError) as error:
            raise InvalidArgument(f"--masking: {error}") from error


def check_sizes(config: PretrainConfig, runtime: Runtime, data, objective,
                schedule: Schedule, memory_measured: bool = False) -> None:
    """The batch against the data and the memory (unless `memory_measured`: --batch-tokens
    auto measured the step's), and the schedule against the budget, before the first step
    (`mlmkit.pretraining.guards`)."""
    warnings_ = [batch_repeats_warning(config.batch_size, len(data.train), config.seq_len),
                 tiny_lr_warning(config, schedule)]
    if runtime.is_main:
        for line in filter(None, warnings_):
            warn(line)
    if memory_measured:
        return
    modules = list(objective.modules.values())
    check_step_memory(
        config, [m.config for m in modules if hasattr(m, "config")],
        sum(p.numel() for m in modules for p in m.parameters()),
        micro_rows=config.batch_size // config.grad_accum // runtime.world_size,
        step_rows=config.batch_size // runtime.world_size, precision=runtime.precision,
        device=runtime.device, shards=runtime.world_size if config.parallel == "fsdp" else 1)


def build_run(config: PretrainConfig | None = None, *, resume: str | Path | None = None,
              overrides: dict | None = None, runtime: Runtime | None = None,
              restart: bool = False, evaluation: EvaluationHook | None = None) -> Run:
    """The run `config` describes (or the run in `resume`, continued), ready to step.

    Every check happens here, before anything is written to the run directory;
    `evaluation` is the hook that runs `config.eval_suite` (`mlmkit.pretraining.hooks`).
    """
    config, run_dir, saved = prepare_run(config, resume, overrides, restart)
    runtime = runtime or build_runtime_from_env(config.device, config.precision,
                                                config.threads, parallel=config.parallel)
    check_config(config, runtime.world_size, evaluation, runtime.device)
    schedule = Schedule.from_config(config)
    if saved is not None:
        saved, schedule = continuation(saved, config, run_dir, runtime.is_main)
    show = config.progress and runtime.is_main
    init_model = None
    if config.init:
        init_model = load_mlm(config.init, device="cpu",
                              allow_untrained_head=config.allow_untrained_head).model.train()
        if config.unpadded:  # the loaded model must support unpadded attention
            check_unpadded_model(init_model)
        if config.flex_attention and config.dropout is None and \
                attention_dropout(init_model.config) > 0:
            raise InvalidArgument(f"--flex-attention: --init {config.init!r} trains with "
                                  f"attention dropout {attention_dropout(init_model.config)}"
                                  " and FlexAttention has none: add --dropout 0")
        limit = getattr(init_model.config, "max_position_embeddings", None)
        if limit is not None:
            limit = input_tokens(limit, init_model.config.model_type,
                                 getattr(init_model.config, "pad_token_id", None))
        if limit is not None and config.seq_len > limit:
            raise InvalidArgument(f"--seq-len {config.seq_len} is longer than --init "
                                  f"{config.init!r} allows ({limit} tokens)")
    if not runtime.is_main:  # distributed: rank 0 trains the tokenizer and fills the caches
        runtime.barrier()
    # a resumed run reads the tokenizer it stored (older runs: resolved as they were)
    tokenizer = (run_tokenizer(run_dir) if saved is not None else None) or \
        resolve_tokenizer(config, show_progress=show)
    if saved is None:
        config = recorded_vocabulary(config, tokenizer)
    data = build_data(config, tokenizer, show_progress=show)
    if saved is not None:
        check_fingerprints(saved, fingerprints(tokenizer, data), config, run_dir)
    if runtime.is_main:
        runtime.barrier()
    objective = build_objective(config, tokenizer, runtime, init_model=init_model)
    if config.activation_checkpointing:
        enable_activation_checkpointing(objective)
    if config.compile:
        objective.compile()
    config, measured = fit_micro_batch(config, runtime, objective, data, saved)  # auto
    objective.config = config
    check_sizes(config, runtime, data, objective, schedule, memory_measured=measured)
    runtime.wrap_objective(objective)  # DDP around the objective's loss (distributed only)
    optimizer = build_optimizer(objective.modules, lr=config.lr,
                                weight_decay=config.weight_decay,
                                betas=(config.beta1, config.beta2), eps=config.eps,
                                device=runtime.device, kind=config.optimizer,
                                decoupled=config.decoupled_weight_decay)
    run = Run(config=config, run_dir=run_dir, runtime=runtime, tokenizer=tokenizer, data=data,
              validation=eval_blocks(data, config.eval_blocks, config.batch_size),
              objective=objective, optimizer=optimizer,
              order=BlockOrder(len(data.train), seed=config.seed),
              budget=Budget.from_config(config), schedule=schedule, restart=restart)
    if config.phases is not None:  # every phase's data and order, before the state loads
        attach_phases(run, say=status if config.progress and runtime.is_main else None)
    if saved is not None:  # continue exactly where the saved state stopped
        run.load_state_dict(saved)
        run.schedule = schedule
        run.last_saved = run.state.step
    else:
        torch.manual_seed(config.seed)  # dropout; the model was initialised from the seed
    return run
