"""`embed`: pooled encoder vectors, equal to sentence-transformers' `encode`, in input order,
whatever the batching; the sentence-transformers directory layout both ways."""

from __future__ import annotations

import json

import numpy as np
import pytest

import mlmkit
from mlmkit.embeddings import read_st_config, save_st_directory
from mlmkit.errors import InvalidArgument, InvalidData, ModelError

TEXTS = ["Return the number of items in a container.", "a b", "",
         "Raise an error when the file is missing, and say which file it was.",
         "Items the of number container return.", "hello"]
ST_POOLING = {"mean": "mean", "cls": "cls", "max": "max", "weighted-mean": "weightedmean"}


def reference_model(path, pooling: str, normalize: bool):
    st = pytest.importorskip("sentence_transformers")
    models = pytest.importorskip("sentence_transformers.models")
    transformer = models.Transformer(str(path))
    modules = [transformer, models.Pooling(transformer.get_embedding_dimension(),
                                           ST_POOLING[pooling])]
    if normalize:
        modules.append(models.Normalize())
    return st.SentenceTransformer(modules=modules, device="cpu")


@pytest.mark.parametrize("family", ["bert", "roberta"])
@pytest.mark.parametrize("pooling", ["mean", "cls", "max", "weighted-mean"])
@pytest.mark.parametrize("normalize", [False, True])
def test_equals_sentence_transformers(saved_tiny_mlm, family, pooling, normalize):
    path = saved_tiny_mlm(family)
    expected = reference_model(path, pooling, normalize).encode(TEXTS, batch_size=4)
    got = mlmkit.load(path).embed(TEXTS, pooling=pooling, normalize=normalize)
    assert got.dtype == np.float32 and got.shape == expected.shape
    assert np.abs(got - expected).max() < 1e-5


def test_order_and_batching_do_not_change_vectors(tiny_mlm):
    mlm = tiny_mlm("bert")
    whole = mlmkit.embed(mlm, TEXTS)
    small = mlmkit.embed(mlm, TEXTS, batch_tokens=8)  # one text per batch, several lengths
    one_by_one = np.stack([mlmkit.embed(mlm, text) for text in TEXTS])
    assert np.abs(whole - small).max() < 1e-5
    assert np.abs(whole - one_by_one).max() < 1e-5
    reversed_ = mlmkit.embed(mlm, TEXTS[::-1])
    assert np.abs(whole - reversed_[::-1]).max() < 1e-5


def test_dimensions_truncate_before_normalising(tiny_mlm):
    mlm = tiny_mlm("bert")
    full = mlmkit.embed(mlm, TEXTS)
    short = mlmkit.embed(mlm, TEXTS, dimensions=16, normalize=True)
    expected = full[:, :16] / np.linalg.norm(full[:, :16], axis=1, keepdims=True)
    assert short.shape == (len(TEXTS), 16)
    assert np.abs(short - expected).max() < 1e-6


def test_prompt_is_put_before_every_text(tiny_mlm):
    mlm = tiny_mlm("bert")
    with_prompt = mlmkit.embed(mlm, ["hello"], prompt="query: ")
    assert np.array_equal(with_prompt, mlmkit.embed(mlm, ["query: hello"]))
    assert not np.allclose(with_prompt, mlmkit.embed(mlm, ["hello"]))


def test_last_k_layers_is_the_mean_of_the_last_layers(tiny_mlm):
    torch = pytest.importorskip("torch")
    mlm = tiny_mlm("bert")
    got = mlmkit.embed(mlm, ["hello world"], pooling="last-k-layers", layers=2)
    ids = mlm.tokenizer(["hello world"], return_tensors="pt")
    with torch.no_grad():
        states = mlm.model.base_model(**ids, output_hidden_states=True).hidden_states
    expected = torch.stack(states[-2:]).mean(0).mean(1).numpy()
    assert np.abs(got - expected).max() < 1e-5
    assert np.abs(got - mlmkit.embed(mlm, ["hello world"])).max() > 1e-4


def test_the_mlm_head_never_runs(tiny_mlm):
    mlm = tiny_mlm("bert")
    calls = []
    hook = mlm.model.cls.register_forward_hook(lambda *args: calls.append(1))
    try:
        mlmkit.embed(mlm, TEXTS)
    finally:
        hook.remove()
    assert calls == []


def test_empty_list_and_single_text(tiny_mlm):
    mlm = tiny_mlm("bert")
    assert mlmkit.embed(mlm, []).shape == (0, mlm.model.config.hidden_size)
    assert mlmkit.embed(mlm, "hello").shape == (mlm.model.config.hidden_size,)


