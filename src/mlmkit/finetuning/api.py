"""`mlmkit.finetune(model, task, ...)`: fine-tune with a head or a prompt, one seed or many."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from mlmkit.core.checks import boolean, choice, count
from mlmkit.core.devices import prepare, resolve_precision
from mlmkit.core.hub import hub_offline
from mlmkit.core.progress import status
from mlmkit.core.records import STDIN
from mlmkit.core.results import Result
from mlmkit.errors import InvalidArgument, RunError, UntrainedHead
from mlmkit.finetuning.data import few_shot, limit, load_task_data
from mlmkit.finetuning.lora import LoraOptions
from mlmkit.finetuning.methods import check_method
from mlmkit.finetuning.run_readme import write_finetune_readme
from mlmkit.finetuning.tasks import get_task
from mlmkit.finetuning.trainer import Recipe, RunResult, fine_tune_run
from mlmkit.models import as_mlm
from mlmkit.options import renamed_keyword
from mlmkit.probe.verbalizer import parse_verbalizer
from mlmkit.training.checkpoint import list_states

# the recipe's own defaults (the Trainer's: `Recipe`)
FULL_DEFAULTS = {name: getattr(Recipe, name)
                 for name in ("epochs", "lr", "batch_size", "warmup", "weight_decay")}
FEW_SHOT_DEFAULTS = {"epochs": 20, "lr": 1e-4, "batch_size": 8, "warmup": 0.1,
                     "weight_decay": 0.01}


@dataclass
class FinetuneResult(Result):
    """The runs of one fine-tuning call: `metrics` and `test_metrics` are the mean over
    seeds and `std` their standard deviation (0 for one seed); `runs` holds each seed's."""

    task: str
    method: str
    shots: int | None
    seeds: list[int]
    metrics: dict
    std: dict
    test_metrics: dict | None
    runs: list[RunResult] = field(default_factory=list)

    @property
    def model(self):
        """The first run's fine-tuned model (its best epoch)."""
        return self.runs[0]._model if self.runs else None

    def summary(self) -> str:
        # the seeds the mean is over: those with validation metrics, else with test metrics
        scored = sum(1 for run in self.runs if run.metrics) or \
            sum(1 for run in self.runs if run.test_metrics)
        stopped = [seed for seed, run in zip(self.seeds, self.runs, strict=False)
                   if run.status != "finished"]
        parts = []
        for name, value in self.metrics.items():
            spread = f" ± {self.std[name]:.4f}" if scored > 1 else ""
            parts.append(f"{name} {value:.4f}{spread}")
        shots = f", {self.shots} shots" if self.shots else ""
        seeds = f"{len(self.seeds)} seed(s)"
        if stopped or scored < len(self.seeds):
            seeds = (f"mean of {scored} of {len(self.seeds)} seed(s)"
                     + (f"; seed {stopped[0]} was stopped" if stopped else ""))
        if not parts and self.test_metrics:
            parts = [f"test {name} {value:.4f}" for name, value in self.test_metrics.items()]
        return f"{self.task} ({self.method}{shots}, {seeds}): " + (
            ", ".join(parts) or "no metrics yet (stopped before its first evaluation)")


def _mean_std(dicts: list[dict]) -> tuple[dict, dict]:
    if not dicts or not dicts[0]:
        return {}, {}
    keys = list(dicts[0])
    values = {k: np.array([d[k] for d in dicts], dtype=np.float64) for k in keys}
    return ({k: float(v.mean()) for k, v in values.items()},
            {k: float(v.std(ddof=1)) if len(v) > 1 else 0.0 for k, v in values.items()})


