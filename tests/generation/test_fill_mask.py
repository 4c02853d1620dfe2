"""fill_mask: parity with FillMaskPipeline, joint filling, batching, spellings, errors, CLI."""

from __future__ import annotations

import importlib
import json

import pytest
import torch
from typer.testing import CliRunner

from mlmkit.errors import MlmkitError
from mlmkit.generation.fill_mask import FillResult, fill_mask, read_fill_inputs
from mlmkit.models import masked_log_probs

SINGLE = "The module returns a [MASK] of the object."
MULTI = "The [MASK] returns a list of [MASK] for the <mask> object."


def pipeline_predictions(mlm, text: str, top_k: int):
    """transformers' FillMaskPipeline on the text in the model's own mask spelling."""
    from transformers import pipeline

    fill = pipeline("fill-mask", model=mlm.model, tokenizer=mlm.tokenizer, device="cpu")
    own = text.replace("[MASK]", mlm.tokenizer.mask_token).replace("<mask>",
                                                                    mlm.tokenizer.mask_token)
    out = fill(own, top_k=top_k)
    return [out] if isinstance(out[0], dict) else out  # one mask: a flat list


@pytest.mark.parametrize("family", ["bert", "roberta"])
@pytest.mark.parametrize("text", [SINGLE, MULTI])
def test_independent_top_k_equals_fill_mask_pipeline(tiny_mlm, family, text):
    mlm = tiny_mlm(family)
    expected = pipeline_predictions(mlm, text, top_k=7)
    result = fill_mask(mlm, text, top_k=7)
    assert len(result.masks) == len(expected) == text.count("MASK") + text.count("mask")
    for mask, reference in zip(result.masks, expected, strict=True):
        assert [c.token_id for c in mask.candidates] == [r["token"] for r in reference]
        assert [c.token for c in mask.candidates] == [r["token_str"] for r in reference]
        torch.testing.assert_close(torch.tensor([c.score for c in mask.candidates]),
                                   torch.tensor([r["score"] for r in reference]),
                                   atol=1e-6, rtol=1e-5)


def test_both_spellings_work_with_either_model(tiny_mlm):
    for family in ("bert", "roberta"):
        mlm = tiny_mlm(family)
        a = fill_mask(mlm, "A list of [MASK] values.", top_k=3)
        b = fill_mask(mlm, "A list of <mask> values.", top_k=3)
        assert [c.token_id for c in a.masks[0].candidates] == \
               [c.token_id for c in b.masks[0].candidates]
        assert mlm.tokenizer.mask_token in ("[MASK]", "<mask>")


def test_batched_equals_one_at_a_time_despite_padding(tiny_mlm):
    mlm = tiny_mlm("roberta")
    texts = [SINGLE, "Short [MASK].", MULTI, "[MASK] first, then a long tail of words here."]
    for mode in ("independent", "joint"):
        batched = fill_mask(mlm, texts, top_k=4, mode=mode, batch_tokens=40)
        for text, result in zip(texts, batched, strict=True):
            alone = fill_mask(mlm, text, top_k=4, mode=mode)
            assert result.text == text
            for got, want in zip(result.masks, alone.masks, strict=True):
                assert [c.token_id for c in got.candidates] == \
                       [c.token_id for c in want.candidates]
                assert got.step == want.step
                torch.testing.assert_close([c.score for c in got.candidates],
                                           [c.score for c in want.candidates],
                                           atol=1e-5, rtol=1e-4)


def test_one_batched_head_only_call_per_batch(tiny_mlm, monkeypatch):
    # The package attribute `mlmkit.generation.fill_mask` is the function; the module is here.
    module = importlib.import_module("mlmkit.generation.fill_mask")

    calls = []

    def spy(model, input_ids, attention_mask, positions):
        reads = int(positions.sum()) if positions.dtype == torch.bool else len(positions)
        calls.append((input_ids.shape[0], reads))
        return masked_log_probs(model, input_ids, attention_mask, positions)

    monkeypatch.setattr(module, "masked_log_probs", spy)
    texts = [SINGLE, MULTI, "Short [MASK]."]
    fill_mask(tiny_mlm("bert"), texts, top_k=2, batch_tokens=512)
    assert calls == [(3, 5)]  # one encoder pass; the head at the 5 masks only
    calls.clear()
    fill_mask(tiny_mlm("bert"), texts, top_k=2, mode="joint", batch_tokens=512)
    assert calls == [(3, 5), (1, 2), (1, 1)]  # a step per mask of the longest, rows batched


