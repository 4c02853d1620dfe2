"""Load any Hugging Face masked LM with its tokenizer, from a directory or a hub name."""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers
from transformers.utils import logging as hf_logging

from mlmkit.core.devices import resolve_device, resolve_precision, set_threads
from mlmkit.core.hub import hub_offline, hub_unreachable, offline_now
from mlmkit.core.run_layout import shared_tokenizer_dir
from mlmkit.errors import InvalidArgument, ModelError, PathError, UntrainedHead
from mlmkit.models.adapters import SUPPORTED_ARCHITECTURES
from mlmkit.models.preset_table import input_tokens

MASK_SPELLINGS = ("[MASK]", "<mask>")


@dataclass
class LoadedMLM:
    """A masked LM with its tokenizer: what every mlmkit feature takes."""

    model: transformers.PreTrainedModel
    tokenizer: transformers.PreTrainedTokenizerBase
    name: str = "model"
    untrained_head: tuple[str, ...] = ()
    """Head weights the checkpoint lacked (initialised at random on load; see
    `allow_untrained_head`); empty for a complete masked LM."""
    precision: str | None = None
    """The resolved inference precision ('fp32'/'bf16') when the runtime was resolved once
    (`mlmkit.load`); None: each call resolves its own."""
    threads: int | None = None
    """Intra-op threads asked for at load (None: the process's setting)."""
    batch_tokens: int | None = None
    """Token budget of a batch for every call (None: the engine's default)."""
    source: str | None = None
    """The folder or hub name the model was loaded from (None: built in memory): where a
    classifier reads the checkpoint's weights the masked LM leaves out (BERT's pooler).
    A copy with another `model` (`dataclasses.replace`) should set it to None."""

    @property
    def bound(self) -> bool:
        """Whether device, precision and threads were resolved once, at load."""
        return self.precision is not None

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def max_length(self) -> int:
        """Longest input the model accepts, in tokens (positions minus any offset)."""
        return model_max_length(self.model, self.tokenizer)


def model_max_length(model, tokenizer) -> int:
    config = model.config
    limit = getattr(config, "max_position_embeddings", None)
    if limit is not None:
        limit = input_tokens(limit, config.model_type, getattr(config, "pad_token_id", None))
    if getattr(config, "model_type", "") == "deberta-v2" and not getattr(
        config, "position_biased_input", True
    ):
        limit = None  # relative positions only: the tokenizer's limit is the model's
    tok_limit = getattr(tokenizer, "model_max_length", None)
    if tok_limit is not None and tok_limit < 1_000_000:
        limit = tok_limit if limit is None else min(limit, tok_limit)
    return int(limit or 512)


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    names = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16,
             "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}
    if dtype not in names:
        raise InvalidArgument(f"unknown dtype {dtype!r}: use one of {sorted(names)}")
    return names[dtype]



def check_mask_token(tokenizer, name: str) -> None:
    if tokenizer.mask_token is None or tokenizer.mask_token_id is None:
        raise ModelError(
            f"the tokenizer of {name!r} has no mask token: a masked LM needs one "
            f"(e.g. {' or '.join(MASK_SPELLINGS)}); set tokenizer.mask_token or use a "
            f"masked-LM checkpoint"
        )


def complete_special_tokens(tokenizer):
    """Give a tokenizer without [CLS]/[SEP] roles its <bos>/<eos> in those roles.

    Gemma-style tokenizers (mmBERT's) name only `bos_token`/`eos_token`; mlmkit's packing,
    scoring and model presets read `cls_token`/`sep_token`. Returns the tokenizer.
    """
    if tokenizer.cls_token is None and tokenizer.bos_token is not None:
        tokenizer.cls_token = tokenizer.bos_token
    if tokenizer.sep_token is None and tokenizer.eos_token is not None:
        tokenizer.sep_token = tokenizer.eos_token
    return tokenizer


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json",
                   "merges.txt", "spiece.model", "sentencepiece.bpe.model", "tokenizer.model",
                   "spm.model", "sentencepiece.model")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".msgpack", ".h5")


@contextlib.contextmanager
def _quiet_loading():
    """transformers' load report and weight-loading bar off: mlmkit says what matters."""
    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def _first_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text[:200] + ("…" if len(text) > 200 else "")


def _weight_files(path: Path) -> list[Path]:
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if p.suffix in WEIGHT_SUFFIXES and p.is_file())


