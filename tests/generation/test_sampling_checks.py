"""Issue 18, checked from outside: sampler settings that could only be ignored are refused
before any model call, in Python and on the command line, in the same words."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.errors import InvalidArgument
from mlmkit.generation import generate, infill


class _Calls:
    """Counts the model's forward passes (its input embeddings run once per call)."""

    def __init__(self, mlm):
        self.n = 0
        self._hook = mlm.model.get_input_embeddings().register_forward_hook(self._count)

    def _count(self, *_):
        self.n += 1

    def close(self):
        self._hook.remove()


@pytest.fixture
def calls(tiny_mlm):
    counter = _Calls(tiny_mlm("bert"))
    yield counter
    counter.close()


# ReMDM's sigma_max is 0 on a block's first step and on its last: a block of one or two steps
# can never remask, so --remask cap/rescale there was accepted and changed nothing.
@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"steps": 2, "remask": "cap"}, "give none of them 3: use --steps 3 or more (got 2), or"),
    ({"steps": 1, "remask": "rescale", "sampler": "ancestral"}, "use --steps 3 or more"),
    ({"steps": 8, "block_length": 4, "remask": "cap"},
     "use --steps 9 or more (got 8); with 12 every block remasks"),
    ({"block_length": 2, "remask": "cap", "reveal": "threshold"},
     "a block of 2 mask(s) allows at most 2 step(s)"),
    ({"steps": 4, "block_length": 8, "remask": "cap", "reveal": "factor"},
     "use --steps 5 or more"),
])
def test_remask_without_a_middle_step_is_refused_before_any_call(tiny_mlm, calls, kwargs,
                                                                 needle):
    with pytest.raises(InvalidArgument, match=re.escape(needle)):
        generate(tiny_mlm("bert"), "Return the", length=16, **kwargs)
    assert calls.n == 0


def test_remask_on_a_two_token_span_is_refused(tiny_mlm, calls):
    with pytest.raises(InvalidArgument, match=re.escape("a block of 2 mask(s) allows at most 2")):
        infill(tiny_mlm("bert"), "a [MASK:2] b", remask="cap")
    assert calls.n == 0


@pytest.mark.parametrize("sampler", ["confidence", "ancestral", "random"])
def test_remask_with_three_steps_a_block_does_remask(tiny_mlm, sampler):
    results = [generate(tiny_mlm("bert"), ["Return the", "A b"], length=8, steps=6,
                        block_length=4, sampler=sampler, remask="cap", sigma=1.0, seed=seed)
               for seed in range(3)]
    assert sum(r[0].cost.remasked for r in results) > 0


def test_remask_where_only_some_blocks_get_three_steps_runs_and_says_so(tiny_mlm):
    """5 steps over 2 blocks are split 3 + 2: the first block remasks (refusing the plan
    refused a setting that works), and a warning says the second does not."""
    results = []
    for seed in range(5):
        with pytest.warns(UserWarning, match=re.escape("give 3 steps to the first 1 block(s) "
                                                       "only")):
            results.append(generate(tiny_mlm("bert"), "Return the", length=10, block_length=5,
                                    steps=5, remask="cap", sigma=1.0, seed=seed))
    assert sum(r.cost.remasked for r in results) > 0


def test_remask_on_uneven_infill_blocks_names_the_steps_that_work(tiny_mlm):
    """10 masks in blocks of 3, 3, 3, 1: 3 steps in a block of 3 masks are possible, so the
    message must not say a block of 3 allows too few steps."""
    with pytest.raises(InvalidArgument, match=re.escape("use --steps 9 or more (got 8)")):
        infill(tiny_mlm("bert"), "a [MASK:10] b", block_length=3, steps=8, remask="cap")


def test_cli_refuses_remask_without_a_middle_step_in_the_api_words(saved_tiny_mlm):
    out = CliRunner().invoke(app, ["generate", str(saved_tiny_mlm("bert")), "--length", "16",
                                   "--steps", "2", "--remask", "cap"])
    assert out.exit_code == 1
    assert out.stderr.strip() == ("error: --remask cap remasks only between a block's first "
                                  "and last steps, so a block needs 3 steps, and 2 step(s) "
                                  "over 1 block(s) give none of them 3: use --steps 3 or more "
                                  "(got 2), or drop --remask")
    assert "Traceback" not in out.output


