"""Iterative unmasking: carry-over, schedules, blocks, guidance, cache, EOS, constraints,
infilling and bad input, on plain BERT-style MLMs of three families."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mlmkit
from mlmkit.errors import MlmkitError
from mlmkit.generation import SAMPLERS, generate, infill
from mlmkit.generation.canvas import MASK, PROMPT, Segment, build_canvas, text_ids
from mlmkit.generation.eos import pad_after_end
from mlmkit.generation.guidance import guided_logits, unconditional_input
from mlmkit.generation.options import SamplerOptions
from mlmkit.generation.pll import token_pll
from mlmkit.generation.predict import predict_logits
from mlmkit.generation.schedules import block_index, reveal_counts, split_steps
from mlmkit.models import masked_logits

FAMILIES = ["bert", "roberta", "modernbert"]
PROMPTS = ["Return the value", "A list of"]


def _record(**kwargs):
    events = []
    return events, dict(kwargs, on_step=events.append)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_carry_over_and_schedules(tiny_mlm, family, sampler):
    mlm = tiny_mlm(family)
    length, steps, block_length = 12, 6, 4  # 11 masks (one fixed): blocks 4, 4, 3
    events, kwargs = _record(length=length, steps=steps, sampler=sampler,
                             block_length=block_length, constraints={3: "the"}, seed=1)
    results = generate(mlm, PROMPTS, **kwargs)
    assert len(results) == 2 and events
    mask_id = mlm.tokenizer.mask_token_id
    first = events[0]
    start_ids = first.ids.masked_fill(first.revealed, mask_id)
    start_masked = first.masked | first.revealed
    blocks = block_index(start_masked, block_length)
    previous_ids, previous_masked = start_ids, start_masked
    n_blocks = int(blocks.max()) + 1
    per_block = split_steps(steps, n_blocks)
    schedule = {b: reveal_counts((start_masked & (blocks == b)).sum(1), per_block[b])
                for b in range(n_blocks)}
    step_in_block = {b: 0 for b in range(n_blocks)}
    for event in events:
        # Carry-over: nothing outside the previously masked positions ever changes.
        assert torch.equal(event.ids[~previous_masked], previous_ids[~previous_masked])
        assert not (event.masked & ~previous_masked).any(), "the mask count increased"
        assert torch.equal(event.revealed, previous_masked & ~event.masked)
        assert (event.ids[event.masked] == mask_id).all()
        assert not (event.ids[~event.masked & start_masked] == mask_id).any()
        # Blocks finish left to right: every earlier block is done.
        assert (blocks[event.revealed] == event.block).all()
        assert not (previous_masked & (blocks < event.block) & (blocks >= 0)).any()
        if SAMPLERS[sampler].scheduled:
            scheduled = schedule[event.block][:, step_in_block[event.block]]
            assert torch.equal(event.revealed.sum(1), scheduled)
        step_in_block[event.block] += 1
        previous_ids, previous_masked = event.ids, event.masked
    assert not previous_masked.any(), "masks left at the end"
    if SAMPLERS[sampler].scheduled:
        assert all(int(s.sum()) == int((start_masked & (blocks == b)).sum())
                   for b, s in schedule.items())
    the = text_ids(mlm.tokenizer, "the")
    for result in results:
        if not result.ended or result.token_ids[3] != mlm.tokenizer.pad_token_id:
            assert result.token_ids[3:3 + len(the)] == the


def test_reveal_counts_are_even_and_sum_to_the_masks():
    counts = reveal_counts(torch.tensor([10, 3, 0]), 4)
    assert counts.tolist() == [[3, 3, 2, 2], [1, 1, 1, 0], [0, 0, 0, 0]]
    with pytest.raises(MlmkitError, match="steps"):
        reveal_counts(torch.tensor([3]), 0)
    with pytest.raises(MlmkitError, match="blocks"):
        split_steps(2, 3)


def test_temperature_zero_ignores_the_seed(tiny_mlm):
    mlm = tiny_mlm("bert")
    a = generate(mlm, PROMPTS, length=8, temperature=0.0, seed=1)
    b = generate(mlm, PROMPTS, length=8, temperature=0.0, seed=2)
    c = generate(mlm, PROMPTS, length=8, temperature=1.0, seed=1)
    d = generate(mlm, PROMPTS, length=8, temperature=1.0, seed=1)
    assert [x.token_ids for x in a] == [x.token_ids for x in b]
    assert [x.token_ids for x in c] == [x.token_ids for x in d]


def test_temperature_zero_step_reveals_the_argmax(tiny_mlm):
    mlm = tiny_mlm("bert")
    events, kwargs = _record(length=6, steps=6, temperature=0.0)
    generate(mlm, "Return the", **kwargs)
    first = events[0]
    before = first.ids.masked_fill(first.revealed, mlm.tokenizer.mask_token_id)
    with torch.inference_mode():
        logits = masked_logits(mlm.model, before, None, first.revealed)
    assert torch.equal(first.ids[first.revealed], logits.argmax(-1))


def _canvas(mlm, prompts, length):
    rows = [[Segment(PROMPT, text_ids(mlm.tokenizer, p)),
             Segment(MASK, [mlm.tokenizer.mask_token_id] * length)] for p in prompts]
    return build_canvas(mlm.tokenizer, rows, mlm.max_length, what="prompt")


def test_guidance_scale_zero_is_conditional_and_uncond_masks_only_the_prompt(tiny_mlm):
    mlm = tiny_mlm("roberta")
    canvas = _canvas(mlm, PROMPTS, 5)
    mask_id = mlm.tokenizer.mask_token_id
    uncond = unconditional_input(canvas.ids, canvas.prompt, mask_id)
    assert torch.equal(uncond != canvas.ids, canvas.prompt & (canvas.ids != mask_id))
    assert (uncond[canvas.prompt] == mask_id).all()
    with torch.inference_mode():
        cond = masked_logits(mlm.model, canvas.ids, canvas.attention_mask, canvas.masked)
        free = masked_logits(mlm.model, uncond, canvas.attention_mask, canvas.masked)
        for scale in (0.0, 1.5):
            got = predict_logits(mlm.model, canvas.ids, canvas.attention_mask, canvas.masked,
                                 prompt=canvas.prompt, mask_id=mask_id, cfg_scale=scale)
            want = free + (scale + 1) * (cond - free)
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(guided_logits(cond, free, 0.0), cond, atol=1e-5, rtol=0)
    plain = generate(mlm, PROMPTS, length=6, seed=3)
    zero = generate(mlm, PROMPTS, length=6, seed=3, cfg_scale=0.0)
    guided = generate(mlm, PROMPTS, length=6, seed=3, cfg_scale=2.0)
    assert [x.token_ids for x in plain] == [x.token_ids for x in zero]
    assert len(guided) == 2


def test_cached_and_uncached_ancestral_sampling_agree(tiny_mlm):
    mlm = tiny_mlm("bert")
    kwargs = dict(length=8, steps=40, sampler="ancestral", seed=5)
    cached = generate(mlm, PROMPTS, cache=True, **kwargs)
    uncached = generate(mlm, PROMPTS, cache=False, **kwargs)
    assert [x.token_ids for x in cached] == [x.token_ids for x in uncached]
    assert uncached[0].model_calls == uncached[0].steps
    assert cached[0].model_calls < uncached[0].model_calls


def test_eos_pads_the_rest():
    ids = torch.tensor([[2, 10, 11, 3, 12, 13, 3], [2, 10, 11, 12, 13, 14, 3]])
    region = torch.tensor([[0, 0, 1, 1, 1, 1, 0], [0, 0, 1, 1, 1, 1, 0]], dtype=torch.bool)
    padded, cut = pad_after_end(ids, region, region, [3], pad_id=0)
    assert padded.tolist() == [[2, 10, 11, 3, 0, 0, 3], [2, 10, 11, 12, 13, 14, 3]]
    assert cut.tolist()[0] == [False, False, False, True, True, True, False]
    assert not cut[1].any()


def test_a_generated_end_token_ends_the_text(tiny_mlm):
    import copy

    from mlmkit.models import LoadedMLM

    mlm = tiny_mlm("bert")
    sep, pad = mlm.tokenizer.sep_token_id, mlm.tokenizer.pad_token_id
    # A model that favours [SEP] strongly, so the end token is certainly generated.
    model = copy.deepcopy(mlm.model)
    with torch.no_grad():
        model.get_output_embeddings().bias[sep] += 8.0
    eager = LoadedMLM(model=model, tokenizer=mlm.tokenizer, name="sep-eager")
    results = generate(eager, [""] * 4, length=12, seed=0, temperature=1.0)
    assert all(sep in result.token_ids for result in results)
    for result in results:
        at = result.token_ids.index(sep)
        assert result.ended
        assert all(t == pad for t in result.token_ids[at + 1:])
    assert any(result.token_ids.index(sep) < 11 for result in results)  # text cut short
    # And the untouched model: `ended` says exactly whether [SEP] was generated.
    for result in generate(mlm, [""] * 4, length=12, seed=0, temperature=2.0):
        assert result.ended == (sep in result.token_ids)


def test_python_api_is_reachable_from_the_top_package(tiny_mlm):
    mlm = tiny_mlm("bert")
    one = mlmkit.generate(mlm, "Return the", length=4, seed=0)
    again = mlmkit.generate(mlm, "Return the", length=4, seed=0)
    assert one.token_ids == again.token_ids and len(one.token_ids) == 4
    model_and_tokenizer = generate((mlm.model, mlm.tokenizer), "Return the", length=4, seed=0)
    assert model_and_tokenizer.token_ids == one.token_ids


def test_batches_are_split_and_constraints_hold(tiny_mlm):
    mlm = tiny_mlm("modernbert")
    ids = text_ids(mlm.tokenizer, " value")
    results = generate(mlm, PROMPTS * 3, length=6, batch_tokens=40, constraints={0: ids[0]},
                       temperature=0.0)
    assert len(results) == 6
    assert all(r.token_ids[0] == ids[0] for r in results)
    assert results[0].token_ids == results[2].token_ids == results[4].token_ids


@pytest.mark.parametrize("family", FAMILIES)
def test_infill_keeps_the_context_and_fills_the_spans(tiny_mlm, family):
    mlm = tiny_mlm(family)
    result = infill(mlm, "Return the [MASK:3] of the list.", seed=0)
    assert result.lengths == (3,) and len(result.spans) == 1
    assert result.text.startswith("Return the") and result.text.endswith("of the list.")
    many = infill(mlm, ["The [MASK:1-3] value.", "A [MASK] list [MASK:2]"], temperature=0.0)
    assert [len(x.candidates) for x in many] == [3, 1]
    scores = [c.score for c in many[0].candidates]
    assert scores == sorted(scores, reverse=True) and many[0].lengths == \
        many[0].candidates[0].lengths
    assert many[1].candidates[0].score is None and len(many[1].spans) == 2


def brute_force_pll(mlm, ids: list[int]) -> list[float]:
    """log P(w_i | rest) from the full model's logits, one masked copy at a time."""
    full = [mlm.tokenizer.cls_token_id] + ids + [mlm.tokenizer.sep_token_id] \
        if mlm.tokenizer.cls_token_id is not None else ids
    offset = 1 if mlm.tokenizer.cls_token_id is not None else 0
    values = []
    for i, token in enumerate(ids):
        masked = torch.tensor([full])
        masked[0, i + offset] = mlm.tokenizer.mask_token_id
        with torch.inference_mode():
            logits = mlm.model(input_ids=masked).logits[0, i + offset].double()
        values.append(float(torch.log_softmax(logits, -1)[token]))
    return values


