"""n-best rescoring, WER, and the minimal-pair (BLiMP) runner."""

from __future__ import annotations

import json
import math

import pytest

import mlmkit
from mlmkit.errors import MlmkitError
from mlmkit.scoring import evaluate_pairs, read_nbest, read_pairs, rescore
from mlmkit.scoring.minimal_pairs import MinimalPair
from mlmkit.scoring.wer import edit_distance, word_error_rate


def test_word_error_rate():
    assert edit_distance("a b c d".split(), "a x c".split()) == 2  # one substitution, one deletion
    assert edit_distance([], "a b".split()) == 2
    assert word_error_rate(["a b c d", "e f"], ["a x c", "e f g"]) == pytest.approx(3 / 6)
    assert word_error_rate(["a b"], ["a b"]) == 0.0


def _constructed_nbest(mlm, tmp_path):
    """Two hypotheses per utterance with equal acoustic scores; the reference is the one
    the model's PLL prefers, so rescoring with any positive weight must pick it."""
    pairs = [("Return the number of items in a container.", "Return the the of of in a a."),
             ("The module defines a class.", "Class a defines module the."),
             ("Open the file for reading.", "Reading for file the open."),
             ("Raise an error when the value is negative.", "Negative is value the when.")]
    data = {}
    for k, (one, two) in enumerate(pairs):
        a, b = (r.pll for r in mlmkit.score(mlm, [one, two]))
        good, bad = (one, two) if a > b else (two, one)
        data[f"utt{k}"] = {"hyp_1": {"score": -5.0, "text": bad},
                           "hyp_2": {"score": -5.0, "text": good}, "ref": good}
    path = tmp_path / "nbest.json"
    path.write_text(json.dumps(data, indent=1))
    return path, data


def test_rescoring_picks_the_known_best(tiny_mlm, tmp_path):
    mlm = tiny_mlm("bert")
    path, data = _constructed_nbest(mlm, tmp_path)
    utterances = read_nbest(path)
    result = rescore(mlm, utterances, weight=0.3)
    assert result.best == {u: entry["ref"] for u, entry in data.items()}
    assert result.wer_after == 0.0 and result.wer_before > 0.0  # ties keep the first (bad) one
    hyp = utterances[0].hypotheses[0]
    assert math.isclose(hyp.combined, hyp.am_score + 0.3 * hyp.pll)
    tuned = rescore(mlm, read_nbest(path), tune_weight=True)
    assert tuned.weight > 0 and len(tuned.dev_utterances) == 2 and tuned.wer_after == 0.0


def test_tsv_nbest_with_references(tiny_mlm, tmp_path):
    mlm = tiny_mlm("bert")
    _, data = _constructed_nbest(mlm, tmp_path)
    tsv = tmp_path / "nbest.tsv"
    tsv.write_text("".join(f"{u}\t{h['score']}\t{h['text']}\n" for u, e in data.items()
                           for n, h in e.items() if n != "ref"))
    refs = tmp_path / "refs.tsv"
    refs.write_text("".join(f"{u}\t{e['ref']}\n" for u, e in data.items()))
    utterances = read_nbest(tsv, refs)
    assert [len(u.hypotheses) for u in utterances] == [2] * 4
    assert rescore(mlm, utterances, weight=1.0).wer_after == 0.0
    normalized = rescore(mlm, read_nbest(tsv, refs), weight=2.0, normalize=True)
    hyp = normalized.utterances[1].hypotheses[1]
    assert math.isclose(hyp.combined, hyp.am_score + 2.0 * hyp.pll / hyp.n_tokens)


