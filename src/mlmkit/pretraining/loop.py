"""The pretraining loop, top to bottom (the run itself is `mlmkit.pretraining.run.Run`):

    run = build_run(config)              # check everything, build everything, write nothing
    run.open_directory()                 # config.yaml, metrics log
    until the budget is spent: run.step(); log, evaluate, save every N steps;
                               stop cleanly on SIGINT/SIGTERM or --halt-after
    save the state; when finished also evaluate, export final/, plot, write summary.json
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from mlmkit.core.devices import run_settings_kept
from mlmkit.core.progress import warn
from mlmkit.core.results import Result
from mlmkit.core.staging import write_text as atomic_write_text  # fsynced, umask
from mlmkit.pretraining.config import PretrainConfig, parse_duration
from mlmkit.pretraining.guards import eta_lines
from mlmkit.pretraining.hooks import EvaluationHook
from mlmkit.pretraining.plots import plot_history
from mlmkit.pretraining.progress import TrainProgress
from mlmkit.pretraining.run import Run, build_run
from mlmkit.training.runtime import Runtime, retained_heap, threads_chosen_by_load
from mlmkit.training.signals import StepInterrupted, StopOnSignal


@dataclass
class PretrainResult(Result):
    """Where a run's outputs are and how it ended."""

    run_dir: Path
    final_dir: Path | None
    summary: dict
    history: list[dict] = field(default_factory=list)

    @property
    def interrupted(self) -> bool:
        return self.summary.get("status") == "interrupted"


def pretrain(config: PretrainConfig | None = None, *, resume: str | Path | None = None,
             overrides: dict | None = None, runtime: Runtime | None = None,
             restart: bool = False, evaluation: EvaluationHook | None = None
             ) -> PretrainResult:
    """Pretrain a masked LM as `config` says (or continue the run in `resume`; `restart`
    starts over in a run directory that holds a run).

    On resume, `overrides` may change budget, evaluation and runtime fields only (see
    `mlmkit.pretraining.run_state`); the rest continues as stored in the run's checkpoint.

    `evaluation` runs at each evaluation when `config.eval_suite` asks for it
    (`mlmkit.pretraining.hooks`; `mlmkit.pretrain` passes the evaluation suite).

    Returns the run directory, the `final` Hugging Face folder (None when the run was
    interrupted) and the summary also written to `summary.json`.
    """
    # the run's thread count (maybe chosen from the load) holds for its evaluations too,
    # and ends with it, as do TF32 products on a GPU
    with run_settings_kept():
        run = build_run(config, resume=resume, overrides=overrides, runtime=runtime,
                        restart=restart, evaluation=evaluation)
        run.open_directory()
        with StopOnSignal() as stop, TrainProgress(run.config.progress and run.is_main,
                                                   every=run.config.progress_every) as bar, \
                _closing(run), retained_heap(run.runtime.device):
            bar.print(f"data: {run.data.describe()}")
            bar.print(f"model: {run.config.init or run.config.model}, "
                      f"{sum(p.numel() for p in run.parameters) / 1e6:.2f}M parameters; "
                      f"{run.objective.describe()}; budget {run.budget.describe()}")
            chosen = (" (the usable cores less those the load average says are busy; "
                      "--threads N to choose)" if run.runtime.device.type == "cpu"
                      and threads_chosen_by_load(run.config.threads) else "")
            bar.print(f"runtime: {run.runtime.device}, {run.runtime.precision}, "
                      f"{torch.get_num_threads()} thread(s){chosen}")
            if run.resumed:
                bar.print(f"resuming at step {run.state.step}")
            stop_reason = train(run, stop, bar, evaluation)
        return finish(run, stop_reason)


def train(run: Run, stop: StopOnSignal, bar: TrainProgress,
          evaluation: EvaluationHook | None = None) -> str | None:
    """Step until the budget is spent; the reason it stopped early, or None."""
    run.objective.train()
    try:
        return _train_steps(run, stop, bar, evaluation)
    finally:
        run.stop_producer()


def _train_steps(run: Run, stop: StopOnSignal, bar: TrainProgress,
                 evaluation: EvaluationHook | None) -> str | None:
    config, steps_here = run.config, 0
    clock = FinishEstimate(run, bar)
    while not run.done():
        run.keep_stable_state()  # WSD: the state an extension continues from
        try:
            run.step(stop)
        except StepInterrupted:  # a signal inside a long step: it was undone
            return stop.requested
        steps_here += 1
        step = run.state.step
        clock.after_step(steps_here)
        if step % config.log_every == 0:
            record = run.train_record()
            bar.update(run.progress(), step, record.get("loss"), record["tokens_per_s"])
        else:  # the loss of the last log line; without a terminal, a line every N seconds
            bar.update(run.progress(), step)
        if run.runtime.any(bool(stop.requested)):  # all processes stop on the same step
            return stop.requested or "signal to another process"  # no evaluation first
        if config.eval_every and step % config.eval_every == 0:
            bar.print(eval_line(run.evaluate()))
            if config.eval_suite and evaluation is not None:  # e.g. the suite's curves
                bar.print(eval_line(evaluation(run) or {"step": run.state.step}))
        if config.save_every and step % config.save_every == 0:
            run.save(with_model_dir=True)
        if config.halt_after and steps_here >= config.halt_after and not run.done():
            return "halt_after"  # a halt on the last step finishes the run instead
    bar.update(run.progress(), run.state.step)
    return None


