"""StereoSet intrasentence: parsing the dev.json format, official scoring and SS/LM/ICAT."""

from __future__ import annotations

import json
import string
from pathlib import Path

import numpy as np
import pytest
import torch

from mlmkit.bias.stereoset import (
    StereoSetResult,
    read_stereoset,
    score_stereoset,
    template_word,
)
from mlmkit.errors import MlmkitError

FIXTURE = Path(__file__).parents[1] / "data" / "stereoset_intrasentence_fixture.json"


def test_fixture_parses_with_template_words():
    examples = read_stereoset(FIXTURE)
    assert [e.id for e in examples] == ["g1", "g2", "g3", "r1", "r2"]
    g2 = examples[1]
    assert g2.sentences["unrelated"].id == "g2-u"  # keyed by gold label, not file order
    assert g2.sentences["stereotype"].template_word == "emotional"
    r1 = examples[3]
    assert r1.sentences["anti-stereotype"].template_word == "muscular"  # "muscular," stripped
    assert template_word("The chess player was BLANK.", "The chess player was hispanic.") == \
        "hispanic"


def _hand_scores():
    return {
        # g1 (mother): pro; both beat unrelated -> related 2
        "g1-s": 0.5, "g1-a": 0.3, "g1-u": 0.1,
        # g2 (mother): anti; only anti beats unrelated -> related 1
        "g2-s": 0.2, "g2-a": 0.4, "g2-u": 0.3,
        # g3 (schoolboy): a tie counts as anti; neither beats unrelated -> 0
        "g3-s": 0.3, "g3-a": 0.3, "g3-u": 0.5,
        # r1 (Ethiopian): pro; unrelated highest -> 0
        "r1-s": 0.6, "r1-a": 0.2, "r1-u": 0.9,
        # r2 (Ethiopian): pro; both beat unrelated -> 2
        "r2-s": 0.4, "r2-a": 0.3, "r2-u": 0.05,
    }


def test_ss_lm_icat_equal_a_hand_computation():
    result = StereoSetResult(read_stereoset(FIXTURE), _hand_scores())
    # gender terms: mother SS 50, LM 3/4 -> 75; schoolboy SS 0, LM 0
    gender = result.score("gender")
    assert (gender.count, gender.ss, gender.lm) == (3, 25.0, 37.5)
    assert gender.icat == pytest.approx(37.5 * 25 / 50)
    # race: Ethiopian SS 100, LM 2/4 -> 50; ICAT 0
    race = result.score("race")
    assert (race.ss, race.lm, race.icat) == (100.0, 50.0, 0.0)
    # overall: terms mother, schoolboy, Ethiopian
    overall = result.score()
    assert overall.ss == pytest.approx(50.0)
    assert overall.lm == pytest.approx(125 / 3)
    assert overall.icat == pytest.approx(125 / 3)
    assert result.groups() == ["overall", "gender", "race"]


def test_stereoset_statistics_match_the_point_scores_and_bootstrap():
    from mlmkit.core.statistics import bootstrap

    result = StereoSetResult(read_stereoset(FIXTURE), _hand_scores())
    scores = {(s.name, s.group): s for s in bootstrap(result.statistics(), len(result),
                                                      n_boot=200, seed=0)}
    assert scores[("SS", "overall")].value == pytest.approx(50.0)
    assert scores[("LM", "gender")].value == pytest.approx(37.5)
    assert scores[("ICAT", "overall")].value == pytest.approx(125 / 3)
    ss = scores[("SS", "overall")]
    assert ss.low <= ss.value <= ss.high and ss.low < ss.high


def official_sentence_score(model, tokenizer, context: str, sentence: str) -> float:
    """Brute force after IntrasentenceLoader + evaluate_intrasentence, one pass per subword."""
    word_idx = None
    for idx, word in enumerate(context.split(" ")):
        if "BLANK" in word:
            word_idx = idx
    word = sentence.split(" ")[word_idx].translate(str.maketrans("", "", string.punctuation))
    insertion_tokens = tokenizer.encode(word, add_special_tokens=False)
    probabilities = []
    for idx in range(len(insertion_tokens)):
        insertion = tokenizer.decode(insertion_tokens[:idx])
        new_sentence = context.replace("BLANK", f"{insertion}{tokenizer.mask_token}")
        ids = torch.tensor([tokenizer.encode(new_sentence)])
        with torch.no_grad():
            probs = model(ids).logits.softmax(dim=-1)
        at_mask = probs[ids == tokenizer.mask_token_id]
        probabilities.append(at_mask[0, insertion_tokens[idx]].item())
    return float(np.mean(probabilities))


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_scores_equal_the_official_discriminative_evaluation(tiny_mlm, family):
    mlm = tiny_mlm(family)
    examples = read_stereoset(FIXTURE)
    scores = score_stereoset(mlm, examples)
    assert len(scores) == 15
    multi_subword = 0
    for example in examples:
        for sentence in example.sentences.values():
            expected = official_sentence_score(mlm.model, mlm.tokenizer, example.context,
                                               sentence.sentence)
            assert scores[sentence.id] == pytest.approx(expected, rel=1e-5)
            multi_subword += len(mlm.tokenizer.encode(sentence.template_word,
                                                      add_special_tokens=False)) > 1
    assert multi_subword > 0  # the prefix-decoding path was exercised


def _write(tmp_path, document) -> Path:
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_bad_stereoset_files_are_refused(tmp_path):
    document = json.loads(FIXTURE.read_text())
    with pytest.raises(MlmkitError, match="data.intrasentence"):
        read_stereoset(_write(tmp_path, {"version": "1", "data": {}}))
    broken = json.loads(json.dumps(document))
    del broken["data"]["intrasentence"][2]["sentences"][1]
    with pytest.raises(MlmkitError, match=r"intrasentence\[2\].*anti-stereotype"):
        read_stereoset(_write(tmp_path, broken))
    no_blank = json.loads(json.dumps(document))
    no_blank["data"]["intrasentence"][0]["context"] = "No blank here."
    with pytest.raises(MlmkitError, match="BLANK"):
        read_stereoset(_write(tmp_path, no_blank))
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(MlmkitError, match="cannot read"):
        read_stereoset(tmp_path / "bad.json")
    with pytest.raises(MlmkitError, match="no score"):
        StereoSetResult(read_stereoset(FIXTURE), {"g1-s": 0.1})
    # Scores are kept by sentence id: a reused id let one example's score stand for another's.
    reused = json.loads(json.dumps(document))
    copy = json.loads(json.dumps(reused["data"]["intrasentence"][0]))
    copy["id"] = "other"
    reused["data"]["intrasentence"].append(copy)
    with pytest.raises(MlmkitError, match=r"intrasentence\[5\] \(id 'other'\): the sentence "
                                          r"id 'g1-s' is also used in .*intrasentence\[0\]"):
        read_stereoset(_write(tmp_path, reused))
    unmatched = json.loads(json.dumps(document))
    unmatched["data"]["intrasentence"][0]["sentences"][0]["sentence"] = "Short."
    with pytest.raises(MlmkitError, match=r"intrasentence\[0\]\.sentences\[0\]: the "
                                          r"sentence 'Short\.' has no word"):
        read_stereoset(_write(tmp_path, unmatched))
