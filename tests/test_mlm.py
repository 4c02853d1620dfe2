"""`mlmkit.load` binds a model to its runtime once; its methods equal the free functions."""

from __future__ import annotations

import functools
import inspect

import pytest
import torch

import mlmkit
from mlmkit.errors import InvalidArgument, UnknownOption

TEXTS = ["The cat sat on the mat.", "A dog barked at the moon tonight.", "Hello world"]


@pytest.fixture(scope="module")
def model_dir(tiny_mlm, tmp_path_factory):
    mlm = tiny_mlm("bert")
    path = tmp_path_factory.mktemp("bound") / "bert-tiny"
    mlm.model.save_pretrained(path)
    mlm.tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def bound(model_dir):
    return mlmkit.load(model_dir, device="cpu", threads=1, batch_tokens=256)


def test_load_binds_the_runtime_once(bound):
    assert isinstance(bound, mlmkit.MLM)
    assert bound.device == torch.device("cpu")
    assert (bound.precision, bound.threads, bound.batch_tokens) == ("fp32", 1, 256)
    assert "precision='fp32'" in repr(bound) and "bert" in repr(bound)


def test_a_path_scored_by_the_method_equals_the_free_function(bound, model_dir):
    by_method = bound.score(TEXTS)
    by_function = mlmkit.score(model_dir, TEXTS, threads=1, batch_tokens=256)
    assert [s.to_dict() for s in by_method] == [s.to_dict() for s in by_function]
    assert [s.to_dict() for s in mlmkit.load(model_dir).score(TEXTS)] \
        == [s.to_dict() for s in mlmkit.score(model_dir, TEXTS)]


