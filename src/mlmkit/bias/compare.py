"""Compare two models on the same benchmark items with a paired bootstrap.

Both models are scored on the same pairs (or StereoSet examples); each bootstrap
replicate draws one set of items and computes every score for both models on it, so the
interval of A − B reflects the items both share rather than two independent samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mlmkit.bias.audit import BiasAudit, audit_result, checked_items, score_model
from mlmkit.core.results import Result, jsonable
from mlmkit.core.statistics import Difference, find, paired_bootstrap
from mlmkit.errors import InvalidArgument


@dataclass
class BiasComparison(Result):
    """Each score of model A and model B, with the paired-bootstrap interval of A − B."""

    benchmark: str
    model_a: str
    model_b: str
    n: int
    audit_a: BiasAudit
    audit_b: BiasAudit
    differences: list[Difference]

    def get(self, name: str, group: str = "overall") -> Difference:
        return find(self.differences, name, group)

    def groups(self) -> list[str]:
        return self.audit_a.groups()

    def count(self, group: str = "overall") -> int:
        """Items (pairs or StereoSet examples) in `group`, the same for both models."""
        return self.audit_a.count(group)

    def to_dict(self) -> dict:
        return jsonable({"benchmark": self.benchmark, "model_a": self.model_a,
                         "model_b": self.model_b, "n": self.n,
                         "n_boot": self.audit_a.n_boot, "seed": self.audit_a.seed,
                         "level": self.audit_a.level,
                         "groups": {g: {"n": self.count(g)} for g in self.groups()},
                         "differences": [d.to_dict() for d in self.differences]})


def compare_results(result_a, result_b, benchmark_name: str, n_boot: int = 1000,
                    seed: int = 0, level: float = 0.95) -> BiasComparison:
    """Paired bootstrap of two results scored on the same items."""
    if len(result_a) != len(result_b):
        raise InvalidArgument(f"the two results cover {len(result_a)} and {len(result_b)} items: "
                          f"compare models on the same data")
    items_a = getattr(result_a, "pairs", None) or result_a.examples
    items_b = getattr(result_b, "pairs", None) or result_b.examples
    if items_a != items_b:
        raise InvalidArgument("the two results were scored on different items: compare models "
                          "on the same data file")
    audit_a = audit_result(result_a, benchmark_name, n_boot=n_boot, seed=seed, level=level)
    audit_b = audit_result(result_b, benchmark_name, n_boot=n_boot, seed=seed, level=level)
    differences = paired_bootstrap(result_a.statistics(), result_b.statistics(), len(result_a),
                                   n_boot=n_boot, seed=seed, level=level)
    return BiasComparison(benchmark_name, result_a.model, result_b.model, len(result_a),
                          audit_a, audit_b, differences)


def compare(model_a, model_b, benchmark_name: str = "crows",
            data: str | Path | list | None = None,
            *, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
            limit: int | None = None, lowercase: bool | None = None,
            batch_tokens: int | None = None, precision: str = "auto", device=None,
            threads: int | None = None, progress: bool | None = None) -> BiasComparison:
    """Score both models on the same data and compare every score (the models first, then
    the benchmark and its data; the keywords as `audit`)."""
    items = checked_items(benchmark_name, data, n_boot=n_boot, level=level, seed=seed,
                          batch_tokens=batch_tokens, limit=limit)
    kwargs = dict(lowercase=lowercase, batch_tokens=batch_tokens, precision=precision,
                  device=device, threads=threads, progress=progress)
    result_a = score_model(model_a, benchmark_name, items, **kwargs)
    result_b = score_model(model_b, benchmark_name, items, **kwargs)
    return compare_results(result_a, result_b, benchmark_name, n_boot=n_boot, seed=seed,
                           level=level)