def test_token_pll_matches_the_full_model(tiny_mlm):
    mlm = tiny_mlm("bert")
    sequences = [text_ids(mlm.tokenizer, t) for t in ["Return the value.", "A list"]]
    for got, ids in zip(token_pll(mlm, sequences), sequences, strict=True):
        assert got == pytest.approx(brute_force_pll(mlm, ids), abs=1e-4)


def test_bad_input_gives_clear_errors(tiny_mlm):
    mlm = tiny_mlm("bert")
    with pytest.raises(MlmkitError, match=r"length=0 \(--length\)"):
        generate(mlm, "x", length=0)
    with pytest.raises(MlmkitError, match=r"steps=0 \(--steps\)"):
        generate(mlm, "x", length=4, steps=0)
    with pytest.raises(MlmkitError, match="prompt 1 needs .* at most 128"):
        generate(mlm, "word " * 200, length=4)
    with pytest.raises(MlmkitError, match="no mask span"):
        infill(mlm, "The cat sat on the mat.")
    with pytest.raises(MlmkitError, match="ancestral"):
        generate(mlm, "x", length=4, sampler="greedy")
    with pytest.raises(MlmkitError, match="entropy"):
        generate(mlm, "x", length=4, confidence="nope")
    with pytest.raises(MlmkitError, match="position 9"):
        generate(mlm, "x", length=4, constraints={9: "the"})
    with pytest.raises(MlmkitError, match="combinations"):
        infill(mlm, "[MASK:1-9] and [MASK:1-9]", max_candidates=10)
    with pytest.raises(MlmkitError, match="more masks than the model's 128 positions"):
        infill(mlm, "A [MASK:999999999] b")  # refused before a billion masks are built


