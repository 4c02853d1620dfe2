"""The evaluation suite (`mlmkit eval suite`) and comparisons with intervals (`eval compare`);
embedding evaluations: STS correlations (`evaluate_sts`) and BEIR retrieval
(`evaluate_retrieval`, metrics as trec_eval computes them).

`evaluate_suite(model, data, quick=...)` runs BLiMP, pseudo-perplexity, zero-shot cloze,
few-shot prompt and fine-tuned SST-2, AG News (and the ELBO / a knowledge probe where they
apply); `compare_suites(suites)` puts bootstrap intervals and paired tests on the results.
"""

from __future__ import annotations

from pathlib import Path

from mlmkit.errors import PathError
from mlmkit.evaluation.compare import Comparison, compare_suites, mcnemar
from mlmkit.evaluation.retrieval import RetrievalResult, evaluate_retrieval, write_run
from mlmkit.evaluation.sts import StsResult, evaluate_sts
from mlmkit.evaluation.suite import PARTS, SuiteResult, evaluate_suite, load_suite, write_suite

__all__ = ["PARTS", "Comparison", "RetrievalResult", "StsResult", "SuiteResult",
           "check_source", "compare_suites", "evaluate_retrieval", "evaluate_sts",
           "evaluate_suite", "load_suite", "mcnemar", "resolve_suite", "write_run",
           "write_suite"]


def check_source(source) -> None:
    """A suite source that names a path must exist (a bare name may be a hub model)."""
    text = str(source)
    path = Path(text)
    looks_like_path = ("/" in text or "\\" in text or text.startswith((".", "~"))
                       or path.suffix in (".json", ".jsonl", ".txt", ".md", ".tsv", ".csv"))
    if not path.exists() and looks_like_path:
        raise PathError(f"{text!r} does not exist: pass a suite.json, a folder holding one, a "
                        "run directory or a model")


def resolve_suite(source, *, data=None, quick=False, parts=None, retrieval=None, **runtime):
    """A suite result from a suite.json, a folder holding one, a pretraining run directory
    (its `suite.json`, else the suite run on `final/` and saved there), or a model."""
    path = Path(str(source))
    if path.is_file():
        return load_suite(path)
    if (path / "suite.json").is_file():
        return load_suite(path)
    if (path / "final" / "config.json").is_file():
        result = evaluate_suite(path / "final", data, quick=quick, parts=parts,
                                retrieval=retrieval, **runtime)
        write_suite(result, path)
        return result
    if path.exists() and not (path / "config.json").is_file():
        raise PathError(f"{str(source)!r} holds no suite.json, run (final/) or model "
                        "(config.json): pass one of those")
    return evaluate_suite(str(source), data, quick=quick, parts=parts, retrieval=retrieval,
                          **runtime)