def test_joint_single_mask_equals_independent(tiny_mlm):
    mlm = tiny_mlm("bert")
    joint = fill_mask(mlm, SINGLE, top_k=5, mode="joint")
    independent = fill_mask(mlm, SINGLE, top_k=5)
    assert [c.token_id for c in joint.masks[0].candidates] == \
           [c.token_id for c in independent.masks[0].candidates]
    assert joint.filled == independent.filled


def test_joint_fills_most_confident_first_conditioned_on_fills(tiny_mlm):
    mlm = tiny_mlm("bert")
    tok, model = mlm.tokenizer, mlm.model
    result = fill_mask(mlm, MULTI, top_k=3, mode="joint")
    ids = torch.tensor([tok(MULTI.replace("<mask>", "[MASK]"))["input_ids"]])
    remaining = ids == tok.mask_token_id
    total = 0.0
    # Replay greedily by brute force, with full recomputation at every step.
    for step in range(int(remaining.sum())):
        with torch.no_grad():
            log_probs = masked_log_probs(model, ids, torch.ones_like(ids), remaining)
        columns = remaining[0].nonzero().squeeze(1)
        best = log_probs.max(-1)
        choice = int(best.values.argmax())
        column = int(columns[choice])
        mask = next(m for m in result.masks if m.position == column)
        assert mask.step == step
        top = log_probs[choice].topk(3)
        assert [c.token_id for c in mask.candidates] == top.indices.tolist()
        torch.testing.assert_close(torch.tensor([c.score for c in mask.candidates]),
                                   top.values.exp(), atol=1e-6, rtol=1e-5)
        total += float(top.values[0])
        ids[0, column] = top.indices[0]
        remaining[0, column] = False
    assert result.log_prob == pytest.approx(total, abs=1e-4)
    assert sorted(m.step for m in result.masks) == [0, 1, 2]


def test_result_shape_filled_text_and_model_as_path(saved_tiny_mlm, tiny_mlm):
    path = saved_tiny_mlm("bert")
    result = fill_mask(str(path), MULTI, top_k=2)
    assert isinstance(result, FillResult)
    assert [m.index for m in result.masks] == [0, 1, 2]
    assert "[MASK]" not in result.filled and "<mask>" not in result.filled
    first = tiny_mlm("bert").tokenizer.decode([result.masks[0].candidates[0].token_id])
    assert first.replace("##", "") in result.filled
    assert result.log_prob == pytest.approx(
        sum(torch.tensor(m.candidates[0].score, dtype=torch.float64).log().item()
            for m in result.masks), abs=1e-6)


def test_training_mode_is_restored(tiny_mlm):
    mlm = tiny_mlm("bert")
    mlm.model.train()
    try:
        a = fill_mask(mlm, SINGLE, top_k=3)
        b = fill_mask(mlm, SINGLE, top_k=3)
        assert a == b  # dropout was off during the call
        assert mlm.model.training
    finally:
        mlm.model.eval()


# --- bad input ---


def test_text_without_mask_names_the_accepted_spellings(tiny_mlm):
    mlm = tiny_mlm("roberta")
    with pytest.raises(MlmkitError, match=r"has no mask: write \[MASK\] or <mask>"):
        fill_mask(mlm, "No mask in here.")
    with pytest.raises(MlmkitError, match=r"texts\[1\] \('nothing'\) has no mask"):
        fill_mask(mlm, ["A [MASK].", "nothing"])


