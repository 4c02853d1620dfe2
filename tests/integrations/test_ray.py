"""`mlmkit.integrations.ray`: scoring, fill-mask and embedding as Ray Data `map_batches` callable
classes, run on a local Ray cluster (Parquet in, Parquet out), with the numbers of
`mlmkit.score` / `mlmkit.fill_mask` / `mlmkit.embed`."""

from __future__ import annotations

import math

import numpy as np
import pytest

import mlmkit
from mlmkit.integrations.ray import Embedder, FillMask, Scorer, embed_parquet

TEXTS = ["Return the list of items.", "", "Open the file for reading.",
         "A module is a file of definitions.", "Raise an error."]


def test_the_classes_add_the_engines_results_to_a_batch(tiny_mlm):
    model = tiny_mlm("bert")  # an MLM, a path or a hub name: as every entry point
    scored = Scorer(model, device="cpu", threads=1)({"text": TEXTS, "id": list(range(5))})
    expected = mlmkit.score(model, [t for t in TEXTS if t], device="cpu", threads=1)
    plls = [p for p in scored["pll"] if not math.isnan(p)]
    # Equal up to float32 rounding: the batches differ (the empty text is not scored), and
    # the sparse last layer's matmuls round by their row count.
    assert plls == pytest.approx([r.pll for r in expected], rel=1e-6)
    assert math.isnan(scored["pll"][1])
    assert list(scored["id"]) == list(range(5))  # the other columns pass through
    filled = FillMask(model, top_k=3, device="cpu", threads=1)(
        {"text": ["Return the [MASK] of items.", "Open the [MASK] [MASK]."]})
    reference = mlmkit.fill_mask(model, ["Open the [MASK] [MASK]."], top_k=3, device="cpu")
    assert len(filled["fills"][1]) == 2 and len(filled["fills"][0][0]) == 3
    assert filled["fills"][1] == [[c.token for c in m.candidates] for m in reference[0].masks]
    assert list(filled["filled"])[1] == reference[0].filled
    with pytest.raises(mlmkit.errors.InvalidData, match="no column 'sentence'"):
        Scorer(model, column="sentence", device="cpu")({"text": TEXTS})


def test_the_embedder_adds_the_librarys_vectors_to_a_batch(tiny_mlm):
    model = tiny_mlm("bert")
    batch = Embedder(model, pooling="cls", dimensions=8, device="cpu", threads=1)(
        {"text": TEXTS, "id": list(range(5))})
    expected = mlmkit.embed(model, TEXTS, pooling="cls", dimensions=8, device="cpu")
    assert batch["embedding"].shape == (5, 8) and list(batch["id"]) == list(range(5))
    assert np.abs(batch["embedding"] - expected).max() < 1e-6
    pd = pytest.importorskip("pandas")
    frame = Embedder(model, device="cpu")(pd.DataFrame({"text": [None, "Open the file."]}))
    assert np.abs(np.stack(frame["embedding"]) - mlmkit.embed(
        model, ["", "Open the file."], device="cpu")).max() < 1e-6
    with pytest.raises(mlmkit.errors.InvalidArgument, match="pooling"):
        Embedder(model, pooling="median", device="cpu")


@pytest.mark.slow
def test_scoring_a_parquet_dataset_on_a_local_ray_cluster(saved_tiny_mlm, tmp_path, monkeypatch):
    ray = pytest.importorskip("ray", reason="the extra mlmkit[ray] is not installed "
                                            "(pip install 'mlmkit[ray]'; make install does)")
    pd = pytest.importorskip("pandas")
    model = str(saved_tiny_mlm("bert"))
    source = tmp_path / "texts.parquet"
    pd.DataFrame({"id": range(len(TEXTS)), "text": TEXTS}).to_parquet(source)
    # Workers inherit this environment: a runtime_env would start a second pool of workers.
    monkeypatch.setenv("MLMKIT_THREADS", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        dataset = ray.data.read_parquet(str(source))
        scores = dataset.map_batches(Scorer, fn_constructor_kwargs={"model": model,
                                                                    "device": "cpu"},
                                     batch_size=2,
                                     compute=ray.data.ActorPoolStrategy(size=1))
        scores.write_parquet(str(tmp_path / "scores"))
        # the one call that embeds a corpus: Embedder actors, Parquet in and out
        embed_parquet(str(source), tmp_path / "vectors", model=model, actors=1,
                      batch_size=2, device="cpu", normalize=True)
        with pytest.raises(mlmkit.errors.InvalidData, match="no column 'sentence'"):
            embed_parquet(str(source), tmp_path / "none", model=model, column="sentence")
    finally:
        ray.shutdown()
    table = pd.read_parquet(tmp_path / "scores").sort_values("id")
    expected = mlmkit.score(model, TEXTS, device="cpu", threads=1)
    for got, want in zip(table["pll"], expected, strict=True):
        # other batches than one call's: float32 sums in another order
        assert (math.isnan(got) and want.pll is None) or abs(got - want.pll) < 1e-5
    assert list(table["text"]) == TEXTS
    vectors = pd.read_parquet(tmp_path / "vectors").sort_values("id")
    assert list(vectors["text"]) == TEXTS
    expected = mlmkit.embed(model, TEXTS, normalize=True, device="cpu")
    got = np.stack([np.asarray(v, dtype=np.float32) for v in vectors["embedding"]])
    assert np.abs(got - expected).max() < 1e-5
