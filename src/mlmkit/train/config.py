"""The run config: one dataclass, every field documented, loadable from YAML, set by flags.

Fields are grouped as in cramming: *what is studied* (model, data, objective, masking,
optimizer, budget) changes results; *how it runs* (device, precision, compile, logging)
should change only speed. A resumed run must agree with its directory on the first group.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from mlmkit.errors import MlmkitError

STUDIED, BUDGET, EVALUATION, RUNTIME = "what is studied", "budget", "evaluation", "runtime"
PRECISIONS = ("auto", "fp32", "bf16")  # auto: bf16 where the device runs it natively


def _f(default, help: str, group: str = STUDIED, **kwargs):
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default),
                     metadata={"help": help, "group": group, **kwargs})
    return field(default=default, metadata={"help": help, "group": group, **kwargs})


@dataclass
class PretrainConfig:
    """Everything a pretraining run depends on (see `mlmkit pretrain --help`)."""

    # what is studied
    objective: str = _f("mlm", "training objective: mlm, electra (replaced-token detection) "
                               "or diffusion (MDLM/LLaDA masked diffusion)")
    model: str | None = _f(None, "model preset: SIZE or FAMILY-SIZE, e.g. mini, roberta-small, "
                                 "modernbert-base; default: modernbert-mini (pre-LN: a short "
                                 "run leaves the unigram stage far sooner than with a post-LN "
                                 "BERT), electra-mini for --objective electra")
    init: str | None = _f(None, "start from this HF masked LM (name or path) and its tokenizer "
                                "(continued pretraining); overrides --model and --tokenizer")
    dropout: float | None = _f(0.0, "dropout of the model (hidden and attention); 0 suits "
                                    "short budgets (cramming); None keeps the preset's / "
                                    "--init model's (0.1 for BERT)")
    tokenizer: str | None = _f(None, "tokenizer name or path; default: train one on the corpus")
    tokenizer_kind: str = _f("wordpiece", "kind of tokenizer trained when --tokenizer is not "
                                          "given: wordpiece, bpe or unigram")
    vocab_size: int = _f(8192, "vocabulary of the tokenizer trained when none is given")
    corpus: str = _f("python-docs", "corpus: python-docs, a text/jsonl/parquet file or folder, "
                                    "or a local HF dataset")
    field: str = _f("text", "field holding the text in jsonl/parquet/dataset corpora")
    validation_share: float = _f(0.05, "share of documents held out for validation when the "
                                       "corpus has no validation split")
    seq_len: int = _f(128, "tokens per packed block")
    packing: str = _f("full", "full: documents concatenated with [SEP] (RoBERTa "
                              "FULL-SENTENCES); document: one document per block, padded")
    masking: Any = _f("default", "masking policy: a preset of mlmkit.masking (bert, whole_word, "
                                 "span, pmi, mask40, ...) or a YAML mapping; default: 30% "
                                 "whole-word masking, 80/10/10")
    masking_stats: str | None = _f(None, "statistics folder from `mlmkit mask stats` (needed "
                                         "by pmi / frequency / tfidf / informask masking)")
    label_smoothing: float = _f(0.0, "label smoothing of the MLM cross-entropy")
    batch_size: int = _f(16, "blocks per optimizer step (all accumulation steps together)")
    grad_accum: int = _f(1, "gradient accumulation micro-steps per optimizer step")
    lr: float = _f(1e-3, "peak learning rate")
    weight_decay: float = _f(0.01, "AdamW weight decay (not applied to norms and biases)")
    beta1: float = _f(0.9, "AdamW beta1")
    beta2: float = _f(0.98, "AdamW beta2")
    eps: float = _f(1e-6, "AdamW epsilon")
    clip: float = _f(1.0, "gradient-norm clipping threshold (0 disables)")
    schedule: str = _f("linear", "learning-rate schedule after warmup: linear, cosine, wsd "
                                 "(warmup-stable-decay) or constant")
    warmup: float = _f(0.06, "warmup: a share of the budget (< 1) or a number of steps (>= 1)")
    decay: float = _f(0.2, "wsd only: share of the budget spent decaying at the end")
    min_lr: float = _f(0.0, "learning rate at the end, as a share of --lr")
    seed: int = _f(0, "seed of initialisation, data order, masking and dropout")
    # budget
    steps: int | None = _f(1000, "optimizer steps to train (the schedule ends there)", BUDGET)
    tokens: int | None = _f(None, "or: tokens to train on (non-padding input tokens)", BUDGET)
    time: str | None = _f(None, "or: wall-clock budget, e.g. 90s, 10m, 2h (the schedule "
                                "follows the elapsed share of it)", BUDGET)
    # evaluation
    eval_every: int = _f(100, "evaluate every N steps (and at the end); 0: only at the end",
                         EVALUATION)
    eval_blocks: int = _f(128, "held-out blocks evaluated (fixed, seeded mask)", EVALUATION)
    pppl_sentences: int = _f(32, "validation sentences scored for pseudo-perplexity (0: skip)",
                             EVALUATION)
    save_every: int = _f(100, "save training state and step-N every N steps (0: only at the "
                              "end and on SIGINT/SIGTERM)", EVALUATION)
    keep_checkpoints: int = _f(2, "training states (and step-N folders) kept", EVALUATION)
    # runtime
    run_dir: str | None = _f(None, "run directory (outputs, checkpoints, logs); default: "
                                   "runs/pretrain, or runs/pretrain-2, -3, ... if taken", RUNTIME)
    device: str = _f("auto", "auto, cpu or cuda", RUNTIME)
    precision: str = _f("auto", "auto, fp32 or bf16 (torch.autocast); auto: bf16 where the "
                                "device multiplies bf16 natively (a GPU with bf16, a CPU with "
                                "AVX512-BF16 or AMX), else fp32", RUNTIME)
    compile: bool = _f(False, "torch.compile the model", RUNTIME)
    threads: int | None = _f(None, "CPU threads for torch (default: torch's choice)", RUNTIME)
    log_every: int = _f(10, "log training metrics every N steps", RUNTIME)
    halt_after: int | None = _f(None, "stop (saving state) after this many steps of this "
                                      "process, as on SIGTERM; resume later with --resume",
                                RUNTIME)
    progress: bool = _f(True, "show progress bars", RUNTIME)
    fill_mask_examples: int = _f(4, "fill-mask examples printed at the end", RUNTIME)

    def __post_init__(self):
        if self.model is None:  # resolved here, so config.yaml names the model trained
            self.model = default_model(self.objective)
        self.validate()

    def validate(self) -> None:
        positive = ("seq_len", "batch_size", "grad_accum", "vocab_size", "log_every",
                    "keep_checkpoints")
        for name in positive:
            if getattr(self, name) < 1:
                raise MlmkitError(f"--{flag(name)} must be at least 1, got {getattr(self, name)}")
        if self.batch_size % self.grad_accum:
            raise MlmkitError(f"--batch-size {self.batch_size} is not divisible by "
                              f"--grad-accum {self.grad_accum}")
        if self.steps is None and self.tokens is None and self.time is None:
            raise MlmkitError("no budget: give --steps, --tokens or --time")
        if self.time is not None:
            parse_duration(self.time)
        if self.precision not in PRECISIONS:
            raise MlmkitError(f"--precision {self.precision!r}: use auto, fp32 or bf16")
        if not 0 <= self.label_smoothing < 1:
            raise MlmkitError(f"--label-smoothing {self.label_smoothing}: use a value in [0, 1)")
        if not 0 <= self.validation_share < 1:
            raise MlmkitError(f"--validation-share {self.validation_share}: use [0, 1)")
        choices = {"packing": ("full", "document"),
                   "schedule": ("linear", "cosine", "wsd", "constant"),
                   "tokenizer_kind": ("wordpiece", "bpe", "unigram")}
        for name, valid in choices.items():
            if getattr(self, name) not in valid:
                raise MlmkitError(f"--{flag(name)} {getattr(self, name)!r}: use one of "
                                  f"{list(valid)}")
        if self.init is None:
            from mlmkit.models.presets import parse_preset

            try:
                parse_preset(self.model)
            except ValueError as error:
                raise MlmkitError(f"--model: {error}") from error

    # ---- what is studied vs how it runs
    def studied(self) -> dict:
        """The fields a resumed run must share with its directory (budget may be extended)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.metadata["group"] == STUDIED}

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def replace(self, **overrides) -> PretrainConfig:
        return from_dict({**self.to_dict(), **overrides})


