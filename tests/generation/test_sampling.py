"""Fast diffusion sampling (issue 18): adaptive reveal policies, ReMDM remasking, editing,
the block cache and the cost every result reports."""

from __future__ import annotations

import copy
import json
import warnings

import pytest
import torch
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.errors import InvalidArgument, ModelError
from mlmkit.generation import generate, infill
from mlmkit.generation.live import title
from mlmkit.generation.options import SamplerOptions
from mlmkit.generation.samplers import (
    entropy_bound_counts,
    factor_counts,
    remask_sigma,
    sigma_max,
    spread_out,
    threshold_counts,
)
from mlmkit.models import adapter_for, load_mlm
from mlmkit.models.block_cache import BlockCache

PROMPTS = ["Return the value", "A list of"]
NEG = float("-inf")


def _record(**kwargs):
    events = []
    return events, dict(kwargs, on_step=events.append)


def _word(tokenizer) -> int:
    """The id of an ordinary token of the tiny vocabulary ("the")."""
    return tokenizer("the", add_special_tokens=False)["input_ids"][0]


def _confident(mlm, token_id: int):
    """A copy of `mlm` whose head puts almost all mass on `token_id`, everywhere."""
    sure = copy.deepcopy(mlm)
    with torch.no_grad():
        sure.model.get_output_embeddings().bias[token_id] += 40.0
    return sure


# The policies' arithmetic, on hand-made confidences.

def test_threshold_reveals_every_confident_position_and_at_least_one():
    scores = torch.tensor([[0.95, 0.5, 0.91, NEG], [0.2, 0.1, NEG, NEG]], dtype=torch.float64)
    assert threshold_counts(scores, 0.9).tolist() == [2, 1]
    assert threshold_counts(scores, 1.0).tolist() == [1, 1]
    assert threshold_counts(scores, 0.05).tolist() == [3, 2]


def test_factor_rule_is_fast_dllms():
    # sorted: 0.99, 0.9, 0.7 -> (n+1)(1-c_n) = 0.02, 0.3, 1.2
    scores = torch.tensor([[0.7, 0.99, 0.9, NEG]], dtype=torch.float64)
    assert factor_counts(scores, 1.0).tolist() == [2]
    assert factor_counts(scores, 1.5).tolist() == [3]
    assert factor_counts(scores, 0.01).tolist() == [1]


def test_entropy_bound_sums_entropies_minus_the_largest():
    scores = torch.tensor([[0.9, 0.8, 0.7, 0.1]], dtype=torch.float64)
    entropy = torch.tensor([[0.05, 0.10, 0.30, 2.0]], dtype=torch.float64)
    # prefixes: 0, 0.05, 0.15, 0.45 (sum minus max)
    assert entropy_bound_counts(scores, entropy, 0.1).tolist() == [2]
    assert entropy_bound_counts(scores, entropy, 0.2).tolist() == [3]
    assert entropy_bound_counts(scores, entropy, 0.0).tolist() == [1]
    assert entropy_bound_counts(scores, entropy, 10.0).tolist() == [4]


def _greedy_spread(row: list[float], gap: int) -> list[int]:
    """The spaced choice, one position at a time: in descending score (ties: leftmost),
    keep each position farther than gap - 1 from every one kept."""
    kept = []
    for j in sorted((j for j, v in enumerate(row) if v != NEG), key=lambda j: (-row[j], j)):
        if all(abs(j - k) >= gap for k in kept):
            kept.append(j)
    return sorted(kept)


def test_spread_out_is_the_greedy_spaced_choice():
    """Kept positions are at least `gap` apart, the row's best is kept, and the choice is
    the greedy one, also on plateaus (equal confidences) and monotone runs, where keeping
    only local maxima would reveal one position per run."""
    generator = torch.Generator().manual_seed(0)
    for gap in (1, 2, 3, 5):
        scores = torch.rand(64, 40, generator=generator, dtype=torch.float64)
        scores[torch.rand(64, 40, generator=generator) < 0.3] = NEG
        scores[:, 7] = scores[:, 8] = 0.5  # a tie
        scores[0] = 1.0  # a plateau
        scores[1] = torch.linspace(0.1, 0.9, 40, dtype=torch.float64)  # a monotone run
        kept = spread_out(scores, gap)
        for row in range(64):
            where = kept[row].nonzero().flatten().tolist()
            assert where == _greedy_spread(scores[row].tolist(), gap), (gap, row)
            assert int(scores[row].argmax()) in where
        assert kept[0].nonzero().flatten().tolist() == list(range(0, 40, gap))
    assert spread_out(torch.tensor([[NEG, NEG]], dtype=torch.float64), 2).sum() == 0


