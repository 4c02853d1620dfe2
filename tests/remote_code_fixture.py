"""A model directory whose code ships with it (as NeoBERT's does), for offline tests of
`trust_remote_code`.

`write_remote_code_model(directory, tokenizer)` writes `configuration_neobert.py`,
`modeling_neobert.py` (a tiny NeoBERT-shaped encoder: RoPE attention, SwiGLU, pre-RMSNorm,
an MLM head), a `config.json` whose `auto_map` points at them, random weights and the
tokenizer. Nothing touches the network; transformers copies the code into its module cache
when the directory is loaded with `trust_remote_code=True`.

Reusable by any test that needs a remote-code masked LM (e.g. diffusion sampling).
"""

from __future__ import annotations

import json
from pathlib import Path

CONFIGURATION = '''
from transformers import PretrainedConfig


class NeoBERTConfig(PretrainedConfig):
    model_type = "neobert"

    def __init__(self, vocab_size=1024, hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
                 rope_theta=10000.0, norm_eps=1e-5, pad_token_id=0, **kwargs):
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.max_position_embeddings = max_position_embeddings
        self.rope_theta = rope_theta
        self.norm_eps = norm_eps
'''

MODELING = '''
import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput, MaskedLMOutput

from .configuration_neobert import NeoBERTConfig


def rotate(x, theta):
    half = x.shape[-1] // 2
    freqs = 1.0 / theta ** (torch.arange(0, half, device=x.device).float() / half)
    angles = torch.arange(x.shape[-2], device=x.device).float()[:, None] * freqs[None]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        d = config.hidden_size
        self.heads = config.num_attention_heads
        self.theta = config.rope_theta
        self.attention_norm = nn.RMSNorm(d, eps=config.norm_eps)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.ffn_norm = nn.RMSNorm(d, eps=config.norm_eps)
        self.gate_up = nn.Linear(d, 2 * config.intermediate_size, bias=False)
        self.down = nn.Linear(config.intermediate_size, d, bias=False)

    def forward(self, x, bias):
        b, n, d = x.shape
        q, k, v = self.qkv(self.attention_norm(x)).view(b, n, 3, self.heads, -1).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        q, k = rotate(q, self.theta), rotate(k, self.theta)
        att = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        x = x + self.out(att.transpose(1, 2).reshape(b, n, d))
        gate, up = self.gate_up(self.ffn_norm(x)).chunk(2, dim=-1)
        return x + self.down(nn.functional.silu(gate) * up)


class NeoBERTPreTrainedModel(PreTrainedModel):
    config_class = NeoBERTConfig
    base_model_prefix = "model"

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)


class NeoBERT(NeoBERTPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.encoder = nn.Embedding(config.vocab_size, config.hidden_size)
        self.transformer_encoder = nn.ModuleList(
            Block(config) for _ in range(config.num_hidden_layers))
        self.layer_norm = nn.RMSNorm(config.hidden_size, eps=config.norm_eps)
        self.post_init()

    def get_input_embeddings(self):
        return self.encoder

    def forward(self, input_ids, attention_mask=None, **kwargs):
        x = self.encoder(input_ids)
        bias = None
        if attention_mask is not None:
            bias = torch.zeros(attention_mask.shape, dtype=x.dtype, device=x.device)
            bias = bias.masked_fill(attention_mask == 0, torch.finfo(x.dtype).min)
            bias = bias[:, None, None, :]
        for block in self.transformer_encoder:
            x = block(x, bias)
        return BaseModelOutput(last_hidden_state=self.layer_norm(x))


class NeoBERTLMHead(NeoBERTPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.model = NeoBERT(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def get_output_embeddings(self):
        return self.decoder

    def forward(self, input_ids, attention_mask=None, **kwargs):
        hidden = self.model(input_ids, attention_mask).last_hidden_state
        return MaskedLMOutput(logits=self.decoder(hidden))
'''


def write_remote_code_model(directory: str | Path, tokenizer, *, hidden: int = 32,
                            layers: int = 2, seed: int = 0) -> Path:
    """A saved NeoBERT-shaped masked LM whose code lives in `directory` (auto_map)."""
    import torch
    import transformers

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "configuration_neobert.py").write_text(CONFIGURATION.lstrip())
    (directory / "modeling_neobert.py").write_text(MODELING.lstrip())
    config = {
        "model_type": "neobert", "architectures": ["NeoBERTLMHead"],
        "auto_map": {"AutoConfig": "configuration_neobert.NeoBERTConfig",
                     "AutoModel": "modeling_neobert.NeoBERT",
                     "AutoModelForMaskedLM": "modeling_neobert.NeoBERTLMHead"},
        "vocab_size": len(tokenizer), "hidden_size": hidden, "num_hidden_layers": layers,
        "num_attention_heads": 2, "intermediate_size": 2 * hidden, "max_position_embeddings": 128,
        "rope_theta": 10000.0, "pad_token_id": tokenizer.pad_token_id,
    }
    (directory / "config.json").write_text(json.dumps(config, indent=1))
    loaded = transformers.AutoConfig.from_pretrained(str(directory), trust_remote_code=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.AutoModelForMaskedLM.from_config(loaded, trust_remote_code=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
