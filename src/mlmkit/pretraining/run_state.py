"""What a run stores so that a resume continues *that* run, not a recomputed look-alike.

- the tokenizer, in `RUN_DIR/tokenizer/` (saved when the run starts; a resume loads it from
  there and never retrains or re-downloads one);
- the resolved config and the fingerprints of the tokenizer and of the token data, inside
  every checkpoint. A resume compares what it is asked against them, not against the
  editable `config.yaml`: a field that defines what is studied (model, data, masking,
  optimizer, seed, ...) may not change; budget, evaluation and runtime fields may, through
  flags, `--override KEY=VALUE` or `overrides=` (`RESUMABLE`);
- `--restart` (`restart=True`) starts a new run in a directory that holds one, removing
  the old run's files (only those: other files in the directory are left alone).
"""

from __future__ import annotations

import logging
import math
import shutil
from dataclasses import fields
from pathlib import Path

import yaml
from transformers import AutoTokenizer

from mlmkit.core.progress import warn
from mlmkit.core.run_layout import RUN_TOKENIZER_DIR
from mlmkit.core.yaml_values import NotFinite, load_yaml
from mlmkit.corpus.shards import tokenizer_fingerprint
from mlmkit.errors import InvalidArgument, MlmkitError, PathError, RunError
from mlmkit.pretraining.config import (
    STUDIED,
    PretrainConfig,
    budget_overrides,
    flag,
    from_dict,
    read_config_file,
)
from mlmkit.tokenizer import save_tokenizer
from mlmkit.training.checkpoint import save_model_dir

logger = logging.getLogger(__name__)

TOKENIZER_DIR = RUN_TOKENIZER_DIR
# What a run directory holds (removed by --restart); anything else there is the user's.
RUN_FILES = ("checkpoints", "final", "wsd-stable", TOKENIZER_DIR, "metrics.jsonl",
             "tensorboard", "plots", "summary.json", "config.yaml", "README.md")
RESUMABLE = tuple(f.name for f in fields(PretrainConfig)
                  if f.metadata["group"] != STUDIED and f.name != "run_dir")
# Fields that runs were saved without, whose default for new runs is not what those runs
# did: a stored config that lacks one is read with the value the run trained with.
BEFORE_THE_FIELD = {"mask_stream": "row"}


# ---- the config of a resumed run


def parse_overrides(items: list[str] | None) -> dict:
    """`["steps=2000", "eval_every=50"]` (from `--override`) as {field: value} (YAML values)."""
    known = {f.name for f in fields(PretrainConfig)}
    values = {}
    for item in items or []:
        key, sep, text = str(item).partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise InvalidArgument(f"--override {item!r}: use KEY=VALUE, e.g. steps=2000")
        if key not in known:
            raise InvalidArgument(f"--override {item!r}: {key!r} is not a config field; "
                                  f"fields that may change on resume: {', '.join(RESUMABLE)}")
        try:
            values[key] = load_yaml(text) if text.strip() else None
        except NotFinite:
            raise InvalidArgument(f"--override {item!r}: {key} must be a finite number") \
                from None
        except yaml.YAMLError as error:
            raise InvalidArgument(f"--override {item!r}: the value is not valid YAML") \
                from error
    return values


def stored_config(state: dict, run_dir: Path) -> PretrainConfig:
    """The config the run was trained with, from its checkpoint (older checkpoints without
    one: from config.yaml)."""
    values = state.get("config")
    if values is None:
        return recorded_config(run_dir / "config.yaml")
    return from_dict({**BEFORE_THE_FIELD, **values}, source=f"the checkpoint in {run_dir}")


def recorded_config(path: Path) -> PretrainConfig:
    """A run's config.yaml as the run used it (a field it lacks: `BEFORE_THE_FIELD`)."""
    values = budget_overrides({**BEFORE_THE_FIELD, **read_config_file(path)})
    return from_dict(values, source=str(path))


def resume_config(stored: PretrainConfig, config: PretrainConfig | None, overrides: dict,
                  run_dir: Path) -> PretrainConfig:
    """The stored config with the changes asked for; a change to a studied field is refused,
    naming each field."""
    wanted = (config if config is not None else stored).replace(**overrides) \
        if overrides or config is not None else stored
    refused = [name for name in stored.studied()
               if getattr(wanted, name) != getattr(stored, name)]
    if refused:
        changes = "; ".join(f"--{flag(k)}: {getattr(stored, k)!r} in the run, "
                            f"{getattr(wanted, k)!r} now" for k in refused)
        raise RunError(f"--resume {str(run_dir)!r} was trained with a different config "
                       f"({changes}); these fields define what the run studies and stay as "
                       f"stored; only {', '.join(RESUMABLE)} may change (flags or --override "
                       "KEY=VALUE); start a new run with another --run-dir, or over in this "
                       "one with --restart")
    if config is None:
        warn_edited_yaml(stored, run_dir)
    return wanted.replace(run_dir=str(run_dir))