def test_spread_out_takes_few_rounds_on_long_plateaus_and_monotone_runs(monkeypatch):
    """Equal confidences (a plateau of prob 1.0) or a monotone run keep one position per
    round: L / gap rounds of pooling over the whole row (2,048 rounds, 0.4 s per step at
    4,096 masks and gap 2 on a CPU; a device sync each on a GPU). The choice is unchanged."""
    calls = []
    pool = torch.nn.functional.max_pool1d
    monkeypatch.setattr(torch.nn.functional, "max_pool1d",
                        lambda *a, **k: calls.append(1) or pool(*a, **k))
    length = 600
    scores = torch.rand(4, length, generator=torch.Generator().manual_seed(1),
                        dtype=torch.float64)
    scores[0] = 1.0
    scores[1] = torch.linspace(0.9, 0.1, length, dtype=torch.float64)
    scores[2] = torch.linspace(0.1, 0.9, length, dtype=torch.float64)
    scores[3, ::7] = NEG
    for gap in (2, 3, 50):
        calls.clear()
        kept = spread_out(scores, gap)
        assert len(calls) <= 2 * 16, (gap, len(calls))
        for row in range(4):
            where = kept[row].nonzero().flatten().tolist()
            assert where == _greedy_spread(scores[row].tolist(), gap), (gap, row)


def test_min_gap_spaces_each_steps_reveals_and_still_fills_everything(tiny_mlm):
    mlm = tiny_mlm("modernbert")
    mask = mlm.tokenizer.mask_token_id
    sure = _confident(mlm, _word(mlm.tokenizer))  # every mask passes any threshold
    events, kwargs = _record(length=12, reveal="threshold", threshold=0.5, min_gap=3)
    results = generate(sure, PROMPTS, **kwargs)
    for event in events:
        for row in event.revealed:
            where = row.nonzero().flatten().tolist()
            assert where and all(b - a >= 3 for a, b in zip(where, where[1:], strict=False))
    assert all(mask not in r.token_ids for r in results)
    assert results[0].cost.nfe == 3  # 12 masks, every third one per call
    assert generate(sure, PROMPTS, length=12, reveal="threshold",
                    threshold=0.5)[0].cost.nfe == 1  # unspaced: all in one call
    # with a step budget, a row that must reveal more than the spacing allows is unspaced
    capped = generate(sure, PROMPTS, length=12, steps=2, reveal="threshold", threshold=0.5,
                      min_gap=4)
    assert all(r.steps <= 2 and mask not in r.token_ids for r in capped)
    # composes with blocks, entropy-bound and infill
    blocks = generate(mlm, PROMPTS, length=12, block_length=6, reveal="entropy-bound",
                      entropy_bound=100.0, min_gap=2, seed=1)
    assert all(mask not in r.token_ids for r in blocks)
    assert blocks[0].cost.nfe >= 4  # at most 3 of a block's 6 masks per call
    filled = infill(sure, "x [MASK:4] y [MASK:4] z", reveal="factor", factor=100.0,
                    min_gap=2)
    assert filled.cost.nfe == 2 and mask not in mlm.tokenizer.convert_tokens_to_ids(
        mlm.tokenizer.tokenize(filled.text))