def test_bad_nbest_files(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{\n "u1": {"hyp_1": {"score": 1, "text": "a"}},\n "u2": {oops}\n}\n')
    with pytest.raises(MlmkitError, match="line 3"):
        read_nbest(broken)
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("u1\t-1.0\ta b\nu1\tnot-a-number\tc\n")
    with pytest.raises(MlmkitError, match="line 2"):
        read_nbest(tsv)
    with pytest.raises(MlmkitError, match="does not exist"):
        read_nbest(tmp_path / "missing.json")
    # A repeated key or reference was kept last, silently dropping the other.
    broken.write_text('{"u1": {"hyp_1": {"score": 1, "text": "a"}, '
                      '"hyp_1": {"score": 2, "text": "b"}}}\n')
    with pytest.raises(MlmkitError, match="the key 'hyp_1' appears twice"):
        read_nbest(broken)
    good, refs = tmp_path / "good.tsv", tmp_path / "refs.tsv"
    good.write_text("u1\t-1.0\ta b\n")
    refs.write_text("u1\ta b\nu1\ta c\n")
    with pytest.raises(MlmkitError, match="refs.tsv' line 2: a second reference for 'u1'"):
        read_nbest(good, refs)


def test_blimp_subset(tiny_mlm, shared_data):
    mlm = tiny_mlm("bert")
    pairs = read_pairs(shared_data / "blimp", limit=3,
                       paradigms=["adjunct_island", "anaphor_gender_agreement", "passive_1"])
    assert len(pairs) == 9
    result = evaluate_pairs(mlm, pairs)
    assert set(result.by_paradigm) == {"adjunct_island", "anaphor_gender_agreement", "passive_1"}
    # recompute the accuracy from independent scores
    wins = [mlmkit.score(mlm, p.good).pll > mlmkit.score(mlm, p.bad).pll for p in pairs]
    assert result.overall == pytest.approx(sum(wins) / len(pairs))
    assert sum(f["n"] for f in result.by_field.values()) == 9
    assert json.loads(json.dumps(result.to_dict()))["n_pairs"] == 9


def test_bad_minimal_pair_file(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"sentence_good": "a", "sentence_bad": "b"}\n{"sentence_good": "a"}\n')
    with pytest.raises(MlmkitError, match="line 2"):
        read_pairs(path)
    # An empty sentence has no score: it was counted as a wrong pair, with a raw warning.
    path.write_text('{"sentence_good": "a", "sentence_bad": "b"}\n'
                    '{"sentence_good": "a", "sentence_bad": "  "}\n')
    with pytest.raises(MlmkitError, match="line 2: 'sentence_bad' is empty"):
        read_pairs(path)
    with pytest.raises(MlmkitError, match=r"pairs\[0\] \(x\) has an empty"):
        evaluate_pairs("unused", [MinimalPair("", "b", "x", "f")])


@pytest.mark.parametrize("weight", [float("nan"), float("inf"), -float("inf"), 1e9, "0.3", None])
def test_a_non_finite_or_huge_weight_is_refused_before_scoring(tiny_mlm, tmp_path, weight,
                                                               monkeypatch):
    import sys

    from mlmkit.errors import InvalidArgument

    module = sys.modules["mlmkit.scoring.rescore"]

    mlm = tiny_mlm("bert")
    path, _ = _constructed_nbest(mlm, tmp_path)
    monkeypatch.setattr(module, "score", lambda *a, **k: pytest.fail("scored before checks"))
    with pytest.raises(InvalidArgument, match="weight"):
        rescore(mlm, read_nbest(path), weight=weight)
    with pytest.raises(InvalidArgument, match="weight_grid"):
        rescore(mlm, read_nbest(path), tune_weight=True, weight_grid=(0.1, float("nan")))
    with pytest.raises(InvalidArgument, match="batch_tokens"):
        rescore(mlm, read_nbest(path), batch_tokens=0)
    with pytest.raises(InvalidArgument, match="metric"):
        rescore(mlm, read_nbest(path), metric="ppl")


@pytest.mark.parametrize("score", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_am_scores_are_refused_with_their_place(tmp_path, score):
    from mlmkit.errors import InvalidData

    path = tmp_path / "nbest.json"
    path.write_text('{"u1": {"hyp_1": {"score": ' + score + ', "text": "a b"}}}')
    with pytest.raises(InvalidData, match="'u1'/'hyp_1'.*finite"):
        read_nbest(path)
    tsv = tmp_path / "nbest.tsv"
    tsv.write_text(f"u1\t-1\ta b\nu1\t{score.lower()}\tc d\n")
    with pytest.raises(InvalidData, match="line 2.*finite"):
        read_nbest(tsv)


def test_non_utf8_nbest_names_the_byte_offset(tmp_path):
    from mlmkit.errors import InvalidData

    tsv = tmp_path / "latin1.tsv"
    tsv.write_bytes("u1\t-1\tcafé\n".encode("latin-1"))
    with pytest.raises(InvalidData, match="byte offset 9 .*--encoding"):
        read_nbest(tsv)
    assert read_nbest(tsv, encoding="latin-1")[0].hypotheses[0].text == "café"


def test_rescore_result_is_valid_json_with_tuned_weights(tiny_mlm, tmp_path):
    mlm = tiny_mlm("bert")
    path, _ = _constructed_nbest(mlm, tmp_path)
    result = rescore(mlm, read_nbest(path), tune_weight=True, weight_grid=(0.0, 0.5))
    data = json.loads(result.to_json())
    assert set(data["tuned_on_dev"]) == {"0.0", "0.5"} and data["n_utterances"] == 4


def test_references_that_are_empty_or_match_nothing_are_errors(tmp_path):
    from mlmkit.errors import InvalidData

    tsv = tmp_path / "nbest.tsv"
    tsv.write_text("u1\t-1\ta b\nu2\t-2\tc d\n")
    for content in ("", "\n \n"):
        refs = tmp_path / "refs.tsv"
        refs.write_text(content)
        with pytest.raises(InvalidData, match="holds no references"):
            read_nbest(tsv, refs)
    refs.write_text("x1\ta b\n")
    with pytest.raises(InvalidData, match="none of the 1 utterance ids"):
        read_nbest(tsv, refs)
    refs.write_text("u2\tc d\n")
    assert [u.reference for u in read_nbest(tsv, refs)] == [None, "c d"]


def test_an_empty_hypothesis_is_said_once_by_name(saved_tiny_mlm, tmp_path):
    """An empty hypothesis (an ASR output of silence) keeps am_score as its combined score;
    the warning names it (it was 'text 0 is empty', an index into no list the user sees, as
    a raw Python warning on the CLI's standard error)."""
    import warnings

    from typer.testing import CliRunner

    from mlmkit.cli import app

    path = tmp_path / "nbest.tsv"
    path.write_text("u1\t-1.0\tthe cat\nu2\t-2.0\t\nu2\t-3.0\tthe dog\n", encoding="utf-8")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = rescore(saved_tiny_mlm("bert"), read_nbest(path))
    assert [str(w.message).split(" have")[0] for w in caught] == [
        "1 empty hypothesis(es) (first: utterance 'u2', hyp_1)"]
    empty = result.utterances[1].hypotheses[0]
    assert empty.pll is None and empty.combined == -2.0
    out = CliRunner().invoke(app, ["rescore", str(saved_tiny_mlm("bert")), str(path), "--json"])
    assert out.exit_code == 0, out.output
    assert out.stderr.startswith("warning: 1 empty hypothesis(es)") and \
        len(out.stderr.splitlines()) == 1
