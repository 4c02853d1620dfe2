"""One call per benchmark: score a model, then bootstrap every score.

The registry maps a benchmark name to how its data is read and how a model is scored on
it, so the CLI, `compare` and the report handle CrowS-Pairs, AUL, AULA and StereoSet
the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mlmkit.bias.bootstrap import Score, bootstrap
from mlmkit.bias.crows_data import DEFAULT_CROWS_PATH, read_crows_pairs
from mlmkit.bias.pairs import PairScores
from mlmkit.bias.stereoset import StereoSetResult, read_stereoset
from mlmkit.errors import MlmkitError
from mlmkit.models import as_mlm


@dataclass(frozen=True)
class Benchmark:
    """How to read a benchmark's data and score a model on it."""

    read: Callable[[Path], list]
    score: Callable[..., PairScores | StereoSetResult]
    headline: str  # the score a person looks at first (drawn per bias type)
    bars: tuple[str, ...]  # the scores drawn in the per-type charts
    default_data: Path | None


def _score_crows(mlm, items, **kw):
    from mlmkit.bias.crows import score_crows

    return score_crows(mlm, items, **kw)


def _score_aul(attention: bool):
    def score(mlm, items, batch_tokens=None, precision="fp32", progress=False, lowercase=None):
        from mlmkit.bias.aul import DEFAULT_BATCH_TOKENS, score_aul

        return score_aul(mlm, items, attention=attention, lowercase=lowercase,
                         batch_tokens=batch_tokens or DEFAULT_BATCH_TOKENS)

    return score


def _score_stereoset(mlm, items, lowercase=None, **kw):
    from mlmkit.bias.stereoset import score_stereoset

    return StereoSetResult(items, score_stereoset(mlm, items, **kw), model=mlm.name)


PAIR_BARS = ("metric score", "stereotype score", "anti-stereotype score")
BENCHMARKS: dict[str, Benchmark] = {
    "crows": Benchmark(read_crows_pairs, _score_crows, "metric score", PAIR_BARS,
                       DEFAULT_CROWS_PATH),
    "aul": Benchmark(read_crows_pairs, _score_aul(False), "metric score", PAIR_BARS,
                     DEFAULT_CROWS_PATH),
    "aula": Benchmark(read_crows_pairs, _score_aul(True), "metric score", PAIR_BARS,
                      DEFAULT_CROWS_PATH),
    "stereoset": Benchmark(read_stereoset, _score_stereoset, "SS", ("SS", "LM", "ICAT"), None),
}


def benchmark(name: str) -> Benchmark:
    if name not in BENCHMARKS:
        raise MlmkitError(f"unknown bias benchmark {name!r}: use one of {list(BENCHMARKS)}")
    return BENCHMARKS[name]


def read_benchmark(name: str, data: str | Path | list | None) -> list:
    """The benchmark's items from `data` (a path, None for the default, or items already read)."""
    spec = benchmark(name)
    if isinstance(data, list):
        return data
    if data is None:
        if spec.default_data is None:
            raise MlmkitError(f"the {name} benchmark has no default data: pass --data")
        data = spec.default_data
    return spec.read(Path(data))


@dataclass
class BiasAudit:
    """A model's scores on one benchmark, each with its bootstrap interval."""

    benchmark: str
    model: str
    n: int
    result: PairScores | StereoSetResult
    scores: list[Score]
    n_boot: int
    seed: int
    level: float

    def get(self, name: str, group: str = "overall") -> Score:
        for score in self.scores:
            if score.name == name and score.group == group:
                return score
        raise KeyError((name, group))

    def groups(self) -> list[str]:
        return self.result.groups()


def audit_result(result, benchmark_name: str, n_boot: int = 1000, seed: int = 0,
                 level: float = 0.95) -> BiasAudit:
    """Bootstrap every score of an already scored result."""
    scores = bootstrap(result.statistics(), len(result), n_boot=n_boot, seed=seed, level=level)
    return BiasAudit(benchmark_name, result.model, len(result), result, scores, n_boot, seed,
                     level)


def score_model(model, benchmark_name: str, items: list, **score_kwargs):
    """Score `model` on already read benchmark items (PairScores or StereoSetResult)."""
    mlm = as_mlm(model)
    return benchmark(benchmark_name).score(mlm, items, **score_kwargs)


def audit(model, benchmark_name: str = "crows", data: str | Path | list | None = None, *,
          n_boot: int = 1000, seed: int = 0, level: float = 0.95, limit: int | None = None,
          **score_kwargs) -> BiasAudit:
    """Read the data, score `model`, bootstrap every score (`limit`: first N items only)."""
    items = read_benchmark(benchmark_name, data)
    if limit is not None:
        if limit < 1:
            raise MlmkitError(f"--limit {limit} must be at least 1")
        items = items[:limit]
    result = score_model(model, benchmark_name, items, **score_kwargs)
    return audit_result(result, benchmark_name, n_boot=n_boot, seed=seed, level=level)