@pytest.mark.parametrize("remask", ["cap", "rescale"])
def test_min_gap_holds_when_remasking_adds_reveals(tiny_mlm, remask):
    """ReMDM's step reveals as many masks more as it remasks: where the policy took every
    spaced mask, that count no longer fit the spacing and the whole step was unspaced (min
    gap 3 revealed positions 7 and 9 together), though no step budget asked for it."""
    mlm = tiny_mlm("modernbert")
    events, kwargs = _record(length=12, reveal="threshold", threshold=1e-12, min_gap=3,
                             remask=remask, sigma=0.9, seed=3)
    results = generate(mlm, PROMPTS, **kwargs)
    for event in events:
        for row in event.revealed:
            where = row.nonzero().flatten().tolist()
            assert all(b - a >= 3 for a, b in zip(where, where[1:], strict=False)), (
                event.step, where)
    assert all(mlm.tokenizer.mask_token_id not in r.token_ids for r in results)


def test_remask_schedules_stay_below_sigma_max():
    t, s = torch.tensor([0.75, 0.5], dtype=torch.float64), torch.tensor([0.5, 0.0],
                                                                        dtype=torch.float64)
    top = sigma_max(t, s)
    assert torch.allclose(top, torch.tensor([1.0, 0.0], dtype=torch.float64))
    assert torch.allclose(remask_sigma("cap", 0.3, t, s, False), torch.tensor([0.3, 0.0],
                                                                            dtype=torch.float64))
    assert torch.allclose(remask_sigma("rescale", 0.5, t, s, False), 0.5 * top)
    assert remask_sigma("loop", 0.3, t, s, False).eq(0).all()


# The loop, on the tiny models.

def test_strictest_adaptive_settings_are_the_one_token_per_step_sampler(tiny_mlm):
    mlm = tiny_mlm("bert")
    base = generate(mlm, PROMPTS, length=8, block_length=4, cfg_scale=0.5, seed=4)
    for policy, setting in [("threshold", {"threshold": 1.0}), ("factor", {"factor": 1e-9}),
                            ("entropy-bound", {"entropy_bound": 0.0})]:
        fast = generate(mlm, PROMPTS, length=8, block_length=4, cfg_scale=0.5, seed=4,
                        reveal=policy, **setting)
        assert [g.token_ids for g in fast] == [g.token_ids for g in base], policy
        assert fast[0].cost.nfe == base[0].cost.nfe == 8


def test_confident_model_reveals_a_block_per_call(tiny_mlm):
    mlm = tiny_mlm("bert")
    token = _word(mlm.tokenizer)
    sure = _confident(mlm, token)
    events, kwargs = _record(length=12, block_length=4, reveal="threshold", threshold=0.9)
    results = generate(sure, PROMPTS, **kwargs)
    assert all(set(r.token_ids) == {token} for r in results)
    assert results[0].cost.nfe == 3 and results[0].steps == 3  # one call per block
    assert results[0].cost.tokens_per_call == 4.0 and results[0].cost.seconds > 0
    assert [int(e.revealed.sum()) for e in events] == [8, 8, 8]
    plain = generate(sure, PROMPTS, length=12, block_length=4)
    assert plain[0].cost.nfe == 12  # the fixed-count sampler: 4x the calls
    assert "3 calls" in title(events[-1]) and "8.00 tokens/call" in title(events[-1])  # both rows


def test_step_floor_finishes_within_steps(tiny_mlm):
    mlm = tiny_mlm("roberta")
    results = generate(mlm, PROMPTS, length=10, steps=3, reveal="entropy-bound", seed=2)
    assert results[0].steps <= 3 and results[0].cost.nfe <= 3
    mask = mlm.tokenizer.mask_token_id
    assert all(mask not in r.token_ids for r in results)


@pytest.mark.parametrize(("sampler", "remask"), [("confidence", "cap"),
                                                 ("ancestral", "rescale"),
                                                 ("confidence", "loop"),
                                                 ("random", "cap")])
def test_remasking_touches_only_generated_tokens(tiny_mlm, sampler, remask):
    mlm = tiny_mlm("bert")
    events, kwargs = _record(length=10, steps=10, block_length=5, sampler=sampler,
                             remask=remask, sigma=0.9, constraints={2: "the"}, seed=3)
    results = generate(mlm, PROMPTS, **kwargs)
    mask = mlm.tokenizer.mask_token_id
    first = events[0]
    start_masked = first.masked | first.revealed
    fixed = ~start_masked
    remasked = 0
    for event in events:
        assert torch.equal(event.ids[fixed], first.ids[fixed])  # prompt, specials, constraint
        assert (event.ids[event.masked] == mask).all()
        remasked += int(event.remasked.sum())
        assert not (event.remasked & fixed).any()
    assert remasked, "sigma = 0.9 remasked nothing"
    assert results[0].cost.remasked == remasked
    assert all(mask not in r.token_ids for r in results)
    if sampler != "ancestral":  # the mask count still follows the schedule
        # 9 masks a row (one position fixed): 9 steps reveal them, plus the loop's
        assert len(events) == 9 if remask != "loop" else len(events) > 9, len(events)


