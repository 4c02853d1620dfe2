"""Extending a run: `--resume RUN` with a larger budget continues its learning-rate schedule.

`continuation` picks the state a resumed run starts from and its schedule. With the budget
unchanged, that is the latest state and the schedule stored with it. With a new budget,
the schedule is extended from the run's current point (`Schedule.extended`: linear/cosine
re-stretched from the current rate, no jump); for WSD the run continues from the state kept
at the end of its stable phase (`RUN/wsd-stable/`, written by `Run.keep_stable_state`), so
it trains on at the peak rate and decays anew at the end of the new budget.
"""

from __future__ import annotations

from pathlib import Path

from mlmkit.core.progress import warn
from mlmkit.errors import InvalidArgument, MlmkitError
from mlmkit.pretraining.budget import Budget
from mlmkit.pretraining.config import PretrainConfig
from mlmkit.training.checkpoint import list_states, load_latest_state
from mlmkit.training.schedule import Schedule

STABLE_DIR = "wsd-stable"  # WSD: the state at the end of the stable phase
BUDGET_FIELDS = ("steps", "tokens", "time")


def _budget_changed(saved: dict, config: PretrainConfig) -> bool:
    old = saved.get("config") or {}
    return any(old.get(k, getattr(config, k)) != getattr(config, k) for k in BUDGET_FIELDS)


def continuation(saved: dict, config: PretrainConfig, run_dir: Path,
                 is_main: bool = True) -> tuple[dict, Schedule]:
    """The state to continue from and its schedule; when the budget changed, the schedule
    extended from there (WSD: from the state kept at the end of the stable phase)."""
    old_config = PretrainConfig(**{**config.to_dict(), **{k: saved["config"][k]
                                                           for k in BUDGET_FIELDS}}) \
        if "config" in saved else config
    schedule = (Schedule.from_state(saved["schedule"]) if "schedule" in saved
                else Schedule.from_config(old_config))
    if not _budget_changed(saved, config):
        return saved, schedule
    old_budget, new_budget = Budget.from_config(old_config), Budget.from_config(config)
    counters = saved["counters"]
    at = (counters["step"], counters["tokens"], counters["elapsed"])
    if new_budget.done(*at):  # a smaller budget: nothing to train, nothing to undo
        # refused: a run that went on would store this budget, and a later extension would
        # take the schedule as finished at it (its rate would jump to the decay's end)
        raise InvalidArgument(
            f"--resume {str(run_dir)!r}: the run is at step {at[0]}, which the new budget "
            f"({new_budget.describe()}) has already reached, so there is nothing to train: "
            f"its model is in {run_dir / 'final'} once it has finished (or resume with a "
            "larger budget)")
    if schedule.in_decay(old_budget.progress(*at)):
        stable_dir = run_dir / STABLE_DIR
        if not list_states(stable_dir):
            raise MlmkitError(f"--resume {str(run_dir)!r} with a new budget: the WSD decay "
                              "has begun and the run kept no state from the end of its "
                              "stable phase; start a new run from its final/ with --init")
        saved, _ = load_latest_state(stable_dir)
        counters = saved["counters"]
        at = (counters["step"], counters["tokens"], counters["elapsed"])
        saved["counters"] = {**counters, "stable_step": None}
    old_progress = old_budget.progress(*at)
    last = old_progress * (at[0] - 1) / at[0] if at[0] > 0 else None  # the last step's
    extended = schedule.extended(old_progress, new_budget.progress(*at), last)
    if old_progress >= 1.0 and extended.anchor is not None and is_main:
        warn(f"--resume {str(run_dir)!r} with a larger budget: its {extended.kind} schedule "
             f"had finished, so the added steps continue the decay from the last step's "
             f"rate ({config.lr * extended.anchor[1]:.2g}) to --min-lr; to train on at a "
             "higher rate, use --schedule wsd (extended from its stable phase) or start a "
             f"new run with --init {run_dir / 'final'}")
    if extended.kind == "wsd":
        saved["counters"] = {**saved["counters"], "stable_step": None}  # a new decay ahead
    return saved, extended