def test_infill_scores_are_the_candidates_pll(tiny_mlm):
    mlm = tiny_mlm("bert")
    result = infill(mlm, "The [MASK:1-2] value.", temperature=0.0)
    for candidate in result.candidates:
        ids = text_ids(mlm.tokenizer, candidate.text)
        assert candidate.score == pytest.approx(float(np.mean(brute_force_pll(mlm, ids))),
                                                abs=1e-4)


@pytest.mark.parametrize("bad, message", [
    (dict(temperature=float("nan")), r"temperature=nan \(--temperature\) must be a finite"),
    (dict(temperature=float("inf")), "temperature=inf"),
    (dict(temperature=-0.5), r"temperature=-0.5 \(--temperature\) must be ≥ 0"),
    (dict(top_k=0), r"top_k=0 \(--top-k\)"),
    (dict(top_p=float("nan")), r"top_p=nan \(--top-p\)"),
    (dict(top_p=0.0), r"top_p=0.0 \(--top-p\) must be in \(0, 1\]"),
    (dict(top_p=1.5), r"top_p=1.5"),
    (dict(steps=0), r"steps=0"),
    (dict(steps=2.5), r"steps=2.5 \(--steps\) must be a whole number"),
    (dict(block_length=0), r"block_length=0"),
    (dict(cfg_scale=float("nan")), r"cfg_scale=nan"),
    (dict(cfg_scale=-1.0), r"cfg_scale=-1.0"),
    (dict(seed=-1), r"seed=-1"),
    (dict(sampler="greedy"), "ancestral"),
])
def test_sampler_options_are_checked_when_made(bad, message):
    with pytest.raises(MlmkitError, match=message):
        SamplerOptions(**bad)


