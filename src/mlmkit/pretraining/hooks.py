"""The evaluation hook: how a caller adds its own evaluation to a pretraining run.

Pretraining sits below the evaluation suite, so it does not import it; the caller (the
`mlmkit pretrain` command, `mlmkit.pretrain`) passes the suite in as a hook instead
(`mlmkit.evaluation.training.SuiteEvaluation`). A run whose config asks for `eval_suite`
refuses to start without one, before anything is written.
"""

from __future__ import annotations

from typing import Protocol


class EvaluationHook(Protocol):
    """An evaluation run at each of the run's evaluations when `config.eval_suite` is set."""

    def check(self, config) -> None:
        """Refuse a config this evaluation cannot serve, before any work or writing."""

    def __call__(self, run) -> dict | None:
        """Evaluate the run's current model; the record logged (None: nothing logged)."""