def test_editing_replaces_tokens_the_model_rejects(tiny_mlm):
    mlm = tiny_mlm("bert")
    token = _word(mlm.tokenizer)
    sure = _confident(mlm, token)
    # a flat sampling temperature reveals random tokens; the model is sure of "the"
    noisy = generate(sure, PROMPTS, length=6, temperature=1e6, seed=1)
    assert any(set(r.token_ids) != {token} for r in noisy)
    edited = generate(sure, PROMPTS, length=6, temperature=1e6, seed=1, edit=0.5)
    assert all(set(r.token_ids) == {token} for r in edited)
    assert edited[0].cost.edited > 0
    capped = generate(sure, PROMPTS, length=6, temperature=1e6, seed=1, edit=0.5,
                      max_steps=6)
    assert capped[0].steps == 6


@pytest.mark.parametrize("family", ["bert", "roberta", "modernbert"])
def test_block_cache_is_exact_at_refresh_and_close_after(tiny_mlm, family):
    mlm = tiny_mlm(family)
    model = mlm.model
    ids = torch.randint(5, 1000, (2, 24))
    attention = torch.ones_like(ids)
    attention[1, 20:] = 0
    ids[1, 20:] = mlm.tokenizer.pad_token_id
    with torch.inference_mode():
        exact = adapter_for(model).encode(model, ids, attention)
        cache = BlockCache(model)
        assert torch.allclose(cache.refresh(ids, attention)[attention.bool()],
                              exact[attention.bool()], atol=1e-5)
        assert torch.allclose(cache.window(ids, slice(4, 12)), exact[:, 4:12], atol=1e-5)
        changed = ids.clone()
        changed[:, 6] = 7
        now = adapter_for(model).encode(model, changed, attention)[:, 4:12]
        approx = cache.window(changed, slice(4, 12))
    error = (approx - now).abs().max()
    assert 0 < error < 0.05 * now.abs().max()


def test_block_cache_generation_agrees_with_the_exact_loop(tiny_mlm):
    mlm = tiny_mlm("roberta")
    exact = generate(mlm, PROMPTS, length=12, block_length=4, temperature=0)
    cached = generate(mlm, PROMPTS, length=12, block_length=4, temperature=0, block_cache=True)
    same = sum(a == b for e, c in zip(exact, cached, strict=True)
               for a, b in zip(e.token_ids, c.token_ids, strict=True))
    assert same >= 20  # of 24 tokens
    assert cached[0].cost.nfe == exact[0].cost.nfe


def test_infill_takes_the_policies_and_reports_cost(tiny_mlm):
    mlm = tiny_mlm("bert")
    token = _word(mlm.tokenizer)
    result = infill(_confident(mlm, token), "x [MASK:4] y [MASK:2] z", reveal="factor")
    assert result.spans == ["the the the the", "the the"]
    assert result.cost.nfe == 1 and result.cost.tokens == 6


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"reveal": "threshold", "threshold": 0.0}, "threshold=0.0"),
    ({"reveal": "threshold", "threshold": 1.5}, "threshold=1.5"),
    ({"reveal": "factor", "factor": 0}, "factor=0"),
    ({"reveal": "entropy-bound", "entropy_bound": -1.0}, "entropy_bound=-1.0"),
    ({"threshold": 0.9}, "--reveal threshold"),
    ({"reveal": "threshold", "sampler": "ancestral"}, "--sampler confidence"),
    ({"reveal": "factor", "confidence": "entropy"}, "--confidence prob"),
    ({"reveal": "fastest"}, "reveal='fastest'"),
    ({"remask": "sometimes"}, "remask='sometimes'"),
    ({"sigma": 0.5}, "--remask"),
    ({"remask": "cap", "sigma": 1.5}, "sigma=1.5"),
    ({"remask": "cap", "remask_steps": 3}, "--remask loop"),
    ({"edit": 1.0}, "edit=1.0"),
    ({"block_cache": True}, "--block-length"),
    ({"max_steps": 5}, "--max-steps 5 caps the steps of --edit and --remask"),
    ({"sampler": "ancestral", "confidence": "margin"}, "--confidence margin ranks"),
    ({"min_gap": 3}, "--min-gap 3 spaces the reveals of an adaptive policy"),
    ({"reveal": "threshold", "min_gap": 0}, "min_gap=0"),
    ({"reveal": "threshold", "min_gap": 2.5}, "min_gap=2.5"),
])
def test_bad_settings_fail_before_work(kwargs, needle):
    with pytest.raises(InvalidArgument, match=needle.replace("(", r"\(")):
        SamplerOptions(**kwargs)


