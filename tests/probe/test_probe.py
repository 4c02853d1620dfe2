"""mlmkit.probe against hand computations with the full model's logits."""

from __future__ import annotations

import copy
import json
import math
import re

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.errors import InvalidArgument, InvalidData, MlmkitError, PathError
from mlmkit.models import LoadedMLM
from mlmkit.probe import cloze_classify, knowledge_probe, rank_statements, read_items
from mlmkit.probe.labelled import read_labelled_texts
from mlmkit.probe.shared import shared_regions
from mlmkit.probe.spans import score_spans

FAMILIES = ("bert", "roberta")
TEXTS = ["The function returns a list.", "Raise an error when the value is negative."]
TEMPLATE = "{text} It was [MASK]."




def _full_log_probs(mlm, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = mlm.model(input_ids=torch.tensor([ids])).logits[0].double()
    return torch.log_softmax(logits, dim=-1)


def _span(mlm, text: str, lo: int, hi: int) -> tuple[list[int], list[int]]:
    """The ids of `text` and the columns of the tokens overlapping characters [lo, hi)."""
    enc = mlm.tokenizer(text, return_offsets_mapping=True)
    special = set(mlm.tokenizer.all_special_ids)
    cols = [t for t, (s, e) in enumerate(enc["offset_mapping"])
            if e > s and s < hi and e > lo and enc["input_ids"][t] not in special]
    return list(enc["input_ids"]), cols


def hand_word_score(mlm, text: str, word: str) -> float:
    """log P(word | prompt): chain rule over the word's subwords, later ones masked."""
    before = TEMPLATE.split("[MASK]")[0].replace("{text}", text)
    filled = TEMPLATE.replace("{text}", text).replace("[MASK]", word)
    ids, cols = _span(mlm, filled, len(before), len(before) + len(word))
    total = 0.0
    for k, col in enumerate(cols):
        copy_ids = list(ids)
        for later in cols[k:]:
            copy_ids[later] = mlm.tokenizer.mask_token_id
        total += _full_log_probs(mlm, copy_ids)[col, ids[col]].item()
    return total


def _single_token_words(mlm, candidates, n):
    """Words of `candidates` that are one token after a space (checked, not assumed)."""
    words = [w for w in candidates if len(mlm.tokenizer.tokenize(" " + w)) == 1]
    assert len(words) >= n, words
    return words[:n]


@pytest.mark.parametrize("family", (*FAMILIES, "xlm-roberta"))
def test_cloze_scores_equal_full_logits(tiny_mlm, family):
    mlm = tiny_mlm(family)
    pos, neg = (_single_token_words(mlm, ["return", "list", "value", "function", "error",
                                          "class", "module"], 4)[i::2] for i in (0, 1))
    long_word = "unpredictably"
    assert len(mlm.tokenizer.tokenize(" " + long_word)) > 1
    verbalizer = {"pos": pos, "neg": neg + [long_word]}
    hands = [{w: hand_word_score(mlm, text, w) for ws in verbalizer.values() for w in ws}
             for text in TEXTS]
    for aggregate in ("logsumexp", "mean", "max"):
        result = cloze_classify(mlm, TEXTS, TEMPLATE, verbalizer, gold=["pos", "neg"],
                                aggregate=aggregate, batch_tokens=40)
        assert result.multi_token_words == [long_word]
        for hand, p in zip(hands, result.predictions, strict=True):
            for word, value in hand.items():
                assert p.word_scores[word] == pytest.approx(value, abs=1e-4)
            reduce = {"logsumexp": lambda v: float(torch.logsumexp(torch.tensor(v), 0)),
                      "mean": lambda v: float(np.mean(v)), "max": max}[aggregate]
            labels = {k: reduce([hand[w] for w in ws]) for k, ws in verbalizer.items()}
            for label, value in labels.items():
                assert p.scores[label] == pytest.approx(value, abs=1e-4)
            z = sum(math.exp(v) for v in labels.values())
            assert p.probabilities["pos"] == pytest.approx(math.exp(labels["pos"]) / z, abs=1e-6)
            assert p.label == max(labels, key=labels.get)
        expected = np.mean([p.label == g for p, g in zip(result.predictions, ["pos", "neg"],
                                                           strict=True)])
        assert result.accuracy == expected


def test_span_scoring_of_a_single_token_equals_the_mask_forward(tiny_mlm):
    mlm = tiny_mlm("roberta")
    word = _single_token_words(mlm, ["return", "list", "value"], 1)[0]
    text = TEXTS[0]
    filled = TEMPLATE.replace("{text}", text).replace("[MASK]", word)
    before = TEMPLATE.split("[MASK]")[0].replace("{text}", text)
    ids, cols = _span(mlm, filled, len(before), len(before) + len(word))
    engine = score_spans(mlm, [ids], [cols])[0]
    fast = cloze_classify(mlm, [text], TEMPLATE, {"a": [word], "b": ["class"]})
    assert fast.multi_token_words in ([], ["class"])
    assert fast.predictions[0].word_scores[word] == pytest.approx(engine, abs=1e-5)


def brute_pll(mlm, text: str, keep=None) -> tuple[float, int]:
    """Sum over (kept) non-special tokens of log P(token | rest), one masked copy each."""
    enc = mlm.tokenizer(text, return_offsets_mapping=True)
    ids = list(enc["input_ids"])
    special = set(mlm.tokenizer.all_special_ids)
    total, n = 0.0, 0
    for t, token in enumerate(ids):
        if token in special or (keep is not None and not keep(enc["offset_mapping"][t])):
            continue
        copy_ids = list(ids)
        copy_ids[t] = mlm.tokenizer.mask_token_id
        total += _full_log_probs(mlm, copy_ids)[t, token].item()
        n += 1
    return total, n


ITEMS = [["The cat sat on the mat.", "The cat sat on the hat.", "The cat sat on the piano."],
         ["Open the file for reading.", "Open the file for eating."]]


@pytest.mark.parametrize("family", FAMILIES)
def test_rankings_equal_brute_force_pll(tiny_mlm, family):
    mlm = tiny_mlm(family)
    for normalize in ("sum", "token"):
        result = rank_statements(mlm, ITEMS, normalize=normalize, gold=[0, 1], batch_tokens=64)
        for item, ranked in zip(ITEMS, result.items, strict=True):
            brute = [brute_pll(mlm, c) for c in item]
            expected = [s if normalize == "sum" else s / n for s, n in brute]
            assert ranked.scores == pytest.approx(expected, abs=1e-4)
            assert ranked.ranking == sorted(range(len(item)), key=lambda k: -expected[k])
            assert ranked.predicted == ranked.ranking[0]
        right = [r.predicted == g for r, g in zip(result.items, [0, 1], strict=True)]
        assert result.accuracy == np.mean(right)


def test_shared_scope_scores_only_the_common_words(tiny_mlm):
    mlm = tiny_mlm("bert")
    prefix, suffix = shared_regions(ITEMS[0])
    assert (prefix, suffix) == (len("The cat sat on the "), 1)
    result = rank_statements(mlm, ITEMS[:1], scope="shared")
    for text, value in zip(ITEMS[0], result.items[0].scores, strict=True):
        keep = lambda span, n=len(text): span[1] <= prefix or span[0] >= n - suffix  # noqa: E731
        assert value == pytest.approx(brute_pll(mlm, text, keep)[0], abs=1e-4)
    with pytest.raises(MlmkitError, match="share no whole word"):
        rank_statements(mlm, [["alpha", "beta"]], scope="shared")


def test_a_candidate_with_no_token_to_score_is_refused_not_ranked_first(tiny_mlm):
    """A candidate of special tokens only summed no log-probability: 0.0, above every real
    statement's negative score, so it was predicted."""
    mlm = tiny_mlm("bert")
    special = mlm.tokenizer.sep_token
    with pytest.raises(InvalidData, match=re.escape(f"item 0: candidate 1 ({special!r}) has no "
                                                    "token to score")):
        rank_statements(mlm, [["The cat sat on the mat.", special]])


def _biased_model(mlm: LoadedMLM, bias: dict[int, float]) -> LoadedMLM:
    """A copy whose output bias makes the given tokens win by wide, known margins."""
    model = copy.deepcopy(mlm.model)
    head = model.get_output_embeddings()
    with torch.no_grad():
        head.bias.zero_()
        for token, value in bias.items():
            head.bias[token] = value
    return LoadedMLM(model=model, tokenizer=mlm.tokenizer, name="biased")


def test_knowledge_probe_ranks_and_metrics_on_a_controlled_model(tiny_mlm):
    base = tiny_mlm("bert")
    tok = base.tokenizer
    a, b, c, d = _single_token_words(base, ["list", "return", "value", "function", "class"], 4)
    ids = {w: tok.convert_tokens_to_ids(w) for w in (a, b, c, d)}
    mlm = _biased_model(base, {ids[a]: 100.0, ids[b]: 90.0, ids[c]: 80.0, ids[d]: -100.0,
                               tok.mask_token_id: 200.0})
    facts = [
        {"template": "[X] gives a [Y].", "subject": "It", "object": a, "relation": "r1"},
        {"masked_sentence": "We saw the [MASK] here.", "obj_label": b, "predicate_id": "r2"},
        {"masked_sentence": "We saw the [MASK] here.", "obj_label": c, "predicate_id": "r2"},
        {"template": "[X] is [Y].", "subject": "That", "object": d, "relation": "r1"},
        {"template": "[X] is [Y].", "subject": "That", "object": "unpredictably",
         "relation": "r1"},
    ]
    result = knowledge_probe(mlm, facts, batch_tokens=24)
    n_answers = len(tok) - len(set(tok.all_special_ids))
    ranks = [f.rank for f in result.facts]
    assert ranks == [1, 2, 3, n_answers, None]
    assert result.facts[0].top[:3] == [a, b, c]
    assert "tokens" in result.facts[4].skipped
    expected = [1, 2, 3, n_answers]
    assert result.overall.n == 4 and result.overall.skipped == 1
    assert result.overall.p_at_1 == pytest.approx(1 / 4)
    assert result.overall.p_at_10 == pytest.approx(3 / 4)
    assert result.overall.mrr == pytest.approx(np.mean([1 / r for r in expected]))
    r1, r2 = result.by_relation["r1"], result.by_relation["r2"]
    assert (r1.n, r1.skipped, r2.n, r2.skipped) == (2, 1, 2, 0)
    assert r1.mrr == pytest.approx((1 + 1 / n_answers) / 2)
    assert r2.p_at_1 == 0.0 and r2.p_at_10 == 1.0 and r2.mrr == pytest.approx((1 / 2 + 1 / 3) / 2)
    assert result.macro.mrr == pytest.approx((r1.mrr + r2.mrr) / 2)
    with_special = knowledge_probe(mlm, facts[:1], exclude_special=False)
    assert with_special.facts[0].rank == 2 and with_special.facts[0].top[0] == tok.mask_token


def test_knowledge_probe_on_roberta_matches_full_logits(tiny_mlm):
    mlm = tiny_mlm("roberta")
    word = _single_token_words(mlm, ["list", "return", "value"], 1)[0]
    result = knowledge_probe(mlm, [{"template": "[X] returns a [Y].", "subject": "It",
                                    "object": word}])
    ids, cols = _span(mlm, f"It returns a {word}.", len("It returns a "),
                      len("It returns a ") + len(word))
    masked = list(ids)
    masked[cols[0]] = mlm.tokenizer.mask_token_id
    scores = _full_log_probs(mlm, masked)[cols[0]]
    scores[sorted(set(mlm.tokenizer.all_special_ids))] = float("-inf")
    assert result.facts[0].rank == int((scores > scores[ids[cols[0]]]).sum()) + 1


def test_bad_inputs(tiny_mlm, tmp_path):
    mlm = tiny_mlm("bert")
    with pytest.raises(MlmkitError, match="has no mask"):
        cloze_classify(mlm, TEXTS, "{text} It was good.")
    with pytest.raises(MlmkitError, match="has 2 masks"):
        cloze_classify(mlm, TEXTS, "{text} [MASK] was [MASK].")
    with pytest.raises(MlmkitError, match=r"has no \{text\}"):
        cloze_classify(mlm, TEXTS, "It was [MASK].")
    with pytest.raises(MlmkitError, match="both"):
        cloze_classify(mlm, TEXTS, verbalizer={"a": ["good"], "b": ["good"]})
    with pytest.raises(MlmkitError, match="not valid JSON"):
        cloze_classify(mlm, TEXTS, verbalizer="{pos: good}")
    with pytest.raises(MlmkitError, match="the label 'a' is given twice"):  # was: last kept
        cloze_classify(mlm, TEXTS, verbalizer='{"a": ["good"], "b": ["bad"], "a": ["fine"]}')
    with pytest.raises(MlmkitError, match="text 1"):
        cloze_classify(mlm, ["fine", "a [MASK] inside"])
    with pytest.raises(MlmkitError, match=r"not in the verbalizer's .*: give a verbalizer "
                                          r"\(--verbalizer\) with words"):
        cloze_classify(mlm, TEXTS, gold=["positive", "meh"])
    with pytest.raises(MlmkitError, match=r"\[Y\]"):
        knowledge_probe(mlm, [{"template": "[X] was born.", "subject": "A", "object": "b"}])
    with pytest.raises(MlmkitError, match="at least two"):
        rank_statements(mlm, [["only one"]])
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(MlmkitError, match="is empty"):
        read_items(empty)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a", "label": "pos"}\n{"txt": "b"}\n')
    with pytest.raises(MlmkitError, match=r"line 2: unknown field\(s\) \['txt'\].*; name "
                                          r"the text and label fields with --text-field"):
        read_labelled_texts(bad)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"candidates": ["a b", "a c"]}\n{"candidates": \n')
    with pytest.raises(MlmkitError, match="line 2: invalid JSON"):
        read_items(broken)
    partial = tmp_path / "partial.jsonl"
    partial.write_text('{"text": "a", "label": "pos"}\n{"text": "b"}\n')
    with pytest.raises(MlmkitError, match="line 2: no 'label'"):
        read_labelled_texts(partial)


def test_copa_rows_become_statements(tmp_path):
    path = tmp_path / "copa.jsonl"
    path.write_text(json.dumps({"premise": "The man broke his toe.", "choice1": "He dropped a "
                                "hammer on his foot.", "choice2": "He got a hole in his sock.",
                                "question": "cause", "label": 0, "idx": 1}) + "\n")
    item = read_items(path)[0]
    assert item.candidates[0] == "The man broke his toe because he dropped a hammer on his foot."
    assert item.gold == 0 and item.item_id == "1"


def test_cli(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": lab}) + "\n"
                            for t, lab in zip(TEXTS, ["pos", "neg"], strict=True)))
    runner = CliRunner()
    result = runner.invoke(app, ["probe", "classify", model, str(data), "--verbalizer",
                                 '{"pos": ["good"], "neg": ["bad"]}', "--json",
                                 "--device", "cpu"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["n"] == 2 and payload["labels"] == ["pos", "neg"]
    long_data = tmp_path / "long.jsonl"
    long_data.write_text(json.dumps({"text": "Open the file and read it. " * 120}) + "\n")
    result = runner.invoke(app, ["probe", "classify", model, str(long_data), "--json",
                                 "--device", "cpu"])
    assert result.exit_code == 0, result.output
    # One `warning:` line, not Python's warning format with the file and the source line.
    assert result.stderr.startswith("warning: 1 text(s) make a prompt longer"), result.stderr
    assert "UserWarning" not in result.stderr and len(result.stderr.splitlines()) == 1
    assert json.loads(result.stdout)["windowed_texts"] == [0]
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"candidates": ITEMS[1], "label": 0}) + "\n")
    result = runner.invoke(app, ["probe", "rank", model, str(items), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert "accuracy" in result.output
    facts = tmp_path / "facts.jsonl"
    facts.write_text(json.dumps({"masked_sentence": "Open the [MASK].", "obj_label": "file"})
                     + "\n")
    out = tmp_path / "facts.json"
    result = runner.invoke(app, ["probe", "facts", model, str(facts), "-o", str(out),
                                 "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["overall"]["n"] + \
        json.loads(out.read_text())["overall"]["skipped"] == 1
    result = runner.invoke(app, ["probe", "classify", model, str(data), "--template",
                                 "{text} It was good.", "--device", "cpu"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: --template") and "has no mask" in result.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = runner.invoke(app, ["probe", "facts", model, str(empty), "--device", "cpu"])
    assert result.exit_code == 1 and "is empty" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_cli_reads_standard_input_and_keeps_stdout_for_results(saved_tiny_mlm, tmp_path):
    model = str(saved_tiny_mlm("bert"))
    rows = json.dumps({"candidates": ITEMS[1], "label": 0}) + "\n"
    out = tmp_path / "ranked.json"
    result = CliRunner().invoke(app, ["probe", "rank", model, "-", "--json", "-o", str(out),
                                      "--device", "cpu", "--threads", "1",
                                      "--batch-tokens", "64"], input=rows)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == json.loads(out.read_text())
    assert json.loads(result.stdout)["n_items"] == 1
    assert "written to" in result.stderr and "written to" not in result.stdout


def test_help_of_every_probe_command_has_a_description_and_an_example():
    runner = CliRunner()
    listing = runner.invoke(app, ["probe", "-h"]).stdout
    for command in ("classify", "rank", "facts"):
        line = next(x for x in listing.splitlines() if f" {command} " in x)
        assert len(line.split(command, 1)[1].strip(" │")) > 20, line  # a one-line description
        result = runner.invoke(app, ["probe", command, "-h"])
        assert result.exit_code == 0
        assert f"mlmkit probe {command} " in result.stdout.split("Example")[-1]
        for option in ("--output", "--json", "--device", "--precision", "--threads",
                       "--batch-tokens"):
            assert option in result.stdout, (command, option)


UNKNOWN_WORD = "東京"  # characters the python-docs WordPiece vocabulary lacks


def test_facts_with_an_unknown_only_object_are_skipped_and_counted(tiny_mlm, saved_tiny_mlm,
                                                                   tmp_path):
    mlm = tiny_mlm("bert")
    tok = mlm.tokenizer
    assert tok.tokenize(" " + UNKNOWN_WORD) == [tok.unk_token]
    word = _single_token_words(mlm, ["list", "value"], 1)[0]
    facts = [{"masked_sentence": "It returns a [MASK].", "obj_label": word, "predicate_id": "r"},
             {"masked_sentence": "It lives in [MASK].", "obj_label": UNKNOWN_WORD,
              "predicate_id": "r"},
             {"masked_sentence": "It is [MASK].", "obj_label": "unpredictably",
              "predicate_id": "s"}]
    result = knowledge_probe(mlm, facts)
    assert [f.rank is not None for f in result.facts] == [True, False, False]
    assert "not in the vocabulary" in result.facts[1].skipped
    assert "tokens" in result.facts[2].skipped
    assert (result.overall.n, result.overall.skipped, result.overall.unknown) == (1, 2, 1)
    assert (result.by_relation["r"].unknown, result.by_relation["s"].unknown) == (1, 0)
    assert result.to_dict()["overall"]["unknown"] == 1
    # the rank of the probed fact is the one it gets alone
    assert result.facts[0].rank == knowledge_probe(mlm, facts[:1]).facts[0].rank
    path = tmp_path / "facts.jsonl"
    path.write_text("".join(json.dumps(f, ensure_ascii=False) + "\n" for f in facts),
                    encoding="utf-8")
    cli = CliRunner().invoke(app, ["probe", "facts", str(saved_tiny_mlm("bert")), str(path),
                                   "--device", "cpu"])
    assert cli.exit_code == 0, cli.output
    assert "1 with an object the vocabulary lacks ([UNK])" in " ".join(cli.stdout.split())


def test_ranking_scores_unknown_tokens_instead_of_skipping_them(tiny_mlm):
    mlm = tiny_mlm("bert")
    tok = mlm.tokenizer
    plain, strange = "Open the file for reading.", f"Open the {UNKNOWN_WORD} for reading."
    assert tok.unk_token_id in tok(strange)["input_ids"]
    result = rank_statements(mlm, [[plain, strange]])
    item = result.items[0]
    assert item.unknown_tokens == [0, 1] and result.n_unknown == 1
    # brute force: every token but [CLS]/[SEP] masked alone, the [UNK] token included
    enc = tok(strange)
    ids = list(enc["input_ids"])
    expected = 0.0
    for t in range(1, len(ids) - 1):
        copy_ids = list(ids)
        copy_ids[t] = tok.mask_token_id
        expected += _full_log_probs(mlm, copy_ids)[t, ids[t]].item()
    assert item.scores[1] == pytest.approx(expected, abs=1e-4)
    assert result.to_dict()["items"][0]["unknown_tokens"] == [0, 1]


def test_a_verbalizer_word_spelled_unk_is_refused(tiny_mlm):
    with pytest.raises(InvalidArgument, match=f"verbalizer word '{UNKNOWN_WORD}'.*unknown"):
        cloze_classify(tiny_mlm("bert"), TEXTS, verbalizer={"a": ["list"],
                                                            "b": [UNKNOWN_WORD]})


@pytest.mark.parametrize("call, message", [
    (lambda m: knowledge_probe(m, [{"masked_sentence": "A [MASK].", "obj_label": "a"}],
                               top_k=0), "top_k=0"),
    (lambda m: knowledge_probe(m, [{"masked_sentence": "A [MASK].", "obj_label": "a"}],
                               top_k=float("nan")), "top_k=nan"),
    (lambda m: rank_statements(m, ITEMS, batch_tokens=-5), "batch_tokens=-5"),
    (lambda m: rank_statements(m, ITEMS, batch_tokens=float("nan")), "batch_tokens=nan"),
    (lambda m: cloze_classify(m, TEXTS, precision="fp16"), "precision 'fp16'"),
    (lambda m: cloze_classify(m, TEXTS, aggregate="median"), "aggregate='median'"),
    (lambda m: rank_statements(m, ITEMS, normalize="chars"), "normalize='chars'"),
    (lambda m: rank_statements(m, ITEMS[1:], gold=[float("nan")]), "gold[0] = nan"),
    (lambda m: cloze_classify(m, TEXTS, threads=0), "threads=0"),
])
def test_bad_numbers_and_names_fail_before_the_model_loads(tmp_path, call, message):
    missing = str(tmp_path / "no-model")  # loading it would be a ModelError/PathError
    with pytest.raises(InvalidArgument) as error:
        call(missing)
    assert message in str(error.value)


def test_non_utf8_and_malformed_files_name_file_and_line(tmp_path):
    from mlmkit.probe import read_facts

    latin = tmp_path / "facts.jsonl"
    latin.write_bytes(b'{"masked_sentence": "A [MASK].", "obj_label": "a"}\n'
                      b'{"masked_sentence": "Caf\xe9 [MASK].", "obj_label": "b"}\n')
    with pytest.raises(InvalidData, match=r"facts.jsonl' is not valid utf-8 at byte offset "
                                          r"\d+ \(line 2\)"):
        read_facts(latin)
    not_object = tmp_path / "items.jsonl"
    not_object.write_text('["a", "b"]\n')
    with pytest.raises(InvalidData, match=r"items.jsonl' line 1: a JSON list, not an object"):
        read_items(not_object)
    with pytest.raises(PathError, match="does not exist"):
        read_items(tmp_path / "missing.jsonl")
    wrong_type = tmp_path / "typed.jsonl"
    wrong_type.write_text('{"candidates": "a b"}\n')
    with pytest.raises(InvalidData, match=r"line 1: field 'candidates' must be a list"):
        read_items(wrong_type)
    # A candidate given twice: its two scores tie, and a tie went to the first, silently.
    twice = tmp_path / "twice.jsonl"
    twice.write_text('{"candidates": ["a b", "a c", "a b"], "label": 2}\n')
    with pytest.raises(InvalidData, match=r"line 1: the candidate 'a b' is given twice"):
        read_items(twice)
    with pytest.raises(InvalidData, match=r"item 0: the candidate 'a b' is given twice"):
        rank_statements("unused", [["a b", "a b"]])


def test_long_prompts_use_windows_in_cloze_and_are_named_in_facts(tiny_mlm):
    mlm = tiny_mlm("bert")
    long_text = " ".join(["Return the number of items in a container."] * 20)
    assert len(mlm.tokenizer(long_text)["input_ids"]) > mlm.max_length
    word = _single_token_words(mlm, ["list", "value"], 1)[0]
    with pytest.warns(UserWarning, match=r"1 text\(s\) make a prompt longer .* \(first: "
                      r"text 1\): .* sliding windows"):
        both = cloze_classify(mlm, ["A short one.", long_text], TEMPLATE,
                              {"a": [word], "b": ["class"]})
    assert both.windowed_texts == [1] and both.to_dict()["windowed_texts"] == [1]
    with pytest.warns(UserWarning, match="sliding windows"):
        result = cloze_classify(mlm, [long_text], TEMPLATE, {"a": [word], "b": ["class"]})
    before = TEMPLATE.split("[MASK]")[0].replace("{text}", long_text)
    filled = TEMPLATE.replace("{text}", long_text).replace("[MASK]", word)
    ids, cols = _span(mlm, filled, len(before), len(before) + len(word))
    expected = score_spans(mlm, [ids], [cols])[0]
    assert np.isfinite(expected)
    assert result.predictions[0].word_scores[word] == pytest.approx(expected, abs=1e-6)
    with pytest.raises(MlmkitError, match="fact 1: the prompt has"):
        knowledge_probe(mlm, [{"masked_sentence": "A [MASK].", "obj_label": word},
                              {"masked_sentence": long_text + " [MASK].", "obj_label": word}])


def test_lama_rows_with_relation_templates(tiny_mlm, tmp_path):
    mlm = tiny_mlm("bert")
    word = _single_token_words(mlm, ["list", "value"], 1)[0]
    relations = tmp_path / "relations.jsonl"
    relations.write_text(json.dumps({"relation": "P1", "template": "[X] returns a [Y] .",
                                     "label": "returns", "type": "N-1"}) + "\n")
    facts = tmp_path / "P1.jsonl"
    facts.write_text(json.dumps({"sub_label": "It", "obj_label": word, "predicate_id": "P1",
                                 "uuid": "u1", "obj_uri": "Q1", "evidences": []}) + "\n")
    from mlmkit.probe import read_facts, read_templates

    templates = read_templates(relations)
    via_file = knowledge_probe(mlm, read_facts(facts, templates))
    direct = knowledge_probe(mlm, [{"template": "[X] returns a [Y] .", "subject": "It",
                                    "object": word, "relation": "P1"}])
    assert via_file.facts[0].rank == direct.facts[0].rank
    assert list(via_file.by_relation) == ["P1"]
    with pytest.raises(MlmkitError, match="relation templates"):
        read_facts(facts)
    typo = tmp_path / "typo.jsonl"
    typo.write_text(json.dumps({"masked_sentence": "A [MASK].", "obj_lable": word}) + "\n")
    with pytest.raises(MlmkitError, match=r"line 1: unknown field\(s\) \['obj_lable'\]"):
        read_facts(typo)


def test_word_normalization_divides_by_the_scored_words(tiny_mlm):
    mlm = tiny_mlm("bert")
    result = rank_statements(mlm, ITEMS[1:], normalize="word")
    for text, value in zip(ITEMS[1], result.items[0].scores, strict=True):
        enc = mlm.tokenizer(text)
        n_words = len({w for w in enc.word_ids() if w is not None})
        assert value == pytest.approx(brute_pll(mlm, text)[0] / n_words, abs=1e-4)


@pytest.mark.parametrize("name, content", [
    ("reviews.tsv", "idx\tsentence\tlabel\n0\tA great film.\tpos\n1\tA dull one.\tneg\n"),
    ("reviews.csv", 'idx,sentence,label\n0,A great film.,pos\n1,"A dull one, sadly.",neg\n'),
    ("reviews.jsonl", '{"sentence": "A great film.", "label": "pos"}\n'
                      '{"sentence": "A dull one.", "label": "neg"}\n'),
])
def test_texts_to_classify_from_json_lines_tsv_or_csv(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    texts, gold = read_labelled_texts(path, text_field="sentence")
    assert texts[0] == "A great film." and texts[1].startswith("A dull one")
    assert gold == ["pos", "neg"]


def test_a_table_without_labels_or_its_text_column(tmp_path):
    unlabelled = tmp_path / "unlabelled.tsv"
    unlabelled.write_text("sentence\tlabel\nA great film.\t\nA dull one.\t\n", encoding="utf-8")
    assert read_labelled_texts(unlabelled, text_field="sentence") == (
        ["A great film.", "A dull one."], None)
    with pytest.raises(MlmkitError, match=r"line 2: no column 'text' \(the columns are "
                                          r"\['sentence', 'label'\]\); name the text and label "
                                          r"fields with --text-field"):
        read_labelled_texts(unlabelled)


def test_cli_classify_reads_a_tsv_with_its_text_field(saved_tiny_mlm, tmp_path):
    data = tmp_path / "reviews.tsv"
    data.write_text("sentence\tgold\nA great film.\tpos\nA dull one.\tneg\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["probe", "classify", str(saved_tiny_mlm("bert")),
                                      str(data), "--text-field", "sentence", "--label-field",
                                      "gold", "--verbalizer", '{"pos": ["good"], "neg": ["bad"]}',
                                      "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["n"] == 2 and payload["accuracy"] is not None
