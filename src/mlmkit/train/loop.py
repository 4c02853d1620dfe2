"""The pretraining loop, top to bottom: data, objective, AdamW, schedule, evaluate, save.

    for each step until the budget is spent:
        set the learning rate from the budget's progress
        take the next blocks, let the objective corrupt them (counting masked tokens)
        forward + backward every micro-batch (loss divided by the step's totals)
        clip, step, log; evaluate / checkpoint every N steps; stop cleanly on a signal

Everything random derives from the config's seed, and the training state holds the RNG
states and the data position, so a resumed run continues bit-for-bit.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from mlmkit.cache import atomic_write_text
from mlmkit.corpus.packing import BlockOrder
from mlmkit.errors import MlmkitError
from mlmkit.objectives import build_objective
from mlmkit.train.budget import Budget
from mlmkit.train.checkpoint import (
    list_states,
    load_latest_state,
    prune_step_dirs,
    save_model_dir,
    save_state,
)
from mlmkit.train.config import STUDIED, PretrainConfig, flag, load_config
from mlmkit.train.data import build_data, eval_blocks, resolve_tokenizer
from mlmkit.train.distributed import build_runtime_from_env
from mlmkit.train.metrics_log import MetricsLog
from mlmkit.train.optimizer import build_optimizer
from mlmkit.train.plots import plot_history
from mlmkit.train.progress import TrainProgress
from mlmkit.train.runtime import Runtime
from mlmkit.train.schedule import lr_factor, warmup_share
from mlmkit.train.signals import StopOnSignal

logger = logging.getLogger(__name__)


@dataclass
class PretrainResult:
    """Where a run's outputs are and how it ended."""

    run_dir: Path
    final_dir: Path | None
    summary: dict
    history: list[dict] = field(default_factory=list)

    @property
    def interrupted(self) -> bool:
        return self.summary.get("status") == "interrupted"


@dataclass
class TrainState:
    """Counters of the run (saved with the checkpoint)."""

    step: int = 0
    tokens: int = 0
    elapsed: float = 0.0  # seconds spent in training steps (not evaluation or saving)


DEFAULT_RUN_DIR = Path("runs/pretrain")


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
                overrides: dict | None = None) -> tuple[PretrainConfig, Path, dict | None]:
    """The config, run directory and (when resuming) the training state to continue from.

    A new run refuses a directory that already holds a run; a resumed run refuses a
    config that differs from the directory's in what is studied (model, data, masking,
    optimizer); budget and runtime fields may change. Nothing is written on refusal.
    """
    overrides = dict(overrides or {})
    if resume is None:
        if config is None:
            config = PretrainConfig(**overrides)
        elif overrides:
            config = config.replace(**overrides)
        if config.run_dir is None:
            config = config.replace(run_dir=str(free_run_dir(DEFAULT_RUN_DIR)))
        run_dir = Path(config.run_dir)
        if holds_run(run_dir):
            raise MlmkitError(f"run directory {str(run_dir)!r} already holds a run: continue "
                              f"it with --resume {run_dir}, or choose another --run-dir")
        return config, run_dir, None
    run_dir = Path(resume)
    saved_path = run_dir / "config.yaml"
    if not saved_path.is_file():
        raise MlmkitError(f"--resume {str(run_dir)!r}: no config.yaml there; it is not a run "
                          "directory of mlmkit pretrain")
    saved = load_config(saved_path)
    wanted = (config.replace(**overrides) if config is not None
              else saved.replace(**overrides))
    differences = [f"{flag(k)}: {saved.studied()[k]!r} in the run, {v!r} now"
                   for k, v in wanted.studied().items() if saved.studied()[k] != v]
    if differences:
        raise MlmkitError(f"--resume {str(run_dir)!r} was trained with a different config ("
                          + "; ".join(differences) + f"); only {STUDIED!r} fields must match: "
                          "start a new run with another --run-dir instead")
    state, path = load_latest_state(run_dir)
    config = wanted.replace(run_dir=str(run_dir))
    return config, run_dir, state


def _rng_state(runtime: Runtime) -> dict:
    state = {"torch": torch.get_rng_state()}
    if runtime.device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(runtime.device)
    return state


def _set_rng_state(state: dict, runtime: Runtime) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and runtime.device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], runtime.device)


def _parameters(objective) -> list[torch.nn.Parameter]:
    seen, params = set(), []
    for module in objective.modules.values():
        for p in module.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
    return params


