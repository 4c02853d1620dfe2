"""Plain-dict (YAML) masking configs and named presets, parsed strictly into a policy.

    {"units": "whole_word", "rate": {"schedule": "linear", "start": 0.3, "end": 0.15},
     "weights": "frequency", "corruption": [0.8, 0.1, 0.1], "total_steps": 10000}

`stats` may name the directory of `mlmkit mask stats` (for pmi / frequency / tfidf / bm25
/ informask). A component is a name or a mapping with a `name` (for rates also `schedule`) and its
parameters; a rate may be a bare number. `name`/`preset` at the top picks a preset whose
fields the other keys override. Unknown keys and names are errors listing the valid ones.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import yaml

import mlmkit.masking.counts  # noqa: F401  (registers the count modes)
import mlmkit.masking.rates  # noqa: F401
import mlmkit.masking.units  # noqa: F401
import mlmkit.masking.weights  # noqa: F401
from mlmkit.core.yaml_values import NotFinite, load_yaml
from mlmkit.errors import MlmkitError
from mlmkit.masking.corruption import Corruption
from mlmkit.masking.policy import MaskingPolicy
from mlmkit.masking.registry import COUNTS, RATES, UNITS, WEIGHTS, normalise_name
from mlmkit.masking.stats import MaskingStats, load_stats
from mlmkit.masking.vocabulary import Vocabulary

BERT = {"units": "tokens", "rate": 0.15, "count": "exact", "weights": "uniform",
        "corruption": [0.8, 0.1, 0.1], "corruption_per_unit": False}

PRESETS: dict[str, dict] = {
    "bert": {},
    "whole_word": {"units": "whole_word"},
    "span": {"units": {"name": "span", "p": 0.2, "max_words": 10}, "corruption_per_unit": True},
    "pmi": {"units": "pmi"},
    "diffusion": {"rate": {"name": "diffusion", "eps": 1e-3}, "count": "bernoulli",
                  "corruption": [1.0, 0.0, 0.0]},
    "mask40": {"rate": 0.4, "corruption": [1.0, 0.0, 0.0]},  # Wettig et al. 2023
    "upmlm": {"rate": {"name": "uniform"}, "corruption": [1.0, 0.0, 0.0]},
    "film": {"rate": {"name": "beta", "a": 2.0, "b": 2.0}, "corruption": [1.0, 0.0, 0.0]},
    "frequency": {"units": "whole_word", "weights": "frequency"},
    "tfidf": {"units": "whole_word", "weights": "tfidf"},
    # ROM (Long et al. 2022): important terms (BM25 weight) masked more, stop-words less
    "rom": {"units": "whole_word", "weights": "bm25"},
    "informask": {"weights": "informask"},
    "loss": {"weights": "loss"},
}
PRESET_ALIASES = {"uniform": "bert", "tokens": "bert", "random": "bert", "wwm": "whole_word",
                  "spanbert": "span", "mdlm": "diffusion"}

FIELDS = ("name", "preset", "units", "rate", "count", "weights", "corruption",
          "corruption_per_unit", "protected_ids", "protected_tokens", "total_steps",
          "mask_prob", "random_prob", "stats")


def preset(name: str) -> dict:
    """The full config of a named preset."""
    key = normalise_name(name)
    key = PRESET_ALIASES.get(key, key)
    if key not in PRESETS:
        raise MlmkitError(f"unknown masking policy {name!r}: use one of {sorted(PRESETS)} "
                          "or a mapping with units / rate / count / weights / corruption")
    return {**copy.deepcopy(BERT), **copy.deepcopy(PRESETS[key])}


def resolve(config) -> dict:
    """A full config dict from a preset name, a partial mapping, or None (BERT)."""
    if config is None:
        return copy.deepcopy(BERT)
    if isinstance(config, str):
        return preset(config)
    if not isinstance(config, dict):
        raise MlmkitError(f"a masking config is a preset name or a mapping, not {type(config).__name__}")
    unknown = sorted(set(config) - set(FIELDS))
    if unknown:
        raise MlmkitError(f"masking config has unknown field(s) {unknown}: use {list(FIELDS)}")
    base = config.get("preset", config.get("name"))
    full = preset(base) if base is not None else copy.deepcopy(BERT)
    full.update({k: copy.deepcopy(v) for k, v in config.items() if k not in ("name", "preset")})
    if "mask_prob" in full or "random_prob" in full:  # the flat spelling of corruption
        if "corruption" in config:
            raise MlmkitError("give either corruption or mask_prob/random_prob, not both")
        mask = float(full.pop("mask_prob", 0.8))
        random = float(full.pop("random_prob", 0.1))
        full["corruption"] = [mask, random, max(0.0, 1.0 - mask - random)]
    return full


def component(spec, what: str, name_keys=("name",)) -> tuple[str, dict]:
    """(name, parameters) of a component given as a name or a mapping."""
    if isinstance(spec, str):
        return spec, {}
    if isinstance(spec, dict):
        params = dict(spec)
        names = [params.pop(k) for k in name_keys if k in params]
        if len(names) != 1:
            raise MlmkitError(f"masking {what} {spec} needs exactly one of {list(name_keys)}")
        return names[0], params
    raise MlmkitError(f"masking {what} must be a name or a mapping, not {spec!r}")


def rate_component(spec) -> tuple[str, dict]:
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return "constant", {"value": float(spec)}
    return component(spec, "rate", ("name", "schedule"))


def protected_ids(full: dict, tokenizer) -> list[int]:
    ids = [int(i) for i in full.get("protected_ids") or []]
    for token in full.get("protected_tokens") or []:
        index = tokenizer.convert_tokens_to_ids(token)
        if index is None or index == tokenizer.unk_token_id and token != tokenizer.unk_token:
            raise MlmkitError(f"protected token {token!r} is not in the tokenizer's vocabulary")
        ids.append(int(index))
    return ids


def build_policy(config, tokenizer, stats=None):
    """A `MaskingPolicy` from a preset name or a config mapping.

    `stats` is a directory written by `mlmkit mask stats` (or a loaded `MaskingStats`),
    else the config's own `stats` field; components that need it (pmi units, frequency /
    tfidf / bm25 / informask weights) say so when it is missing.
    """
    full = resolve(config)
    if stats is None:
        stats = full.get("stats")  # a config may name its statistics directory itself
    if stats is not None and not isinstance(stats, MaskingStats):
        stats = load_stats(stats)
    vocabulary = Vocabulary(tokenizer, protected_ids(full, tokenizer))
    if stats is not None and stats.vocab_size != vocabulary.size:
        raise MlmkitError(f"the masking statistics were computed for a vocabulary of "
                          f"{stats.vocab_size}, but the tokenizer has {vocabulary.size}: "
                          "recompute them with this tokenizer (mlmkit mask stats)")
    total_steps = full.get("total_steps")
    name, params = component(full["units"], "units")
    units = UNITS.build(name, params, stats=stats)
    name, params = rate_component(full["rate"])
    rate = RATES.build(name, params, total_steps=total_steps)
    name, params = component(full["count"], "count")
    count = COUNTS.build(name, params)
    name, params = component(full["weights"], "weights")
    weights = WEIGHTS.build(name, params, stats=stats, vocab_size=vocabulary.size)
    corruption = Corruption(full["corruption"], per_unit=full.get("corruption_per_unit", False))
    return MaskingPolicy(vocabulary=vocabulary, units=units, rate=rate, count=count,
                         weights=weights, corruption=corruption, config=full)


def parse_masking_option(value, flag_name: str = "--masking"):
    """The one parser of a masking option (`mlmkit pretrain --masking`, `mlmkit mask preview
    --policy`, a config file's `masking:`): a preset name, an inline YAML/JSON mapping
    ('{units: span, rate: 0.2}'), or a .yaml/.json file holding either. A mapping or a name
    passes through; errors name the flag."""
    if value is None or isinstance(value, dict):
        return value
    text = str(value).strip()
    if text.lower().endswith((".yaml", ".yml", ".json")):
        path = Path(text)
        if not path.is_file():
            raise MlmkitError(f"{flag_name} {value!r}: masking config file {path} does not "
                              "exist")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise MlmkitError(f"{flag_name} {value!r}: cannot read it ({error})") from None
    elif not text.startswith("{"):
        return text
    try:
        parsed = load_yaml(text)
    except NotFinite as error:
        raise MlmkitError(f"{flag_name} {value!r}: {error}") from None
    except yaml.YAMLError as error:
        problem = str(error).replace("\n", " ")
        raise MlmkitError(f"{flag_name} {value!r} is not valid YAML/JSON: {problem}") from None
    if not isinstance(parsed, (dict, str)):
        raise MlmkitError(f"{flag_name} {value!r} must be a preset name or a mapping")
    return parsed


def check_masking(config, flag_name: str = "--masking", total_steps: int | None = None) -> dict:
    """Check a masking config without a tokenizer (preset, fields, component names and
    their parameters' names, the rate over `total_steps`, the corruption), so a run can
    refuse it before any work; the full config."""
    full = resolve(parse_masking_option(config, flag_name))
    parts = (("units", UNITS, component, ("name",)), ("rate", RATES, None, None),
             ("count", COUNTS, component, ("name",)), ("weights", WEIGHTS, component, ("name",)))
    for key, registry, split, names in parts:
        name, params = (rate_component(full[key]) if split is None
                        else split(full[key], key, names))
        cls = registry.get(name)
        allowed = getattr(cls, "PARAMS", {})
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise MlmkitError(f"{flag_name}: masking {registry.kind} {name!r} has no "
                              f"parameter(s) {unknown}: its parameters are "
                              f"{sorted(allowed) or 'none'}")
    name, params = rate_component(full["rate"])
    RATES.build(name, params, total_steps=total_steps)
    corruption = full["corruption"]
    if isinstance(corruption, (list, tuple)) and not all(
            isinstance(p, (int, float)) and math.isfinite(p) for p in corruption):
        raise MlmkitError(f"corruption proportions {list(corruption)} must be finite")
    Corruption(corruption, per_unit=full.get("corruption_per_unit", False))
    return full