def test_options_are_checked_against_the_canvas_before_any_model_call(tiny_mlm, monkeypatch):
    import mlmkit.generation.unmask as loop

    mlm = tiny_mlm("bert")
    monkeypatch.setattr(loop, "unmask", lambda *a, **k: pytest.fail("the loop ran"))
    for kwargs, message in [
        (dict(length=4, steps=5), r"steps=5 \(--steps\) is more than 4"),
        (dict(length=4, steps=10_001, sampler="ancestral"), "more than 10,000"),
        (dict(length=4, block_length=5), r"block_length=5 .* longer than the 4 masks"),
        (dict(length=8, block_length=2, steps=3), "fewer than the 4 blocks"),
        (dict(length=10, block_length=4), r"block_length=4 \(--block-length\) does not divide "
                                          r"length=10 \(--length\).* divides 10 \(1, 2, 5, 10\)"),
        (dict(length=4, top_k=10**6), r"top_k=1000000 \(--top-k\) must be a whole number "
                                      r"between 1 and"),
        (dict(length=10**9), r"length=1000000000 \(--length\) must be a whole number between "
                             r"1 and 128"),
        # no '--constraint' flag exists (the CLI's is --fix): the message names the position
        (dict(length=4, constraints={0: 10**9}), r"^constraint at position 0: token id "
                                                 r"1000000000 is not in the model's vocab"),
        (dict(length=4, constraints={1: -1}), r"^constraint at position 1: token id -1"),
    ]:
        with pytest.raises(MlmkitError, match=message):
            generate(mlm, ["x", "y"], **kwargs)
    with pytest.raises(MlmkitError, match=r"steps=9 \(--steps\) is more than 3"):
        infill(mlm, "A [MASK:1-3] b", steps=9)


