"""Where an answer sits in its filled-in prompt: one token, or a span of tokens.

Each (prompt, answer) pair is tokenized as the filled-in statement. The answer is
*single-token* when exactly one token covers its characters and nothing else; the
masked prompt is then that statement with the token replaced by the mask, which is
what the model sees whatever the tokenizer does with spaces before a mask. Pairs that
share a masked prompt (the words of a verbalizer; facts with the same prompt) share one
forward pass.
Other answers (several subwords, or merged with the text around the gap) are spans,
scored in the filled statement by the PLL engine. An answer holding a token the
tokenizer can only spell as its unknown token ([UNK]) is marked `unknown`: its tokens are
kept in its span (the tokenizer's unknown token is part of the text, not a special
marker to leave out), and each caller decides (knowledge probes skip and count such facts,
as LAMA leaves them out; a verbalizer word must be spelled by the vocabulary).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlmkit.errors import InvalidData, ModelError
from mlmkit.probe.prompt import Cloze


@dataclass
class AnswerTokens:
    """Per (prompt, answer) pair: the answer's token and its masked prompt, or its span."""

    token: np.ndarray  # [Q] token id when single-token, else -1
    context: np.ndarray  # [Q] index into `contexts` when single-token, else -1
    contexts: list[list[int]]  # distinct masked prompts (token ids)
    mask_column: np.ndarray  # [len(contexts)] column of the mask in each context
    context_owner: np.ndarray  # [len(contexts)] the first pair using each context
    filled_ids: list[list[int]]  # [Q] the filled-in statement's ids
    span: list[list[int]]  # [Q] columns of the answer's tokens in filled_ids
    unknown: np.ndarray  # [Q] bool: the answer holds the tokenizer's unknown token

    @property
    def single(self) -> np.ndarray:
        return self.token >= 0


def locate_answers(tokenizer, clozes: list[Cloze], prompt_index: np.ndarray,
                   answers: list[str], names: list[str]) -> AnswerTokens:
    """Tokenize `clozes[prompt_index[q]].filled(answers[q])` and find the answer in it.

    `names[q]` says which input a pair comes from, for errors.
    """
    for q, answer in enumerate(answers):
        if not isinstance(answer, str) or not answer.strip():
            raise InvalidData(f"{names[q]}: the answer {answer!r} is empty")
    if not getattr(tokenizer, "is_fast", False):
        raise ModelError("probing needs a fast tokenizer (character offsets): load the model "
                         "with its tokenizer.json")
    texts = [clozes[p].filled(a) for p, a in zip(prompt_index, answers, strict=True)]
    empty = np.zeros(0, np.int64)
    if not texts:
        return AnswerTokens(empty, empty, [], empty, empty, [], [], np.zeros(0, bool))
    encoding = tokenizer(texts, add_special_tokens=True, truncation=False, verbose=False,
                         return_offsets_mapping=True)
    unk_id = tokenizer.unk_token_id
    special = set(tokenizer.all_special_ids) - {unk_id}
    mask_id = tokenizer.mask_token_id
    token = np.full(len(texts), -1, dtype=np.int64)
    unknown = np.zeros(len(texts), dtype=bool)
    context = np.full(len(texts), -1, dtype=np.int64)
    seen: dict[tuple[int, ...], int] = {}
    contexts, columns, owners, filled, spans = [], [], [], [], []
    for q, p in enumerate(prompt_index):
        row = list(encoding["input_ids"][q])
        if mask_id in row:
            raise InvalidData(f"{names[q]}: {texts[q]!r} holds the mask token "
                              f"{tokenizer.mask_token!r} outside the gap; remove it from the input")
        lo, hi = clozes[p].answer_span(answers[q])
        offsets = encoding["offset_mapping"][q]
        span = [t for t, (s, e) in enumerate(offsets)
                if e > s and s < hi and e > lo and row[t] not in special]
        if not span:
            raise InvalidData(f"{names[q]}: the answer {answers[q]!r} has no tokens in "
                              f"{texts[q]!r}")
        filled.append(row)
        spans.append(span)
        unknown[q] = unk_id is not None and any(row[t] == unk_id for t in span)
        if len(span) == 1 and not unknown[q]:
            s, e = offsets[span[0]]
            starts_at_answer = s == lo or (s == lo - 1 and texts[q][s].isspace())
            if starts_at_answer and e == hi:  # the token is the answer (and maybe its space)
                masked = list(row)
                masked[span[0]] = mask_id
                key = tuple(masked)
                if key not in seen:
                    seen[key] = len(contexts)
                    contexts.append(masked)
                    columns.append(span[0])
                    owners.append(q)
                token[q] = row[span[0]]
                context[q] = seen[key]
    return AnswerTokens(token=token, context=context, contexts=contexts,
                        mask_column=np.array(columns, dtype=np.int64),
                        context_owner=np.array(owners, dtype=np.int64), filled_ids=filled,
                        span=spans, unknown=unknown)
