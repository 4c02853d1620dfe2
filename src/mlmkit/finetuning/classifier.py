"""A fine-tuned classifier, used after `finetune`: predictions and the task's metrics.

`finetune` saves its best epoch as an `AutoModelForSequenceClassification` folder whose
config names the labels (with --method prompt: a masked LM with `prompt.json`, the cloze
template and one word per label, whose logits at the mask are the class scores); `load_classifier(path)` binds that folder to a runtime once
(device, precision, threads, token budget), and its methods are the features:

    clf = load_classifier("runs/finetune/sst2/best")
    clf.predict(["a gripping film", "dull"])          # labels with their probabilities
    clf.evaluate("test.tsv", task="sst2")             # the task's official metrics

`predict(model, texts)` and `evaluate_classifier(model, data, task=...)` are the same as
free functions (a path or a bound `Classifier` first). Inputs are cut at `max_length`
tokens (128, `finetune`'s default, so that the metrics match those it reported), and cut
inputs are counted.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification

from mlmkit.core.checks import count
from mlmkit.core.devices import autocast, prepare
from mlmkit.core.progress import Progress
from mlmkit.core.results import Result
from mlmkit.errors import InvalidArgument, ModelError, PathError
from mlmkit.finetuning.data import Split, label_index, read_split
from mlmkit.finetuning.data import limit as sample_rows
from mlmkit.finetuning.encode import PromptEncoder, collate, encode_pairs
from mlmkit.finetuning.methods import head_logits, prompt_logits, takes_segments
from mlmkit.finetuning.metrics import compute
from mlmkit.finetuning.packing import equal_length_batches
from mlmkit.finetuning.tasks import Task, get_task
from mlmkit.models.load import load_mlm, load_tokenizer, model_max_length

DEFAULT_MAX_LENGTH = 128  # finetune's default: the same cut as the metrics it reported
# the config key where `finetune` records the --max-length a classifier was trained at: its
# inputs are cut there by default, as its reported metrics were
RECORDED_MAX_LENGTH = "mlmkit_max_length"
# ... and how many text columns it read (1: single texts, 2: sentence pairs)
RECORDED_TEXT_COLUMNS = "mlmkit_text_columns"
DEFAULT_BATCH_TOKENS = 16384
PROMPT_FILE = "prompt.json"  # what finetune --method prompt saves beside its masked LM


@dataclass
class Prediction(Result):
    """One input's prediction: the `label` with its probability `score` and every label's
    `probabilities` (classification), or the predicted `value` (regression)."""

    label: str | None = None
    score: float | None = None
    probabilities: dict[str, float] | None = None
    value: float | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in super().to_dict().items() if v is not None}


@dataclass
class ClassifierEvaluation(Result):
    """A fine-tuned classifier's metrics on one split: the task's official metrics, the
    examples counted, the inputs cut at `max_length`, and the data's source."""

    model: str
    task: str
    source: str
    examples: int
    metrics: dict[str, float]
    truncated: int = 0  # inputs longer than max_length, cut there
    labels: list[str] | None = None
    confusion: list[list[int]] | None = None  # rows: true label; columns: predicted
    max_length: int = DEFAULT_MAX_LENGTH  # where the inputs were cut

    def summary(self) -> str:
        shown = ", ".join(f"{name} {value:.4f}" for name, value in self.metrics.items())
        return f"{self.task} on {self.source} ({self.examples:,} examples): {shown}"