def pretrain(config: PretrainConfig | None = None, *, resume: str | Path | None = None,
             overrides: dict | None = None, runtime: Runtime | None = None,
             console=None) -> PretrainResult:
    """Pretrain a masked LM as `config` says (or continue the run in `resume`).

    Returns the run directory, the `final` Hugging Face folder (None when the run was
    interrupted) and the summary also written to `summary.json`.
    """
    config, run_dir, saved = prepare_run(config, resume, overrides)
    # torchrun (WORLD_SIZE > 1) gives a DDP runtime, else one process (issue 6)
    runtime = runtime or build_runtime_from_env(config.device, config.precision, config.threads)
    main = runtime.is_main
    show = config.progress and main

    # ---- data and model
    init_model = None
    if config.init:
        from mlmkit.models import load_mlm

        init_model = load_mlm(config.init, device="cpu").model.train()
    if not main:  # distributed: rank 0 trains the tokenizer and fills the caches first
        runtime.barrier()
    tokenizer = resolve_tokenizer(config, show_progress=show)
    if init_model is not None:
        limit = getattr(init_model.config, "max_position_embeddings", None)
        if limit is not None and config.seq_len > limit:
            raise MlmkitError(f"--seq-len {config.seq_len} is longer than --init "
                              f"{config.init!r} allows ({limit} positions)")
    data = build_data(config, tokenizer, show_progress=show)
    if main:
        runtime.barrier()
    validation = eval_blocks(data, config.eval_blocks, config.batch_size)
    objective = build_objective(config, tokenizer, runtime, init_model=init_model)
    if config.compile:
        objective.compile()
    runtime.wrap_objective(objective)  # DDP around the objective's loss (distributed only)
    optimizer = build_optimizer(objective.modules, lr=config.lr,
                                weight_decay=config.weight_decay,
                                betas=(config.beta1, config.beta2), eps=config.eps,
                                device=runtime.device)
    params = _parameters(objective)
    order = BlockOrder(len(data.train), seed=config.seed)
    budget = Budget.from_config(config)
    warmup = warmup_share(config.warmup, config.steps)
    state = TrainState()
    history: list[dict] = []

    if saved is not None:  # ---- continue exactly where the saved state stopped
        for name, module in objective.modules.items():
            module.load_state_dict(saved["modules"][name])
        optimizer.load_state_dict(saved["optimizer"])
        objective.load_state_dict(saved["objective"])
        order.load_state_dict(saved["data"])
        state = TrainState(**saved["counters"])
        history = saved["history"]
        _set_rng_state(saved["rng"], runtime)
    else:
        torch.manual_seed(config.seed)  # dropout; the model was initialised from the seed

    if main:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / "config.yaml", config.to_yaml())
    log = MetricsLog(run_dir, history, resume_step=state.step if saved else None) if main \
        else None
    n_params = sum(p.numel() for p in params)
    micro_batch = config.batch_size // config.grad_accum // runtime.world_size
    if config.batch_size % (config.grad_accum * runtime.world_size):
        raise MlmkitError(f"--batch-size {config.batch_size} is not a multiple of --grad-accum "
                          f"× processes ({config.grad_accum} × {runtime.world_size})")

    def checkpoint(with_model_dir: bool) -> None:
        if not main:
            return
        save_state(run_dir, state.step, {
            "modules": {n: m.state_dict() for n, m in objective.modules.items()},
            "optimizer": optimizer.state_dict(), "objective": objective.state_dict(),
            "data": order.state_dict(), "counters": vars(state).copy(),
            "history": log.history, "rng": _rng_state(runtime), "config": config.to_dict(),
            # metrics of steps since the last log line, so that line averages the same steps
            "pending": {"sums": {k: float(v) for k, v in sums.items()}, "count": sums_count},
        }, keep=config.keep_checkpoints)
        if with_model_dir:
            save_model_dir(objective.save_pretrained, run_dir / f"step-{state.step}")
            prune_step_dirs(run_dir, config.keep_checkpoints)

    def evaluate() -> dict:
        with torch.random.fork_rng(devices=[]):  # evaluation never moves the training RNG
            # only rank 0 evaluates (issue 6); the others go on to the next step
            metrics = objective.evaluate(validation, data.sentences) if main else {}
        record = {"step": state.step, "split": "eval", **metrics}
        if main and metrics:
            log.log(record)
        return record

    stop_reason = None
    last_eval: dict = {}
    steps_this_process = 0
    window_tokens, window_time = 0, 0.0
    sums: dict[str, torch.Tensor] = {}
    sums_count = 0
    if saved is not None:
        sums = {k: torch.tensor(v, dtype=torch.float64) for k, v in
                saved["pending"]["sums"].items()}
        sums_count = saved["pending"]["count"]
    with StopOnSignal() as stop, TrainProgress(show, console=console) as bar:
        if main:
            bar.print(f"[bold]data[/]: {data.describe()}")
            bar.print(f"[bold]model[/]: {config.init or config.model}, {n_params / 1e6:.2f}M "
                      f"parameters; {objective.describe()}; budget {budget.describe()}")
            if saved is not None:
                bar.print(f"resuming at step {state.step}")
        objective.train()
        while not budget.done(state.step, state.tokens, state.elapsed):
            started = time.perf_counter()
            share = budget.progress(state.step, state.tokens, state.elapsed)
            lr = config.lr * lr_factor(share, schedule=config.schedule, warmup=warmup,
                                       decay=config.decay, min_lr=config.min_lr)
            for group in optimizer.param_groups:
                group["lr"] = lr
            # The global batch of this step (all micro-steps, all processes) is corrupted
            # at once; this process trains on its rows, micro-batch by micro-batch.
            batch = data.train[order.next_indices(config.batch_size)]
            prepared = objective.prepare(batch, state.step)
            totals = prepared.counts
            mine = torch.arange(runtime.rank, config.batch_size, runtime.world_size)
            micro = mine.split(micro_batch)
            for i, rows in enumerate(micro):
                with runtime.no_sync(objective, last_micro_step=i == len(micro) - 1):
                    tensors = prepared.rows(rows, runtime.device)
                    with runtime.autocast():
                        out = objective.loss(tensors, totals)
                    out.loss.backward()
                for key, value in out.metrics.items():
                    sums[key] = sums.get(key, 0.0) + value.detach().double()
            grad_norm = (torch.nn.utils.clip_grad_norm_(params, config.clip)
                         if config.clip > 0 else None)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            objective.after_step(state.step)
            step_tokens = batch.n_tokens
            state.step += 1
            steps_this_process += 1
            sums_count += 1
            state.tokens += step_tokens
            window_tokens += step_tokens
            if state.step % config.log_every == 0 or budget.done(
                    state.step, state.tokens, state.elapsed):
                runtime.synchronize()
            # the slowest process's step time, so that time budgets end on the same step
            seconds = runtime.max(time.perf_counter() - started)
            state.elapsed += seconds
            window_time += seconds

            if state.step % config.log_every == 0:
                values = {k: runtime.sum(float(v)) / sums_count for k, v in sums.items()}
                rate = window_tokens / max(window_time, 1e-9)
                record = {"step": state.step, "split": "train", **values, "lr": lr,
                          "tokens": state.tokens, "tokens_per_s": rate,
                          "elapsed": state.elapsed}
                if grad_norm is not None:
                    record["grad_norm"] = float(grad_norm)
                if main:
                    log.log(record)
                if not math.isfinite(values.get("loss", 0.0)):
                    raise MlmkitError(f"the loss is {values['loss']} at step {state.step}: "
                                      "lower --lr or use --precision fp32")
                bar.update(budget.progress(state.step, state.tokens, state.elapsed),
                           state.step, values.get("loss"), rate)
                sums, sums_count, window_tokens, window_time = {}, 0, 0, 0.0
            if config.eval_every and state.step % config.eval_every == 0:
                last_eval = evaluate()
                bar.print(_eval_line(last_eval))
            if config.save_every and state.step % config.save_every == 0:
                checkpoint(with_model_dir=True)
            if runtime.any(bool(stop.requested)):  # all processes stop on the same step
                stop_reason = stop.requested or "signal to another process"
                break
            if config.halt_after and steps_this_process >= config.halt_after:
                stop_reason = "halt_after"
                break
        bar.update(budget.progress(state.step, state.tokens, state.elapsed), state.step)

    # ---- the end: save state; when finished also evaluate, export and plot
    final_dir = None
    if stop_reason is not None:
        checkpoint(with_model_dir=False)
    else:
        if not last_eval or last_eval["step"] != state.step:
            last_eval = evaluate()
        checkpoint(with_model_dir=False)
        if main:
            final_dir = save_model_dir(_final_saver(objective, config), run_dir / "final")
    summary = _summary(config, state, last_eval, n_params, stop_reason, final_dir, run_dir,
                       objective.describe())
    if main:
        log.close()
        plot_history(log.history, run_dir / "plots")
        atomic_write_text(run_dir / "summary.json", json.dumps(summary, indent=1))
    return PretrainResult(run_dir=run_dir, final_dir=final_dir, summary=summary,
                          history=log.history if log else [])


def _final_saver(objective, config):
    def save(directory: Path) -> None:
        objective.save_pretrained(directory)
        atomic_write_text(Path(directory) / "mlmkit_pretrain.yaml", config.to_yaml())

    return save


def _eval_line(record: dict) -> str:
    parts = [f"{k} {v:.4f}" for k, v in record.items()
             if k not in ("step", "split", "masked_tokens") and isinstance(v, float)]
    return f"[cyan]eval @ step {record['step']}[/]: " + ", ".join(parts)


def _summary(config, state, last_eval, n_params, stop_reason, final_dir, run_dir,
             description) -> dict:
    return {
        "status": "interrupted" if stop_reason else "finished",
        "stop_reason": stop_reason,
        "steps": state.step,
        "tokens": state.tokens,
        "train_seconds": round(state.elapsed, 3),
        "tokens_per_s": state.tokens / state.elapsed if state.elapsed else None,
        "parameters": n_params,
        "objective": description,
        "eval": {k: v for k, v in last_eval.items() if k != "split"},
        "run_dir": str(run_dir),
        "final_dir": str(final_dir) if final_dir else None,
        "resume_with": None if not stop_reason else f"mlmkit pretrain --resume {run_dir}",
        "model": config.init or config.model,
    }