def finetune(
    model,
    task: str = "sst2",
    *,
    train=None,
    validation=None,
    test=None,
    dataset: str | None = None,
    offline: bool = False,
    text_field=None,
    label_field: str | None = None,
    regression: bool | None = None,
    method: str = "head",
    epochs: int | None = None,
    lr: float | None = None,
    batch_size: int | None = None,
    max_length: int = 128,
    warmup: float | None = None,
    weight_decay: float | None = None,
    bucket: bool = False,
    select: str | None = None,
    packed: bool | None = None,
    shots: int | None = None,
    seeds: int = 1,
    template: str | None = None,
    verbalizer=None,
    lora: bool = False,
    lora_rank: int = 8,
    lora_alpha: float = 16.0,
    lora_targets=None,
    merge_lora: bool = False,
    train_limit: int | None = None,
    eval_limit: int | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
    save_every: int = 0,
    halt_after: int | None = None,
    batch_tokens: int | None = None,
    precision: str = "auto",
    device=None,
    threads: int | None = None,
    seed: int = 0,
    progress: bool | None = None,
    tokenizer=None,
    text_cols=None,
    label_col: str | None = None,
) -> FinetuneResult:
    """Fine-tune `model` on `task` and evaluate it on the validation split each epoch.

    `task`: a GLUE task (cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli), agnews, or a
    name of your own with `text_field` (one or two columns) and `label_field` (`text_cols` and
    `label_col`, their previous names, still work, deprecated). Data: `train`,
    `validation`, `test` files (JSONL/TSV/CSV), else `dataset` (a Hugging Face datasets name,
    `NAME[:CONFIG]`), else the task's own dataset; without a validation split, every training
    row is trained on when a `test` split scores the run, and 10% of train is held out as the
    validation split (a fixed seed) when nothing else would (or `select="best"` needs one).
    `offline=True` reads datasets names and hub models from
    the local caches only (never the network; a name not cached is an error); without it
    `datasets` downloads what it needs, as usual.
    `method`: "head" (an AutoModelForSequenceClassification; classification or regression)
    or "prompt" (PET / LM-BFF: a cloze `template` and a `verbalizer` through the MLM head).
    Defaults are the Hugging Face Trainer's (lr 5e-5, batch 8, 3 epochs, no warm-up, no
    weight decay; length 128) and so is the optimisation (AdamW, its decay groups and
    schedule, clipping at 1.0) and the last epoch's model (`select="best"` evaluates each
    epoch and keeps the best on the validation split); `bucket=True` trains on
    length-bucketed batches (less padding where batches are padded: docs/fine-tuning.md);
    `shots=K` samples K examples per class under each of `seeds` seeds (few-shot
    defaults: 20 epochs, lr 1e-4, batch 8, 10% warm-up, weight decay 0.01; the last epoch
    is kept: no large validation set may pick it in a true few-shot setting) and reports
    the mean and standard deviation.
    `batch_size` is the optimizer's batch (examples per step); `batch_tokens` bounds the
    evaluation batches. `packed` (default: wherever the model has unpadded attention) packs
    each batch's examples into rows without padding, each attending only to itself: the
    same numbers as padded batches, faster.
    `lora=True` trains LoRA adapters (`lora_rank`, `lora_alpha`, `lora_targets`) through
    peft, saved as an adapter or merged (`merge_lora`).
    `run_dir` keeps the best epoch's model in `run_dir/best`, `metrics.json` (with the
    truncation counts), checkpoints for `resume=True` (several seeds: `run_dir/seed-N`) and
    a README.md that says how to use them; without it nothing is written (`mlmkit finetune`
    defaults to `runs/finetune/<task>`). The saved classifier is used with
    `mlmkit.finetuning.predict` and `evaluate_classifier`. `tokenizer` (a folder or hub
    name) is the model's tokenizer when its folder has none.
    """
    text_field = renamed_keyword("finetune", "text_cols", text_cols, "text_field", text_field)
    label_field = renamed_keyword("finetune", "label_col", label_col, "label_field",
                                  label_field)
    if epochs == 0:  # training nothing would only evaluate a random head
        raise InvalidArgument("epochs=0 (--epochs) trains nothing: to evaluate a fine-tuned "
                              "classifier use mlmkit.finetuning.evaluate_classifier (mlmkit eval "
                              "classify MODEL --task ...), to predict with it "
                              "mlmkit.finetuning.predict (mlmkit predict MODEL FILE)")
    if resume and run_dir is None:
        raise InvalidArgument("resume=True (--resume) needs the run_dir (--run-dir) to resume")
    files = {"train": train, "validation": validation, "test": test}
    for name, path in files.items():
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise InvalidArgument(f"{name}={type(path).__name__}: give the {name} file's path "
                                  "(a str or Path; - reads standard input)")
    from_stdin = [f"--{name}" for name, path in files.items() if str(path) == STDIN]
    if len(from_stdin) > 1:
        raise InvalidArgument(f"{' and '.join(from_stdin)} all read standard input (-), "
                              "which holds one split: give the others as files")
    spec = get_task(task, text_field, label_field, regression)
    count("seeds", seeds, 1, 1000)
    count("seed", seed, 0)
    if shots is not None:
        count("shots", shots, 1, 1_000_000)
        if spec.regression:
            raise InvalidArgument("shots (--shots) samples examples per class: a regression "
                                  "task has no classes")
    for name, value in (("train_limit", train_limit), ("eval_limit", eval_limit),
                        ("halt_after", halt_after)):
        if value is not None:
            count(name, value, 1)
    count("save_every", save_every, 0)
    if batch_tokens is not None:
        count("batch_tokens", batch_tokens, 1)
    if packed is not None:
        boolean("packed", packed)
    select = "last" if select is None else select
    choice("select", select, ("last", "best"))
    defaults = dict(FEW_SHOT_DEFAULTS if shots else FULL_DEFAULTS)
    targets = lora_targets.split(",") if isinstance(lora_targets, str) else lora_targets
    lora_options = LoraOptions(rank=lora_rank, alpha=lora_alpha,
                               targets=tuple(t.strip() for t in targets) if targets
                               else None).check()
    if not lora:
        if merge_lora or lora_targets or lora_options != LoraOptions():
            raise InvalidArgument("lora_rank / lora_alpha / lora_targets / merge_lora (--lora-"
                                  "rank, ...) are LoRA settings: add lora=True (--lora)")
        lora_options = None
    if method != "prompt" and (template is not None or verbalizer is not None):
        raise InvalidArgument("template / verbalizer (--template, --verbalizer) are the prompt "
                              "method's: add method='prompt' (--method prompt)")
    words = parse_verbalizer(verbalizer) if verbalizer is not None else None
    recipe = Recipe(method=method,
                    epochs=defaults["epochs"] if epochs is None else epochs,
                    lr=defaults["lr"] if lr is None else lr,
                    batch_size=defaults["batch_size"] if batch_size is None else batch_size,
                    max_length=max_length,
                    warmup=defaults["warmup"] if warmup is None else warmup,
                    weight_decay=defaults["weight_decay"] if weight_decay is None
                    else weight_decay,
                    bucket=bucket, seed=seed, lora=lora_options, template=template,
                    verbalizer=words, select=select).check()
    check_method(method, spec.regression, None)
    asked = precision
    target, precision = prepare(device, precision, threads, task="training")
    # the scores a run reports are those of `eval classify` and of the saved checkpoint in
    # transformers: `auto` trains in bf16 where the CPU has it and evaluates in fp32
    eval_precision = resolve_precision(asked, target, task="inference")
    seed_list = [seed + k for k in range(seeds)]
    if resume and run_dir is not None and seeds > 1 and not any(
            _has_states(Path(run_dir) / f"seed-{s}") for s in seed_list):
        raise RunError(f"--resume: {str(run_dir)!r} holds no fine-tuning state of seeds "
                       f"{seed_list[0]}-{seed_list[-1]} (seed-N folders): start the run "
                       "without --resume")
    with hub_offline(offline):
        mlm = as_mlm(model, tokenizer, device=str(target), allow_untrained_head=True)
        # a classifier head trains the encoder; only the prompt method reads the MLM's
        if method == "prompt" and mlm.untrained_head and not getattr(mlm, "head_allowed",
                                                                      False):
            raise UntrainedHead(f"--method prompt reads the masked-LM head, and {mlm.name!r} "
                                "has none trained: use a masked-LM checkpoint, or --method "
                                "head (a classifier head of its own)")
        data = load_task_data(spec, train=train, validation=validation, test=test,
                              dataset=dataset, offline=offline,
                              carve_validation=test is None or select == "best")
    data.train = limit(data.train, train_limit)
    if data.validation is not None:
        data.validation = limit(data.validation, eval_limit)
    say = status if progress is not False else None
    runs = []
    for run_seed in seed_list:
        run_data = data
        if shots is not None:
            run_data = replace(data, train=few_shot(data.train, shots, run_seed,
                                                    len(data.label_names)))
        where = None
        if run_dir is not None:
            where = Path(run_dir) / f"seed-{run_seed}" if seeds > 1 else Path(run_dir)
        runs.append(fine_tune_run(mlm, run_data, replace(recipe, seed=run_seed), device=target,
                                  precision=precision, eval_precision=eval_precision,
                                  run_dir=where,
                                  resume=resume and (seeds == 1 or _has_states(where)),
                                  save_every=save_every, halt_after=halt_after,
                                  merge_lora=merge_lora, batch_tokens=batch_tokens,
                                  progress=progress, say=say, packed=packed,
                                  resume_dir=run_dir))
        if runs[-1].status != "finished":
            break
    if run_dir is not None:
        write_finetune_readme(Path(run_dir), task=spec.name, method=method, seeds=seed_list,
                              lora=lora, merged=merge_lora)
    # a seed stopped before its first evaluation has no metrics: the mean is over the others
    metrics, std = _mean_std([r.metrics for r in runs if r.metrics])
    tests = [r.test_metrics for r in runs if r.test_metrics is not None]
    test_metrics = _mean_std(tests)[0] if tests else None
    return FinetuneResult(task=spec.name, method=method, shots=shots, seeds=seed_list,
                          metrics=metrics, std=std, test_metrics=test_metrics, runs=runs)


def _has_states(folder: Path) -> bool:
    return bool(list_states(folder))
