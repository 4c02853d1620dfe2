"""Learning curves: the evaluation suite during pretraining (`pretrain --eval-suite quick
--eval-every N`). The current model is saved to a temporary folder and the suite runs on
that copy (the training model, its mode and the training RNG are untouched); its numbers go
into metrics.jsonl as records of split "suite", and at the last step into plots/suite.png
beside the loss.

Pretraining does not import the suite: `SuiteEvaluation` is the hook it is handed
(`mlmkit.pretraining.hooks`), and `pretrain` here is `mlmkit.pretrain`, the pretraining entry
point with that hook in place."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from mlmkit.errors import InvalidArgument
from mlmkit.evaluation.suite import DEFAULT_PARTS, PARTS, check_suite_data, evaluate_suite
from mlmkit.extras import require
from mlmkit.pretraining.config import PretrainConfig
from mlmkit.pretraining.loop import PretrainResult
from mlmkit.pretraining.loop import pretrain as pretrain_with_hook
from mlmkit.training.runtime import Runtime

SUITE_CHOICES = ("quick", "full")


def parse_eval_suite(value: str | None) -> tuple[bool, list[str] | None] | None:
    """`quick`, `full` or comma-separated parts (run at quick size) -> (quick, parts)."""
    if value is None or value == "":
        return None
    if value in SUITE_CHOICES:
        return value == "quick", None
    parts = [p.strip() for p in str(value).split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        raise InvalidArgument(f"eval_suite={value!r} (--eval-suite): use quick, full or parts "
                              f"among {', '.join(PARTS)} (comma-separated)")
    # parts that need a file a training run has no flag for: refused before training (they
    # failed at the first evaluation, the run half-written)
    for part, flag, what in (("facts", "--facts", "facts file"),
                             ("variants", "--variants", "scans file"),
                             ("retrieval", "--retrieval", "BEIR folder")):
        if part in parts:
            raise InvalidArgument(
                f"eval_suite={value!r} (--eval-suite): the {part} part needs a {what}, which a "
                f"training run has no flag for: leave {part} out, and run `mlmkit eval suite "
                f"MODEL --parts {part} {flag} ...` on a saved model")
    return True, parts


def suite_record(run) -> dict | None:
    """Run the suite on the run's current model; the record logged (None: not asked)."""
    config = run.config
    parsed = parse_eval_suite(getattr(config, "eval_suite", None))
    if parsed is None or not run.is_main:
        return None
    quick, parts = parsed
    with torch.random.fork_rng(devices=[]), tempfile.TemporaryDirectory() as folder:
        run.objective.save_pretrained(folder)
        result = evaluate_suite(folder, config.suite_data, quick=quick, parts=parts,
                                device=str(run.runtime.device), threads=torch.get_num_threads(),
                                seed=config.seed, progress=False)
    record = {"step": run.state.step, "split": "suite", **result.metrics,
              "suite_seconds": round(sum(result.seconds.values()), 2)}
    run.record(record)
    if run.done() and run.plots:  # one plot at the end (matplotlib takes seconds per figure)
        history = run.log.history if run.log is not None else run.history
        plot_suite_history(history, Path(run.run_dir) / "plots")
    return record


class SuiteEvaluation:
    """The evaluation suite as a pretraining run's evaluation hook (`--eval-suite`)."""

    def check(self, config) -> None:
        """The parts exist and their data is there, before the run writes anything."""
        quick_and_parts = parse_eval_suite(config.eval_suite)
        if quick_and_parts is not None:
            chosen = quick_and_parts[1] or list(DEFAULT_PARTS)
            check_suite_data(config.suite_data, chosen, "--suite-data", "--eval-suite")

    def __call__(self, run) -> dict | None:
        return suite_record(run)


def pretrain(config: PretrainConfig | None = None, *, resume=None, overrides: dict | None = None,
             runtime: Runtime | None = None, restart: bool = False) -> PretrainResult:
    """Pretrain a masked LM as `config` says (or continue the run in `resume`), with the
    evaluation suite as the run's evaluation hook, so `eval_suite` logs learning curves.

    The arguments and the result are those of `mlmkit.pretraining.pretrain`.
    """
    return pretrain_with_hook(config, resume=resume, overrides=overrides, runtime=runtime,
                              restart=restart, evaluation=SuiteEvaluation())


def plot_suite_history(history: list[dict], folder: Path) -> Path | None:
    """plots/suite.png: the training loss and each suite metric against the step."""
    suite = [r for r in history if r.get("split") == "suite"]
    train = [r for r in history if r.get("split") == "train" and r.get("loss") is not None]
    if not suite:
        return None
    matplotlib = require("matplotlib", extra="plots", feature="plotting the suite's history")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [k for k in suite[-1] if k not in ("step", "split", "suite_seconds")
             and "/" not in k and isinstance(suite[-1][k], (int, float))]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    top.plot([r["step"] for r in train], [r["loss"] for r in train], label="train loss")
    top.set_ylabel("loss")
    top.legend(fontsize=7)
    for name in names:
        points = [(r["step"], r[name]) for r in suite if r.get(name) is not None]
        if points and not name.startswith(("pppl", "elbo")) and not name.endswith("_std"):
            bottom.plot(*zip(*points, strict=True), marker="o", label=name)
    bottom.set_xlabel("step")
    bottom.set_ylabel("suite (share right)")
    bottom.legend(fontsize=7)
    fig.subplots_adjust(left=0.1, right=0.97, top=0.97, bottom=0.09, hspace=0.08)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "suite.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
