"""Masking policies: the call contract, rates, corruption, guarantees, determinism, state."""

from __future__ import annotations

import pytest
import torch

from mlmkit.errors import MlmkitError
from mlmkit.masking import IGNORE_INDEX, MaskedBatch, MaskingPolicy, build_policy


def ordinary_ids(tokenizer, shape, seed=0):
    """Random non-special ids, with [CLS] first and [SEP] last in every row."""
    special = set(tokenizer.all_special_ids)
    pool = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
    g = torch.Generator().manual_seed(seed)
    ids = pool[torch.randint(len(pool), shape, generator=g)]
    ids[:, 0], ids[:, -1] = tokenizer.cls_token_id, tokenizer.sep_token_id
    return ids


def test_contract_fields_and_labels(wordpiece_tokenizer):
    tok = wordpiece_tokenizer
    policy = build_policy("bert", tok)
    assert isinstance(policy, MaskingPolicy)
    ids = ordinary_ids(tok, (8, 64))
    out = policy(ids, step=0, seed=0)
    assert isinstance(out, MaskedBatch)
    assert out.input_ids.shape == ids.shape and out.mask.dtype == torch.bool
    assert out.rate.shape == (8,) and out.rate.dtype == torch.float32
    assert torch.equal(out.labels != IGNORE_INDEX, out.mask)
    assert torch.equal(out.labels[out.mask], ids[out.mask])
    assert torch.equal(out.input_ids[~out.mask], ids[~out.mask])
    assert not torch.equal(out.input_ids, ids)
    assert "tokens" in policy.describe() and "80/10/10" in policy.describe()


@pytest.mark.parametrize("rate", [0.15, 0.4, 0.8])
def test_exact_count_per_row(wordpiece_tokenizer, rate):
    policy = build_policy({"rate": rate}, wordpiece_tokenizer)
    ids = ordinary_ids(wordpiece_tokenizer, (16, 100))
    attention = torch.ones_like(ids)
    attention[:, 80:] = 0  # 79 maskable tokens per row ([CLS] and padding excluded)
    out = policy(ids, attention)
    assert torch.all(out.mask.sum(1) == round(rate * 79))


def test_bernoulli_rate_within_tolerance(wordpiece_tokenizer):
    policy = build_policy({"rate": 0.3, "count": "bernoulli"}, wordpiece_tokenizer)
    ids = ordinary_ids(wordpiece_tokenizer, (256, 130))
    out = policy(ids, seed=3)
    realised = out.mask.sum().item() / (256 * 128)
    assert abs(realised - 0.3) < 0.01  # sd ≈ 0.0025
    assert out.mask.sum(1).unique().numel() > 3  # counts vary per row, unlike exact mode


def test_corruption_proportions(wordpiece_tokenizer):
    tok = wordpiece_tokenizer
    policy = build_policy({"rate": 0.5, "corruption": [0.6, 0.3, 0.1]}, tok)
    ids = ordinary_ids(tok, (256, 128))
    out = policy(ids, seed=1)
    chosen = out.input_ids[out.mask]
    original = ids[out.mask]
    n = chosen.numel()
    masked = (chosen == tok.mask_token_id).float().sum() / n
    kept = (chosen == original).float().sum() / n
    assert abs(masked - 0.6) < 0.01 and abs(kept - (0.1 + 0.3 / len(tok))) < 0.01
    assert abs(1 - masked - kept - 0.3) < 0.01
    specials = torch.tensor(sorted(set(tok.all_special_ids)))
    assert not torch.isin(out.input_ids[out.mask & (out.input_ids != tok.mask_token_id)],
                          specials).any()


def test_random_replacements_skip_added_special_tokens(wordpiece_tokenizer):
    tok = wordpiece_tokenizer
    unused = [i for i, t in tok.added_tokens_decoder.items() if t.content.startswith("[unused")]
    policy = build_policy({"rate": 1.0, "corruption": [0, 1, 0]}, tok)
    out = policy(ordinary_ids(tok, (64, 128)))
    replaced = out.input_ids[out.mask]
    assert not torch.isin(replaced, torch.tensor(sorted(set(tok.all_special_ids)) + unused)).any()
    assert replaced.unique().numel() > 100  # drawn across the vocabulary