def default_model(objective: str) -> str:
    """The preset a run trains when --model is not given."""
    return "electra-mini" if objective == "electra" else "modernbert-mini"


def flag(name: str) -> str:
    return name.replace("_", "-")


def from_dict(values: dict, source: str = "config") -> PretrainConfig:
    known = {f.name for f in fields(PretrainConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise MlmkitError(f"{source}: unknown field(s) {unknown}; valid fields: {sorted(known)}")
    return PretrainConfig(**values)


def budget_overrides(values: dict) -> dict:
    """A --time or --tokens budget given without --steps replaces the default step budget."""
    if ("time" in values or "tokens" in values) and "steps" not in values:
        return {**values, "steps": None}
    return values


def load_config(path: str | Path, **overrides) -> PretrainConfig:
    """A config from a YAML file, with `overrides` (flags) applied on top."""
    path = Path(path)
    if not path.is_file():
        raise MlmkitError(f"config file {str(path)!r} does not exist")
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise MlmkitError(f"config file {str(path)!r} is not valid YAML: {error}") from error
    if not isinstance(values, dict):
        raise MlmkitError(f"config file {str(path)!r} must hold a mapping of field: value")
    return from_dict(budget_overrides({**values, **overrides}), source=str(path))


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr)?\s*$")


def parse_duration(text: str) -> float:
    """Seconds in `90`, `90s`, `10m`, `1.5h`."""
    match = _DURATION.match(str(text))
    if not match:
        raise MlmkitError(f"--time {text!r} is not a duration: use e.g. 90s, 10m or 2h")
    value, unit = float(match.group(1)), (match.group(2) or "s")[0]
    return value * {"s": 1, "m": 60, "h": 3600}[unit]