def _results(value):
    """A result's dict without its wall-clock timings (which differ run to run)."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    if isinstance(value, dict):
        return {k: _results(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_results(v) for v in value]
    return value


def test_every_feature_of_the_method_equals_its_free_function(bound):
    fill_method = bound.fill("The cat sat on the [MASK].", top_k=3)
    fill_function = mlmkit.fill_mask(bound, "The cat sat on the [MASK].", top_k=3)
    assert _results(fill_method) == _results(fill_function)
    assert _results(bound.generate("The", length=6, seed=3)) \
        == _results(mlmkit.generate(bound, "The", length=6, seed=3))
    assert _results(bound.infill("The [MASK] sat.", seed=1)) \
        == _results(mlmkit.infill(bound, "The [MASK] sat.", seed=1))
    assert _results(bound.elbo("The cat.", samples=4)) \
        == _results(mlmkit.elbo(bound, "The cat.", samples=4))
    verbalizer = {"good": ["good"], "bad": ["bad"]}
    assert _results(bound.classify(TEXTS, verbalizer=verbalizer)) \
        == _results(mlmkit.cloze_classify(bound, TEXTS, verbalizer=verbalizer))
    items = [["The cat sat.", "The cat sat sat."]]
    assert _results(bound.rank(items)) == _results(mlmkit.rank_statements(bound, items))


def test_methods_show_the_task_options_and_refuse_runtime_keywords(bound):
    params = inspect.signature(mlmkit.MLM.score).parameters
    assert "metric" in params and "device" not in params and "precision" not in params
    assert "min_gap" in inspect.signature(mlmkit.MLM.generate).parameters
    for keyword, value in [("device", "cpu"), ("precision", "bf16"), ("threads", 2)]:
        with pytest.raises(InvalidArgument, match=rf"{keyword}=.*mlmkit.load"):
            bound.score(TEXTS, **{keyword: value})


def test_the_bound_budget_is_the_default_and_a_call_may_lower_it(bound, monkeypatch):
    seen = []
    original = mlmkit.mlm.FEATURES["score"]

    @functools.wraps(original)
    def spy(model, texts, **options):
        seen.append(options.get("batch_tokens"))
        return original(model, texts, **options)

    monkeypatch.setitem(mlmkit.mlm.FEATURES, "score", spy)
    method = mlmkit.mlm._feature("score")
    method(bound, TEXTS)
    method(bound, TEXTS, batch_tokens=64)
    assert seen == [256, 64]


def test_loading_a_bound_model_again_returns_it_or_a_rebound_copy(bound):
    assert mlmkit.load(bound) is bound
    rebound = mlmkit.load(bound, batch_tokens=512)
    assert rebound is not bound and rebound.batch_tokens == 512
    assert rebound.model is bound.model and rebound.precision == "fp32"
    assert mlmkit.load(bound, precision="bf16").precision == "bf16"


def test_a_model_and_tokenizer_pair_is_bound_where_it_is(tiny_mlm):
    base = tiny_mlm("bert")
    mlm = mlmkit.load(base.model, tokenizer=base.tokenizer)
    assert mlm.device == base.device and mlm.precision == "fp32"
    assert mlmkit.load((base.model, base.tokenizer)).model is base.model


def test_one_device_rule_for_every_feature(tiny_mlm):
    """A given model stays where it is unless a device is named; then it is moved (the
    generation features used to refuse what scoring did)."""
    base = tiny_mlm("bert")
    assert mlmkit.generation.generate(base, "x", length=2, device="cpu").text is not None
    assert mlmkit.scoring.score(base, "x", device="cpu").pll is not None
    assert base.device == torch.device("cpu")
    with pytest.raises(mlmkit.errors.DeviceError):
        mlmkit.load(base, device="cuda:7")
    with pytest.raises(mlmkit.errors.DeviceError):
        mlmkit.generation.generate(base, "x", length=2, device="cuda:7")


@pytest.mark.parametrize("value", [0, -1, 2.5, "many", True])
def test_a_bad_budget_fails_at_load(model_dir, value):
    with pytest.raises(InvalidArgument, match="batch_tokens"):
        mlmkit.load(model_dir, batch_tokens=value)


def test_a_thing_that_is_no_model_is_refused_in_one_line():
    with pytest.raises(InvalidArgument, match="model is a int"):
        mlmkit.load(3)


def test_the_free_functions_carry_the_task_signatures():
    params = inspect.signature(mlmkit.score).parameters
    assert list(params)[:2] == ["model", "texts"] and "device" in params
    assert mlmkit.score.__doc__ == mlmkit.scoring.score.__doc__


def test_a_checkpoint_without_its_head_embeds_but_refuses_the_head_features(tiny_mlm, tmp_path):
    """A sentence-transformers folder of a plain encoder loads for .embed; scoring with its
    random head would be noise, so it is refused unless the caller accepts the random head."""
    import transformers

    base = tiny_mlm("bert")
    folder = tmp_path / "st"
    transformers.BertModel(base.model.config).save_pretrained(folder)
    base.tokenizer.save_pretrained(folder)
    mlmkit.embeddings.save_st_directory(mlmkit.load(folder, allow_untrained_head=True), folder)
    transformers.BertModel(base.model.config).save_pretrained(folder)  # the encoder alone
    mlm = mlmkit.load(folder)
    assert mlm.untrained_head and mlm.embed(TEXTS).shape[0] == len(TEXTS)
    with pytest.raises(mlmkit.errors.ModelError, match="no trained MLM head"):
        mlm.score(TEXTS)
    assert mlmkit.load(folder, allow_untrained_head=True).score(TEXTS)[0].pll is not None


@pytest.mark.parametrize("keyword", ["batch_size", "batch_rows"])
def test_a_row_batch_keyword_names_batch_tokens_before_any_load(tiny_mlm, keyword):
    with pytest.raises(UnknownOption, match=r"score\(\) got an unexpected keyword argument "
                                            rf"'{keyword}': .*pass batch_tokens=N") as caught:
        mlmkit.score("no/such/model", ["Hello."], **{keyword: 32})  # refused before loading
    assert isinstance(caught.value, TypeError)
    with pytest.raises(UnknownOption, match=r"MLM\.score\(\).*batch_tokens=N"):
        mlmkit.load(tiny_mlm("bert")).score(["Hello."], **{keyword: 32})


def test_a_misspelt_option_names_the_close_one(tiny_mlm):
    with pytest.raises(TypeError, match=r"fill\(\) got an unexpected keyword argument "
                                        r"'topk': did you mean top_k\?"):
        mlmkit.load(tiny_mlm("bert")).fill("A [MASK].", topk=3)