@pytest.mark.parametrize("preset", ["bert", "whole_word", "span", "diffusion", "upmlm", "film"])
def test_never_masks_specials_padding_or_protected(wordpiece_tokenizer, preset):
    tok = wordpiece_tokenizer
    ids = ordinary_ids(tok, (32, 64))
    ids[:, 10] = tok.sep_token_id  # a special in the middle (packed documents)
    protected = int(ids[0, 5])
    policy = build_policy({"preset": preset, "rate": 0.9, "protected_ids": [protected]}
                          if preset in ("bert", "whole_word", "span") else preset, tok)
    attention = torch.ones_like(ids)
    attention[:, 50:] = 0
    out = policy(ids, attention, seed=2)
    special = torch.isin(ids, torch.tensor(tok.all_special_ids))
    assert not out.mask[special].any()
    assert not out.mask[attention == 0].any()
    assert torch.equal(out.input_ids[attention == 0], ids[attention == 0])
    if preset in ("bert", "whole_word", "span"):
        assert not out.mask[ids == protected].any()
        assert out.mask.float().mean() > 0.5


def test_determinism_by_seed_and_step(wordpiece_tokenizer):
    policy = build_policy("span", wordpiece_tokenizer)
    ids = ordinary_ids(wordpiece_tokenizer, (8, 128))
    a = policy(ids, step=5, seed=1)
    b = build_policy("span", wordpiece_tokenizer)(ids, step=5, seed=1)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.mask, b.mask)
    assert not torch.equal(a.mask, policy(ids, step=6, seed=1).mask)
    assert not torch.equal(a.mask, policy(ids, step=5, seed=2).mask)
    torch.manual_seed(123)  # the global RNG plays no part
    assert torch.equal(a.mask, policy(ids, step=5, seed=1).mask)