class FinishEstimate:
    """After the first steps (10, or fewer when they took 30 s), the time to finish at the
    speed measured so far: a status line, and a warning when it passes --time-bound."""

    STEPS, SECONDS = 10, 30.0

    def __init__(self, run: Run, bar: TrainProgress):
        self.run, self.bar = run, bar
        self.start = (run.progress(), run.state.elapsed)
        self.said = False

    def after_step(self, steps_here: int) -> None:
        if self.said or self.run.done():
            return
        progress, elapsed = self.run.progress(), self.run.state.elapsed
        spent = elapsed - self.start[1]
        if steps_here < self.STEPS and (steps_here < 2 or spent < self.SECONDS):
            return
        self.said = True
        config = self.run.config
        bound = parse_duration(config.time_bound) if config.time_bound else None
        line, warning = eta_lines(progress - self.start[0], spent, bound, steps_here,
                                  left=1.0 - progress)
        if line:
            self.bar.print(line)
        if warning and self.run.is_main:
            warn(warning)


def finish(run: Run, stop_reason: str | None) -> PretrainResult:
    """Save the state; when the run finished, also evaluate (unless just done), export the
    final model, plot the metrics and write summary.json."""
    final_dir, history = None, run.log.history if run.log is not None else run.history
    evals = [r for r in history if r.get("split") == "eval"]
    last_eval = evals[-1] if evals else {}
    # rank 0 holds the history: its decision for all (FSDP evaluates on every rank)
    if run.runtime.any(run.is_main and stop_reason is None
                       and last_eval.get("step") != run.state.step):
        last_eval = run.evaluate()
    run.save()
    if stop_reason is None:
        final_dir = run.save_final()
    summary = _summary(run, last_eval, stop_reason, final_dir)
    if run.is_main:
        run.log.close()
        if stop_reason is None and run.plots:  # a stopped run saves and exits: no plots
            plot_history(run.log.history, run.run_dir / "plots")
        atomic_write_text(run.run_dir / "summary.json", json.dumps(summary, indent=1))
    return PretrainResult(run_dir=run.run_dir, final_dir=final_dir, summary=summary,
                          history=run.log.history if run.log is not None else [])


@contextlib.contextmanager
def _closing(run: Run):
    """Close the metrics log when training ends with an error (e.g. a non-finite loss)."""
    try:
        yield
    except BaseException:
        if run.log is not None:
            run.log.close()
        raise


def eval_line(record: dict) -> str:
    parts = [f"{k} {v:.4f}" for k, v in record.items()
             if k not in ("step", "split", "masked_tokens") and isinstance(v, float)]
    return f"eval @ step {record['step']}: " + ", ".join(parts)


def _summary(run: Run, last_eval: dict, stop_reason: str | None,
             final_dir: Path | None) -> dict:
    state, config = run.state, run.config
    return {
        "status": "interrupted" if stop_reason else "finished",
        "stop_reason": stop_reason,
        "steps": state.step,
        "tokens": state.tokens,
        "train_seconds": round(state.elapsed, 3),
        "tokens_per_s": state.tokens / state.elapsed if state.elapsed else None,
        "data_seconds": round(run.data_seconds, 3),  # rank 0 reading and masking its rows
        # the share of the steps' time rank 0 spent building or waiting for its batches
        "data_wait_share": (run.data_seconds / run.step_seconds if run.step_seconds
                            else None),
        "parameters": sum(p.numel() for p in run.parameters),
        # what was read (documents, tokens, <unk>, blocks, the validation split): the run's
        # first status line, kept here where --no-progress silences it
        "data": run.data.describe(),
        "objective": run.objective.describe(),
        "eval": {k: v for k, v in last_eval.items() if k != "split"},
        "run_dir": str(run.run_dir),
        "final_dir": str(final_dir) if final_dir else None,
        "resume_with": None if not stop_reason else f"mlmkit pretrain --resume --run-dir {run.run_dir}",
        "model": config.init or config.model,
        # held-out sentences with a word masked: what `mlmkit pretrain` shows at the end
        "fill_mask_examples": [e.to_dict() for e in run.data.examples],
    }