@dataclass
class Classifier:
    """A fine-tuned sequence classifier bound to its runtime (`load_classifier`)."""

    model: torch.nn.Module
    tokenizer: object
    name: str
    device: torch.device
    precision: str
    batch_tokens: int = DEFAULT_BATCH_TOKENS
    labels: list[str] | None = field(default=None)  # None: a regression model
    prompt: PromptEncoder | None = None  # --method prompt: the cloze template and its words

    @property
    def regression(self) -> bool:
        return self.labels is None

    def cut_length(self, max_length: int | None = None) -> int:
        """Where inputs are cut: `max_length`, else the one the classifier was fine-tuned at
        (recorded in its config by `finetune`), else `DEFAULT_MAX_LENGTH`; at most the
        model's positions."""
        if max_length is None:
            recorded = getattr(self.model.config, RECORDED_MAX_LENGTH, None)
            max_length = recorded if isinstance(recorded, int) else DEFAULT_MAX_LENGTH
        count("max_length", max_length, 4, 1_000_000)
        return min(max_length, model_max_length(self.model, self.tokenizer))

    def outputs(self, texts: list[tuple[str, ...]], max_length: int | None = None,
                progress: bool | None = None) -> tuple[np.ndarray, int]:
        """([n, labels] probabilities, or [n] values for regression; inputs cut at
        `cut_length(max_length)`)."""
        cut = self.cut_length(max_length)
        no_labels = np.zeros(len(texts), np.int64)
        if self.prompt is not None:
            encoded = self.prompt.encode(texts, no_labels, cut)
            word_ids = torch.tensor(self.prompt.word_ids, device=self.device)
        else:
            # a pair's segments as `finetune` passed them in training
            encoded = encode_pairs(self.tokenizer, texts, no_labels, cut,
                                   takes_segments(self.model))
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        width = 1 if self.regression else len(self.labels)
        out = np.empty((len(texts), width), dtype=np.float64)
        with torch.inference_mode(), Progress(f"classifying with {self.name}", len(texts),
                                              "texts", enabled=progress) as bar:
            for index in equal_length_batches(encoded.lengths, self.batch_tokens):
                batch = collate(encoded, index, pad, self.device)
                with autocast(self.precision, self.device):
                    if self.prompt is not None:  # the label words' logits at the mask
                        logits = prompt_logits(self.model, batch, word_ids)
                    else:
                        logits = head_logits(self.model, batch)
                logits = logits.double()
                out[index] = (logits if self.regression else logits.softmax(-1)).cpu().numpy()
                bar.advance(len(index))
        return (out[:, 0] if self.regression else out), encoded.truncated

    def predict(self, texts, *, max_length: int | None = None,
                progress: bool | None = None) -> Prediction | list[Prediction]:
        """The label and probabilities of each text (a text or a pair of texts gives one
        `Prediction`, a list gives a list in the same order). Inputs cut at the length are
        counted in a warning (`predict_rows` returns the count)."""
        rows, single = _as_rows(texts)
        results, truncated = self.predict_rows(rows, max_length=max_length, progress=progress)
        if truncated:
            warnings.warn(f"{truncated} of {len(rows)} input(s) longer than "
                          f"{self.cut_length(max_length)} tokens were cut there "
                          "(max_length, --max-length)", stacklevel=2)
        return results[0] if single else results

    def predict_rows(self, rows: list[tuple[str, ...]], *, max_length: int | None = None,
                     progress: bool | None = None) -> tuple[list[Prediction], int]:
        """(a `Prediction` per row of one or two texts, how many rows were cut at the
        length). Rows of another width than the classifier was fine-tuned on (single texts
        for a pair model, or pairs for a single-text one) are refused."""
        if not rows:
            return [], 0
        trained = getattr(self.model.config, RECORDED_TEXT_COLUMNS, None)
        if trained == 2 and len(rows[0]) == 1:
            raise InvalidArgument(f"{self.name!r} was fine-tuned on pairs of texts and is "
                                  "given single texts: give pairs (two columns, --text-field "
                                  "A,B; in Python (text, text) tuples)")
        if trained == 1 and len(rows[0]) == 2:
            raise InvalidArgument(f"{self.name!r} was fine-tuned on single texts and is given "
                                  "pairs: give one text per input (one --text-field)")
        values, truncated = self.outputs(rows, max_length, progress)
        if self.regression:
            results = [Prediction(value=float(v)) for v in values]
        else:
            results = [Prediction(label=self.labels[int(p.argmax())], score=float(p.max()),
                                  probabilities={name: float(x) for name, x in
                                                 zip(self.labels, p, strict=True)})
                       for p in values]
        return results, truncated

    def evaluate(self, data=None, *, task: str | None = None, text_field=None,
                 label_field: str | None = None, dataset: str | None = None,
                 split: str = "validation", offline: bool = False, limit: int | None = None,
                 max_length: int | None = None,
                 progress: bool | None = None) -> ClassifierEvaluation:
        """The task's metrics on `data` (a JSONL/TSV/CSV file with the task's text and label
        columns) or on `split` of `dataset` (a Hugging Face datasets name, NAME[:CONFIG];
        default: the task's own dataset)."""
        spec = self._task(task, text_field, label_field)
        if limit is not None:
            count("limit", limit, 1)
        if data is None and dataset is None:
            if spec.dataset is None:
                raise InvalidArgument(f"task {spec.name}: give the data to evaluate on (a file "
                                      "after the model, or --dataset NAME[:CONFIG])")
            dataset = spec.dataset
        if data is not None and dataset is not None:
            raise InvalidArgument("give the data (a FILE after the model) or a dataset "
                                  "(--dataset), not both")
        if data is None and split == "validation" and spec.validation_split:
            split = spec.validation_split
        texts, raw, source = read_split(spec, "evaluation", path=data, dataset=dataset,
                                        split=split, offline=offline)
        labels = label_index(spec, raw, self.labels)
        chosen = sample_rows(Split("evaluation", texts, labels, source), limit)
        max_length = self.cut_length(max_length)
        values, truncated = self.outputs(chosen.texts, max_length, progress)
        if self.regression:
            predictions = values
        else:
            predictions = values.argmax(-1).astype(np.int64)
        confusion = None
        if not self.regression:
            table = np.zeros((len(self.labels), len(self.labels)), dtype=np.int64)
            np.add.at(table, (chosen.labels, predictions), 1)
            confusion = table.tolist()
        return ClassifierEvaluation(
            model=self.name, task=spec.name, source=source, examples=len(chosen),
            metrics=compute(spec.metrics, predictions, chosen.labels), truncated=truncated,
            labels=self.labels, confusion=confusion, max_length=max_length)

    def _task(self, task: str | None, text_field, label_field) -> Task:
        """The task to evaluate: named (its metrics, columns, labels) or one of your own
        (`text_field`), whose labels are the classifier's."""
        if task is None and not text_field:
            raise InvalidArgument("name the task (task='sst2', --task) or the text columns "
                                  "of your own (text_field, --text-field)")
        spec = get_task(task or "custom", text_field, label_field,
                        self.regression if task is None or text_field else None)
        if spec.regression != self.regression:
            kind = "a regression" if self.regression else "a classification"
            raise InvalidArgument(f"task {spec.name} does not match {self.name!r}, which is "
                                  f"{kind} model; name the task it was fine-tuned on")
        if spec.labels and list(spec.labels) != self.labels:
            raise InvalidArgument(f"{self.name!r} predicts {self.labels}, not the labels of "
                                  f"task {spec.name} ({list(spec.labels)}); name the task it "
                                  "was fine-tuned on")
        return spec


