"""One call per benchmark: score a model, then bootstrap every score.

The registry maps a benchmark name to how its data is read and how a model is scored on
it, so the CLI, `compare` and the report handle CrowS-Pairs, AUL, AULA and StereoSet
the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mlmkit.bias.aul import score_aul
from mlmkit.bias.crows import score_crows
from mlmkit.bias.crows_data import default_crows_path, read_crows_pairs
from mlmkit.bias.pairs import PairScores
from mlmkit.bias.stereoset import StereoSetResult, read_stereoset, score_stereoset
from mlmkit.core.checks import count
from mlmkit.core.results import Result, jsonable
from mlmkit.core.statistics import Score, bootstrap, check_bootstrap, find
from mlmkit.engine.batching import check_budget
from mlmkit.errors import InvalidArgument


@dataclass(frozen=True)
class Benchmark:
    """How to read a benchmark's data and score a model on it."""

    read: Callable[[Path], list]
    score: Callable[..., PairScores | StereoSetResult]
    headline: str  # the score a person looks at first (drawn per bias type)
    bars: tuple[str, ...]  # the scores drawn in the per-type charts
    default: Callable[[], Path] | None  # where the data is when none is given

    @property
    def default_data(self) -> Path | None:
        return None if self.default is None else self.default()


def _score_crows(mlm, items, **kw):
    return score_crows(mlm, items, **kw)


def _score_aul(attention: bool):
    def score(mlm, items, **kw):
        return score_aul(mlm, items, attention=attention, **kw)

    return score


def _score_stereoset(mlm, items, lowercase=None, **kw):
    if lowercase is not None:
        raise InvalidArgument("lowercase does not apply to StereoSet (the official evaluation "
                              "scores the sentences as written): leave it unset")
    scores = score_stereoset(mlm, items, **kw)
    return StereoSetResult(items, scores, model=scores.model)


PAIR_BARS = ("metric score", "stereotype score", "anti-stereotype score")
BENCHMARKS: dict[str, Benchmark] = {
    "crows": Benchmark(read_crows_pairs, _score_crows, "metric score", PAIR_BARS,
                       default_crows_path),
    "aul": Benchmark(read_crows_pairs, _score_aul(False), "metric score", PAIR_BARS,
                     default_crows_path),
    "aula": Benchmark(read_crows_pairs, _score_aul(True), "metric score", PAIR_BARS,
                      default_crows_path),
    "stereoset": Benchmark(read_stereoset, _score_stereoset, "SS", ("SS", "LM", "ICAT"), None),
}


def benchmark(name: str) -> Benchmark:
    if name not in BENCHMARKS:
        raise InvalidArgument(f"unknown bias benchmark {name!r}: use one of "
                              f"{', '.join(BENCHMARKS)}")
    return BENCHMARKS[name]


def read_benchmark(name: str, data: str | Path | list | None) -> list:
    """The benchmark's items from `data` (a path, None for the default, or items already read)."""
    spec = benchmark(name)
    if isinstance(data, list):
        return data
    if data is None:
        if spec.default_data is None:
            raise InvalidArgument(f"the {name} benchmark has no default data: pass its file "
                                  "after the model (data=PATH in Python)")
        data = spec.default_data
    return spec.read(Path(data))


@dataclass
class BiasAudit(Result):
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
        return find(self.scores, name, group)

    def groups(self) -> list[str]:
        return self.result.groups()

    def count(self, group: str = "overall") -> int:
        """Items (pairs or StereoSet examples) in `group`."""
        if isinstance(self.result, StereoSetResult):
            return self.result.score(group).count
        return self.result.summary(group).n

    def to_dict(self, with_items: bool = False) -> dict:
        """Every score with its interval and n, per group; `with_items`: also per item."""
        out = {"benchmark": self.benchmark, "model": self.model, "n": self.n,
               "n_boot": self.n_boot, "seed": self.seed, "level": self.level,
               "groups": {g: {"n": self.count(g)} for g in self.groups()},
               "scores": [s.to_dict() for s in self.scores]}
        if with_items:
            out["result"] = self.result.to_dict()
        return jsonable(out)


def audit_result(result, benchmark_name: str, n_boot: int = 1000, seed: int = 0,
                 level: float = 0.95) -> BiasAudit:
    """Bootstrap every score of an already scored result."""
    scores = bootstrap(result.statistics(), len(result), n_boot=n_boot, seed=seed, level=level)
    return BiasAudit(benchmark_name, result.model, len(result), result, scores, n_boot, seed,
                     level)


def score_model(model, benchmark_name: str, items: list, *, lowercase: bool | None = None,
                batch_tokens: int | None = None, precision: str = "auto", device=None,
                threads: int | None = None, progress: bool | None = None):
    """Score `model` on already read benchmark items (PairScores or StereoSetResult).

    Every keyword reaches the scorer (none is dropped): `lowercase` (CrowS/AUL/AULA only;
    None = when the tokenizer is uncased), `batch_tokens`, `precision`, `device`,
    `threads`, `progress`.
    """
    return benchmark(benchmark_name).score(
        model, items, lowercase=lowercase, batch_tokens=batch_tokens, precision=precision,
        device=device, threads=threads, progress=progress)


def check_items(items: list, limit: int | None) -> list:
    """The first `limit` items (all when None); `limit` must be a whole number ≥ 1."""
    if limit is not None:
        items = items[:count("limit", limit, 1)]
    return items


def checked_items(benchmark_name: str, data, *, n_boot, level, seed, batch_tokens,
                  limit) -> list:
    """Check the options an audit or a comparison takes, then read its (first `limit`)
    items: every bad value fails before the data is read or a model loaded."""
    benchmark(benchmark_name)
    check_bootstrap(n_boot, level, seed)
    check_budget(batch_tokens)
    check_items([], limit)
    return check_items(read_benchmark(benchmark_name, data), limit)


def audit(model, benchmark_name: str = "crows", data: str | Path | list | None = None, *,
          n_boot: int = 1000, seed: int = 0, level: float = 0.95, limit: int | None = None,
          lowercase: bool | None = None, batch_tokens: int | None = None,
          precision: str = "auto", device=None, threads: int | None = None,
          progress: bool | None = None) -> BiasAudit:
    """Read the data, score `model`, bootstrap every score (`limit`: first N items only).

    `benchmark_name`: crows, aul, aula or stereoset. `data`: a path (`-`: standard input),
    items already read, or None for the benchmark's default file. `n_boot` replicates
    (0: no intervals) seeded by `seed`, `level` the interval's coverage.
    """
    items = checked_items(benchmark_name, data, n_boot=n_boot, level=level, seed=seed,
                          batch_tokens=batch_tokens, limit=limit)
    result = score_model(model, benchmark_name, items, lowercase=lowercase,
                         batch_tokens=batch_tokens, precision=precision, device=device,
                         threads=threads, progress=progress)
    return audit_result(result, benchmark_name, n_boot=n_boot, seed=seed, level=level)