def warn_edited_yaml(stored: PretrainConfig, run_dir: Path) -> None:
    """config.yaml is a record, not an input: say so when it was edited."""
    try:
        written = recorded_config(run_dir / "config.yaml")
    except MlmkitError:
        return
    edited = [k for k in stored.to_dict() if k != "run_dir"
              and getattr(written, k) != getattr(stored, k)]
    if edited:
        warn(f"{run_dir / 'config.yaml'} differs from the config stored in the run "
             f"({', '.join('--' + flag(k) for k in edited)}); it is ignored: the run "
             "continues as stored (change a budget, evaluation or runtime field with "
             "--override KEY=VALUE)")


# ---- the tokenizer and the data


def run_tokenizer(run_dir: Path):
    """The tokenizer stored in the run, or None for a run of an older version."""
    folder = Path(run_dir) / TOKENIZER_DIR
    if not (folder / "tokenizer_config.json").is_file():
        return None
    try:
        return AutoTokenizer.from_pretrained(str(folder))
    except (OSError, ValueError) as error:
        raise RunError(f"--resume {str(run_dir)!r}: the run's tokenizer in {folder} cannot "
                       f"be loaded ({str(error).splitlines()[0] if str(error) else error}); "
                       "restore it, or start over with --restart") from error


def save_run_tokenizer(tokenizer, run_dir: Path) -> None:
    """Store the tokenizer in the run (once: a resumed run keeps the stored one)."""
    folder = Path(run_dir) / TOKENIZER_DIR
    if not (folder / "tokenizer_config.json").is_file():
        save_model_dir(lambda directory: save_tokenizer(tokenizer, directory), folder)


def drop_tokenizer_files(model_dir: Path, run_dir: Path) -> None:
    """Remove from a step's model folder the files of the run's tokenizer (those that
    RUN/tokenizer/ holds): the run keeps one copy, not one per step."""
    stored = Path(run_dir) / TOKENIZER_DIR
    if not (stored / "tokenizer_config.json").is_file():  # nothing to point at: keep them
        return
    for path in stored.iterdir():
        (Path(model_dir) / path.name).unlink(missing_ok=True)


def fingerprints(tokenizer, data) -> dict:
    """What the token ids of the run depend on: the tokenizer and the token shards (whose
    cache key hashes the corpus text, the tokenizer and the tokenization settings)."""
    val = data.validation_shards
    return {"tokenizer": tokenizer_fingerprint(tokenizer),
            "train": Path(data.train_shards.path).name,
            "validation": Path(val.path).name if val is not None else None}


def check_fingerprints(saved: dict, now: dict, config: PretrainConfig, run_dir: Path) -> None:
    """Refuse to resume on other token ids than the run was trained on."""
    stored = saved.get("fingerprints")
    if stored is None:  # a checkpoint of an older version
        return
    if stored.get("tokenizer") != now["tokenizer"]:
        raise RunError(f"--resume {str(run_dir)!r}: the tokenizer differs from the one the "
                       "run was trained with (its ids would map to other embeddings); "
                       f"restore {run_dir / TOKENIZER_DIR}, or start over with --restart")
    changed = [split for split in ("train", "validation") if stored.get(split) != now[split]]
    if changed:
        raise RunError(f"--resume {str(run_dir)!r}: the {' and '.join(changed)} data of "
                       f"--corpus {config.corpus!r} is not what the run was trained on (the "
                       "text changed since); restore it, or start over with --restart")


# ---- starting over


def clear_run(run_dir: Path) -> None:
    """Remove a run's files from `run_dir` (--restart), leaving any other file alone."""
    for name in RUN_FILES:
        path = Path(run_dir) / name
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        except OSError as error:
            raise PathError(f"--restart: cannot remove {str(path)!r} ({error.strerror}); "
                            "remove it yourself or choose another --run-dir") from error
    for step_dir in Path(run_dir).glob("step-*"):
        if step_dir.name[5:].isdigit():
            shutil.rmtree(step_dir, ignore_errors=True)


# ---- a step's numbers


def check_finite(value: float, what: str, step: int, run_dir: Path, last_saved: int | None
                 ) -> None:
    """Stop at the first non-finite loss or gradient, before the optimizer uses it."""
    if math.isfinite(value):
        return
    kept = (f"the last checkpoint (step {last_saved}) is kept" if last_saved is not None
            else "no checkpoint was saved yet")
    raise RunError(f"the {what} is {value} at step {step + 1}: training stopped before the "
                   f"update, and {kept}; lower --lr (or use --precision fp32) and start over "
                   f"with --restart --run-dir {run_dir}")
