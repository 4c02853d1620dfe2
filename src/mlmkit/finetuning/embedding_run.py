"""One embedding-training run, top to bottom:

    tokenize every column once (truncations counted)
    for each epoch: batches of examples in a seeded order (in-batch negatives need random
                    batches, not length-sorted ones); every text of a step through the encoder
                    in length groups (`embedding_encoder`); the loss on the pooled vectors
                    (`mlmkit.embeddings.losses`, Matryoshka around it when asked);
                    cached-mnrl: the same loss through GradCache, the texts in mini-batches
                    (`embedding_cache`); tsdae: each text's vector from a copy with words
                    deleted, a decoder rebuilding the text (`mlmkit.embeddings.denoising`);
                    splade: sparse vectors from the MLM head (`embedding_sparse`), the
                    ranking loss on dot products plus FLOPS (`mlmkit.embeddings.splade`);
                    AdamW, linear warm-up and decay, gradient clipping at 1.0;
                    with validation pairs, Spearman of the cosine; keep the best epoch
    save the best epoch as a sentence-transformers folder (run_dir/best; splade: a
    SparseEncoder folder, the MLM with its head), metrics.json

With a run directory the training state (weights, optimizer, schedule, RNG, position in
the epoch, best so far) is saved every `save_every` steps, at each epoch's end and on
SIGINT/SIGTERM, through the same verified checkpoint files as `finetune` and `pretrain`;
`resume=True` continues bit for bit (an epoch's order is a function of the seed and the
epoch, dropout draws from the saved generator state, and TSDAE's deletions are a function
of the seed, the epoch and the example; the decoder's weights are part of the state).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from transformers.utils import logging as hf_logging

from mlmkit.core.checks import choice, count, non_negative, positive, probability
from mlmkit.core.correlation import pearson, spearman
from mlmkit.core.devices import autocast
from mlmkit.core.progress import Progress
from mlmkit.core.results import Result
from mlmkit.core.staging import write_text
from mlmkit.embeddings.denoising import (
    DELETION_RATIO,
    build_decoder,
    delete_words,
    reconstruction_loss,
)
from mlmkit.embeddings.embed import embed
from mlmkit.embeddings.losses import LOSSES, matryoshka_loss
from mlmkit.embeddings.pairs import Examples, cosine_rows
from mlmkit.embeddings.splade import (
    DOCUMENT_REGULARIZER,
    QUERY_REGULARIZER,
    REGULARIZER_WARMUP,
    active_dims,
    regularizer_weight,
    splade_loss,
)
from mlmkit.embeddings.st_directory import save_sparse_directory, save_st_directory
from mlmkit.errors import InvalidArgument, ModelError, RunError
from mlmkit.finetuning.embedding_cache import cached_backward
from mlmkit.finetuning.embedding_encoder import TrainingEncoder
from mlmkit.finetuning.embedding_sparse import SparseTrainingEncoder
from mlmkit.finetuning.encode import quiet_tokenizer
from mlmkit.mlm import MLM, load
from mlmkit.models.fast_modernbert import use_fast_layers
from mlmkit.options.embedding import TRAINING_LOSSES
from mlmkit.training import checkpoint
from mlmkit.training.objectives.mlm import set_dropout
from mlmkit.training.optimizer import build_optimizer
from mlmkit.training.runtime import retained_heap
from mlmkit.training.signals import StopOnSignal

TRAIN_BATCH_TOKENS = 8192  # a forward group's padded tokens (a memory bound, not a result)
MINI_BATCH_SIZE = 32  # cached-mnrl's texts per forward pass when none is given


@dataclass(frozen=True)
class EmbeddingRecipe:
    """What is studied in a run: a resume may not change any of these."""

    loss: str = "mnrl"
    pooling: str = "mean"
    normalize: bool = False
    matryoshka_dims: tuple[int, ...] | None = None
    scale: float = 20.0
    epochs: int = 1
    lr: float = 5e-5
    batch_size: int = 32
    max_length: int = 128
    warmup: float = 0.1
    weight_decay: float = 0.01
    dropout: float | None = None
    seed: int = 0
    mini_batch_size: int | None = None  # cached-mnrl: texts per forward pass
    deletion_ratio: float = DELETION_RATIO  # tsdae: the share of words deleted
    tie_decoder: bool = True  # tsdae: the decoder shares the encoder's weights
    query_regularizer: float = QUERY_REGULARIZER  # splade: FLOPS weights and their warm-up
    document_regularizer: float = DOCUMENT_REGULARIZER
    regularizer_warmup: float = REGULARIZER_WARMUP

    def check(self, width: int) -> EmbeddingRecipe:
        choice("loss", self.loss, TRAINING_LOSSES)
        choice("pooling", self.pooling, ("mean", "cls", "max", "weighted-mean"))
        positive("scale", self.scale)
        count("epochs", self.epochs, 1, 10_000)
        positive("lr", self.lr)
        count("batch_size", self.batch_size, 2, 1_000_000)
        count("max_length", self.max_length, 2, 1_000_000)
        probability("warmup", self.warmup)
        non_negative("weight_decay", self.weight_decay)
        if self.dropout is not None:
            probability("dropout", self.dropout)
        count("seed", self.seed, 0)
        if self.mini_batch_size is not None:
            if self.loss != "cached-mnrl":
                raise InvalidArgument(f"mini_batch_size (--mini-batch-size) is the cached-mnrl "
                                      f"loss's; loss={self.loss!r} embeds a batch at once: "
                                      "leave it out or use --loss cached-mnrl")
            count("mini_batch_size", self.mini_batch_size, 1)
            if self.mini_batch_size > self.batch_size:
                raise InvalidArgument(f"mini_batch_size (--mini-batch-size) "
                                      f"{self.mini_batch_size} is above batch_size "
                                      f"(--batch-size) {self.batch_size}: a mini-batch is a part "
                                      "of a step's batch; give at most the batch size")
        if self.loss != "tsdae" and (self.deletion_ratio != DELETION_RATIO
                                     or not self.tie_decoder):
            raise InvalidArgument(f"deletion_ratio and tie_decoder (--deletion-ratio, "
                                  f"--no-tie-decoder) are the tsdae loss's; loss={self.loss!r} "
                                  "has no decoder: leave them out or use --loss tsdae")
        probability("deletion_ratio", self.deletion_ratio)
        self._check_splade()
        if self.loss == "tsdae" and self.matryoshka_dims:
            raise InvalidArgument("matryoshka_dims (--matryoshka-dims) shapes a contrastive "
                                  "loss; tsdae reconstructs from the whole vector: leave it out")
        for dim in self.matryoshka_dims or ():
            if not 1 <= dim <= width:
                raise InvalidArgument(f"matryoshka_dims (--matryoshka-dims) {dim} is outside "
                                      f"1..{width}, the model's width: give prefixes it has")
        return self

    def _check_splade(self) -> None:
        """splade's weights are non-negative and its own; dense-only settings are refused."""
        regularizers = (self.query_regularizer, self.document_regularizer,
                        self.regularizer_warmup)
        if self.loss != "splade":
            if regularizers != (QUERY_REGULARIZER, DOCUMENT_REGULARIZER, REGULARIZER_WARMUP):
                raise InvalidArgument(f"query_regularizer, document_regularizer and "
                                      f"regularizer_warmup are the splade loss's; "
                                      f"loss={self.loss!r} has no sparse vectors: leave them "
                                      "out or use --loss splade")
            return
        non_negative("query_regularizer", self.query_regularizer)
        non_negative("document_regularizer", self.document_regularizer)
        probability("regularizer_warmup", self.regularizer_warmup, closed_high=True)
        if self.matryoshka_dims or self.normalize:
            raise InvalidArgument("matryoshka_dims and normalize (--matryoshka-dims, "
                                  "--normalize) shape dense vectors; splade's vectors are the "
                                  "vocabulary's weights: leave them out")