def test_bad_arguments_and_too_long_input(tiny_mlm):
    mlm = tiny_mlm("bert")
    with pytest.raises(MlmkitError, match=r"mode='beam' \(--mode\) is not known"):
        fill_mask(mlm, SINGLE, mode="beam")
    with pytest.raises(MlmkitError, match=r"top_k=0 \(--top-k\) must be a whole number "
                                          r"between 1 and 1,0"):
        fill_mask(mlm, SINGLE, top_k=0)
    with pytest.raises(MlmkitError, match="batch_tokens"):
        fill_mask(mlm, SINGLE, batch_tokens=0)
    with pytest.raises(MlmkitError, match=r"tokens long; the model takes at most 128"):
        fill_mask(mlm, "word " * 200 + "[MASK]")


def test_inputs_file_errors_name_the_line(tmp_path, tiny_mlm):
    path = tmp_path / "inputs.txt"
    path.write_text("A [MASK] here.\n\nno mask\n", encoding="utf-8")
    with pytest.raises(MlmkitError, match=r"inputs\.txt' line 3 has no mask"):
        read_fill_inputs(path, tiny_mlm("bert").tokenizer)
    path.write_text("A [MASK] here.\n\nand <mask> there\n", encoding="utf-8")
    with pytest.warns(UserWarning, match=r"1 blank line\(s\) of '.*inputs\.txt' skipped"):
        assert read_fill_inputs(path) == ["A [MASK] here.", "and <mask> there"]
    with pytest.raises(MlmkitError, match="does not exist"):
        read_fill_inputs(tmp_path / "missing.txt")
    path.write_bytes(b"A [MASK] here.\ncaf\xe9 [MASK]\n")
    with pytest.raises(MlmkitError, match=r"inputs\.txt' is not valid utf-8 at byte offset 18 "
                                          r"\(line 2\)"):
        read_fill_inputs(path)


# --- CLI ---


def test_cli_fill_json_file_and_joint(saved_tiny_mlm, tmp_path):
    from mlmkit.cli import app

    path = saved_tiny_mlm("roberta")
    runner = CliRunner()
    out = runner.invoke(app, ["fill", str(path), SINGLE, "--top-k", "3", "--json"])
    assert out.exit_code == 0, out.output
    data = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(data) == 1 and len(data[0]["masks"][0]["candidates"]) == 3
    inputs = tmp_path / "inputs.txt"
    inputs.write_text(f"{SINGLE}\n  \n{MULTI}\n", encoding="utf-8")
    out = runner.invoke(app, ["fill", str(path), "--file", str(inputs), "--joint", "--json"])
    assert out.exit_code == 0, out.output
    assert out.stderr.startswith("warning: 1 blank line(s) of")  # said, not silent
    data = [json.loads(line) for line in out.stdout.splitlines()]
    assert [d["mode"] for d in data] == ["joint", "joint"]
    assert sorted(m["step"] for m in data[1]["masks"]) == [0, 1, 2]
    out = runner.invoke(app, ["fill", str(path), MULTI, "--top-k", "2"])
    assert out.exit_code == 0 and "probability" in out.stdout and "filled:" in out.stdout
    # Each table row holds every column: mask, rank, token, id, probability (the rank was
    # missing, shifting the token under 'rank' and leaving 'probability' empty).
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.stdout.splitlines()
            if line.startswith("│")]
    assert rows and all(len(row) == 5 and row[1] in ("1", "2") and row[4] for row in rows)


def test_cli_fill_without_mask_is_one_error_line(saved_tiny_mlm, monkeypatch, capsys):
    from mlmkit.cli import main

    path = saved_tiny_mlm("bert")
    monkeypatch.setattr("sys.argv", ["mlmkit", "fill", str(path), "no mask"])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code == 1
    err = capsys.readouterr().err
    assert "has no mask: write [MASK] or <mask>" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("mode", ["independent", "joint"])
def test_a_wordpiece_continuation_is_not_glued_to_the_word_before(tiny_mlm, mode):
    import copy

    mlm = tiny_mlm("bert")
    tok = mlm.tokenizer
    piece = next(i for i in range(len(tok)) if tok.convert_ids_to_tokens(i).startswith("##")
                 and len(tok.convert_ids_to_tokens(i)) > 3)
    model = copy.deepcopy(mlm.model)
    with torch.no_grad():
        model.get_output_embeddings().bias[piece] += 100.0  # the model now loves the piece
    text = "Return A [MASK] of the values and [MASK]."
    result = fill_mask((model, tok), text, top_k=2, mode=mode)
    word = tok.convert_ids_to_tokens(piece)[2:]
    assert all(m.candidates[0].token_id == piece for m in result.masks)
    assert result.masks[0].candidates[0].token == "##" + word  # as FillMaskPipeline's token_str
    assert result.filled == f"Return A {word} of the values and {word}."  # the text as written
    assert result.to_dict()["masks"][0]["candidates"][0]["token_id"] == piece


