"""One fine-tuning run, top to bottom:

    encode the splits once (truncations counted)
    for each epoch: batches in a seeded order, packed without padding where the model
                    has unpadded attention (finetuning/packing.py), else padded to their
                    longest row (length-bucketed on request);
                    AdamW (of the input embedding, only the rows the training split
                    uses: trained_rows.py), linear warm-up and decay, clipping at 1.0
    evaluate the last epoch's model (or, with select="best", each epoch's, keeping the best)
    on the validation split, then on the test split if given; write metrics.json

The optimisation is the Hugging Face Trainer's, step for step: the same AdamW (betas
(0.9, 0.999), epsilon 1e-8, no decay on biases and normalisation weights), the same linear
schedule (warm-up from 0 over ceil(warmup × steps) steps), the same clipping, the same
number of steps. Given the same model, head and data order, the per-step losses are the
Trainer's (tests/finetuning/test_trainer_parity.py); docs/fine-tuning.md lists the defaults
that differ on purpose and why.

With a run directory the training state (weights, optimizer, scheduler, RNG, position in
the epoch, best so far) is saved every `save_every` steps, at each epoch's end and on
SIGINT/SIGTERM, through the same verified checkpoint files as `pretrain`; `resume=True`
continues bit for bit (the epoch's order is a function of the seed and the epoch).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import math
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from mlmkit.core.checks import boolean, choice, count, non_negative, positive, probability
from mlmkit.core.devices import autocast
from mlmkit.core.progress import Progress
from mlmkit.core.results import Result
from mlmkit.core.staging import write_text
from mlmkit.errors import InvalidArgument, RunError
from mlmkit.finetuning import methods
from mlmkit.finetuning.classifier import RECORDED_MAX_LENGTH, RECORDED_TEXT_COLUMNS
from mlmkit.finetuning.data import TaskData
from mlmkit.finetuning.encode import (
    PromptEncoder,
    collate,
    encode_pairs,
    train_batches,
)
from mlmkit.finetuning.lora import LoraOptions, add_lora, base_of, peft_module
from mlmkit.finetuning.metrics import compute
from mlmkit.finetuning.packing import (
    collate_packed,
    equal_length_batches,
    packed_loss,
    packed_outputs,
    supports_packing,
)
from mlmkit.finetuning.run_dir import holds_run
from mlmkit.finetuning.trained_rows import TrainedRows, trained_rows
from mlmkit.models.fast_modernbert import use_fast_layers
from mlmkit.training import checkpoint
from mlmkit.training.checkpoint import save_model_dir
from mlmkit.training.optimizer import clip_in_step
from mlmkit.training.signals import StopOnSignal

EVAL_BATCH_TOKENS = 16384
ADAM_BETAS = (0.9, 0.999)  # torch's and the Trainer's defaults
ADAM_EPS = 1e-8
MAX_GRAD_NORM = 1.0


@dataclass(frozen=True)
class Recipe:
    """What is studied in a run: a resume may not change any of these."""

    method: str = "head"
    # the Trainer's defaults (TrainingArguments): measured more accurate than the cramming
    # GLUE recipe (lr 4e-5, batch 16, 10% warm-up, weight decay 0.01) on SST-2
    # (docs/fine-tuning.md)
    epochs: int = 3
    lr: float = 5e-5
    batch_size: int = 8
    max_length: int = 128
    warmup: float = 0.0
    weight_decay: float = 0.0
    bucket: bool = False
    seed: int = 0
    lora: LoraOptions | None = None
    template: str | None = None
    verbalizer: dict | None = None
    select: str = "last"  # last: the last epoch's model; best: evaluate each epoch, keep the best

    def check(self) -> Recipe:
        # whole numbers given as 64.0 are stored as 64 (a frozen dataclass: set in place)
        for name, low, high in (("epochs", 1, 10_000), ("batch_size", 1, 1_000_000),
                                ("max_length", 4, 1_000_000), ("seed", 0, None)):
            object.__setattr__(self, name, count(name, getattr(self, name), low, high))
        positive("lr", self.lr)
        probability("warmup", self.warmup)
        non_negative("weight_decay", self.weight_decay)
        boolean("bucket", self.bucket)
        choice("select", self.select, ("best", "last"))
        if self.lora is not None:
            self.lora.check()
            peft_module()  # without peft, stop before any model is loaded
        return self


@dataclass
class RunResult(Result):
    """One fine-tuning run: the best epoch's validation metrics (and test metrics when a
    test split was given), the per-epoch history, truncation counts and speed."""

    task: str
    method: str
    seed: int
    metrics: dict
    best_epoch: int
    history: list = field(default_factory=list)
    test_metrics: dict | None = None
    truncated: dict = field(default_factory=dict)
    examples: dict = field(default_factory=dict)
    steps: int = 0
    train_seconds: float = 0.0
    examples_per_s: float | None = None
    status: str = "finished"
    stop_reason: str | None = None  # "SIGINT", "SIGTERM" or "halt_after" when interrupted
    run_dir: str | None = None
    best_dir: str | None = None
    lora: bool = False
    _model: object = None
    _predictions: np.ndarray | None = None
    _labels: np.ndarray | None = None


def _score(task, metrics: dict) -> float:
    values = [metrics[m] for m in task.metrics]
    return float(np.mean(values))


class Trainer:
    """The state of one run (built by `fine_tune_run`)."""

    def __init__(self, mlm, data: TaskData, recipe: Recipe, device, precision: str,
                 packed: bool | None = None, eval_precision: str | None = None):
        self.mlm, self.data, self.recipe = mlm, data, recipe
        self.task = data.task
        self.device, self.precision = device, precision
        self.eval_precision = eval_precision or precision
        regression = self.task.regression
        methods.check_method(recipe.method, regression, mlm)
        if recipe.method == "head":
            model = methods.build_classifier(mlm, data.label_names, recipe.seed)
            segments = methods.takes_segments(model)
            self.encode = lambda split: encode_pairs(mlm.tokenizer, split.texts, split.labels,
                                                     self.max_length, segments)
        else:
            torch.manual_seed(recipe.seed)
            model = copy.deepcopy(mlm.model)
            words = recipe.verbalizer or {k: [v] for k, v in self.task.verbalizer.items()}
            if not words:
                raise InvalidArgument(f"task {self.task.name}: the prompt method needs a "
                                      "verbalizer (--verbalizer '{\"label\": \"word\", ...}')")
            words = {k: [v] if isinstance(v, str) else list(v) for k, v in words.items()}
            template = recipe.template or self.task.template
            self.prompt = PromptEncoder(mlm.tokenizer, template, words, data.label_names,
                                        len(self.task.text_cols))
            self.word_ids = torch.tensor(self.prompt.word_ids, device=mlm.device)
            self.encode = lambda split: self.prompt.encode(split.texts, split.labels,
                                                           self.max_length)
        if recipe.lora is not None:
            model = add_lora(model, recipe.lora, recipe.method)
        self.model = model.to(device)
        # -- speed (finetuning/packing.py): packed batches where the model has unpadded
        # attention, ModernBERT's fast rotary/GeGLU layers; the same numbers either way
        self.packed = _packing(self.model, recipe, packed)
        use_fast_layers(self.model)
        # -- end speed
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.pad_id = mlm.tokenizer.pad_token_id if mlm.tokenizer.pad_token_id is not None \
            else 0
        self.rows: TrainedRows | None = None

    def train_used_rows(self, encoded) -> None:
        """Train only the input embedding's rows that `encoded` (the training split) uses
        (finetuning/trained_rows.py): the same steps, without a dense gradient and AdamW
        over rows that only decay. Head fine-tuning without LoRA."""
        if self.recipe.method == "head" and self.recipe.lora is None:
            self.rows = trained_rows(self.model, encoded, self.pad_id)
        if self.rows is not None:
            self.trainable = [self.rows.rows if p is self.rows.embedding.weight else p
                              for p in self.model.parameters()
                              if p.requires_grad or p is self.rows.embedding.weight]

    @property
    def max_length(self) -> int:
        return min(self.recipe.max_length, self.mlm.max_length)

    def collate(self, encoded, index):
        if self.packed:
            return collate_packed(encoded, index, self.pad_id, self.device)
        return collate(encoded, index, self.pad_id, self.device)

    def loss(self, batch):
        if "documents" in batch:
            return packed_loss(base_of(self.model), batch, self.task.regression)
        if self.recipe.method == "head":
            return methods.head_loss(self.model, batch, self.task.regression)
        return methods.prompt_loss(self.model, batch, self.word_ids)

    def outputs(self, batch):
        if "documents" in batch:
            return packed_outputs(base_of(self.model), batch, self.task.regression)
        if self.recipe.method == "head":
            return methods.head_outputs(self.model, batch, self.task.regression)
        return methods.prompt_outputs(self.model, batch, self.word_ids)

    def optimizer(self, total_steps: int):
        """AdamW with decay on all but biases and normalisation weights, and the linear
        schedule: warm-up from 0 over ceil(warmup × total_steps) steps, then decay to 0 at
        the last step (the Trainer's `get_linear_schedule_with_warmup`)."""
        decayed = decayed_parameters(self.model)
        decay, plain = [], []
        for name, parameter in self.model.named_parameters():
            if self.rows is not None and parameter is self.rows.embedding.weight:
                parameter = self.rows.rows  # trained in its place
            if parameter.requires_grad:
                (decay if name in decayed else plain).append(parameter)
        optimizer = torch.optim.AdamW([{"params": decay, "weight_decay":
                                        self.recipe.weight_decay},
                                       {"params": plain, "weight_decay": 0.0}],
                                      lr=self.recipe.lr, betas=ADAM_BETAS, eps=ADAM_EPS,
                                      **_fused(self.device))
        warm = int(math.ceil(self.recipe.warmup * total_steps))

        def factor(step: int) -> float:
            if step < warm:
                return step / warm
            return max(0.0, (total_steps - step) / max(1, total_steps - warm))

        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    @torch.inference_mode()
    def predict(self, encoded, batch_tokens: int) -> np.ndarray:
        was_training = self.model.training
        self.model.eval()
        out = np.empty(len(encoded), dtype=np.float64)
        for index in equal_length_batches(encoded.lengths, batch_tokens):  # most unpadded
            batch = collate(encoded, index, self.pad_id, self.device)
            with autocast(self.eval_precision, self.device):
                out[index] = self.outputs(batch).double().cpu().numpy()
        self.model.train(was_training)
        return out

    def evaluate(self, encoded, batch_tokens: int) -> tuple[dict, np.ndarray]:
        predictions = self.predict(encoded, batch_tokens)
        labels = encoded.labels
        if not self.task.regression:
            predictions = predictions.astype(np.int64)
        return compute(self.task.metrics, predictions, labels), predictions


def decayed_parameters(model) -> set[str]:
    """Names of the parameters weight decay applies to: all but biases and the weights of
    normalisation layers (decaying a LayerNorm's gain towards 0 would shrink the
    activations it exists to rescale). The same set as the Trainer's."""
    out = set()
    for module_name, module in model.named_modules():
        norm = isinstance(module, torch.nn.LayerNorm) or "norm" in type(module).__name__.lower()
        for name, _ in module.named_parameters(recurse=False):
            full = f"{module_name}.{name}" if module_name else name
            if not norm and "bias" not in full.lower() and "norm" not in full.lower():
                out.add(full)
    return out


def _packing(model, recipe: Recipe, asked: bool | None) -> bool:
    """Whether batches are packed: `asked` (None: wherever the model supports it)."""
    able = recipe.method == "head" and supports_packing(base_of(model))
    if asked and not able:
        raise InvalidArgument(
            f"packed=True (--packed): a {model.config.model_type!r} model with method "
            f"{recipe.method!r} has no packed batches (head fine-tuning of ModernBERT-, BERT-, "
            "RoBERTa-, XLM-R- and ELECTRA-type classifiers only): drop --packed")
    return able if asked is None else asked


def _fused(device) -> dict:
    """AdamW's fused kernel where torch has one for the device (CPU and CUDA): one pass
    over all parameters per step instead of a Python loop."""
    return {"fused": True} if device.type in ("cpu", "cuda") else {}


def _state_config(recipe: Recipe, data: TaskData, precision: str, packed: bool, mlm) -> dict:
    out = asdict(recipe)
    out["model (weights and vocabulary)"] = _model_digest(mlm)  # the model it started from
    out["task"] = data.task.name
    # the arithmetic of a step: a resume in another precision or batch layout would not
    # continue the run bit for bit
    out["precision"], out["packed"] = precision, bool(packed)
    source = Path(str(data.train.source)).expanduser()  # a file by its full path
    out["train"] = str(source.resolve()) if source.is_file() else data.train.source
    out["train_examples"] = len(data.train)
    # what the rows hold, not only where they came from: a file edited in place between a
    # stop and a resume changes them under the same name and count
    out["train_content"] = _digest(data.train)
    out["validation_content"] = (_digest(data.validation) if data.validation is not None
                                 else None)
    return json.loads(json.dumps(out, default=str))


def _model_digest(mlm) -> str:
    """A short sha256 of the masked LM a run starts from: each weight's name, shape and
    about 1,024 of its values (evenly spaced), and the tokenizer's vocabulary. Another model
    of the same shapes, or the same one with another tokenizer, gives another digest. The
    head weights a checkpoint lacked (drawn anew at each load) are left out."""
    h = hashlib.sha256()
    drawn = set(mlm.untrained_head)
    for name, tensor in mlm.model.state_dict().items():
        if name in drawn:
            continue
        flat = tensor.detach().reshape(-1)
        sample = flat[::max(1, flat.numel() // 1024)]
        h.update(f"{name}{tuple(tensor.shape)}".encode())
        h.update(sample.float().cpu().numpy().tobytes())
    h.update(json.dumps(sorted(mlm.tokenizer.get_vocab().items()), ensure_ascii=False).encode())
    return "sha256:" + h.hexdigest()[:16]


def _digest(split) -> str:
    """A short sha256 of a split's texts and labels (in order)."""
    h = hashlib.sha256()
    h.update(json.dumps(split.texts, ensure_ascii=False).encode())
    h.update(np.ascontiguousarray(split.labels).tobytes())
    return "sha256:" + h.hexdigest()[:16]


def fine_tune_run(mlm, data: TaskData, recipe: Recipe, *, device, precision: str,
                  eval_precision: str | None = None,
                  run_dir: str | Path | None = None, resume: bool = False,
                  save_every: int = 0, halt_after: int | None = None,
                  merge_lora: bool = False, batch_tokens: int | None = None,
                  progress: bool | None = None, say=None, on_step=None,
                  packed: bool | None = None, resume_dir: str | Path | None = None
                  ) -> RunResult:
    """Train, evaluate, keep the last (or best) epoch; see the module docstring.
    `on_step(step, loss)` is called after each optimizer step with its training loss.
    `packed`: batches without padding (finetuning/packing.py; None: wherever the model
    has them). `eval_precision`: that of the evaluations (default: `precision`).
    `resume_dir`: the folder a stopped run is resumed with (default `run_dir`; a seed's
    folder of a multi-seed run is resumed through the run's)."""
    recipe.check()
    if recipe.select == "best" and data.validation is None:
        raise InvalidArgument("select='best' (--select best) picks an epoch on the validation "
                              "split: pass one (--validation), or keep the last epoch")
    say = say or (lambda message: None)
    batch_tokens = batch_tokens or EVAL_BATCH_TOKENS
    trainer = Trainer(mlm, data, recipe, device, precision, packed, eval_precision)
    train_enc = trainer.encode(data.train)
    valid_enc = trainer.encode(data.validation) if data.validation is not None else None
    test_enc = trainer.encode(data.test) if data.test is not None else None
    trainer.train_used_rows(train_enc)
    truncated = {"train": train_enc.truncated}
    if valid_enc is not None:
        truncated["validation"] = valid_enc.truncated
    if test_enc is not None:
        truncated["test"] = test_enc.truncated
    asked = recipe.max_length != Recipe.__dataclass_fields__["max_length"].default
    if asked and recipe.max_length > trainer.max_length:  # the default fits itself silently
        warnings.warn(f"max_length={recipe.max_length} (--max-length) is more than the "
                      f"model's {trainer.max_length} positions: inputs are cut at "
                      f"{trainer.max_length} tokens", stacklevel=2)
    per_epoch = math.ceil(len(train_enc) / recipe.batch_size)
    total = per_epoch * recipe.epochs
    optimizer, schedule = trainer.optimizer(total)
    run_path = Path(run_dir) if run_dir is not None else None
    config = _state_config(recipe, data, precision, trainer.packed, mlm)
    step, epoch, position, history = 0, 0, 0, []
    best = {"score": -math.inf, "epoch": 0, "metrics": {}}
    best_state, elapsed, seen, losses = None, 0.0, 0, []
    if run_path is not None:
        checkpoint.remove_leftovers(run_path)
        if resume:
            state = checkpoint.resume_state(run_path, config, files=("train",),
                                            kind="fine-tuning run", marker="task")
            try:
                trainer.model.load_state_dict(state["model"])
            except RuntimeError:
                raise RunError(f"--resume {str(run_path)!r}: its saved weights do not fit this "
                               "model (the run was trained from another one): resume with the "
                               "model it started from, or start a new run directory") from None
            optimizer.load_state_dict(state["optimizer"])
            schedule.load_state_dict(state["schedule"])
            torch.set_rng_state(state["rng"])
            step, epoch, position = state["step"], state["epoch"], state["position"]
            history, best, elapsed, seen = (state["history"], state["best"], state["elapsed"],
                                            state["seen"])
            losses = state["losses"]  # this epoch's so far
            if trainer.rows is not None:  # the unused rows' decay (the loaded rows are read)
                if state.get("embedding_decay") is None:  # saved training the whole matrix
                    trainer.rows.adopt_dense(optimizer)
                else:
                    trainer.rows.decay = state["embedding_decay"]
            say(f"resuming at epoch {epoch + 1}, step {step}")
        elif holds_run(run_path):  # its states, or a finished run's best/ or metrics
            raise RunError(f"run directory {str(run_path)!r} already holds a run: resume it "
                           "(--resume) or choose another --run-dir")
        run_path.mkdir(parents=True, exist_ok=True)
    for split, cut in truncated.items():  # said once the run is sure to go on
        if cut:
            say(f"{split}: {cut} of {len(data.__dict__[split])} inputs longer than "
                f"{trainer.max_length} tokens were truncated (counted in metrics.json)")

    def save() -> None:
        if run_path is None:
            return
        checkpoint.save_state(run_path, step, {
            "config": config, "model": trainer.model.state_dict(),
            "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
            "rng": torch.get_rng_state(), "step": step, "epoch": epoch, "position": position,
            "history": history, "best": best, "elapsed": elapsed, "seen": seen,
            "losses": losses,
            "embedding_decay": trainer.rows.decay if trainer.rows is not None else None})

    best_predictions = None  # the best epoch's validation predictions, made in this process

    def keep_best(metrics: dict, predictions) -> None:
        nonlocal best_state, best_predictions
        score = _score(data.task, metrics) if metrics else -math.inf
        if recipe.select == "last" or score > best["score"] or not best["epoch"]:
            best.update(score=score, epoch=epoch + 1, metrics=metrics)
            best_predictions = predictions
            if run_path is not None:
                _save_model(trainer, run_path / "best", merge_lora)
            best_state = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}

    status = "finished"
    steps_here = 0
    trainer.model.train()
    with StopOnSignal() as stop, Progress(f"fine-tuning {data.task.name}", total,
                                           "steps", enabled=progress) as bar, \
            (trainer.rows or contextlib.nullcontext()):
        bar.update(step)
        while epoch < recipe.epochs:
            batches = train_batches(train_enc.lengths, recipe.batch_size, recipe.seed, epoch,
                                    recipe.bucket)
            started = time.perf_counter()
            while position < len(batches):
                batch = trainer.collate(train_enc, batches[position])
                with autocast(precision, device):
                    loss = trainer.loss(batch)
                if not torch.isfinite(loss):
                    raise RunError(f"the loss is {loss.item()} at step {step + 1}: lower --lr "
                                   "or use --precision fp32")
                loss.backward()
                clip_in_step(optimizer, trainer.trainable, MAX_GRAD_NORM)
                optimizer.step()
                if trainer.rows is not None:
                    trainer.rows.stepped(optimizer)
                schedule.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(loss.item())
                if on_step is not None:
                    on_step(step + 1, losses[-1])
                step, position, steps_here = step + 1, position + 1, steps_here + 1
                seen += len(batches[position - 1])
                bar.update(step)
                # a halt on the run's last step lets it finish (its evaluation, its model)
                halting = halt_after and steps_here >= halt_after and step < total
                if stop.requested or halting:
                    elapsed += time.perf_counter() - started
                    save()
                    status = "interrupted"
                    again = resume_dir if resume_dir is not None else run_path
                    say(f"stopped at step {step} ({stop.requested or 'halt_after'}); continue "
                        f"with --resume" + (f" --run-dir {again}" if again else ""))
                    stopped = _result(trainer, data, recipe, best, history, truncated, step,
                                      elapsed, seen, status, run_path, None, None)
                    stopped.stop_reason = stop.requested or "halt_after"
                    return stopped
                if save_every and step % save_every == 0:
                    elapsed += time.perf_counter() - started
                    save()
                    started = time.perf_counter()
            elapsed += time.perf_counter() - started
            last = epoch + 1 == recipe.epochs
            metrics, predictions = {}, None
            if valid_enc is not None and (recipe.select == "best" or last):
                metrics, predictions = trainer.evaluate(valid_enc, batch_tokens)
            record = {"epoch": epoch + 1, "step": step,
                      "train_loss": float(np.mean(losses)) if losses else None, **metrics}
            history.append(record)
            if last or (recipe.select == "best" and metrics):
                keep_best(metrics, predictions)
            loss_text = f"{record['train_loss']:.4f}" if record["train_loss"] is not None \
                else "nan"
            say(f"epoch {epoch + 1}/{recipe.epochs}: loss {loss_text}"
                + "".join(f", {k} {v:.4f}" for k, v in metrics.items()))
            epoch, position, losses = epoch + 1, 0, []
            save()
    if best_state is not None:
        trainer.model.load_state_dict(best_state)
    elif run_path is not None and (run_path / "best").is_dir():  # resumed after it was saved
        _load_best(trainer, run_path / "best", merge_lora)
    test_metrics, predictions = None, None
    if test_enc is not None:
        test_metrics, predictions = trainer.evaluate(test_enc, batch_tokens)
    elif best_state is not None and best_predictions is not None:
        predictions = best_predictions  # the restored weights made them: no second pass
    elif valid_enc is not None:
        _, predictions = trainer.evaluate(valid_enc, batch_tokens)
    scored = test_enc if test_enc is not None else valid_enc
    result = _result(trainer, data, recipe, best, history, truncated, step, elapsed, seen,
                     status, run_path, test_metrics, predictions,
                     scored.labels if scored is not None else None)
    if run_path is not None:
        write_text(run_path / "metrics.json", result.to_json(indent=1) + "\n")
        write_text(run_path / "metrics.jsonl",
                   "".join(json.dumps(r) + "\n" for r in history))
    return result


def _result(trainer, data, recipe, best, history, truncated, step, elapsed, seen, status,
            run_path, test_metrics, predictions, labels=None) -> RunResult:
    best_dir = run_path / "best" if run_path is not None and (run_path / "best").is_dir() \
        else None
    return RunResult(
        task=data.task.name, method=recipe.method, seed=recipe.seed, metrics=best["metrics"],
        best_epoch=best["epoch"], history=list(history), test_metrics=test_metrics,
        truncated=truncated,
        examples={"train": len(data.train),
                  **({"validation": len(data.validation)} if data.validation is not None
                     else {}),
                  **({"test": len(data.test)} if data.test is not None else {})},
        steps=step, train_seconds=round(elapsed, 3),
        examples_per_s=seen / elapsed if elapsed > 0 else None, status=status,
        run_dir=str(run_path) if run_path else None,
        best_dir=str(best_dir) if best_dir else None, lora=recipe.lora is not None,
        _model=trainer.model, _predictions=predictions, _labels=labels)


def _load_best(trainer: Trainer, folder: Path, merged: bool) -> None:
    """The best epoch's weights, saved by an earlier process of this run, into the model."""
    if trainer.recipe.lora is not None and not merged:
        peft_module().set_peft_model_state_dict(
            trainer.model, load_file(folder / "adapter_model.safetensors"))
        return
    if trainer.recipe.lora is not None:  # merged: the adapters cannot be taken back out
        raise RunError(f"cannot restore the best epoch from the merged model in {folder}: "
                       "resume without --merge-lora, or start the run over")
    trainer.model.load_state_dict(load_file(folder / "model.safetensors"), strict=False)


def _save_model(trainer: Trainer, target: Path, merge_lora: bool) -> None:
    """The model as Hugging Face loads it: a classifier (head), a masked LM (prompt; with
    prompt.json), or a peft adapter (LoRA, unless merged)."""
    model, tokenizer = trainer.model, trainer.mlm.tokenizer
    lora = trainer.recipe.lora is not None

    def write(folder: Path) -> None:
        # where its inputs are cut, read back by predict and eval classify
        setattr(model.config, RECORDED_MAX_LENGTH, trainer.max_length)
        setattr(model.config, RECORDED_TEXT_COLUMNS, len(trainer.task.text_cols))
        if lora and merge_lora:
            merged = copy.deepcopy(model).merge_and_unload()
            merged.save_pretrained(folder)
        else:
            model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        if trainer.recipe.method == "prompt":
            (folder / "prompt.json").write_text(json.dumps(
                {"template": trainer.prompt.template.replace(tokenizer.mask_token, "[MASK]"),
                 "labels": trainer.data.label_names, "word_ids": trainer.prompt.word_ids}))
        if lora and not merge_lora:
            base = base_of(model)
            base.config.save_pretrained(folder)  # the base's config, for the classifier's shape

    save_model_dir(write, target)