def load_classifier(model, *, device=None, precision: str = "auto",
                    threads: int | None = None, batch_tokens: int | None = None,
                    trust_remote_code: bool | None = None, tokenizer=None) -> Classifier:
    """A fine-tuned classifier folder (as `finetune` saves `best/`), or an already loaded
    `Classifier`, bound to a runtime: the device, precision (fp32 for inference; bf16 when
    asked) and threads resolved once, `batch_tokens` padded tokens per forward batch.
    `tokenizer` (a folder or hub name): the tokenizer of a folder saved without one."""
    if batch_tokens is not None:
        count("batch_tokens", batch_tokens, 1)
    if isinstance(model, Classifier):
        return model
    if not isinstance(model, (str, Path)):
        raise InvalidArgument(f"model={type(model).__name__}: pass the folder of a fine-tuned "
                              "classifier (e.g. runs/finetune/sst2/best) or a Classifier")
    path = Path(model).expanduser()
    _check_folder(path, str(model))
    target, resolved = prepare(device, precision, threads, task="inference")
    if (path / PROMPT_FILE).is_file():
        return _prompt_classifier(path, str(model), target, resolved,
                                  batch_tokens or DEFAULT_BATCH_TOKENS, trust_remote_code,
                                  tokenizer)
    try:
        net = AutoModelForSequenceClassification.from_pretrained(
            str(path), trust_remote_code=bool(trust_remote_code))
    except (OSError, ValueError) as error:
        text = " ".join(str(error).split())[:200]
        raise ModelError(f"cannot load the classifier in {str(model)!r} ({text}): re-run "
                         "mlmkit finetune, or pass the run's best/ folder") from error
    config = net.config
    tokenizer = load_tokenizer(path, config, tokenizer=tokenizer,
                               trust_remote_code=bool(trust_remote_code))
    regression = config.problem_type == "regression" or config.num_labels == 1
    labels = None if regression else [str(config.id2label[i]) for i in
                                       range(config.num_labels)]
    net.to(target).eval()
    return Classifier(model=net, tokenizer=tokenizer, name=str(model), device=target,
                      precision=resolved, batch_tokens=batch_tokens or DEFAULT_BATCH_TOKENS,
                      labels=labels)