def test_plans_beyond_the_cap_and_unsupported_caches_fail_before_any_call(tiny_mlm):
    mlm = tiny_mlm("bert")
    with pytest.raises(InvalidArgument, match="--max-steps allows 12"):
        generate(mlm, "a", length=8, remask="loop", remask_steps=5, max_steps=12)
    with pytest.raises(InvalidArgument, match="needs --steps 4 or more"):
        generate(mlm, "a", length=8, steps=2, block_length=4, remask="loop")
    with pytest.raises(InvalidArgument, match="not available for distilbert"):
        generate(tiny_mlm("distilbert"), "a", length=8, block_length=4, block_cache=True)


def test_edit_steps_leave_later_blocks_room_within_max_steps(tiny_mlm):
    # edit = 1e-4: a random model always prefers another token, so every block would edit
    # until the cap; the first block once took the whole cap and later blocks ran past it
    result = generate(tiny_mlm("bert"), "a", length=8, block_length=4, steps=8, edit=1e-4,
                      max_steps=10, temperature=0)
    assert result.steps == 10 and result.cost.nfe <= 10 and result.cost.edited > 0


def test_remask_loop_runs_under_an_adaptive_reveal(tiny_mlm):
    mlm = tiny_mlm("bert")
    sure = _confident(mlm, _word(mlm.tokenizer))  # factor reveals a whole block per call
    events, kwargs = _record(reveal="factor", remask="loop", sigma=1.0, remask_steps=2)
    result = generate(sure, "a", length=8, block_length=4, **kwargs)
    # the loop once sat at a fixed step the block never reached: nothing was remasked
    assert result.cost.remasked > 0
    loops = [e for e in events if e.remasked is not None and e.remasked.any()]
    # at half of each block's 4 masks (block 0's loop also sees block 1's 4)
    assert [(e.block, int(e.masked.sum())) for e in loops] == [(0, 6), (0, 6), (1, 2), (1, 2)]


def test_template_and_loop_errors_name_what_to_change(tiny_mlm):
    mlm = tiny_mlm("bert")
    with pytest.raises(InvalidArgument, match=r"span '\[MASK:-1\]' has no valid length"):
        infill(mlm, "a [MASK] b [MASK:-1] c")
    with pytest.raises(InvalidArgument, match=r"template 1 .* needs 130 tokens .* spans$"):
        infill(mlm, "a [MASK:126] b")  # not "lower --length", which infill does not have
    with pytest.raises(InvalidArgument, match="1 mask.s. allow at most 1 steps"):
        infill(mlm, "a [MASK] b", remask="loop")  # not "--steps 2", which 1 mask refuses


def test_whole_numbers_given_as_floats_run_as_ints(tiny_mlm):
    mlm = tiny_mlm("bert")
    ints = dict(length=6, steps=4, block_length=3, remask="loop", remask_steps=1,
                max_steps=12, top_k=5, seed=1)
    floats = {k: float(v) if isinstance(v, int) else v for k, v in ints.items()}
    assert generate(mlm, "a", **floats).token_ids == generate(mlm, "a", **ints).token_ids
    assert infill(mlm, "a [MASK:1-2] b", max_candidates=2.0).lengths in ((1,), (2,))