def test_temperature_nan_is_an_error_not_padding(tiny_mlm):
    with pytest.raises(MlmkitError, match="temperature"):
        generate(tiny_mlm("bert"), "Return the", length=4, temperature=float("nan"))


def test_generate_and_infill_run_the_same_loop(tiny_mlm, monkeypatch):
    import mlmkit.generation.unmask as loop

    mlm = tiny_mlm("bert")
    seen = []
    real = loop.unmask

    def spy(mlm, canvas, options, **kwargs):
        seen.append((options, kwargs["seed"]))
        return real(mlm, canvas, options, **kwargs)

    monkeypatch.setattr(loop, "unmask", spy)
    generate(mlm, PROMPTS * 3, length=4, seed=7, batch_tokens=20, temperature=0.5)
    assert len(seen) >= 2 and [seed for _, seed in seen] == list(range(7, 7 + len(seen)))
    assert all(o.steps == 4 and o.temperature == 0.5 for o, _ in seen)
    seen.clear()
    infill(mlm, "A [MASK:2] b", seed=3, top_p=0.5)
    assert [(o.steps, o.top_p, seed) for o, seed in seen] == [(2, 0.5, 3)]


def test_deprecated_batch_size_still_batches_by_rows(tiny_mlm):
    mlm = tiny_mlm("bert")
    with pytest.warns(DeprecationWarning, match="batch_tokens"):
        old = generate(mlm, PROMPTS * 2, length=4, batch_size=1, seed=2)
    with pytest.warns(DeprecationWarning):
        again = generate(mlm, PROMPTS * 2, length=4, batch_size=1, seed=2)
    assert [r.token_ids for r in old] == [r.token_ids for r in again]
    with pytest.raises(MlmkitError, match="not both"):
        generate(mlm, "x", length=4, batch_size=1, batch_tokens=64)


def test_results_are_json_ready(tiny_mlm):
    mlm = tiny_mlm("bert")
    record = generate(mlm, "Return the", length=4).to_dict()
    assert set(record) >= {"prompt", "text", "full_text", "token_ids", "ended"}
    filled = infill(mlm, "The [MASK:1-2] value.", temperature=0.0).to_dict()
    assert len(filled["candidates"]) == 2 and filled["candidates"][0]["lengths"]


def test_runtime_keywords(tiny_mlm):
    mlm = tiny_mlm("bert")
    a = generate(mlm, "Return the", length=4, precision="fp32", threads=1, device="cpu")
    b = generate(mlm, "Return the", length=4)
    assert a.token_ids == b.token_ids
    with pytest.raises(MlmkitError, match="precision"):
        generate(mlm, "x", length=4, precision="fp8")
    with pytest.raises(MlmkitError, match="not on this machine|not a device"):
        generate(mlm, "x", length=4, device="cuda:7")
