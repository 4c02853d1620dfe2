"""The sentence-transformers directory layout, read and written.

A sentence-transformers model is a folder with `modules.json` (the modules in order: a
Transformer, a Pooling, optionally a Normalize), the transformers model and tokenizer, and
each module's settings (`1_Pooling/config.json`, `sentence_bert_config.json`). mlmkit reads
the pooling and normalisation from it, so `mlmkit.load(dir).embed(...)` gives the vectors
`SentenceTransformer(dir).encode(...)` gives; and writes it, so an mlmkit model loads in
`SentenceTransformer(dir)` with the pooling and normalisation it was embedded with.

A SPLADE model (`save_sparse_directory`) is written as sentence-transformers' SparseEncoder
folder: the masked LM with its head (an MLMTransformer module) and a SpladePooling module
(max over tokens of log(1 + relu(logit))), so `SparseEncoder(dir)` gives the vectors
`mlmkit.load(dir).embed_sparse(...)` gives; `read_st_config` refuses it by name for dense
embedding.

Written in the classic layout (module types `sentence_transformers.models.*`, the
`pooling_mode_*` flags) that every sentence-transformers release since 2.x reads; both the
classic and the 6.x layouts are read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mlmkit.core.staging import publish_dir, staging_dir
from mlmkit.errors import InvalidArgument, ModelError

MODULES_FILE = "modules.json"
# sentence-transformers' pooling names (classic flag or 6.x `pooling_mode`) -> mlmkit's
ST_POOLINGS = {"mean": "mean", "cls": "cls", "max": "max", "weightedmean": "weighted-mean"}
CLASSIC_FLAGS = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens",
                 "max": "pooling_mode_max_tokens", "weightedmean": "pooling_mode_weightedmean_tokens",
                 "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
                 "lasttoken": "pooling_mode_lasttoken"}
KNOWN_MODULES = ("Transformer", "Pooling", "Normalize")
SPARSE_MODULES = ("MLMTransformer", "SpladePooling", "SparseAutoEncoder",
                  "SparseStaticEmbedding")


@dataclass(frozen=True)
class StConfig:
    """What a sentence-transformers directory says about embedding with it."""

    transformer: Path
    """The folder of the transformers model (the directory itself, or its `0_Transformer`)."""
    pooling: str
    normalize: bool
    prompt: str | None = None
    """The default prompt (`default_prompt_name` of config_sentence_transformers.json)."""


def is_st_directory(path) -> bool:
    try:
        return (Path(path) / MODULES_FILE).is_file()
    except (TypeError, OSError):
        return False


def _json(path: Path) -> dict | list:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ModelError(f"cannot read {path} ({error}): re-save the sentence-transformers "
                         "model") from error


def _pooling_name(config: dict, where: Path) -> str:
    mode = config.get("pooling_mode")
    if isinstance(mode, str):
        modes = [mode]
    else:
        modes = [name for name, flag in CLASSIC_FLAGS.items() if config.get(flag)]
    if len(modes) != 1 or modes[0] not in ST_POOLINGS:
        raise ModelError(f"{where}: pooling {'+'.join(modes) or 'none'} is not one mlmkit "
                         f"embeds with; it reads {', '.join(ST_POOLINGS)}")
    return ST_POOLINGS[modes[0]]


def read_st_config(path) -> StConfig | None:
    """The pooling, normalisation and model folder of a sentence-transformers directory, or
    None for any other model (a name, a plain transformers directory)."""
    if not is_st_directory(path):
        return None
    root = Path(path)
    modules = _json(root / MODULES_FILE)
    if not isinstance(modules, list):
        raise ModelError(f"{root / MODULES_FILE} is not a list of modules: re-save the model")
    transformer, pooling, normalize = None, "cls", False
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        folder = root / str(module.get("path", ""))
        if kind in SPARSE_MODULES:
            raise ModelError(f"{root} is a sparse (SPLADE) model: embed it with embed_sparse "
                             "(mlmkit embed --sparse), not a dense pooling")
        if kind not in KNOWN_MODULES:
            raise ModelError(f"{root}: module {kind or module!r} is not one mlmkit embeds with "
                             f"({', '.join(KNOWN_MODULES)}); use SentenceTransformer for it")
        if kind == "Transformer":
            transformer = folder
        elif kind == "Pooling":
            pooling = _pooling_name(_json(folder / "config.json"), folder / "config.json")
        else:
            normalize = True
    if transformer is None:
        raise ModelError(f"{root / MODULES_FILE} names no Transformer module: it is not a "
                         "transformers-based embedding model")
    prompt = None
    settings = root / "config_sentence_transformers.json"
    if settings.is_file():
        values = _json(settings)
        name = values.get("default_prompt_name")
        if name:
            prompt = (values.get("prompts") or {}).get(name)
    return StConfig(transformer=transformer, pooling=pooling, normalize=normalize,
                    prompt=prompt or None)


def save_st_directory(mlm, directory, *, pooling: str = "mean", normalize: bool = False,
                      prompt: str | None = None) -> Path:
    """Write `mlm` (its masked LM and tokenizer) as a sentence-transformers model folder that
    embeds with `pooling` and `normalize` (and `prompt` before every text); the folder still
    loads as a masked LM. Written whole or not at all."""
    if pooling not in ST_POOLINGS.values():
        raise InvalidArgument(f"pooling={pooling!r} has no sentence-transformers Pooling "
                              f"module: save with one of {', '.join(ST_POOLINGS.values())}")
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    st_name = {value: key for key, value in ST_POOLINGS.items()}[pooling]
    flags = {flag: name == st_name for name, flag in CLASSIC_FLAGS.items()}
    pooling_config = {"word_embedding_dimension": int(mlm.model.config.hidden_size), **flags,
                      "include_prompt": True}
    return _write_folder(mlm, directory, modules, {"1_Pooling": pooling_config},
                         {"prompts": {"default": prompt} if prompt else {},
                          "default_prompt_name": "default" if prompt else None,
                          "similarity_fn_name": "cosine"})


def save_sparse_directory(mlm, directory) -> Path:
    """Write `mlm` (its masked LM with the head, and tokenizer) as a sentence-transformers
    SparseEncoder folder: MLMTransformer + SpladePooling (max, log(1 + relu)), dot-product
    similarity. The folder still loads as a masked LM. Written whole or not at all."""
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.sparse_encoder.models.MLMTransformer"},
               {"idx": 1, "name": "1", "path": "1_SpladePooling",
                "type": "sentence_transformers.sparse_encoder.models.SpladePooling"}]
    pooling_config = {"pooling_strategy": "max", "activation_function": "relu",
                      "word_embedding_dimension": int(mlm.model.config.vocab_size)}
    return _write_folder(mlm, directory, modules, {"1_SpladePooling": pooling_config},
                         {"model_type": "SparseEncoder", "prompts": {},
                          "default_prompt_name": None, "similarity_fn_name": "dot"})


def _write_folder(mlm, directory, modules: list[dict], module_configs: dict,
                  st_config: dict) -> Path:
    """The folder both layouts share: the masked LM and tokenizer at the root, a folder per
    module after the first (its config.json from `module_configs`, else empty, as
    Normalize's), modules.json, the sequence length and `st_config`; written whole or not
    at all."""
    target = Path(directory)
    staging = staging_dir(target)
    mlm.model.save_pretrained(staging)
    mlm.tokenizer.save_pretrained(staging)
    for module in modules[1:]:
        (staging / module["path"]).mkdir()
        if module["path"] in module_configs:
            _write(staging / module["path"] / "config.json", module_configs[module["path"]])
    _write(staging / MODULES_FILE, modules)
    _write(staging / "sentence_bert_config.json",
           {"max_seq_length": int(mlm.max_length), "do_lower_case": False})
    _write(staging / "config_sentence_transformers.json", st_config)
    return publish_dir(staging, target)


def _write(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
