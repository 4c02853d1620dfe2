"""The tasks `mlmkit finetune` knows by name: the GLUE set and AG News.

Each task says which columns hold its text(s) and label, its label names (in the order of
the label indices the official data uses), its official metrics, where its data lives in
the Hugging Face datasets hub (the local cache only with --offline), and the cloze template
and verbalizer of the prompt-based method. Any other name is a custom task: the columns
come from `text_cols` / `label_col`, the labels from the training data.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from mlmkit.errors import InvalidArgument


@dataclass(frozen=True)
class Task:
    """What a fine-tuning task is: inputs, labels, metrics and sources."""

    name: str
    text_cols: tuple[str, ...]
    label_col: str = "label"
    other_label_cols: tuple[str, ...] = ()  # read where a file has no `label_col` column
    labels: tuple[str, ...] | None = None  # None: read from the training data
    regression: bool = False
    metrics: tuple[str, ...] = ("accuracy",)
    dataset: str | None = None  # Hugging Face datasets name (see --offline)
    dataset_config: str | None = None
    validation_split: str | None = "validation"  # None: carve one from train (fixed seed)
    template: str | None = None  # prompt method: {text} (or {text1}, {text2}) and [MASK]
    verbalizer: dict = field(default_factory=dict)

    @property
    def pair(self) -> bool:
        return len(self.text_cols) == 2

    @property
    def main_metric(self) -> str:
        """The number that picks the best epoch: the mean of the task's metrics."""
        return self.metrics[0] if len(self.metrics) == 1 else "mean"


def _glue(name, cols, labels, metrics, words=None, template=None, **kw) -> Task:
    return Task(name=name, text_cols=cols, labels=labels, metrics=metrics,
                dataset="nyu-mll/glue", dataset_config=name, template=template,
                verbalizer=words or {}, **kw)


PAIR_TEMPLATE = "{text1} ? [MASK] , {text2}"
TASKS: dict[str, Task] = {
    "cola": _glue("cola", ("sentence",), ("unacceptable", "acceptable"),
                  ("matthews", "accuracy"), {"unacceptable": "wrong", "acceptable": "correct"},
                  "{text} This is [MASK] ."),
    "sst2": _glue("sst2", ("sentence",), ("negative", "positive"), ("accuracy",),
                  {"negative": "terrible", "positive": "great"}, "{text} It was [MASK] ."),
    "mrpc": _glue("mrpc", ("sentence1", "sentence2"), ("not_equivalent", "equivalent"),
                  ("f1", "accuracy"), {"not_equivalent": "no", "equivalent": "yes"},
                  PAIR_TEMPLATE),
    "stsb": _glue("stsb", ("sentence1", "sentence2"), None, ("pearson", "spearman"),
                  regression=True, other_label_cols=("score",)),  # sentence-transformers
    "qqp": _glue("qqp", ("question1", "question2"), ("not_duplicate", "duplicate"),
                 ("accuracy", "f1"), {"not_duplicate": "no", "duplicate": "yes"},
                 PAIR_TEMPLATE),
    "mnli": _glue("mnli", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"),
                  ("accuracy",), {"entailment": "yes", "neutral": "maybe", "contradiction": "no"},
                  PAIR_TEMPLATE, validation_split="validation_matched"),
    "qnli": _glue("qnli", ("question", "sentence"), ("entailment", "not_entailment"),
                  ("accuracy",), {"entailment": "yes", "not_entailment": "no"}, PAIR_TEMPLATE),
    "rte": _glue("rte", ("sentence1", "sentence2"), ("entailment", "not_entailment"),
                 ("accuracy",), {"entailment": "yes", "not_entailment": "no"}, PAIR_TEMPLATE),
    "wnli": _glue("wnli", ("sentence1", "sentence2"), ("not_entailment", "entailment"),
                  ("accuracy",), {"not_entailment": "no", "entailment": "yes"}, PAIR_TEMPLATE),
    "agnews": Task("agnews", ("text",), labels=("World", "Sports", "Business", "Sci/Tech"),
                   dataset="fancyzhx/ag_news", validation_split=None,
                   template="[MASK] news : {text}",
                   verbalizer={"World": "world", "Sports": "sports", "Business": "business",
                               "Sci/Tech": "science"}),
}
ALIASES = {"sst-2": "sst2", "sts-b": "stsb", "ag_news": "agnews", "ag-news": "agnews"}


def get_task(name: str, text_cols=None, label_col: str | None = None,
             regression: bool | None = None) -> Task:
    """The task called `name` (a GLUE task, agnews), or a custom one from its columns.

    Given columns override a named task's (e.g. a local SST-2 file whose text column is
    `text`); a custom task needs `text_cols` (one or two columns).
    """
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument(f"task {name!r} (--task): give a name, e.g. sst2, or a name of "
                              "your own with --text-field and --label-field")
    key = ALIASES.get(name.lower(), name.lower())
    cols = _columns(text_cols)
    if key in TASKS:
        task = TASKS[key]
        if cols:
            if len(cols) != len(task.text_cols):
                raise InvalidArgument(f"--text-field {','.join(cols)}: task {key} takes "
                                      f"{len(task.text_cols)} text column(s) "
                                      f"({', '.join(task.text_cols)})")
            task = replace(task, text_cols=cols)
        if label_col:
            task = replace(task, label_col=label_col, other_label_cols=())
        if regression is not None and regression != task.regression:
            raise InvalidArgument(f"--regression: task {key} is "
                                  f"{'a regression' if task.regression else 'a classification'}"
                                  " task; drop the flag")
        return task
    if not cols:
        raise InvalidArgument(f"task {name!r} (--task) is not a known task ({', '.join(TASKS)}); "
                              "for your own data pass --text-field (one or two columns, comma-"
                              "separated) and --label-field")
    return Task(name=name, text_cols=cols, label_col=label_col or "label",
                regression=bool(regression), metrics=("pearson", "spearman") if regression
                else ("accuracy",), validation_split=None,
                template="{text} It was [MASK] ." if len(cols) == 1 else PAIR_TEMPLATE)


def _columns(text_cols) -> tuple[str, ...]:
    if text_cols is None:
        return ()
    if isinstance(text_cols, str):
        text_cols = text_cols.split(",")
    cols = tuple(c.strip() for c in text_cols if c and c.strip())
    if len(cols) > 2:
        raise InvalidArgument(f"--text-field {','.join(cols)}: give one column (single texts) "
                              "or two (sentence pairs)")
    return cols