_TRUST_REMOTE_CODE: list[bool] = []  # set by `trusting_remote_code` (the CLI flag)


@contextlib.contextmanager
def trusting_remote_code(trust: bool = True):
    """Inside this block, models loaded without an explicit `trust_remote_code` take
    `trust` (the `--trust-remote-code` flag of every model-loading command sets it for the
    command, so loaders deep inside the library see it; threads the command starts too)."""
    _TRUST_REMOTE_CODE.append(bool(trust))
    try:
        yield
    finally:
        _TRUST_REMOTE_CODE.pop()


def trust_remote_code_default(trust_remote_code: bool | None) -> bool:
    """`trust_remote_code`, or (None) the enclosing `trusting_remote_code` block's value,
    else whether $MLMKIT_TRUST_REMOTE_CODE is 1/true/yes."""
    if trust_remote_code is not None:
        return bool(trust_remote_code)
    if _TRUST_REMOTE_CODE:
        return _TRUST_REMOTE_CODE[-1]
    return os.environ.get("MLMKIT_TRUST_REMOTE_CODE", "").strip().lower() in ("1", "true", "yes")


def needs_remote_code(name: str) -> bool:
    """Whether a local model directory's config.json names code of its own (auto_map)."""
    try:
        values = json.loads((Path(name) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(values, dict) and bool(values.get("auto_map"))


def _load_config(name: str, trust_remote_code: bool = False):
    if not trust_remote_code and needs_remote_code(name):
        raise ModelError(f"{name!r} ships its own model code (config.json auto_map): read it, "
                         "then pass --trust-remote-code (trust_remote_code=True, or "
                         "MLMKIT_TRUST_REMOTE_CODE=1) to run it")
    try:
        return transformers.AutoConfig.from_pretrained(name, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError, TypeError, ImportError) as error:
        if "trust_remote_code" in str(error):
            raise ModelError(f"{name!r} needs its own model code: pass --trust-remote-code "
                             "(trust_remote_code=True) if you trust it") from error
        if not Path(name).expanduser().is_dir():  # a hub name: not found, or no network
            if offline_now():
                raise ModelError(f"model {name!r} is neither a local directory nor in the "
                                 "Hugging Face cache, and the hub cannot be reached (no "
                                 "network?): pass a directory saved with save_pretrained, or "
                                 "download the model where there is a network") from error
            raise ModelError(f"model {name!r} is not a local directory and the Hugging Face "
                             f"hub did not give its config ({_first_line(error)}): check the "
                             "name, or pass a directory saved with save_pretrained") from error
        raise ModelError(f"cannot read the model config of {name!r} ({_first_line(error)}): "
                         "re-download or re-export the model (save_pretrained writes "
                         "config.json)") from error


def load_tokenizer(model: str | Path, config, *, tokenizer=None,
                   trust_remote_code: bool = False):
    """The checked tokenizer of the model folder or hub name `model` (whose config is
    `config`), or `tokenizer` for a model saved without one; a folder with no tokenizer files
    is an error naming `--tokenizer DIR` (transformers would build an empty one)."""
    return _load_tokenizer(str(model), Path(str(model)).expanduser(), config,
                           trust_remote_code, tokenizer)


def _load_tokenizer(name: str, path: Path, config, trust_remote_code: bool = False,
                    tokenizer=None):
    """The tokenizer of `name`: its own (from its folder or hub name), or `tokenizer` (a
    folder or hub name of its own, or a loaded tokenizer) for a model saved without one."""
    if tokenizer is not None and not isinstance(tokenizer, (str, Path)):
        return _checked_tokenizer(complete_special_tokens(tokenizer), name, config)
    if tokenizer is not None:
        name = _tokenizer_path(tokenizer)
        path = Path(name)
    elif path.is_dir() and not any((path / f).is_file() for f in TOKENIZER_FILES):
        # a run's step-N/ folder: the run stores its tokenizer once, beside the steps
        shared = shared_tokenizer_dir(path)
        if shared is not None:
            return _load_tokenizer(str(shared), shared, config, trust_remote_code)
        raise ModelError(f"{name!r} has no tokenizer files ({', '.join(TOKENIZER_FILES[:3])}, "
                         "...): save the tokenizer next to the model "
                         "(tokenizer.save_pretrained(dir)) or name its folder with "
                         "tokenizer=DIR (--tokenizer DIR)")
    try:
        # a hub name without a network: the local cache at once (no ~50 s of retries)
        with hub_offline(not path.is_dir() and hub_unreachable()):
            tokenizer = transformers.AutoTokenizer.from_pretrained(
                name, trust_remote_code=trust_remote_code)
    except Exception as error:  # noqa: BLE001 - tokenizers raise many kinds (Rust panics too)
        raise ModelError(f"cannot load the tokenizer of {name!r} ({_first_line(error)}): "
                         "re-download or re-export the model with its tokenizer") from error
    return _checked_tokenizer(complete_special_tokens(tokenizer), name, config)


def _tokenizer_path(tokenizer) -> str:
    """A tokenizer given by folder (`--tokenizer DIR`): it must exist and hold tokenizer files;
    a name that is no local path is a hub name."""
    path = Path(str(tokenizer)).expanduser()
    if path.exists() and not path.is_dir():
        raise PathError(f"tokenizer {str(tokenizer)!r} is a file: pass the directory that "
                        "holds tokenizer.json (or vocab.txt), as save_pretrained writes it")
    if str(tokenizer).startswith((".", "/", "~")) and not path.exists():
        raise PathError(f"tokenizer path {str(tokenizer)!r} does not exist: pass a directory "
                        "written by save_pretrained or `mlmkit tokenizer train`")
    if path.is_dir() and not any((path / f).is_file() for f in TOKENIZER_FILES):
        raise ModelError(f"{str(tokenizer)!r} holds no tokenizer files "
                         f"({', '.join(TOKENIZER_FILES[:3])}, ...): pass the directory written "
                         "by save_pretrained or `mlmkit tokenizer train`")
    return str(path) if path.is_dir() else str(tokenizer)


def _checked_tokenizer(tokenizer, name: str, config):
    """Refuse a tokenizer that cannot serve the model `name` (only special tokens, or more
    tokens than the model's vocabulary)."""
    vocab = getattr(config, "vocab_size", None)
    specials = len(set(tokenizer.all_special_ids))
    if len(tokenizer) <= specials:
        raise ModelError(f"the tokenizer of {name!r} holds only its special tokens: it would "
                         "turn every text into [UNK]; save the real tokenizer with the model")
    if vocab is not None and len(tokenizer) > vocab:
        raise ModelError(f"the tokenizer of {name!r} has {len(tokenizer)} tokens but the "
                         f"model's vocabulary {vocab}: they do not belong together; save the "
                         "model with the tokenizer it was trained with")
    return tokenizer


def untrained_weights(model, missing_keys) -> tuple[list[str], list[str]]:
    """(head keys, encoder keys) among `missing_keys`: weights initialised at random on load."""
    prefix = getattr(model, "base_model_prefix", "") or ""
    encoder = sorted(k for k in missing_keys if prefix and k.startswith(prefix + "."))
    head = sorted(k for k in missing_keys if k not in set(encoder))
    return head, encoder


def _check_trained(name: str, model, info: dict, allow_untrained_head: bool) -> None:
    head, encoder = untrained_weights(model, info.get("missing_keys") or ())
    if encoder:
        raise ModelError(f"{name!r}: {len(encoder)} encoder weight(s) are not in the checkpoint "
                         f"(e.g. {encoder[0]}): it is not a complete {model.config.model_type} "
                         "model; re-download or re-export it")
    if head and not allow_untrained_head:
        hint = (" (an ELECTRA discriminator: load the generator, which is the masked LM)"
                if model.config.model_type == "electra" else
                " (DeBERTa-v3 checkpoints are released without their MLM head)"
                if model.config.model_type == "deberta-v2" else "")
        raise UntrainedHead(f"{name!r} has no trained MLM head{hint}: {len(head)} head "
                            f"weight(s) such as {head[0]} would be random, so every score and "
                            "prediction would be noise; use a masked-LM checkpoint, or pass "
                            "allow_untrained_head=True (--allow-untrained-head) to train one")


def load_mlm(
    model: str | Path,
    device: str | torch.device | None = "auto",
    dtype: str | torch.dtype | None = None,
    *,
    allow_untrained_head: bool = False,
    trust_remote_code: bool | None = None,
    tokenizer=None,
) -> LoadedMLM:
    """Load a masked LM and its tokenizer: `model` is a hub name or a directory
    (`bert-base-uncased`, `./runs/x/final`, ...).

    Errors (`mlmkit.errors.ModelError`, `DeviceError`, `PathError`) name what is wrong: a
    missing path, a device this machine lacks, a checkpoint that is not a masked LM (with
    the supported architectures), a directory without a tokenizer, a damaged weight file,
    a checkpoint whose MLM head is not trained (an ELECTRA discriminator, a DeBERTa-v3
    release; `allow_untrained_head=True` accepts it, e.g. to train the head), a tokenizer
    without a mask token. A checkpoint that ships its own code (NeoBERT, ...) loads only with
    `trust_remote_code=True` (or $MLMKIT_TRUST_REMOTE_CODE=1): that code runs on this machine.
    A hub name is read from the local cache alone when the hub cannot be reached.
    `tokenizer` (a directory, a hub name or a loaded tokenizer) replaces the model's own, for a
    checkpoint saved without one (the CLI's `--tokenizer DIR`).
    """
    trust_remote_code = trust_remote_code_default(trust_remote_code)

    target = resolve_device(device)
    name = str(model)
    path = Path(name).expanduser()
    # a name like runs/model whose folder is here is a local path, not a hub id (whose
    # lookup, offline, waits on retries before failing)
    in_local_folder = len(path.parts) > 1 and path.parent.is_dir()
    looks_local = (path.exists() or name.startswith((".", "/", "~")) or name.count("/") > 1
                   or in_local_folder)
    if looks_local and not path.exists():
        raise PathError(f"model path {name!r} does not exist: pass a directory saved with "
                        "save_pretrained or a Hugging Face hub name")
    if path.exists() and not path.is_dir():
        raise PathError(f"model path {name!r} is a file: pass the directory that holds "
                        "config.json, the weights and the tokenizer")
    if path.is_dir() and not (path / "config.json").exists():
        raise ModelError(f"{name!r} has no config.json: it is not a saved Hugging Face model")
    if path.is_dir():
        name = str(path)
    # no network: the local cache at once (huggingface_hub would retry for ~25 s first)
    with hub_offline(not path.is_dir() and hub_unreachable()):
        return _load_files(name, path, str(model), target, dtype,
                           allow_untrained_head=allow_untrained_head,
                           trust_remote_code=trust_remote_code, tokenizer=tokenizer)


def _load_files(name: str, path: Path, shown: str, target, dtype, *,
                allow_untrained_head: bool, trust_remote_code: bool,
                tokenizer=None) -> LoadedMLM:
    """The config, tokenizer and weights of `name` (a checked directory or a hub name)."""
    config = _load_config(name, trust_remote_code)
    mlm_types = transformers.models.auto.modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
    remote = "AutoModelForMaskedLM" in (getattr(config, "auto_map", None) or {})
    if config.model_type not in mlm_types and not remote:
        raise ModelError(
            f"{name!r} is a {config.model_type!r} model, which has no masked-LM head in "
            f"transformers; mlmkit's fast path supports {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    if path.is_dir() and not _weight_files(path):
        raise ModelError(f"{name!r} holds no weight file (model.safetensors): re-download or "
                         "re-export the model")
    tokenizer = _load_tokenizer(name, path, config, trust_remote_code, tokenizer)
    check_mask_token(tokenizer, name)
    kwargs = {"trust_remote_code": trust_remote_code}
    if dtype is not None:
        kwargs["dtype"] = resolve_dtype(dtype)
    try:
        with _quiet_loading():
            net, info = transformers.AutoModelForMaskedLM.from_pretrained(
                name, config=config, output_loading_info=True, **kwargs)
    except Exception as error:  # noqa: BLE001 - safetensors, pickle, torch and OS errors
        files = _weight_files(path)
        where = ", ".join(repr(str(f)) for f in files) if files else f"the weights of {name!r}"
        raise ModelError(f"cannot read {where} ({_first_line(error)}): the file is damaged or "
                         "truncated; re-download or re-export the model") from error
    _check_trained(name, net, info, allow_untrained_head)
    net.to(target).eval()
    head, _ = untrained_weights(net, info.get("missing_keys") or ())
    return LoadedMLM(model=net, tokenizer=tokenizer, name=shown, untrained_head=tuple(head),
                     source=name)


def classifier_from_checkpoint(source: str, config, trust_remote_code: bool = False):
    """(`AutoModelForSequenceClassification.from_pretrained(source, config=config)` in
    float32, the keys it initialised), from the files the masked LM was loaded from (the
    local copy only, never the network): the checkpoint's weights, the pooler a masked LM
    drops included, and only the missing weights drawn (the draws a Hugging Face script
    makes after the same seed). None where the family has no such class; a checkpoint that
    cannot be read so is said in a warning, and None."""
    try:
        with _quiet_loading():
            model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
                source, config=config, dtype=torch.float32, local_files_only=True,
                output_loading_info=True, trust_remote_code=trust_remote_code)
    except ValueError as error:
        if "Unrecognized configuration class" in str(error):
            return None  # the family has no classifier class: the caller says so
        _cannot_read_classifier(source, error)
        return None
    except Exception as error:  # noqa: BLE001 - moved files, shapes changed in memory, ...
        _cannot_read_classifier(source, error)
        return None
    return model, set(info.get("missing_keys") or ())


def _cannot_read_classifier(source: str, error: BaseException) -> None:
    warnings.warn(f"cannot read a classifier from {source!r} ({_first_line(error)}): it "
                  "starts from the masked LM's weights in memory, without the checkpoint's "
                  "pooler", stacklevel=3)


def _check_head(model, name: str) -> None:
    get = getattr(model, "get_output_embeddings", None)
    if get is not None and get() is None:
        raise ModelError(f"{name!r} ({type(model).__name__}) has no MLM head: pass a masked LM "
                         "(AutoModelForMaskedLM), not an encoder or a discriminator")


def as_mlm(model, tokenizer=None, *, device=None, dtype=None,
           allow_untrained_head: bool = False, trust_remote_code: bool | None = None) -> LoadedMLM:
    """Accept an `MLM`, a name or path (loaded with `load_mlm`), or a model with its tokenizer.

    `device` (None: where it is; 'auto' or a name) loads a name there, and moves a given
    model there when it is elsewhere. `trust_remote_code`: see `load_mlm`.
    """
    if isinstance(model, LoadedMLM):
        mlm = model
    elif isinstance(model, (str, Path)):
        return load_mlm(model, device=device if device is not None else "auto", dtype=dtype,
                        allow_untrained_head=allow_untrained_head,
                        trust_remote_code=trust_remote_code, tokenizer=tokenizer)
    else:
        if isinstance(model, tuple) and len(model) == 2:
            model, tokenizer = model
        if tokenizer is None:
            raise InvalidArgument("pass a tokenizer with the model, a (model, tokenizer) pair, "
                                  "or an MLM from load_mlm()")
        if not isinstance(model, torch.nn.Module) or not hasattr(model, "config"):
            raise InvalidArgument(f"model is a {type(model).__name__}: pass an MLM, a model "
                                  "name or path, or a (transformers model, tokenizer) pair")
        name = getattr(model, "name_or_path", "") or "model"
        check_mask_token(tokenizer, name)
        _check_head(model, name)
        mlm = LoadedMLM(model=model, tokenizer=tokenizer, name=name)
    if device is not None and device != "auto":
        target = resolve_device(device)
        if mlm.device != target and not (target.type == mlm.device.type and target.index is None):
            mlm.model.to(target)
    return mlm


def prepare_mlm(model, *, device=None, precision: str | None = "auto", threads=None,
                tokenizer=None, allow_untrained_head: bool = False,
                trust_remote_code: bool | None = None) -> tuple[LoadedMLM, str]:
    """The one runtime resolver every feature runs first: (MLM, resolved precision).

    A model bound by `mlmkit.load` (its precision resolved) is used as it is: its threads
    are set again (they are the process's) and nothing else is resolved. Otherwise: resolve
    the device (a `DeviceError` listing this machine's devices), load a name there or move a
    given model there (`device` None or 'auto': a given model stays where it is), set the
    thread count (`threads`, `$MLMKIT_THREADS`, the usable cores) and resolve `precision`
    for inference ('auto' = fp32). Explicit `device`, `precision` or `threads` override a
    bound model's for this call. Bad values fail before any load.
    """
    if (isinstance(model, LoadedMLM) and model.bound and device in (None, "auto")
            and precision in (None, "auto") and threads is None):
        set_threads(model.threads)
        return model, model.precision
    if device is not None:
        resolve_device(device)
    resolve_precision(precision, torch.device("cpu"))  # a bad name fails before the load
    set_threads(threads if threads is not None else getattr(model, "threads", None))
    mlm = as_mlm(model, tokenizer, device=device, allow_untrained_head=allow_untrained_head,
                 trust_remote_code=trust_remote_code)
    if precision in (None, "auto") and getattr(mlm, "bound", False):
        return mlm, mlm.precision
    return mlm, resolve_precision(precision, mlm.device, "inference")