@pytest.mark.parametrize(("options", "message"), [
    ({"pooling": "sum"}, "pooling='sum' is not known"),
    ({"dimensions": 0}, "dimensions"),
    ({"dimensions": 100000}, "more than the model's"),
    ({"pooling": "last-k-layers", "layers": 99}, "layers=99"),
    ({"prompt": 3}, "prompt is a int"),
])
def test_bad_options_are_one_line_errors(tiny_mlm, options, message):
    with pytest.raises(InvalidArgument, match=message) as error:
        mlmkit.embed(tiny_mlm("bert"), ["hello"], **options)
    assert "\n" not in str(error.value)


def test_bad_texts_are_one_line_errors(tiny_mlm):
    mlm = tiny_mlm("bert")
    with pytest.raises(InvalidArgument, match="text 2 is a int"):
        mlmkit.embed(mlm, ["hello", 3])
    with pytest.raises(InvalidData, match="text 1 has .* tokens, more than"):
        mlmkit.embed(mlm, ["word " * 500])


def test_saved_directory_loads_in_sentence_transformers(tiny_mlm, tmp_path):
    st = pytest.importorskip("sentence_transformers")
    mlm = tiny_mlm("bert")
    for pooling, normalize in [("mean", True), ("max", False), ("cls", True)]:
        target = save_st_directory(mlm, tmp_path / pooling, pooling=pooling,
                                   normalize=normalize, prompt="query: ")
        expected = mlmkit.embed(mlm, TEXTS, pooling=pooling, normalize=normalize,
                                prompt="query: ")
        assert np.abs(st.SentenceTransformer(str(target), device="cpu").encode(TEXTS)
                      - expected).max() < 1e-5
        # and back: the directory's own pooling, normalisation and prompt are the defaults
        assert np.abs(mlmkit.load(target).embed(TEXTS) - expected).max() < 1e-5
        assert mlmkit.load(target).score("hello").pll is not None  # still a masked LM


def test_sentence_transformers_directory_loads_without_a_head(saved_tiny_mlm, tmp_path):
    pytest.importorskip("sentence_transformers")
    model = reference_model(saved_tiny_mlm("bert"), "cls", True)
    model.save(str(tmp_path / "st"))  # a BertModel: no MLM head at all
    config = read_st_config(tmp_path / "st")
    assert (config.pooling, config.normalize) == ("cls", True)
    got = mlmkit.load(tmp_path / "st").embed(TEXTS)
    assert np.abs(got - model.encode(TEXTS)).max() < 1e-5


def test_unsupported_sentence_transformers_modules_are_refused(saved_tiny_mlm, tmp_path):
    target = save_st_directory(mlmkit.load(saved_tiny_mlm("bert")), tmp_path / "m")
    modules = json.loads((target / "modules.json").read_text())
    modules.append({"idx": 2, "name": "2", "path": "2_Dense",
                    "type": "sentence_transformers.models.Dense"})
    (target / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ModelError, match="module 'Dense' is not one mlmkit embeds with"):
        mlmkit.load(target).embed("hello")


def test_last_k_layers_cannot_be_saved(tiny_mlm, tmp_path):
    with pytest.raises(InvalidArgument, match="no sentence-transformers Pooling"):
        save_st_directory(tiny_mlm("bert"), tmp_path / "m", pooling="last-k-layers")


def test_the_fused_encoder_equals_the_transformers_layers(tiny_mlm):
    torch = pytest.importorskip("torch")
    from mlmkit.embeddings.fused_encoder import fused_hidden_states, fused_layers

    mlm = tiny_mlm("bert")
    layers = fused_layers(mlm.model)
    assert layers is not None and fused_layers(tiny_mlm("distilbert").model) is None
    row = mlm.tokenizer("Return the number of items.")["input_ids"]
    ids = torch.tensor([row, row[:1] + row[1:-1][::-1] + row[-1:]])  # rows of one length
    with torch.inference_mode():
        expected = mlm.model.base_model(input_ids=ids, output_hidden_states=True).hidden_states
        got = fused_hidden_states(mlm.model, layers, ids)
    assert len(got) == len(expected)
    assert max(float((a - b).abs().max()) for a, b in zip(got, expected, strict=True)) < 1e-5


def test_other_families_embed_through_the_transformers_encoder(saved_tiny_mlm):
    path = saved_tiny_mlm("distilbert")
    expected = reference_model(path, "mean", False).encode(TEXTS)
    assert np.abs(mlmkit.load(path).embed(TEXTS) - expected).max() < 1e-5