def parse_dims(value) -> tuple[int, ...] | None:
    """`"256,128,64"` or a list → the dimensions, largest first (None: no Matryoshka)."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    try:
        dims = [int(str(item).strip()) for item in items]
    except ValueError:
        raise InvalidArgument(f"matryoshka_dims (--matryoshka-dims) {value!r}: give whole "
                              "numbers, comma-separated (e.g. 256,128,64)") from None
    if not dims or len(set(dims)) != len(dims):
        raise InvalidArgument(f"matryoshka_dims (--matryoshka-dims) {value!r}: give each "
                              "dimension once, comma-separated (e.g. 256,128,64)")
    return tuple(sorted(dims, reverse=True))


@dataclass
class EmbeddingTrainResult(Result):
    """An embedding-training run: the best epoch's validation correlations (empty without
    validation pairs), the per-epoch history, truncations and speed, and where the
    sentence-transformers folder is (`model_dir`, with a run directory)."""

    loss: str
    metrics: dict
    best_epoch: int
    history: list = field(default_factory=list)
    truncated: int = 0
    examples: int = 0
    steps: int = 0
    train_seconds: float = 0.0
    examples_per_s: float | None = None
    status: str = "finished"
    stop_reason: str | None = None  # "SIGINT", "SIGTERM" or "halt_after" when interrupted
    run_dir: str | None = None
    model_dir: str | None = None
    _model: object = None

    @property
    def model(self) -> MLM | None:
        """The trained model (its best epoch; a stopped run's weights at the stop), bound like
        `mlmkit.load`'s; embed with the run's pooling (the folder in `model_dir` carries
        it)."""
        return self._model

    def summary(self) -> str:
        scores = ", ".join(f"{k} {v:.4f}" for k, v in self.metrics.items())
        speed = f", {self.examples_per_s:,.1f} examples/s" if self.examples_per_s else ""
        where = f" → {self.model_dir}" if self.model_dir else ""
        return (f"{self.loss}: {self.steps} steps{speed}"
                + (f", best epoch {self.best_epoch}: {scores}" if scores else "") + where)


def _tokenize(tokenizer, texts: list[str], max_length: int) -> tuple[list[list[int]], int]:
    """Token ids (special tokens included), cut at `max_length`; how many were cut."""
    with quiet_tokenizer():
        ids = tokenizer(texts, add_special_tokens=True)["input_ids"]
        long = [i for i, row in enumerate(ids) if len(row) > max_length]
        if long:
            cut = tokenizer([texts[i] for i in long], truncation=True,
                            max_length=max_length)["input_ids"]
            for i, row in zip(long, cut, strict=True):
                ids[i] = row
    return ids, len(long)


def _word_ids(tokenizer, texts: list[str], max_length: int) -> list[list[int | None]]:
    """Each token's word (None for special tokens), as `_tokenize` cuts the texts: the words
    TSDAE's noise deletes."""
    if not getattr(tokenizer, "is_fast", False):
        raise InvalidArgument("the tsdae loss deletes words by the tokenizer's word split, "
                              "which only fast tokenizers give: use the model's fast tokenizer")
    with quiet_tokenizer():
        encoded = tokenizer(texts, add_special_tokens=True, truncation=True,
                            max_length=max_length)
    return [encoded.word_ids(i) for i in range(len(texts))]


def _padded(ids: list[list[int]], pad_id: int, device) -> torch.Tensor:
    """[n, longest]: the rows padded with `pad_id` at the end."""
    longest = max(map(len, ids))
    rows = np.full((len(ids), longest), pad_id, dtype=np.int64)
    for row, tokens in enumerate(ids):
        rows[row, :len(tokens)] = tokens
    return torch.from_numpy(rows).to(device)


def _digest(examples: Examples) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(examples.columns, ensure_ascii=False).encode())
    if examples.scores is not None:
        h.update(np.ascontiguousarray(examples.scores).tobytes())
    return "sha256:" + h.hexdigest()[:16]


