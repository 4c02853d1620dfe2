"""TSDAE (Wang, Reimers and Gurevych 2021): a sentence encoder trained on plain text by
denoising. Delete about 60% of a sentence's words, embed what is left into one pooled
vector, and have a decoder rebuild the whole sentence token by token from that vector alone
(it cross-attends to the vector and to nothing else); the encoder learns to put the
sentence's content into the vector.

- `delete_words`: the noise. The words are the tokenizer's own (its pre-tokenizer's split,
  punctuation apart, as NLTK's word tokenizer splits it for sentence-transformers); each is
  deleted with probability `ratio` and at least one is kept, with sentence-transformers'
  draws (`random(n) > ratio`, then `choice(n)` when none survived), from a generator the
  caller seeds. The noisy text is the kept words' tokens, so nothing is decoded and
  re-tokenized.
- `build_decoder`: for the families transformers gives a decoder with cross-attention
  (BERT, RoBERTa, XLM-R, CamemBERT, ELECTRA) it is sentence-transformers' decoder: the
  causal-LM class of the encoder's own configuration with cross-attention added, its
  weights and output head from the masked LM, and with `tie=True` every encoder weight
  shared with it (only the cross-attention is the decoder's own): the TSDAE paper's set-up,
  no extra memory for weights. The other families (ModernBERT, DeBERTa-v3, EuroBERT, ESM,
  ...) have no decoder version in transformers; for them it is a one-layer BERT decoder of
  the encoder's width and vocabulary (RetroMAE's finding: a shallow decoder suffices, and a
  weak one makes the vector carry more), sharing the encoder's token embeddings with
  `tie=True` (the only weights of the same shape and meaning).
- `reconstruction_loss`: the decoder reads the sentence's tokens and predicts each next
  one (causal attention) from the earlier ones and the vector; the mean cross-entropy over
  the non-padding targets. Equal to sentence-transformers' `DenoisingAutoEncoderLoss` on
  the same inputs and decoder.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, BertConfig, BertLMHeadModel

DELETION_RATIO = 0.6
DECODER_FAMILIES = ("bert", "roberta", "xlm-roberta", "camembert", "electra")


def keep_words(count: int, ratio: float, rng) -> np.ndarray:
    """Which of `count` words survive: each deleted with probability `ratio`, at least one
    kept (sentence-transformers' `DenoisingAutoEncoderDataset.delete` draws, in order)."""
    keep = rng.random(count) > ratio
    if not keep.any():
        keep[rng.choice(count)] = True
    return keep


def delete_words(ids: list[int], words: list[int | None], ratio: float, rng) -> list[int]:
    """`ids` without the tokens of the deleted words; `words[i]` is token i's word (None
    for special tokens, which stay)."""
    index = np.fromiter((-1 if w is None else w for w in words), np.int64, len(words))
    present = np.unique(index[index >= 0])
    if not len(present):
        return list(ids)
    kept = present[keep_words(len(present), ratio, rng)]
    return [ids[i] for i in np.flatnonzero((index < 0) | np.isin(index, kept))]


def _tie(decoder_base: torch.nn.Module, encoder_base: torch.nn.Module) -> int:
    """Make each decoder parameter with an encoder parameter of the same name and shape that
    very parameter; how many were tied."""
    encoder_parameters = dict(encoder_base.named_parameters())
    modules = dict(decoder_base.named_modules())
    tied = 0
    for name, parameter in list(decoder_base.named_parameters()):
        own = encoder_parameters.get(name)
        if own is not None and own.shape == parameter.shape:
            module, _, attribute = name.rpartition(".")
            setattr(modules[module], attribute, own)
            tied += 1
    return tied


def build_decoder(model, tie: bool = True):
    """The TSDAE decoder of masked LM `model` (see the module docstring), in train mode on
    the model's device; its own weights drawn from torch's generator."""
    config = model.config
    if config.model_type in DECODER_FAMILIES:
        decoder_config = copy.deepcopy(config)
        decoder_config.is_decoder = True
        decoder_config.add_cross_attention = True
        decoder = AutoModelForCausalLM.from_config(decoder_config)
        decoder.load_state_dict(model.state_dict(), strict=False)  # base and head, by name
    else:
        decoder = BertLMHeadModel(BertConfig(
            vocab_size=config.vocab_size, hidden_size=config.hidden_size, num_hidden_layers=1,
            num_attention_heads=config.num_attention_heads,
            intermediate_size=4 * config.hidden_size,
            max_position_embeddings=max(512, getattr(config, "max_position_embeddings", 0)),
            pad_token_id=config.pad_token_id, is_decoder=True, add_cross_attention=True))
        with torch.no_grad():
            decoder.get_input_embeddings().weight.copy_(model.get_input_embeddings().weight)
    decoder.to(next(model.parameters()).device)
    if tie:
        if config.model_type in DECODER_FAMILIES:
            _tie(decoder.base_model, model.base_model)
        else:
            decoder.get_input_embeddings().weight = model.get_input_embeddings().weight
        if decoder.config.tie_word_embeddings:
            decoder.get_output_embeddings().weight = decoder.get_input_embeddings().weight
    return decoder.train()


def reconstruction_loss(decoder, vectors: torch.Tensor, targets: torch.Tensor,
                        pad_id: int) -> torch.Tensor:
    """The mean cross-entropy of each next token of `targets` ([b, L], the original
    sentences padded with `pad_id`) given the earlier ones and the sentence's vector
    ([b, d]); padding is no target."""
    logits = decoder(input_ids=targets[:, :-1], encoder_hidden_states=vectors[:, None],
                     encoder_attention_mask=targets.new_ones(len(targets), 1),
                     use_cache=False).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                           targets[:, 1:].reshape(-1), ignore_index=pad_id)
