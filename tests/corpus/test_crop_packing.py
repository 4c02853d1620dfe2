"""`--packing crop`: one document per block, a long document cropped to a random window
drawn from (seed, step, row); short documents as `--packing document`."""

from __future__ import annotations

import numpy as np
import pytest

from mlmkit.corpus.packing import PackedBlocks
from mlmkit.corpus.shards import TokenShards
from mlmkit.pretraining.config import PretrainConfig
from mlmkit.pretraining.data import crop_draws
from mlmkit.pretraining.recipes import recipe_config

CLS, SEP, PAD = 1, 2, 0


def _shards(lengths=(5, 30, 3)) -> TokenShards:
    tokens = np.concatenate([np.arange(100 * (d + 1), 100 * (d + 1) + n)
                             for d, n in enumerate(lengths)]).astype(np.uint32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return TokenShards(path=None, tokens=tokens, word_starts=np.ones(len(tokens), np.uint8),
                       doc_offsets=offsets, meta={})


def _blocks(packing: str) -> PackedBlocks:
    return PackedBlocks(_shards(), 10, cls_id=CLS, sep_id=SEP, pad_id=PAD, packing=packing)


def test_short_documents_as_document_packing_long_ones_one_window():
    crop, document = _blocks("crop"), _blocks("document")
    assert len(crop) == 3  # one block per document, however long
    short = crop.gather([0, 2], draws=[5, 9])
    same = document[[0, len(document) - 1]]
    assert np.array_equal(short.input_ids.numpy(), same.input_ids.numpy())
    row = crop.gather([1], draws=[7]).input_ids[0].numpy()
    assert row[0] == CLS and row[-1] == SEP and len(row) == 10
    inner = row[1:-1]
    assert np.array_equal(np.diff(inner), np.ones(7)) and 200 <= inner[0] <= 223


def test_the_data_line_counts_the_documents_cropped_and_says_why_none_is_held_out():
    from mlmkit.pretraining.data import PretrainData

    shards = _shards((5, 30, 3, 12))
    crop = PackedBlocks(shards, 10, cls_id=CLS, sep_id=SEP, pad_id=PAD, packing="crop")
    assert crop.cropped == 2 and _blocks("document").cropped == 0
    line = PretrainData(crop, None, [], shards, None).describe()
    assert "4 blocks (2 documents longer than a block: a random window" in line
    # and why a corpus this small is not evaluated
    line = PretrainData(crop, None, [], shards, None, validation_share=0.05).describe()
    assert "none of the 4 documents fell in the 5% held out" in line
    line = PretrainData(crop, None, [], shards, None, validation_share=0.0).describe()
    assert line.endswith("no validation split (--validation-share 0): the run is not evaluated")


def test_windows_follow_the_draws_and_are_fixed_without_them():
    blocks = _blocks("crop")
    starts = {int(blocks.gather([1], draws=[d]).input_ids[0, 1]) for d in range(60)}
    assert len(starts) > 10 and min(starts) >= 200 and max(starts) <= 223
    again = [int(blocks.gather([1], draws=[d]).input_ids[0, 1]) for d in range(60)]
    assert set(again) == starts  # the same draw, the same window
    fixed = {int(blocks.gather([1]).input_ids[0, 1]) for _ in range(3)}
    assert len(fixed) == 1  # validation: one window per document
    with pytest.raises(ValueError, match="2 draws for 1 blocks"):
        blocks.gather([1], draws=[1, 2])


def test_draws_are_a_function_of_seed_step_and_row():
    rows = np.array([0, 1, 2, 3])
    assert np.array_equal(crop_draws(0, 5, rows), crop_draws(0, 5, rows))  # exact resume
    assert np.array_equal(crop_draws(0, 5, rows[2:]), crop_draws(0, 5, rows)[2:])  # per rank
    assert not np.array_equal(crop_draws(0, 5, rows), crop_draws(0, 6, rows))  # each epoch
    assert not np.array_equal(crop_draws(0, 5, rows), crop_draws(1, 5, rows))


def test_the_esm2_recipe_crops():
    assert recipe_config("esm2")["packing"] == "crop"
    # its warm-up, given in steps, keeps its share of a run of other length
    assert recipe_config("esm2")["warmup"] == 50
    assert recipe_config("esm2", {"steps": 2000})["warmup"] == 100
    assert recipe_config("esm2", {"steps": 12})["warmup"] == 1
    assert recipe_config("esm2", {"steps": 12, "warmup": 5})["warmup"] == 5
    assert recipe_config("bert", {"steps": 12})["warmup"] == 0.06  # a share already
    assert PretrainConfig(packing="crop").packing == "crop"
