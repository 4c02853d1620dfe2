"""`model_info`: what a checkpoint is, and which mlmkit features will work on it.

It reads the loaded model (not a table of names): family and classes, parameters
(embeddings and the rest), vocabulary, positions and their scheme (absolute, relative,
RoPE with its θ, ALiBi), the attention implementation, whether the MLM head is present and
trained, the special tokens, and per feature "yes" or the reason it will not work.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from mlmkit.core.results import Result
from mlmkit.models.load import LoadedMLM, as_mlm, load_mlm, model_max_length
from mlmkit.models.sparse_last_layer import sparse_last_layer_supported

ABSOLUTE_FAMILIES = ("bert", "roberta", "xlm-roberta", "camembert", "distilbert", "albert",
                     "electra", "megatron-bert", "ernie")
HEAD_FEATURES = ("score", "fill", "generate", "infill", "probe", "bias")


@dataclass
class ModelInfo(Result):
    """What `model_info` reports about one model (see `mlmkit model info --help`)."""

    name: str
    family: str  # the config's model_type
    architecture: str  # the model class
    parameters: int  # each shared tensor counted once
    embedding_parameters: int  # token, position and type embeddings
    other_parameters: int
    vocab_size: int  # the model's output vocabulary
    tokenizer_size: int
    max_positions: int  # longest input in tokens (model and tokenizer limits)
    position_scheme: str  # absolute, relative, rope, alibi or unknown
    rope_theta: dict[str, float] | None  # per attention kind, for RoPE models
    attention: str  # implementation (sdpa, eager, flash...) and pattern
    mlm_head: bool  # a masked-LM head is part of the model
    mlm_head_trained: bool  # ... and its weights came from the checkpoint
    remote_code: bool  # the model's code shipped with the checkpoint
    special_tokens: dict[str, str] = field(default_factory=dict)  # role -> "token (id)"
    features: dict[str, str] = field(default_factory=dict)  # feature -> "yes" or reason
    sparse_last_layer: bool = False  # the primitive computes the last layer only where read

    def table(self) -> list[tuple[str, str]]:
        """(field, value) rows for a terminal."""
        theta = (", ".join(f"{k} {v:g}" for k, v in self.rope_theta.items())
                 if self.rope_theta else None)
        rows = [
            ("family", f"{self.family} ({self.architecture}"
                       + (", remote code)" if self.remote_code else ")")),
            ("parameters", f"{self.parameters:,} (embeddings {self.embedding_parameters:,}, "
                           f"rest {self.other_parameters:,})"),
            ("vocabulary", f"{self.vocab_size:,} (tokenizer {self.tokenizer_size:,})"),
            ("max positions", f"{self.max_positions:,}"),
            ("positions", self.position_scheme + (f" (θ: {theta})" if theta else "")),
            ("attention", self.attention),
            ("MLM head", ("present, weights from the checkpoint" if self.mlm_head_trained
                          else "present, NOT trained (random weights on load)")
             if self.mlm_head else "absent"),
            ("sparse last layer", "yes" if self.sparse_last_layer else "no (full layer)"),
            ("special tokens", ", ".join(f"{k} {v}" for k, v in self.special_tokens.items())),
        ]
        rows += [(f"  {name}", verdict) for name, verdict in self.features.items()]
        return rows


def _unique_parameters(module: torch.nn.Module) -> dict[int, torch.nn.Parameter]:
    return {id(p): p for p in module.parameters()}


def parameter_counts(model: torch.nn.Module) -> tuple[int, int]:
    """(embedding parameters, all parameters); shared (tied) tensors counted once."""
    every = _unique_parameters(model)
    embeddings = {id(p): p for m in model.modules() if isinstance(m, torch.nn.Embedding)
                  for p in m.parameters(recurse=False)}
    return sum(p.numel() for p in embeddings.values()), sum(p.numel() for p in every.values())


def rope_thetas(config) -> dict[str, float] | None:
    """The RoPE θ of each attention kind ({'all': θ} when one), or None without RoPE."""
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, dict) and params:
        if "rope_theta" in params:
            return {"all": float(params["rope_theta"])}
        thetas = {kind: float(p["rope_theta"]) for kind, p in params.items()
                  if isinstance(p, dict) and "rope_theta" in p}
        if thetas:
            return {{"full_attention": "global", "sliding_attention": "local"}.get(k, k): v
                    for k, v in thetas.items()}
    for name in ("rope_theta", "global_rope_theta"):
        value = getattr(config, name, None)
        if isinstance(value, (int, float)):
            return {"all": float(value)}
    return None


def position_scheme(model) -> tuple[str, dict[str, float] | None]:
    config = model.config
    thetas = rope_thetas(config)
    if thetas is not None or any("Rotary" in type(m).__name__ for m in model.modules()):
        return "rope", thetas
    names = " ".join(str(k) for k in config.to_dict()).lower()
    kind = str(getattr(config, "position_embedding_type", "")).lower()
    if "alibi" in names or kind == "alibi":
        return "alibi", None
    if config.model_type in ("deberta", "deberta-v2"):
        absolute = " + absolute" if getattr(config, "position_biased_input", True) else ""
        return "relative (disentangled attention, buckets "\
            f"{getattr(config, 'position_buckets', -1)}){absolute}", None
    if kind.startswith("relative"):
        return f"relative ({kind})", None
    if config.model_type in ABSOLUTE_FAMILIES or hasattr(config, "max_position_embeddings"):
        return "absolute (learned)", None
    return "unknown", None


def attention_kind(model) -> str:
    config = model.config
    impl = getattr(config, "_attn_implementation", None) or "default"
    text = f"{impl}"
    if getattr(config, "local_attention", None) and config.model_type == "modernbert":
        types = getattr(config, "layer_types", None) or []
        local = sum(t == "sliding_attention" for t in types)
        text += (f", local window {config.local_attention} in {local} of {len(types)} layers, "
                 "global in the rest")
    heads, kv = getattr(config, "num_attention_heads", None), getattr(
        config, "num_key_value_heads", None)
    if heads and kv and kv != heads:
        text += f", grouped-query ({heads} query heads, {kv} key/value heads)"
    return text


def _special_tokens(tokenizer) -> dict[str, str]:
    out = {}
    for role in ("cls_token", "sep_token", "mask_token", "pad_token", "unk_token", "bos_token",
                 "eos_token"):
        token = getattr(tokenizer, role, None)
        if token is not None:
            out[role.removesuffix("_token")] = f"{token} ({tokenizer.convert_tokens_to_ids(token)})"
    return out


def _features(mlm, head: bool, trained: bool) -> dict[str, str]:
    reason = None
    if not head:
        reason = "no: the model has no MLM head"
    elif not trained:
        hint = (" (DeBERTa-v3 checkpoints ship without one)"
                if mlm.model.config.model_type == "deberta-v2" else "")
        reason = f"no: the MLM head is not trained{hint}"
    features = {name: reason or "yes" for name in HEAD_FEATURES}
    features["pretrain --init"] = reason or "yes"
    features["finetune"] = "yes (the encoder's weights come from the checkpoint)"
    features["electra"] = ("yes (as the generator of --objective electra)"
                           if mlm.model.config.model_type == "electra" else
                           "no: mlmkit's ELECTRA objective trains electra-SIZE presets")
    return features


def model_info(model, tokenizer=None, *, trust_remote_code: bool | None = None) -> ModelInfo:
    """Describe `model` (a name or path, an `MLM`, or a (model, tokenizer) pair).

    A name or path loads on the CPU, accepting an untrained MLM head (reported, with the
    features it rules out); `trust_remote_code` as in `load_mlm`.
    """
    if isinstance(model, (str,)) or hasattr(model, "__fspath__"):
        mlm = load_mlm(model, device="cpu", allow_untrained_head=True,
                       trust_remote_code=trust_remote_code)
    else:
        mlm = model if isinstance(model, LoadedMLM) else as_mlm(model, tokenizer)
    net, tok = mlm.model, mlm.tokenizer
    config = net.config
    embeddings, total = parameter_counts(net)
    get_head = getattr(net, "get_output_embeddings", None)
    head = get_head is not None and get_head() is not None
    trained = head and not mlm.untrained_head
    scheme, thetas = position_scheme(net)
    return ModelInfo(
        name=str(mlm.name), family=config.model_type, architecture=type(net).__name__,
        parameters=total, embedding_parameters=embeddings, other_parameters=total - embeddings,
        vocab_size=int(getattr(config, "vocab_size", len(tok))), tokenizer_size=len(tok),
        max_positions=model_max_length(net, tok), position_scheme=scheme, rope_theta=thetas,
        attention=attention_kind(net), mlm_head=head, mlm_head_trained=bool(trained),
        remote_code=bool(getattr(config, "auto_map", None)),
        special_tokens=_special_tokens(tok), features=_features(mlm, head, bool(trained)),
        sparse_last_layer=bool(sparse_last_layer_supported(net)),
    )
