"""`rescore` and `evaluate_pairs` take score's runtime keywords, declared once: their
signatures show them with score's defaults, and a misspelt keyword is refused."""

from __future__ import annotations

import inspect

import pytest

from mlmkit.scoring import evaluate_pairs, rescore, score
from mlmkit.scoring.text_scores import SCORE_RUNTIME


@pytest.mark.parametrize("function", [rescore, evaluate_pairs])
def test_the_signature_shows_scores_runtime_keywords(function):
    parameters = inspect.signature(function).parameters
    of_score = inspect.signature(score).parameters
    for name in SCORE_RUNTIME:
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert parameters[name].default == of_score[name].default
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


@pytest.mark.parametrize("function", [rescore, evaluate_pairs])
def test_a_misspelt_keyword_is_refused(function):
    with pytest.raises(TypeError, match="unexpected keyword argument 'batch_token'"):
        function("unused", [], batch_token=64)