def test_document_boundaries_are_respected(wordpiece_tokenizer):
    tok = wordpiece_tokenizer
    ids = ordinary_ids(tok, (64, 96))
    docs = (torch.arange(96) // 7).expand(64, 96).contiguous()  # a new document every 7 tokens
    starts = torch.zeros_like(ids, dtype=torch.bool)
    starts[:, ::20] = True  # words of 20 tokens: each straddles documents
    policy = build_policy({"units": "whole_word", "rate": 0.3}, tok)
    units = policy.unit_ids(ids, word_starts=starts, document_ids=docs)
    same_unit = (units[:, 1:] == units[:, :-1]) & (units[:, 1:] >= 0)
    assert not (same_unit & (docs[:, 1:] != docs[:, :-1])).any()
    assert same_unit.any()
    out = policy(ids, word_starts=starts, document_ids=docs)
    assert out.mask.any()


def test_state_round_trip_with_loss_weights(wordpiece_tokenizer):
    tok = wordpiece_tokenizer
    config = {"weights": {"name": "loss", "decay": 0.0}}
    policy = build_policy(config, tok)
    ids = ordinary_ids(tok, (8, 64))
    out = policy(ids)
    policy.update_losses(out.labels[out.mask], torch.rand(int(out.mask.sum())) * 10)
    state = policy.state_dict()
    assert isinstance(state["weights"]["table"], torch.Tensor)
    fresh = build_policy(config, tok)
    assert not torch.equal(fresh(ids, step=9).mask, policy(ids, step=9).mask)
    fresh.load_state_dict(state)
    assert torch.equal(fresh(ids, step=9).mask, policy(ids, step=9).mask)
    with pytest.raises(MlmkitError, match="same masking config"):
        build_policy("bert", tok).load_state_dict(state)


def test_unknown_names_list_the_valid_ones(wordpiece_tokenizer):
    tok = wordpiece_tokenizer
    with pytest.raises(MlmkitError, match=r"unknown masking units 'words'.*whole_word"):
        build_policy({"units": "words"}, tok)
    with pytest.raises(MlmkitError, match=r"unknown masking rate 'exp'.*linear"):
        build_policy({"rate": {"schedule": "exp"}}, tok)
    with pytest.raises(MlmkitError, match=r"unknown masking weights 'idf'.*tfidf"):
        build_policy({"weights": "idf"}, tok)
    with pytest.raises(MlmkitError, match=r"unknown masking count 'fixed'.*bernoulli"):
        build_policy({"count": "fixed"}, tok)
    with pytest.raises(MlmkitError, match="unknown masking policy 'nonexistent'"):
        build_policy("nonexistent", tok)
    with pytest.raises(MlmkitError, match="unknown field"):
        build_policy({"rates": 0.2}, tok)
    with pytest.raises(MlmkitError, match="sum to 1"):
        build_policy({"corruption": [0.8, 0.1, 0.2]}, tok)
    with pytest.raises(MlmkitError, match="needs total_steps"):
        build_policy({"rate": {"schedule": "linear", "start": 0.3, "end": 0.15}}, tok)
    with pytest.raises(MlmkitError, match="no parameter"):
        build_policy({"units": {"name": "span", "q": 0.1}}, tok)
    with pytest.raises(MlmkitError, match="statistics"):
        build_policy({"weights": "frequency"}, tok)


def test_flat_config_spelling_of_the_pretraining_default(wordpiece_tokenizer):
    policy = build_policy({"name": "whole-word", "rate": 0.3, "mask_prob": 0.8,
                           "random_prob": 0.1}, wordpiece_tokenizer)
    assert "whole_word" in policy.describe() and "0.3" in policy.describe()
    assert "80/10/10" in policy.describe()


@pytest.mark.parametrize("spread", [0, 3, 40])  # equal counts, a few apart, far apart
def test_top_per_row_takes_exactly_the_largest_keys(spread):
    from mlmkit.masking.counts import top_per_row

    g = torch.Generator().manual_seed(spread)
    key = torch.rand(32, 100, generator=g)
    key[torch.rand(32, 100, generator=g) < 0.2] = float("-inf")  # may not be chosen
    finite = (key > float("-inf")).sum(1)
    count = (finite * 0.3).long() - torch.randint(0, spread + 1, (32,), generator=g)
    count = count.clamp(min=0)
    chosen = top_per_row(key, count)
    assert torch.equal(chosen.sum(1), count)
    for row in range(32):
        expected = key[row].topk(int(count[row])).indices
        assert set(chosen[row].nonzero().squeeze(1).tolist()) == set(expected.tolist())


def test_one_parser_of_masking_options(tmp_path):
    """`pretrain --masking`, `mask preview --policy` and a run's `masking` field all go
    through masking.config.parse_masking_option."""
    from mlmkit.masking.config import check_masking, parse_masking_option
    from mlmkit.training.objectives.mlm import resolve_masking

    assert parse_masking_option("span") == "span"
    assert parse_masking_option("{units: whole_word, rate: 0.4}") == {"units": "whole_word",
                                                                      "rate": 0.4}
    path = tmp_path / "policy.yaml"
    path.write_text("units: span\nrate: 0.2\n", encoding="utf-8")
    assert parse_masking_option(str(path)) == {"units": "span", "rate": 0.2}
    assert resolve_masking(str(path)) == {"units": "span", "rate": 0.2}  # a run's field too
    with pytest.raises(MlmkitError, match="--policy .*not valid YAML"):
        parse_masking_option("{units: [", "--policy")
    with pytest.raises(MlmkitError, match="--masking .*does not exist"):
        parse_masking_option(str(tmp_path / "missing.yaml"))
    assert check_masking("span")["units"]["name"] == "span"
    with pytest.raises(MlmkitError, match=r"units 'span' has no parameter\(s\) \['q'\]"):
        check_masking({"units": {"name": "span", "q": 0.1}})
    with pytest.raises(MlmkitError, match="unknown masking weights 'nope'"):
        check_masking({"weights": "nope"})