# --- targets and the sequence of each candidate (FillMaskPipeline's) ---


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_targets_equal_the_pipeline_targets(tiny_mlm, family):
    from transformers import pipeline

    mlm = tiny_mlm(family)
    tok = mlm.tokenizer
    space = " " if family == "roberta" else ""  # a byte-level BPE word is " list" (Ġlist)
    words = [space + w for w in ("list", "value", "object", "module", "the")]
    words = [w for w in words if len(tok(w, add_special_tokens=False)["input_ids"]) == 1]
    assert len(words) >= 3
    fill = pipeline("fill-mask", model=mlm.model, tokenizer=tok, device="cpu")
    own = SINGLE.replace("[MASK]", tok.mask_token)
    expected = fill(own, targets=words, top_k=10)
    result = fill_mask(mlm, SINGLE, top_k=10, targets=words)
    candidates = result.masks[0].candidates
    assert len(candidates) == len(words)  # top_k is at most the number of targets
    assert [c.token_id for c in candidates] == [r["token"] for r in expected]
    torch.testing.assert_close(torch.tensor([c.score for c in candidates]),
                               torch.tensor([r["score"] for r in expected]),
                               atol=1e-6, rtol=1e-5)
    assert {c.token_id for c in candidates} == {
        tok(w, add_special_tokens=False)["input_ids"][0] for w in words}
    assert fill_mask(mlm, SINGLE, top_k=2, targets=words).masks[0].candidates == candidates[:2]


def test_each_candidate_carries_its_filled_sequence(tiny_mlm):
    result = fill_mask(tiny_mlm("bert"), MULTI, top_k=2)
    first, second = result.masks[0].candidates[0], result.masks[1].candidates[1]
    assert first.sequence == MULTI.replace("[MASK]", first.token.removeprefix("##"), 1)
    assert second.sequence == ("The [MASK] returns a list of "
                               f"{second.token.removeprefix('##')} for the <mask> object.")
    assert result.to_dict()["masks"][0]["candidates"][0]["sequence"] == first.sequence


def test_joint_mode_takes_targets_too(tiny_mlm):
    result = fill_mask(tiny_mlm("bert"), MULTI, top_k=5, targets=["list", "value"], mode="joint")
    assert all(len(m.candidates) == 2 for m in result.masks)
    assert result.filled.split()[1] in ("list", "value")


def test_a_target_of_several_tokens_is_refused(tiny_mlm):
    with pytest.raises(MlmkitError, match=r"target 'zqxjkvw' is \d+ tokens .* give whole tokens"):
        fill_mask(tiny_mlm("bert"), SINGLE, targets=["list", "zqxjkvw"])
    with pytest.raises(MlmkitError, match="non-empty list of words"):
        fill_mask(tiny_mlm("bert"), SINGLE, targets=[])


def test_cli_fill_targets_and_the_file_hint(saved_tiny_mlm, tmp_path, monkeypatch):
    from mlmkit.cli import app

    path = str(saved_tiny_mlm("bert"))
    runner = CliRunner()
    out = runner.invoke(app, ["fill", path, SINGLE, "--targets", "list,value", "--targets",
                              "object", "--json"])
    assert out.exit_code == 0, out.output
    tokens = [c["token"] for c in json.loads(out.stdout)["masks"][0]["candidates"]]
    assert sorted(tokens) == ["list", "object", "value"]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "masked.txt").write_text(f"{SINGLE}\n", encoding="utf-8")
    out = runner.invoke(app, ["fill", path, "masked.txt"])
    assert out.exit_code == 1
    assert "'masked.txt' is a file, taken here as a text to fill (it has no mask): read " \
           "inputs from it with --file masked.txt" in out.stderr