def test_cli_flags_and_json_cost(saved_tiny_mlm, tmp_path):
    runner = CliRunner()
    model = str(saved_tiny_mlm("bert"))
    trace = tmp_path / "trace.jsonl"
    out = runner.invoke(app, ["generate", model, "Return the", "--length", "6",
                              "--reveal", "threshold", "--threshold", "0.5", "--remask", "cap",
                              "--sigma", "0.5", "--edit", "0.9", "--block-length", "3",
                              "--block-cache", "--json", "--trace", str(trace)])
    assert out.exit_code == 0, out.output
    record = json.loads(out.stdout)
    assert set(record["cost"]) >= {"nfe", "tokens_per_call", "seconds", "tokens"}
    assert record["cost"]["nfe"] == record["model_calls"] >= 1
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert "remasked" in lines[0] and "edited" in lines[0] and "model_calls" in lines[0]
    out = runner.invoke(app, ["infill", model, "a [MASK:2] b", "--reveal", "entropy-bound",
                              "--entropy-bound", "0.5", "--min-gap", "2", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["cost"]["tokens"] == 2
    bad = runner.invoke(app, ["generate", model, "--length", "4", "--reveal", "threshold",
                              "--threshold", "2"])
    assert bad.exit_code == 1
    assert "threshold=2.0 (--threshold) must be in (0, 1]" in bad.stderr
    assert "Traceback" not in bad.output


# Models whose code ships with the checkpoint (the NeoBERT-shaped fixture of the model
# families' tests), offline.

@pytest.fixture(scope="module")
def remote_dir(tmp_path_factory, bpe_tokenizer):
    from remote_code_fixture import write_remote_code_model

    return write_remote_code_model(tmp_path_factory.mktemp("remote") / "neobert", bpe_tokenizer)


def test_remote_code_models_run_the_same_samplers(remote_dir, monkeypatch):
    monkeypatch.delenv("MLMKIT_TRUST_REMOTE_CODE", raising=False)
    with pytest.raises(ModelError, match="--trust-remote-code"):
        generate(str(remote_dir), "a", length=4)
    results = generate(str(remote_dir), PROMPTS, length=6, block_length=3, reveal="threshold",
                       threshold=0.5, remask="cap", sigma=0.5, trust_remote_code=True)
    assert all(len(r.token_ids) == 6 and r.cost.nfe >= 2 for r in results)
    runner = CliRunner()
    out = runner.invoke(app, ["infill", str(remote_dir), "a [MASK:2] b", "--reveal", "factor",
                              "--trust-remote-code", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["cost"]["tokens"] == 2
    refused = runner.invoke(app, ["infill", str(remote_dir), "a [MASK:2] b"])
    assert refused.exit_code == 1 and "--trust-remote-code" in refused.stderr


def test_mask_id_and_logits_shift_come_from_the_config(remote_dir, tmp_path):
    import shutil

    shifted = tmp_path / "shifted"
    shutil.copytree(remote_dir, shifted)
    config = json.loads((shifted / "config.json").read_text())
    mlm = load_mlm(shifted, device="cpu", trust_remote_code=True)
    tokenizer_mask = mlm.tokenizer.mask_token_id
    own_mask = _word(mlm.tokenizer)
    config.update(logits_shift=True, mask_token_id=own_mask)
    (shifted / "config.json").write_text(json.dumps(config))
    mlm = load_mlm(shifted, device="cpu", trust_remote_code=True)
    events, kwargs = _record(temperature=0)
    result = infill(mlm, "a [MASK] b", **kwargs)
    start = events[0].ids.masked_fill(events[0].revealed, -1)
    position = int(events[0].revealed[0].nonzero())
    ids = events[0].ids.clone()
    ids[0, position] = own_mask
    assert int((start == -1).sum()) == 1 and own_mask != tokenizer_mask
    with torch.no_grad():
        logits = mlm.model(input_ids=ids).logits[0].float()
    banned = sorted(set(mlm.tokenizer.all_special_ids) | {own_mask, tokenizer_mask})
    logits[:, banned] = NEG
    predicted_left, predicted_here = logits[position - 1].argmax(), logits[position].argmax()
    assert predicted_left != predicted_here  # the test tells a shift from no shift
    assert int(events[0].ids[0, position]) == int(predicted_left)
    assert result.cost.nfe == 1


def test_template_text_right_after_a_span_goes_on_the_word(wordpiece_tokenizer, bpe_tokenizer):
    """'pars[MASK:2]ing x': the text after the span continues the span's word, so on a
    WordPiece model it starts with a ##piece (it was tokenized as a new word)."""
    from mlmkit.generation.canvas import continuation_ids, text_ids
    from mlmkit.generation.infill import _rows
    from mlmkit.generation.template import parse_template

    tok = wordpiece_tokenizer
    rows = _rows(tok, parse_template("pars[MASK:2]ing of it"), (2,), tok.mask_token_id)
    after = tok.convert_ids_to_tokens(rows[2].ids)
    assert after[0].startswith("##") and after[-2:] == ["of", "it"]
    assert tok.decode(rows[0].ids + [tok.convert_tokens_to_ids("##s")] + rows[2].ids) \
        == tok.decode(text_ids(tok, "parssing of it"))
    # a space or punctuation after the span starts a word, as before
    for text in (" ing of it", ", of it"):
        assert continuation_ids(tok, text) == text_ids(tok, text)
    spaced = _rows(tok, parse_template("pars[MASK:2] ing"), (2,), tok.mask_token_id)
    assert spaced[2].ids == text_ids(tok, " ing")
    # byte-level BPE already reads a text without a leading space as a word's rest
    assert continuation_ids(bpe_tokenizer, "ing of it") == text_ids(bpe_tokenizer, "ing of it")


def test_a_continuation_or_span_that_goes_on_a_word_has_no_wordpiece_marker(
        wordpiece_tokenizer):
    from mlmkit.generation.canvas import decode_part

    tok = wordpiece_tokenizer
    ids = tok.convert_tokens_to_ids(["##s", "of"])
    assert tok.decode(ids).startswith("##")  # what the result texts showed
    assert decode_part(tok, ids) == tok.decode(ids)[2:]
    word = tok.convert_tokens_to_ids(["of", "##s"])
    assert decode_part(tok, word) == tok.decode(word)


def test_each_step_reports_the_probability_of_what_it_revealed(tiny_mlm):
    """StepEvent.probability is the step's own prediction of each revealed token: the same
    as a fresh forward of the canvas before the step, over the tokens generation may emit
    (so live views need no model call of their own)."""
    from mlmkit.generation.canvas import suppressed_ids
    from mlmkit.models import masked_log_probs

    mlm = tiny_mlm("bert")
    events, kwargs = _record(length=5, steps=3, temperature=1.0, seed=2)
    generate(mlm, PROMPTS, **kwargs)
    assert len(events) == 3
    mask, pad = mlm.tokenizer.mask_token_id, mlm.tokenizer.pad_token_id
    for event in events:
        before = event.ids.clone()
        before[event.masked | event.revealed] = mask
        attention = (event.content | (event.ids != pad)).long()
        with torch.inference_mode():
            log_probs = masked_log_probs(mlm.model, before, attention, event.revealed)
            log_probs[:, suppressed_ids(mlm.tokenizer, allow_eos=True)] = float("-inf")
        expected = log_probs.float().log_softmax(-1).gather(1, event.ids[event.revealed].view(-1, 1)).exp()
        got = event.probability[event.revealed]
        torch.testing.assert_close(got, expected.squeeze(1), rtol=1e-5, atol=1e-6)
        assert event.probability[~event.revealed].isnan().all()


def test_infill_model_calls_count_every_batch_of_a_template(tiny_mlm):
    """Candidates of one template in several batches: `model_calls` is the calls of all of
    them, as `cost.nfe` (it was the largest batch's alone)."""
    mlm = tiny_mlm("bert")
    one = infill(mlm, "a [MASK:3] b", seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # batch_size: rows per batch
        spread = infill(mlm, "a [MASK:1-3] b", seed=1, batch_size=1)
    assert len(spread.candidates) == 3
    assert spread.model_calls == spread.cost.nfe > one.model_calls == one.cost.nfe