def _prompt_classifier(path: Path, shown: str, target, precision: str, batch_tokens: int,
                       trust_remote_code, tokenizer=None) -> Classifier:
    """A model fine-tuned with --method prompt: its masked LM, and the template and label
    words of its prompt.json, each word found again from its token id."""
    try:
        saved = json.loads((path / PROMPT_FILE).read_text(encoding="utf-8"))
        template, labels, word_ids = saved["template"], list(saved["labels"]), saved["word_ids"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ModelError(f"{shown!r}: its {PROMPT_FILE} cannot be read ({error}); re-run "
                         "mlmkit finetune --method prompt") from error
    mlm = load_mlm(path, device=target, trust_remote_code=trust_remote_code,
                   tokenizer=tokenizer)
    tokenizer = mlm.tokenizer
    words = {label: [tokenizer.decode([word]).strip()]
             for label, word in zip(labels, word_ids, strict=True)}
    pairs = "{text1}" in template
    encoder = PromptEncoder(tokenizer, template, words, labels, 2 if pairs else 1)
    if encoder.word_ids != list(word_ids):
        raise ModelError(f"{shown!r}: the label words of {PROMPT_FILE} do not tokenize back to "
                         "their ids with the saved tokenizer; re-save the run's model")
    return Classifier(model=mlm.model.eval(), tokenizer=tokenizer, name=shown, device=target,
                      precision=precision, batch_tokens=batch_tokens, labels=labels,
                      prompt=encoder)


def predict(model, texts, *, max_length: int | None = None,
            batch_tokens: int | None = None, precision: str = "auto", device=None,
            threads: int | None = None, tokenizer=None, progress: bool | None = None
            ) -> Prediction | list[Prediction]:
    """Labels and probabilities of a fine-tuned classifier (`model`: its folder, e.g.
    `runs/finetune/sst2/best`, or a `Classifier`) for `texts` (a text, a (text, text) pair,
    or a list of either). A regression model gives each input's `value`."""
    clf = load_classifier(model, device=device, precision=precision, threads=threads,
                          batch_tokens=batch_tokens, tokenizer=tokenizer)
    return clf.predict(texts, max_length=max_length, progress=progress)


def evaluate_classifier(model, data=None, *, task: str | None = None, text_field=None,
                        label_field: str | None = None, dataset: str | None = None,
                        split: str = "validation", offline: bool = False,
                        limit: int | None = None, max_length: int | None = None,
                        batch_tokens: int | None = None, precision: str = "auto",
                        device=None, threads: int | None = None, tokenizer=None,
                        progress: bool | None = None) -> ClassifierEvaluation:
    """A fine-tuned classifier's metrics (the task's official ones: accuracy, F1, Matthews,
    Pearson/Spearman) on `data` (a file) or on `split` of `dataset`; see
    `Classifier.evaluate`."""
    clf = load_classifier(model, device=device, precision=precision, threads=threads,
                          batch_tokens=batch_tokens, tokenizer=tokenizer)
    return clf.evaluate(data, task=task, text_field=text_field, label_field=label_field,
                        dataset=dataset, split=split, offline=offline, limit=limit,
                        max_length=max_length, progress=progress)


def _check_folder(path: Path, shown: str) -> None:
    """Refuse, in one line, what is not a fine-tuned classifier folder."""
    if not path.exists():
        raise PathError(f"model path {shown!r} does not exist: pass the folder of a "
                        "fine-tuned classifier (mlmkit finetune writes RUN_DIR/best)")
    if (path / "best" / "config.json").is_file():
        raise ModelError(f"{shown!r} is a fine-tuning run: pass its model, {shown}/best")
    seeds = sorted(path.glob("seed-*/best/config.json"))
    if seeds:
        raise ModelError(f"{shown!r} is a fine-tuning run of several seeds: pass one seed's "
                         f"model, e.g. {seeds[0].parent}")
    if not path.is_dir() or not (path / "config.json").is_file():
        raise ModelError(f"{shown!r} is not a saved model folder (no config.json): pass the "
                         "folder of a fine-tuned classifier, e.g. runs/finetune/sst2/best")
    if (path / "adapter_config.json").is_file():
        raise ModelError(f"{shown!r} holds a LoRA adapter, not a whole classifier: fine-tune "
                         "with --merge-lora to save one, or load it with peft")
    if (path / PROMPT_FILE).is_file():
        return  # --method prompt: a masked LM with its template and label words
    try:
        config = AutoConfig.from_pretrained(str(path))
    except (OSError, ValueError) as error:
        text = " ".join(str(error).split())[:200]
        raise ModelError(f"cannot read the config of {shown!r} ({text}): pass the folder of "
                         "a fine-tuned classifier, e.g. runs/finetune/sst2/best") from error
    architectures = config.architectures or []
    if not any(name.endswith("ForSequenceClassification") for name in architectures):
        kind = ", ".join(architectures) or config.model_type
        raise ModelError(f"{shown!r} is a {kind}, not a fine-tuned classifier: fine-tune it "
                         "first (mlmkit finetune MODEL --task ...), or classify without "
                         "training with mlmkit probe classify")


def _as_rows(texts) -> tuple[list[tuple[str, ...]], bool]:
    """(rows of one or two texts, whether one input was given)."""
    if isinstance(texts, str):
        return [(texts,)], True
    if isinstance(texts, tuple) and len(texts) == 2 and all(isinstance(t, str) for t in texts):
        return [texts], True
    rows = []
    for i, item in enumerate(texts):
        if isinstance(item, str):
            rows.append((item,))
        elif isinstance(item, (tuple, list)) and len(item) in (1, 2) and all(
                isinstance(t, str) for t in item):
            rows.append(tuple(item))
        else:
            raise InvalidArgument(f"texts[{i}] is {json.dumps(item, default=str)[:60]}: give "
                                  "a text or a pair of texts (text, text)")
    if rows and len({len(r) for r in rows}) > 1:
        raise InvalidArgument("texts mixes single texts and pairs: give one kind")
    return rows, False
