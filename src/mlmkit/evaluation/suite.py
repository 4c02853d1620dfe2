"""`mlmkit eval suite`: one command for the downstream picture of a masked LM.

Parts (each can be chosen with `parts=`):
- `blimp`: BLiMP minimal pairs, overall, per field and per paradigm (PLL, good > bad);
- `pppl`: pseudo-perplexity on held-out text (python-docs validation, or `texts`);
- `cloze`: zero-shot cloze SST-2 (PET's template and verbalizer, `mlmkit.cloze_classify`);
- `fewshot`: prompt-based fine-tuning on SST-2, K = 16 per class, 3 seeds (mean ± std);
- `sst2`, `agnews`: fine-tuned with a classification head (`mlmkit.finetune`);
- `elbo`: the masked-diffusion bound (nats/token), for models pretrained with diffusion;
- `facts`: a LAMA-style knowledge probe (P@1), when a facts file is given;
- `variants`: zero-shot variant effects (masked marginals) of deep mutational scans,
  Spearman's ρ against measured fitness per scan, when a scans file is given;
- `sts`: STS-B validation, Spearman's ρ of the cosine of the two sentences' vectors
  (`mlmkit.embed`: a sentence-transformers folder's pooling, else mean) with the gold
  scores; named with `parts=` (an embedding model's number, not a masked LM's);
- `retrieval`: dense retrieval on a BEIR folder given as `retrieval=` (exact cosine top-100
  search, `mlmkit.evaluation.retrieval`): NDCG@10, MRR@10 and Recall@100 as trec_eval
  computes them, each with its per-query values, so `eval compare` pairs two models query
  by query; it runs when `retrieval=` is given (or named in `parts=` with it).

Every part keeps its per-item outcomes (`items`), so `eval compare` can put bootstrap
intervals on each number and test differences between models on the same items.
`quick` sub-samples every part (sizes in QUICK) so a mini model finishes in minutes on CPU.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from mlmkit.core.checks import choice, count
from mlmkit.core.correlation import spearman
from mlmkit.core.data_dir import default_data_dir
from mlmkit.core.fasta import is_fasta, sequence_file
from mlmkit.core.hub import hub_offline
from mlmkit.core.output import write_text
from mlmkit.core.progress import status, warn
from mlmkit.core.records import names_a_file, read_table, read_texts
from mlmkit.core.results import Result
from mlmkit.corpus.python_docs import python_docs
from mlmkit.embeddings import embed
from mlmkit.embeddings.pairs import cosine_rows, read_sts_pairs
from mlmkit.errors import InvalidArgument, InvalidData, MissingExtra, PathError
from mlmkit.evaluation.data_names import beir_folder
from mlmkit.evaluation.ranking_metrics import per_query
from mlmkit.evaluation.retrieval import BeirSet, read_beir_folder, retrieve
from mlmkit.evaluation.suite_data import missing_data
from mlmkit.extras import require
from mlmkit.finetuning import finetune
from mlmkit.generation import elbo
from mlmkit.models import prepare_mlm
from mlmkit.options import renamed_keyword
from mlmkit.probe import cloze_classify, knowledge_probe, read_facts
from mlmkit.protein import check_sequence, variant_effects
from mlmkit.protein.dms import check_mutations, check_varied, numbers, read_scan
from mlmkit.scoring import read_pairs, score
from mlmkit.scoring.text_scores import NO_TOKEN_WARNING

PARTS = ("blimp", "pppl", "cloze", "fewshot", "sst2", "agnews", "elbo", "facts", "variants",
         "sts", "retrieval")
DEFAULT_PARTS = tuple(p for p in PARTS if p not in ("elbo", "facts", "variants", "sts",
                                                    "retrieval"))
"""The parts run when none are named (elbo needs a diffusion model, facts a facts file,
variants a scans file, retrieval a BEIR folder; sts scores an embedding model)."""
RETRIEVAL_METRICS = ("ndcg@10", "mrr@10", "recall@100")
# Sizes: (quick, full). None = everything.
SIZES = {
    "blimp_per_paradigm": (6, None), "pppl_texts": (30, 200), "cloze_rows": (300, None),
    "fewshot_eval": (300, 1000), "sst2_train": (2000, None), "sst2_eval": (400, None),
    "sst2_epochs": (1, 3), "agnews_train": (1000, None), "agnews_eval": (300, None),
    "agnews_epochs": (1, 3), "elbo_texts": (20, 100), "elbo_samples": (16, 128),
    "sts_pairs": (500, None), "retrieval_queries": (300, None),
}
CLOZE_TEMPLATE = "{text} It was [MASK] ."
VERBALIZERS = ({"negative": "terrible", "positive": "great"},
               {"negative": "bad", "positive": "good"})


@dataclass
class SuiteResult(Result):
    """The suite's numbers (`metrics`, flat names), their details, and per-item outcomes
    (`items[name]`: `values`, optional `weights`, `kind`, `key` of the items)."""

    model: str
    quick: bool
    metrics: dict
    details: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    items: dict = field(default_factory=dict)
    cpu_seconds: dict = field(default_factory=dict)

    def markdown(self) -> str:
        lines = [f"| metric ({self.model}{', quick' if self.quick else ''}) | value | n |",
                 "|---|---:|---:|"]
        for name, value in self.metrics.items():
            n = len(self.items[name]["values"]) if name in self.items else ""
            lines.append(f"| {name} | {format_value(name, value)} | {n} |")
        total = sum(self.seconds.values())
        lines.append(f"\nTime: {total:.0f} s (" + ", ".join(
            f"{k} {v:.0f} s" for k, v in self.seconds.items()) + ")")
        if self.cpu_seconds:
            lines.append(f"CPU: {sum(self.cpu_seconds.values()):.0f} s (" + ", ".join(
                f"{k} {v:.0f} s" for k, v in self.cpu_seconds.items()) + ")")
        return "\n".join(lines) + "\n"


def format_value(name: str, value) -> str:
    if value is None:
        return "–"
    if is_percent(name):
        return f"{100 * value:.1f}%"
    return f"{value:.3f}"


def is_percent(name: str) -> bool:
    return not (name.startswith(("pppl", "elbo", "variants", "sts")) or name.endswith("_std"))


def _key(parts) -> str:
    digest = hashlib.sha1()
    for part in parts:
        digest.update(str(part).encode("utf-8", "replace") + b"\0")
    return digest.hexdigest()[:16]


def _size(name: str, quick: bool):
    return SIZES[name][0 if quick else 1]


def _read_tsv(path: Path, text_col: str) -> tuple[list[str], list[str]]:
    rows = [row for _, row in read_table(path)]
    return [r[text_col] for r in rows], [r["label"] for r in rows]


def _sample(n: int, count: int | None, seed: int = 0) -> np.ndarray:
    if count is None or count >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).permutation(n)[:count])


def _single_token_verbalizer(tokenizer) -> dict | None:
    for words in VERBALIZERS:
        ok = all(len(tokenizer(" " + w, add_special_tokens=False)["input_ids"]) == 1 and
                 tokenizer.unk_token_id not in tokenizer(" " + w, add_special_tokens=False)[
                     "input_ids"] for w in words.values())
        if ok:
            return words
    return None


def _known_verbalizer(tokenizer) -> dict:
    for words in VERBALIZERS:
        if all(tokenizer.unk_token_id not in tokenizer(" " + w, add_special_tokens=False)[
                "input_ids"] for w in words.values()):
            return words
    return VERBALIZERS[0]


def check_suite_data(data, chosen: list[str], flag: str = "--data",
                     parts_flag: str = "--parts") -> Path:
    """The data folder (None: `default_data_dir()`, $MLMKIT_DATA) after checking it holds
    what the chosen parts read; the errors name `flag` and say how to get the data."""
    if data is not None and not (Path(data).is_dir() and any(
            (Path(data) / name).is_dir() for name in ("blimp", "sst2", "agnews", "stsb"))):
        raise PathError(f"data {str(data)!r} ({flag}) is not a folder holding blimp/, sst2/, "
                        "agnews/ or stsb/: pass the folder of the suite's data sets (mlmkit data "
                        "fetch NAME --data-dir DIR writes one)")
    default = data is None
    data = default_data_dir() if default else Path(data)
    needs = {"blimp": "blimp", "cloze": "sst2", "fewshot": "sst2", "sst2": "sst2",
             "agnews": "agnews", "sts": "stsb"}
    for part in chosen:
        if part in needs and not (data / needs[part]).is_dir():
            raise PathError(missing_data(needs[part], data, part, flag, parts_flag, default))
    return data


def is_diffusion(model) -> bool:
    """Whether `model` (a run's final folder) was pretrained with masked diffusion."""
    path = Path(str(getattr(model, "name", model))) / "mlmkit_pretrain.yaml"
    if not path.is_file():
        return False
    try:
        return (yaml.safe_load(path.read_text()) or {}).get("objective") == "diffusion"
    except yaml.YAMLError:
        return False


def evaluate_suite(
    model,
    data: str | Path | None = None,
    *,
    quick: bool = False,
    parts=None,
    texts=None,
    facts=None,
    variants=None,
    retrieval=None,
    run_dir: str | Path | None = None,
    offline: bool = False,
    batch_tokens: int | None = None,
    precision: str = "auto",
    device=None,
    threads: int | None = None,
    seed: int = 0,
    progress: bool | None = None,
    tokenizer=None,
    output_dir: str | Path | None = None,
) -> SuiteResult:
    """Run the evaluation suite on `model`; `data` is the folder holding `blimp/`, `sst2/`
    and `agnews/` (the shared data sets). `parts` picks parts (default: all that apply:
    `elbo` for diffusion models, `facts` when a facts file is given); `texts` is a file of
    held-out texts for `pppl` (default: python-docs validation); `quick` sub-samples every
    part. `variants` is a YAML list of deep mutational scans (`dms`, `sequence`, `offset`,
    `target`, optional `mutation_col`, paths relative to the file) for the `variants`
    part. `run_dir` receives suite.json, suite.md and suite.png (`output_dir`, its previous
    name, still works, deprecated). `offline=True` loads a hub model name from the local
    cache only (never the network). `tokenizer` (a folder or hub name) is the model's
    tokenizer when its folder has none."""
    run_dir = renamed_keyword("evaluate_suite", "output_dir", output_dir, "run_dir", run_dir)
    count("seed", seed, 0)
    if parts is None:
        chosen = list(DEFAULT_PARTS)
    else:
        chosen = [choice("parts", p.strip(), PARTS) for p in
                  (parts.split(",") if isinstance(parts, str) else parts)]
    data = check_suite_data(data, chosen)
    if "facts" in chosen and facts is None:
        raise InvalidArgument("the facts part needs a facts file (facts=, --facts)")
    if facts is not None and parts is not None and "facts" not in chosen:
        raise InvalidArgument("a facts file (--facts) is given but --parts has no facts part: "
                              "add facts to --parts or drop --facts")
    if "variants" in chosen and variants is None:
        raise InvalidArgument("the variants part needs a scans file (variants=, --variants)")
    if variants is not None and parts is not None and "variants" not in chosen:
        raise InvalidArgument("a scans file (--variants) is given but --parts has no variants "
                              "part: add variants to --parts or drop --variants")
    if variants is not None:  # read and checked now: a bad scan fails before any work
        variants = read_scans(variants)
    if "retrieval" in chosen and retrieval is None:
        raise InvalidArgument("the retrieval part needs a BEIR folder (retrieval=, "
                              "--retrieval)")
    if retrieval is not None and parts is not None and "retrieval" not in chosen:
        raise InvalidArgument("a BEIR folder (--retrieval) is given but --parts has no "
                              "retrieval part: add retrieval to --parts or drop --retrieval")
    if retrieval is not None:  # read and checked now: a bad file fails before any work
        retrieval = (str(retrieval), read_beir_folder(beir_folder(retrieval, "--retrieval")))
    if texts is not None and parts is not None and "pppl" not in chosen:
        raise InvalidArgument("a texts file (--texts) is given but --parts has no pppl part: "
                              "add pppl to --parts or drop --texts")
    if texts is not None:  # read now: a bad file fails before any work
        texts = _held_out_texts(texts)
    if facts is not None:
        facts = read_facts_file(facts)
    with hub_offline(offline):
        mlm, infer_precision = prepare_mlm(model, device=device, precision=precision,
                                           threads=threads, tokenizer=tokenizer)
    if parts is None:
        if is_diffusion(model):
            chosen.append("elbo")
        if facts is not None:
            chosen.append("facts")
        if variants is not None:
            chosen.append("variants")
        if retrieval is not None:
            chosen.append("retrieval")
    say = status if progress is not False else (lambda message: None)
    result = SuiteResult(model=str(getattr(mlm, "name", model)), quick=quick, metrics={})
    runtime = {"batch_tokens": batch_tokens, "precision": infer_precision, "progress": progress}
    for part in chosen:
        started, cpu_started = time.perf_counter(), time.process_time()
        say(f"suite: {part} ...")
        RUNNERS[part](mlm, result, data=data, quick=quick, texts=texts, facts=facts,
                      variants=variants, retrieval=retrieval,
                      seed=seed, runtime=runtime, precision=precision)
        result.seconds[part] = round(time.perf_counter() - started, 2)
        result.cpu_seconds[part] = round(time.process_time() - cpu_started, 2)
        say(f"suite: {part} done in {result.seconds[part]:.0f} s")
    if run_dir is not None:
        write_suite(result, run_dir)
    return result


def _accuracy_item(result: SuiteResult, name: str, correct, key_parts) -> None:
    values = np.asarray(correct, dtype=np.float64)
    result.metrics[name] = float(values.mean()) if len(values) else None
    result.items[name] = {"kind": "mean", "values": values.tolist(), "key": _key(key_parts)}


def _blimp(mlm, result, *, data, quick, runtime, **_):
    pairs = read_pairs(data / "blimp", limit=_size("blimp_per_paradigm", quick))
    unique = list(dict.fromkeys(s for p in pairs for s in (p.good, p.bad)))
    with warnings.catch_warnings():  # said below by pair, not by an internal text index
        warnings.filterwarnings("ignore", message=NO_TOKEN_WARNING)
        scores = score(mlm, unique, **runtime)
    pll = {text: s.pll for text, s in zip(unique, scores, strict=True)}
    unscored = [i for i, p in enumerate(pairs) if pll[p.good] is None or pll[p.bad] is None]
    if unscored:
        first = pairs[unscored[0]]
        warnings.warn(f"blimp: {len(unscored)} pair(s) with a sentence that has no token to "
                      f"score count as wrong (first: pair {unscored[0]}, paradigm "
                      f"{first.paradigm!r})", stacklevel=2)
    correct = np.array([pll[p.good] is not None and pll[p.bad] is not None and
                        pll[p.good] > pll[p.bad] for p in pairs], dtype=np.float64)
    _accuracy_item(result, "blimp", correct, [(p.good, p.bad) for p in pairs])
    fields = sorted({p.field for p in pairs})
    for name in fields:
        index = [i for i, p in enumerate(pairs) if p.field == name]
        _accuracy_item(result, f"blimp/{name}", correct[index],
                       [(pairs[i].good, pairs[i].bad) for i in index])
    paradigms = {}
    for p, c in zip(pairs, correct, strict=True):
        row = paradigms.setdefault(p.paradigm, {"field": p.field, "right": 0, "n": 0})
        row["right"] += int(c)
        row["n"] += 1
    result.details["blimp_by_paradigm"] = {
        k: {"field": v["field"], "n": v["n"], "accuracy": v["right"] / v["n"]}
        for k, v in sorted(paradigms.items())}


def _pppl(mlm, result, *, quick, texts, runtime, **_):
    if texts is None:
        pool = [t for t in python_docs("validation") if 5 <= len(t.split()) <= 60]
        source = "python-docs validation"
    else:
        pool, source = texts, "the texts file (--texts)"
    # whole texts: a long one is scored in sliding windows (never cut short)
    chosen = [pool[i] for i in _sample(len(pool), _size("pppl_texts", quick))]
    scored = [s for s in score(mlm, chosen, **runtime) if s.pll is not None and s.n_tokens]
    nll = np.array([-s.pll for s in scored], dtype=np.float64)
    tokens = np.array([s.n_tokens for s in scored], dtype=np.float64)
    result.metrics["pppl"] = float(np.exp(nll.sum() / tokens.sum()))
    result.items["pppl"] = {"kind": "exp_ratio", "values": nll.tolist(),
                            "weights": tokens.tolist(), "key": _key(s.text for s in scored)}
    result.details["pppl_source"] = source


def _held_out_texts(path) -> list[str]:
    lines = [t for _, t in read_texts(path)]
    pool = [t for t in lines if t.strip()]
    if not pool:
        raise InvalidArgument(f"texts file {str(path)!r} (--texts) holds no text: give one "
                              "held-out text per line")
    if len(pool) < len(lines):
        warnings.warn(f"{len(lines) - len(pool)} blank line(s) of the texts file "
                      f"{str(path)!r} (--texts) skipped", stacklevel=3)
    return pool


def _cloze(mlm, result, *, data, quick, runtime, **_):
    texts, labels = _read_tsv(data / "sst2" / "validation.tsv", "sentence")
    index = _sample(len(texts), _size("cloze_rows", quick))
    words = _known_verbalizer(mlm.tokenizer)
    gold = [words["positive"] if labels[i] == "1" else words["negative"] for i in index]
    verbalizer = {w: [w] for w in words.values()}
    out = cloze_classify(mlm, [texts[i] for i in index], CLOZE_TEMPLATE, verbalizer,
                         gold=gold, **runtime)
    correct = [p.label == p.gold for p in out.predictions]
    _accuracy_item(result, "cloze_sst2", correct, [texts[i] for i in index])
    result.details["cloze"] = {"template": CLOZE_TEMPLATE, "verbalizer": words}


def _finetune_part(mlm, result, name: str, task: str, **kwargs):
    out = finetune(mlm, task, **kwargs)
    correct, keys = [], []
    for run in out.runs:
        predictions, labels = run._predictions, run._labels
        correct.extend((predictions == labels).tolist())
        keys.append(run.seed)
    _accuracy_item(result, name, correct, [task, kwargs.get("eval_limit"), *keys])
    result.details[name] = {"metrics": out.metrics, "std": out.std, "seeds": out.seeds,
                            "per_seed": [r.metrics for r in out.runs],
                            "examples_per_s": [r.examples_per_s for r in out.runs]}
    return out


def _fewshot(mlm, result, *, data, quick, seed, precision, **_):
    words = _single_token_verbalizer(mlm.tokenizer)
    if words is None:
        result.details["fewshot_sst2"] = {"skipped": "no verbalizer pair of single tokens "
                                          f"among {list(VERBALIZERS)} in this vocabulary"}
        return
    out = _finetune_part(mlm, result, "fewshot_sst2", "sst2", method="prompt", shots=16,
                         seeds=3, verbalizer=words, train=data / "sst2" / "train.tsv",
                         validation=data / "sst2" / "validation.tsv",
                         eval_limit=_size("fewshot_eval", quick), seed=seed,
                         precision=precision, progress=False)
    result.metrics["fewshot_sst2_std"] = out.std["accuracy"]


def _sst2(mlm, result, *, data, quick, seed, precision, **_):
    _finetune_part(mlm, result, "finetune_sst2", "sst2", train=data / "sst2" / "train.tsv",
                   validation=data / "sst2" / "validation.tsv",
                   train_limit=_size("sst2_train", quick), eval_limit=_size("sst2_eval", quick),
                   epochs=_size("sst2_epochs", quick), seed=seed, precision=precision,
                   progress=False)


def _agnews(mlm, result, *, data, quick, seed, precision, **_):
    _finetune_part(mlm, result, "finetune_agnews", "agnews",
                   train=data / "agnews" / "train.tsv",
                   train_limit=_size("agnews_train", quick),
                   eval_limit=_size("agnews_eval", quick),
                   epochs=_size("agnews_epochs", quick), seed=seed, precision=precision,
                   progress=False)


def _elbo(mlm, result, *, quick, texts, seed, runtime, **_):
    pool = [t for t in python_docs("validation") if 5 <= len(t.split()) <= 60]
    chosen = [pool[i] for i in _sample(len(pool), _size("elbo_texts", quick))]
    bounds = elbo(mlm, chosen, samples=_size("elbo_samples", quick), seed=seed, **runtime)
    nats = np.array([b.nats for b in bounds], dtype=np.float64)
    tokens = np.array([b.n_tokens for b in bounds], dtype=np.float64)
    result.metrics["elbo_nats_per_token"] = float(nats.sum() / tokens.sum())
    result.items["elbo_nats_per_token"] = {"kind": "ratio", "values": nats.tolist(),
                                           "weights": tokens.tolist(), "key": _key(chosen)}


def _facts(mlm, result, *, facts, runtime, **_):
    out = knowledge_probe(mlm, facts, **runtime)
    probed = [f for f in out.facts if f.rank is not None]
    _accuracy_item(result, "facts_p@1", [f.rank == 1 for f in probed],
                   [(f.prompt, f.answer) for f in probed])
    result.details["facts"] = {"skipped": len(out.facts) - len(probed)}


@dataclass
class Scan:
    """One deep mutational scan of the variants part, read and checked."""

    name: str
    sequence: str
    offset: int
    mutations: list[str]
    fitness: list[float]


SCAN_KEYS = ("dms", "sequence", "offset", "target", "mutation_col", "name")
SCAN_NAME = re.compile(r"[\w.-]+")


def read_facts_file(path) -> list:
    """The facts part's file, read and checked (a bad one fails before any work)."""
    facts = read_facts(path)
    if not facts:
        raise InvalidArgument("the facts file (--facts) holds no facts")
    return facts


def read_scans(path) -> list[Scan]:
    """The scans listed in the YAML file at `path` (each `dms`, `sequence` (letters or a
    FASTA file), `offset` (default 1), `target`, optional `mutation_col` and `name`; no
    other key)."""
    path = Path(path)
    if not path.is_file():
        raise PathError(f"--variants {path}: no such scans file")
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise InvalidData(f"{path}: not a YAML list of scans ({error})") from None
    if not isinstance(entries, list) or not entries:
        raise InvalidData(f"{path}: give a YAML list of scans, each with dms, sequence, "
                          "offset and target")
    scans, names = [], {}
    for i, entry in enumerate(entries, 1):
        missing = [k for k in ("dms", "sequence", "target")
                   if not isinstance(entry, dict) or k not in entry]
        if missing:
            raise InvalidData(f"{path}: scan {i} lacks {', '.join(missing)}")
        unknown = sorted(str(key) for key in entry if key not in SCAN_KEYS)
        if unknown:
            raise InvalidData(f"{path}: scan {i} has unknown key(s) {', '.join(unknown)}: "
                              f"a scan takes {', '.join(SCAN_KEYS)}")
        for key in ("dms", "sequence", "target", "mutation_col", "name"):
            if key in entry and (not isinstance(entry[key], str | int) or
                                 isinstance(entry[key], bool) or not str(entry[key]).strip()):
                raise InvalidData(f"{path}: scan {i}'s {key} is {entry[key]!r}: give it as "
                                  "text")
        offset = entry.get("offset", 1)
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise InvalidData(f"{path}: scan {i}'s offset is {offset!r}: give the number of "
                              "the sequence's first residue as a whole number (e.g. 1)")
        dms = path.parent / str(entry["dms"])
        given = str(entry["sequence"])
        file = path.parent / given  # a FASTA file, relative to the scans file like dms
        if is_fasta(given) or names_a_file(file):
            sequence = sequence_file(file, f"{path}: scan {i}'s sequence")
        elif "/" in given or "." in given:
            raise PathError(f"{path}: scan {i}'s sequence {given!r}: no such FASTA file "
                            f"in {str(path.parent)!r} (paths are relative to the scans file)")
        else:
            sequence = given
        sequence = check_sequence(sequence, f"{path}: scan {i}'s sequence")
        column = str(entry.get("mutation_col", "mutant"))
        if not dms.is_file():
            raise PathError(f"{path}: scan {i}'s dms {str(entry['dms'])!r}: no such file in "
                            f"{str(path.parent)!r} (paths are relative to the scans file)")
        scan = read_scan(dms, column, naming=f"mutation_col: in {path}")
        if str(entry["target"]) not in scan.columns:
            raise InvalidData(f"{path}: scan {i}'s target {str(entry['target'])!r} is not a "
                              f"column of {dms} (its columns: {', '.join(scan.columns)})")
        mutations = check_mutations(scan, sequence, column, offset,
                                    offset_name=f"scan {i}'s offset in {path}")
        # the file's stem, its other characters made '-', unless a name is given
        name = str(entry.get("name", re.sub(r"[^\w.-]+", "-", dms.stem)))
        if not SCAN_NAME.fullmatch(name):
            raise InvalidData(f"{path}: scan {i}'s name {name!r} becomes a metric's name "
                              "(variants_spearman_NAME): use letters, digits, '_', '-' and "
                              "'.' only")
        if name in names:
            raise InvalidData(f"{path}: scans {names[name]} and {i} are both named {name!r}: "
                              "give each a name of its own (name: ...)")
        names[name] = i
        fitness = check_varied(numbers(scan, str(entry["target"])), scan,
                               f"{path}: scan {i}'s target {entry['target']}")
        scans.append(Scan(name, sequence, offset, mutations, fitness))
    return scans


def _variants(mlm, result, *, variants, runtime, **_):
    for scan in variants:
        scores = variant_effects(mlm, scan.sequence, scan.mutations, offset=scan.offset,
                                 batch_tokens=runtime["batch_tokens"],
                                 precision=runtime["precision"], progress=runtime["progress"])
        name = f"variants_spearman_{scan.name}"
        result.metrics[name] = spearman(scores, scan.fitness)
        result.items[name] = {"kind": "spearman", "values": scores.tolist(),
                              "weights": list(scan.fitness),
                              "key": _key([scan.name, *scan.mutations])}


def _sts(mlm, result, *, data, quick, runtime, **_):
    firsts, seconds, gold = read_sts_pairs(data / "stsb" / "validation.tsv",
                                           limit=_size("sts_pairs", quick))
    vectors = embed(mlm, firsts + seconds, **runtime)
    similarity = cosine_rows(vectors[:len(firsts)], vectors[len(firsts):])
    result.metrics["sts_spearman"] = spearman(similarity, gold)
    result.items["sts_spearman"] = {"kind": "spearman", "values": similarity.tolist(),
                                    "weights": gold.tolist(),
                                    "key": _key(list(zip(firsts, seconds, strict=True)))}


def _retrieval(mlm, result, *, quick, retrieval, runtime, **_):
    source, data = retrieval
    keep = set(np.asarray(list(data.queries))[_sample(len(data.queries),
                                                      _size("retrieval_queries", quick))])
    data = BeirSet(data.doc_ids, data.doc_texts,
                   {q: t for q, t in data.queries.items() if q in keep},
                   {q: r for q, r in data.qrels.items() if q in keep})
    run = retrieve(mlm, data, embed=lambda texts: embed(mlm, texts, **runtime))
    values = per_query(run, data.qrels)
    # the same queries over the same corpus: `eval compare` pairs two models query by query
    key = _key([*values, "|", *data.doc_ids])
    for metric in RETRIEVAL_METRICS:
        _accuracy_item(result, f"retrieval_{metric}", [v[metric] for v in values.values()],
                       [key])
    result.details["retrieval"] = {"data": source, "queries": len(values),
                                   "documents": len(data.doc_ids)}


RUNNERS = {"blimp": _blimp, "pppl": _pppl, "cloze": _cloze, "fewshot": _fewshot,
           "sst2": _sst2, "agnews": _agnews, "elbo": _elbo, "facts": _facts,
           "variants": _variants, "sts": _sts, "retrieval": _retrieval}


def write_suite(result: SuiteResult, output_dir) -> Path:
    """suite.json, suite.md and suite.png (a bar chart of the percentages) in `output_dir`.

    Without matplotlib (the extra mlmkit[plots]) the chart is skipped with one warning:
    the figures are in suite.json and suite.md, and an evaluation that took minutes is not
    thrown away for a picture."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    write_text(str(folder / "suite.json"), result.to_json(indent=1) + "\n")
    write_text(str(folder / "suite.md"), result.markdown())
    try:
        plot_suites([result], folder / "suite.png")
    except MissingExtra as missing:
        warn(f"{missing}; suite.png is not written (suite.json and suite.md are)")
    return folder


def plot_suites(results: list, path: Path, intervals: dict | None = None) -> None:
    """Grouped bars of every percentage metric (one colour per model), with intervals."""
    matplotlib = require("matplotlib", extra="plots", feature="the suite's chart (suite.png)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in results[0].metrics if is_percent(n) and
             all(r.metrics.get(n) is not None for r in results)]
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(names) * len(results)), 4))
    width = 0.8 / len(results)
    for k, res in enumerate(results):
        values = [100 * res.metrics[n] for n in names]
        errors = None
        if intervals:
            errors = np.array([[v - intervals[(k, n)][0], intervals[(k, n)][1] - v]
                               if intervals.get((k, n)) else [0, 0]
                               for v, n in zip(values, names, strict=True)]).T
        ax.bar(np.arange(len(names)) + k * width, values, width, yerr=errors,
               label=res.model, capsize=2)
    ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, rotation=45, ha="right",
                  fontsize=7)
    ax.set_ylabel("%")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def load_suite(path) -> SuiteResult:
    """A SuiteResult from suite.json (or a folder holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "suite.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return SuiteResult(**{k: data[k] for k in ("model", "quick", "metrics", "details",
                                                   "seconds", "items")},
                           cpu_seconds=data.get("cpu_seconds", {}))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise InvalidData(f"{str(path)!r} is not a suite.json written by mlmkit eval suite "
                          f"({type(error).__name__}); run the suite again") from error