def test_remask_counts_every_call_it_makes(tiny_mlm, calls):
    result = generate(tiny_mlm("bert"), "Return the", length=8, steps=8, remask="cap",
                      sigma=1.0, seed=1)
    assert result.cost.remasked > 0
    assert calls.n == result.cost.nfe == result.model_calls


# Guidance masks the prompt for its unconditional pass: with no prompt text anywhere both
# passes are the same canvas, and --cfg-scale was accepted and changed nothing.
@pytest.mark.parametrize("call", [
    lambda mlm: generate(mlm, ["", ""], length=8, cfg_scale=2.0),
    lambda mlm: infill(mlm, "[MASK:4]", cfg_scale=2.0),
])
def test_guidance_without_any_prompt_text_is_refused_before_any_call(tiny_mlm, calls, call):
    with pytest.raises(InvalidArgument, match=r"--cfg-scale 2\.0 guides by masking the prompt "
                                              r"text, but no .* has any"):
        call(tiny_mlm("bert"))
    assert calls.n == 0


def test_guidance_runs_when_some_row_has_a_prompt(tiny_mlm):
    mlm = tiny_mlm("bert")
    plain = generate(mlm, ["", "Return the"], length=8, seed=1)
    guided = generate(mlm, ["", "Return the"], length=8, seed=1, cfg_scale=50.0)
    assert guided[1].token_ids != plain[1].token_ids


# infill ranks the candidates of a span of unknown length by PLL: those model calls were in
# no field of the cost, so a forward hook counted more calls than nfe reported.
def test_infill_cost_counts_the_ranking_calls_too(tiny_mlm, calls):
    mlm = tiny_mlm("bert")
    result = infill(mlm, "Return the [MASK:1-3] of the list.", reveal="threshold", seed=1)
    assert len(result.candidates) == 3
    assert result.cost.scoring_calls >= 1 and result.cost.scoring_seconds > 0
    assert calls.n == result.cost.nfe + result.cost.scoring_calls
    assert result.cost.tokens_per_call == result.cost.tokens / result.cost.nfe
    calls.n = 0
    known = infill(mlm, "Return the [MASK:3] of the list.", seed=1)
    assert known.cost.scoring_calls == 0 and calls.n == known.cost.nfe


def test_infill_json_reports_the_ranking_calls(saved_tiny_mlm):
    import json

    out = CliRunner().invoke(app, ["infill", str(saved_tiny_mlm("bert")), "a [MASK:1-2] b",
                                   "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["cost"]["scoring_calls"] >= 1


# A guidance weight past its range made the logits overflow (cfg_scale=1e300
# returned empty text, with no word of why); no float of the sampler is unbounded.
@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"cfg_scale": 1e300}, "cfg_scale=1e+300 (--cfg-scale) must be between 0 and 100"),
    ({"temperature": 1e7}, "temperature=10000000.0 (--temperature) must be between 0 and "
                           "1e+06"),
    ({"reveal": "factor", "factor": 1e9}, "factor=1000000000.0 (--factor) must be between 0 "
                                          "and 1,000"),
])
def test_a_float_past_its_range_is_refused_before_any_call(tiny_mlm, calls, kwargs, needle):
    with pytest.raises(InvalidArgument, match=re.escape(needle)):
        generate(tiny_mlm("bert"), "Return the", length=4, **kwargs)
    assert calls.n == 0


def test_cli_refuses_a_guidance_weight_past_its_range(saved_tiny_mlm):
    out = CliRunner().invoke(app, ["generate", str(saved_tiny_mlm("bert")), "--length", "4",
                                   "--cfg-scale", "1e300"])
    assert out.exit_code == 1
    assert "must be between 0 and 100" in out.stderr and "Traceback" not in out.output