def _has_dropout(model) -> bool:
    """Whether any dropout of `model` (a module's, or an attention's rate) is above 0."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) and module.p > 0:
            return True
        rates = (getattr(module, name, None) for name in ("dropout_prob", "attention_dropout",
                                                          "dropout_p"))
        if any(isinstance(rate, float) and rate > 0 for rate in rates):
            return True
    return False


def _batches(n: int, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    order = np.random.default_rng([seed, epoch]).permutation(n)
    return [order[i:i + batch_size] for i in range(0, n, batch_size)]


def _schedule(optimizer, total: int, warmup: float):
    warm = int(math.ceil(warmup * total))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total - step) / max(1, total - warm))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def train_embedding_run(mlm: MLM, train: Examples, recipe: EmbeddingRecipe, *, precision: str,
                        validation=None, run_dir: str | Path | None = None,
                        resume: bool = False, save_every: int = 0,
                        halt_after: int | None = None, batch_tokens: int | None = None,
                        progress: bool | None = None, say=None) -> EmbeddingTrainResult:
    """Train, evaluate each epoch on `validation` ((firsts, seconds, scores) or None), keep
    the best; see the module docstring."""
    say = say or (lambda message: None)
    width = int(mlm.model.config.hidden_size)
    recipe.check(width)
    if recipe.loss == "splade" and getattr(mlm, "untrained_head", ()):
        raise ModelError(f"{mlm.name!r} has no trained MLM head ({len(mlm.untrained_head)} head "
                         "weight(s) missing): splade reads its vectors from the head; start "
                         "from a masked-LM checkpoint")
    torch.manual_seed(recipe.seed)
    model = copy.deepcopy(mlm.model)  # the caller's model is left as it was
    if recipe.dropout is not None:
        set_dropout(model, recipe.dropout)
    if recipe.loss in ("simcse", "tsdae") and len(train.columns) != 1:
        raise InvalidArgument(f"the {recipe.loss} loss trains on single texts, and the examples "
                              f"have {len(train.columns)} text columns: give one (text_field=)")
    if recipe.loss == "simcse" and not _has_dropout(model):
        raise InvalidArgument("the simcse loss draws each text's positive through dropout, "
                              "and the model's dropout is 0: pass dropout=0.1 (--dropout 0.1)")
    use_fast_layers(model)
    model.train()
    tokenizer = mlm.tokenizer
    max_length = min(recipe.max_length, mlm.max_length)
    columns, truncated = [], 0
    for column in train.columns:
        ids, cut = _tokenize(tokenizer, column, max_length)
        columns.append(ids)
        truncated += cut
    if truncated:
        say(f"train: {truncated} text(s) longer than {max_length} tokens were truncated "
            "(counted in metrics.json)")
    if recipe.loss == "simcse":
        columns = [columns[0], columns[0]]  # each text is its own positive, through dropout
    words = _word_ids(tokenizer, train.columns[0], max_length) \
        if recipe.loss == "tsdae" else None
    if recipe.loss == "splade" and (len(columns) < 2 or train.scores is not None):
        raise InvalidArgument("the splade loss trains on (anchor, positive[, negative...]) "
                              "rows, not scored pairs or single texts: give unscored rows "
                              "(text_field=)")
    if recipe.loss == "cosent" and (len(columns) != 2 or train.scores is None):
        raise InvalidArgument("the cosent loss trains on scored pairs: two text columns and "
                              "a score column (text_field=, score_field=)")
    loss_function = LOSSES.get(recipe.loss)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    encoder = TrainingEncoder(model, pad_id, recipe.pooling, precision,
                              batch_tokens or TRAIN_BATCH_TOKENS)
    sparse = SparseTrainingEncoder(model, pad_id, precision, batch_tokens or TRAIN_BATCH_TOKENS) \
        if recipe.loss == "splade" else None
    decoder = build_decoder(model, tie=recipe.tie_decoder) if recipe.loss == "tsdae" else None
    trained = {"model": model} if decoder is None else {"model": model, "decoder": decoder}
    parameters = list({id(p): p for module in trained.values() for p in module.parameters()
                       if p.requires_grad}.values())
    mini_batch_size = recipe.mini_batch_size or min(MINI_BATCH_SIZE, recipe.batch_size)
    per_epoch = math.ceil(len(train) / recipe.batch_size)
    total = per_epoch * recipe.epochs
    optimizer = build_optimizer(trained, lr=recipe.lr,
                                weight_decay=recipe.weight_decay, betas=(0.9, 0.999),
                                eps=1e-8, device=encoder.device)
    schedule = _schedule(optimizer, total, recipe.warmup)
    config = json.loads(json.dumps({**asdict(recipe), "train": train.source,
                                    "train_examples": len(train),
                                    "train_content": _digest(train)}, default=str))
    run_path = Path(run_dir) if run_dir is not None else None
    step, epoch, position, history, losses, actives = 0, 0, 0, [], [], []
    best = {"score": -math.inf, "epoch": 0, "metrics": {}}
    best_state, elapsed, seen = None, 0.0, 0
    if run_path is not None:
        checkpoint.remove_leftovers(run_path)
        if resume:
            state = checkpoint.resume_state(run_path, config)
            model.load_state_dict(state["model"])
            if decoder is not None:
                decoder.load_state_dict(state["decoder"])
            optimizer.load_state_dict(state["optimizer"])
            schedule.load_state_dict(state["schedule"])
            torch.set_rng_state(state["rng"])
            step, epoch, position = state["step"], state["epoch"], state["position"]
            history, best, elapsed = state["history"], state["best"], state["elapsed"]
            seen, losses = state["seen"], state["losses"]
            actives = state.get("actives", [])
            say(f"resuming at epoch {epoch + 1}, step {step}")
        elif checkpoint.list_states(run_path):
            raise RunError(f"run directory {str(run_path)!r} already holds a training run: "
                           "resume it (--resume) or choose another --run-dir")
        run_path.mkdir(parents=True, exist_ok=True)

    def bound() -> MLM:
        return load((model, tokenizer), allow_untrained_head=True)

    def save_model(target: Path) -> None:
        hf_logging.disable_progress_bar()  # one bar per saved shard clutters the training's
        if sparse is not None:
            save_sparse_directory(bound(), target)
        else:
            save_st_directory(bound(), target, pooling=recipe.pooling,
                              normalize=recipe.normalize)

    def save() -> None:
        if run_path is None:
            return
        checkpoint.save_state(run_path, step, {
            "config": config, "model": model.state_dict(),
            **({"decoder": decoder.state_dict()} if decoder is not None else {}),
            "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
            "rng": torch.get_rng_state(), "step": step, "epoch": epoch, "position": position,
            "history": history, "best": best, "elapsed": elapsed, "seen": seen,
            "losses": losses, "actives": actives})

    def evaluate_sparse() -> dict:
        """Spearman and Pearson of the validation pairs' dot products (SPLADE's similarity)
        and the vectors' mean number of non-zero weights (what FLOPS drives down)."""
        firsts, seconds, gold = validation
        ids, _ = _tokenize(tokenizer, firsts + seconds, max_length)
        model.eval()
        with torch.no_grad():
            vectors = torch.cat([sparse(ids[i:i + 64]) for i in range(0, len(ids), 64)])
        model.train()
        dots = (vectors[:len(firsts)] * vectors[len(firsts):]).sum(1).cpu().numpy()
        return {"spearman": spearman(dots, gold), "pearson": pearson(dots, gold),
                "active_dims": active_dims(vectors)}

    def evaluate() -> dict:
        if sparse is not None:
            return evaluate_sparse()
        firsts, seconds, gold = validation
        model.eval()
        vectors = embed((model, tokenizer), firsts + seconds, pooling=recipe.pooling,
                        batch_tokens=batch_tokens, precision="auto", progress=False)
        model.train()
        similarity = cosine_rows(vectors[:len(firsts)], vectors[len(firsts):])
        return {"spearman": spearman(similarity, gold), "pearson": pearson(similarity, gold)}

    def contrastive(vectors, scores=None, **rows):
        """The run's loss on a step's vectors (Matryoshka around it when asked)."""
        if recipe.matryoshka_dims:
            return matryoshka_loss(loss_function, vectors, recipe.matryoshka_dims,
                                   scale=recipe.scale, scores=scores, **rows)
        return loss_function(vectors, scale=recipe.scale, scores=scores, **rows)

    status, stop_reason, steps_here = "finished", None, 0
    with StopOnSignal() as stop, retained_heap(encoder.device), Progress(
            f"training embeddings ({recipe.loss})", total, "steps", enabled=progress) as bar:
        bar.update(step)
        while epoch < recipe.epochs:
            batches = _batches(len(train), recipe.batch_size, recipe.seed, epoch)
            started = time.perf_counter()
            while position < len(batches):
                rows = batches[position]
                scores = None
                if train.scores is not None and recipe.loss == "cosent":
                    scores = torch.from_numpy(train.scores[rows]).to(encoder.device)
                if recipe.loss == "tsdae":
                    noisy = [delete_words(columns[0][i], words[i], recipe.deletion_ratio,
                                          np.random.default_rng([recipe.seed, epoch, int(i)]))
                             for i in rows]
                    targets = _padded([columns[0][i] for i in rows], pad_id, encoder.device)
                    vectors = encoder(noisy)
                    with autocast(precision, encoder.device):
                        loss = reconstruction_loss(decoder, vectors, targets, pad_id)
                elif sparse is not None:
                    vectors = sparse([column[i] for column in columns for i in rows])
                    actives.append(active_dims(vectors.detach()))
                    weights = (regularizer_weight(recipe.query_regularizer, step, total,
                                                  recipe.regularizer_warmup),
                               regularizer_weight(recipe.document_regularizer, step, total,
                                                  recipe.regularizer_warmup))
                    loss = splade_loss(vectors.split(len(rows)), recipe.scale, *weights)
                elif recipe.loss == "cached-mnrl":
                    loss = cached_backward(encoder, [c[i] for c in columns for i in rows],
                                           len(rows), contrastive, mini_batch_size)
                else:
                    texts = [column[i] for column in columns for i in rows]
                    loss = contrastive(encoder(texts).split(len(rows)), scores)
                if not torch.isfinite(loss):
                    raise RunError(f"the loss is {loss.item()} at step {step + 1}: lower --lr "
                                   "or use --precision fp32")
                if loss.requires_grad:  # cached-mnrl has back-propagated already
                    loss.backward()
                torch.nn.utils.clip_grad_norm_(parameters, 1.0, foreach=True)
                optimizer.step()
                schedule.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(loss.item())
                step, position, steps_here = step + 1, position + 1, steps_here + 1
                seen += len(rows)
                bar.update(step)
                if stop.requested or (halt_after and steps_here >= halt_after):
                    elapsed += time.perf_counter() - started
                    save()
                    status, stop_reason = "interrupted", stop.requested or "halt_after"
                    say(f"stopped at step {step} ({stop_reason}); continue with --resume"
                        + (f" --run-dir {run_path}" if run_path else ""))
                    break
                if save_every and step % save_every == 0:
                    elapsed += time.perf_counter() - started
                    save()
                    started = time.perf_counter()
            if status != "finished":
                break
            elapsed += time.perf_counter() - started
            record = {"epoch": epoch + 1, "step": step,
                      "train_loss": float(np.mean(losses)) if losses else None}
            if sparse is not None:  # the training vectors' non-zeros, with or without validation
                record["train_active_dims"] = float(np.mean(actives)) if actives else None
            metrics = evaluate() if validation is not None else {}
            record.update(metrics)
            history.append(record)
            score = metrics.get("spearman", float(epoch))  # without validation: the last
            if score > best["score"] or not best["epoch"]:
                best.update(score=score, epoch=epoch + 1, metrics=metrics)
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                if run_path is not None:
                    save_model(run_path / "best")
            say(f"epoch {epoch + 1}/{recipe.epochs}: loss {record['train_loss']:.4f}"
                + "".join(f", {k} {v:.4f}" for k, v in metrics.items()))
            epoch, position, losses, actives = epoch + 1, 0, [], []
            save()
    if status == "finished":
        if best_state is not None:
            model.load_state_dict(best_state)
        elif run_path is not None and (run_path / "best").is_dir():  # saved before a resume
            model.load_state_dict(load_file(run_path / "best" / "model.safetensors"),
                                  strict=False)
    model.eval()
    model_dir = run_path / "best" if run_path is not None and (run_path / "best").is_dir() \
        else None
    result = EmbeddingTrainResult(
        loss=recipe.loss, metrics=best["metrics"], best_epoch=best["epoch"],
        history=list(history), truncated=truncated, examples=len(train), steps=step,
        train_seconds=round(elapsed, 3), examples_per_s=seen / elapsed if elapsed > 0 else None,
        status=status, stop_reason=stop_reason, run_dir=str(run_path) if run_path else None,
        model_dir=str(model_dir) if model_dir else None, _model=bound())
    if run_path is not None and status == "finished":
        write_text(run_path / "metrics.json", result.to_json(indent=1) + "\n")
        write_text(run_path / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in history))
    return result
