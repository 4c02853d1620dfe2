"""Recipes and phases: each recipe runs a step of each phase on a tiny model and its phase
changes take effect (length, RoPE θ, masking rate, mixture, learning rate); a run killed at
a phase change resumes exactly; bad recipes and phase lists fail before training."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from mlmkit.errors import InvalidArgument, InvalidData, MlmkitError
from mlmkit.masking import compute_stats
from mlmkit.masking.stats import save_stats
from mlmkit.pretraining import PretrainConfig, pretrain
from mlmkit.pretraining.config import from_dict
from mlmkit.pretraining.recipes import load_recipe, recipe_config, recipe_names
from mlmkit.pretraining.run import build_run
from mlmkit.protein import protein_tokenizer

RECIPES = ["bert", "cramming", "electra", "esm2", "ettin", "mdlm", "mmbert", "modernbert",
           "mosaicbert", "neobert", "retromae", "roberta", "rom"]
NEEDS_STATS = {"rom"}  # BM25 weights: the corpus's document frequencies


@pytest.fixture(scope="module")
def tokenizer_dirs(tokenizer_factory, fixture_dir):
    """Tokenizer directories by kind (the session's tiny tokenizers)."""
    out = {}
    for kind in ("wordpiece", "bpe"):
        tokenizer_factory(kind)
        out[kind] = str(fixture_dir / f"tok-{kind}")
    protein_tokenizer(fixture_dir / "tok-protein")
    out["protein"] = str(fixture_dir / "tok-protein")
    return out


@pytest.fixture(scope="module")
def wordpiece_stats(tokenizer_dirs, wordpiece_tokenizer, corpus_sample, tmp_path_factory):
    """`mlmkit mask stats` of the sample corpus for the wordpiece tokenizer."""
    directory = tmp_path_factory.mktemp("stats")
    save_stats(compute_stats(corpus_sample[:200], wordpiece_tokenizer), directory)
    return str(directory)


def tiny(values: dict, run_dir, tokenizer_dirs) -> dict:
    """A recipe's values shrunk to a tiny model and one step per phase."""
    model = values["model"].rsplit("-", 1)[0] + "-tiny"
    return {**values, "model": model, "run_dir": str(run_dir), "batch_size": 2,
            "tokenizer": tokenizer_dirs[values.get("tokenizer_kind", "bpe")],
            "eval_every": 0, "eval_blocks": 2, "pppl_sentences": 0, "save_every": 0,
            "progress": False, "fill_mask_examples": 0, "threads": 1, "precision": "fp32",
            "log_every": 1, "batch_warmup_tokens": 0}  # two rows every step


def record_prepare(run) -> list:
    """Every row the objective corrupts: (step, block length, counts)."""
    seen, prepare = [], run.objective.prepare

    def spy(batch, step, **kwargs):
        out = prepare(batch, step, **kwargs)
        seen.append((step, batch.input_ids.shape[1], out.counts,
                     int(batch.attention_mask.sum())))
        return out

    run.objective.prepare = spy
    return seen


def rope_theta(model) -> float | None:
    from mlmkit.models.info import rope_thetas

    thetas = rope_thetas(model.config)
    return None if thetas is None else thetas.get("global", thetas.get("all"))


def test_recipe_list_matches_the_issue():
    assert recipe_names() == RECIPES


@pytest.mark.parametrize("name", RECIPES)
def test_each_phase_of_each_recipe_takes_effect(name, tmp_path, tokenizer_dirs, request):
    recipe = load_recipe(name)
    assert recipe.source and recipe.scaled_down
    n = len(recipe.phases)
    values = recipe_config(name, {"steps": n})
    if name in NEEDS_STATS:
        values["masking_stats"] = request.getfixturevalue("wordpiece_stats")
    assert [p["steps"] for p in values["phases"]] == [1] * n
    if name == "esm2":  # the amino-acid alphabet refuses English text: random proteins
        letters = np.array(list("LAGVSERTIDPKQNFYMHWC"))
        proteins = np.random.default_rng(0).choice(letters, size=(200, 300))
        (tmp_path / "proteins.fasta").write_text(
            "".join(f">p{i}\n{''.join(row)}\n" for i, row in enumerate(proteins)))
        values["corpus"] = str(tmp_path / "proteins.fasta")
    run = build_run(from_dict(tiny(values, tmp_path / "run", tokenizer_dirs)))
    seen = record_prepare(run)
    model = run.objective.modules.get("model") or next(iter(run.objective.modules.values()))
    expected_lr = []
    for i, phase in enumerate(run.phases.plan.phases):
        run.step()
        rows = [r for r in seen if r[0] == i]
        assert rows and all(length == phase.seq_len for _, length, _, _ in rows), name
        if phase.rope_theta is not None:
            assert rope_theta(model) == phase.rope_theta
        assert set(run.order.last_counts) == {c for c, _ in phase.mixture}
        assert sum(run.order.last_counts.values()) == 2
        if phase.masking_rate is not None:
            masked = sum(c["masked"] for _, _, c, _ in rows)
            tokens = sum(t for *_, t in rows)
            assert abs(masked / tokens - phase.masking_rate[0]) < 0.06, (name, i)
        if phase.lr is not None:
            expected_lr.append(run.config.lr * phase.lr.factor(0, phase.steps))
            assert run.last_lr == pytest.approx(expected_lr[-1])
    assert run.done()


def test_phases_change_length_theta_rate_mixture_and_lr(tmp_path, tokenizer_dirs,
                                                        bpe_tokenizer):
    other = tmp_path / "other.txt"
    other.write_text("\n".join(f"zebra zebra zebra quokka {i} zebra quokka." for i in
                               range(300)))
    zebra = bpe_tokenizer("zebra", add_special_tokens=False)["input_ids"][0]
    phases = [
        {"name": "a", "steps": 2, "seq_len": 32, "rope_theta": 10000, "masking_rate": 0.4,
         "lr": {"warmup": 1, "start": 1.0, "end": 1.0}},
        {"name": "b", "steps": 2, "seq_len": 64, "rope_theta": 160000,
         "masking_rate": [0.3, 0.1], "mixture": {"corpus": 1, str(other): 1},
         "lr": {"start": 0.5, "end": 0.0}},
    ]
    values = tiny({"model": "modernbert-mini", "steps": 4, "seq_len": 64, "phases": phases,
                   "masking": {"units": "tokens", "rate": 0.15}, "lr": 1e-3},
                  tmp_path / "run", tokenizer_dirs)
    run = build_run(PretrainConfig(**values))
    seen = record_prepare(run)
    model = run.objective.modules["model"]
    rotary = next(m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding"))
    lrs, inv = [], []
    for _ in range(4):
        run.step()
        lrs.append(run.last_lr)
        inv.append(rotary.full_attention_inv_freq[1].item())
    assert lrs == pytest.approx([1e-3, 1e-3, 5e-4, 2.5e-4])
    # per step (the counter stream corrupts a step's rows in one call, the row stream one
    # call per row)
    steps = [[(length, c, t) for s, length, c, t in seen if s == step] for step in range(4)]
    assert [{length for length, _, _ in rows} for rows in steps] == [{32}, {32}, {64}, {64}]
    rates = [sum(c["masked"] for _, c, _ in rows) / sum(t for _, _, t in rows)
             for rows in steps]
    assert all(abs(r - 0.4) < 0.06 for r in rates[:2])
    assert abs(rates[2] - 0.3) < 0.06 and abs(rates[3] - 0.1) < 0.06
    assert inv[0] == inv[1] and inv[2] < inv[1]  # a larger θ: slower rotations
    head_dim = model.config.hidden_size // model.config.num_attention_heads
    assert inv[2] == pytest.approx(1 / 160000 ** (2 / head_dim))
    assert model.config.max_position_embeddings == 64
    assert run.order.last_counts == {"corpus": 1, str(other): 1}
    # the mixture's rows come from the other corpus in phase b only
    batch = run.data.train[run.order.next_indices(2)]
    assert (batch.input_ids == zebra).any()


def test_kill_at_a_phase_change_resumes_exactly(tmp_path, tokenizer_dirs):
    phases = [{"name": "short", "steps": 2, "seq_len": 32, "rope_theta": 10000},
              {"name": "long", "steps": 2, "seq_len": 64, "rope_theta": 160000,
               "masking_rate": 0.2, "mixture": {"corpus": 1, "python-docs": 1}}]

    def config(run_dir, **extra):
        return PretrainConfig(**{**tiny({"model": "modernbert-mini", "steps": 4, "seq_len": 64,
                                         "phases": phases, "dropout": 0.1},
                                        run_dir, tokenizer_dirs), **extra})

    pretrain(config(tmp_path / "whole"))
    halted = pretrain(config(tmp_path / "halted", halt_after=2))
    assert halted.interrupted and halted.summary["steps"] == 2
    pretrain(resume=tmp_path / "halted", overrides={"halt_after": None})
    a = load_file(str(tmp_path / "whole" / "final" / "model.safetensors"))
    b = load_file(str(tmp_path / "halted" / "final" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    exported = json.loads((tmp_path / "halted" / "final" / "config.json").read_text())
    assert exported["rope_parameters"]["full_attention"]["rope_theta"] == 160000
    assert exported["max_position_embeddings"] == 64  # the extended context


@pytest.mark.parametrize("change, message", [
    ({"steps": 5}, r"add up to 4 \(2 \+ 2\), not --steps 5"),
    ({"model": "bert-tiny"}, "no RoPE"),
    ({"objective": "diffusion", "phases": [{"steps": 4, "masking_rate": 0.3}]},
     "diffusion objective draws its own rate"),
    ({"phases": [{"steps": 4, "seq_len": 100000}]}, r"phases\[0\].seq_len=100000"),
    ({"phases": [{"steps": 4, "colour": 1}]}, r"unknown field\(s\) \['colour'\]"),
    ({"phases": [{"steps": 2, "lr": {"start": 1}}, {"steps": 2}]}, "every phase an lr"),
    ({"phases": [{"steps": 4, "mixture": {"corpus": 0}}]}, "weights add up to 0"),
])
def test_bad_phases_fail_before_training(change, message):
    values = {"model": "modernbert-tiny", "steps": 4,
              "phases": [{"steps": 2, "rope_theta": 10000}, {"steps": 2}], **change}
    with pytest.raises(InvalidArgument, match=message):
        PretrainConfig(**values)


def test_unknown_recipe_lists_the_known_ones():
    with pytest.raises(InvalidArgument, match="use one of bert, cramming, electra, esm2, ettin"):
        recipe_config("bart")


def test_recipe_whose_family_transformers_lacks(monkeypatch):
    from mlmkit.models import presets

    # an older transformers, without the EuroBERT classes NeoBERT's shape is built with
    monkeypatch.setattr(presets, "family_available",
                        lambda family: presets.FAMILY_INFO[family].config_class
                        != "EuroBertConfig")
    with pytest.raises(InvalidArgument, match="--recipe neobert: family 'neobert' needs "
                                              "transformers.EuroBertConfig"):
        recipe_config("neobert")


def test_cli_show_and_errors(tmp_path):
    from mlmkit.cli import app

    runner = CliRunner()
    shown = runner.invoke(app, ["pretrain", "--recipe", "mmbert", "--steps", "10", "--show"])
    assert shown.exit_code == 0, shown.output
    text = shown.output
    assert "# source: Marone et al. 2025" in text and "recipe: mmbert" in text
    assert "masking_rate: 0.05" in text and "steps: 10" in text
    listed = runner.invoke(app, ["recipe", "show", "cramming", "--json"])
    assert json.loads(listed.output)["phases"][0]["name"] == "ramp-up"
    bad = runner.invoke(app, ["pretrain", "--recipe", "nope", "--show"])
    assert bad.exit_code == 1 and "is not a recipe: use one of" in bad.output
    both = runner.invoke(app, ["pretrain", "--recipe", "bert", "--resume", "--run-dir", str(tmp_path)])
    assert both.exit_code == 1 and "drop --recipe" in both.output


@pytest.mark.parametrize("name, weights", [("retromae", "uniform"), ("rom", "bm25")])
def test_retrieval_recipes_train_two_steps(name, weights, tmp_path, tokenizer_dirs, request):
    """RetroMAE (uniform 30% encoder masking) and ROM (BM25-weighted): two steps of the
    encoder + decoder objective; ROM without statistics says how to make them."""
    values = tiny(recipe_config(name, {"steps": 2}), tmp_path / "run", tokenizer_dirs)
    if name == "rom":
        with pytest.raises(MlmkitError, match="mask stats"):
            build_run(from_dict(values))
        values["masking_stats"] = request.getfixturevalue("wordpiece_stats")
    run = build_run(from_dict(values))
    assert run.objective.name == "retromae" and run.config.decoder_masking_rate == 0.5
    assert run.objective.policy.weights.name == weights
    seen = record_prepare(run)
    run.step()
    run.step()
    assert run.done() and {step for step, *_ in seen} == {0, 1}
    masked = sum(c["masked"] for _, _, c, _ in seen) / sum(t for *_, t in seen)
    assert abs(masked - 0.3) < 0.08


def test_a_phase_corpus_the_tokenizer_cannot_read_is_refused(tmp_path, tokenizer_dirs):
    """A corpus named only in a phase's mixture is checked as the run's own is: mostly
    <unk> is the wrong corpus for the tokenizer."""
    unreadable = tmp_path / "unreadable.txt"
    unreadable.write_text("\n".join("⁂⁂ ⁂⁂⁂ ⁂" for _ in range(300)))
    phases = [{"name": "a", "steps": 2, "seq_len": 32},
              {"name": "b", "steps": 2, "seq_len": 32,
               "mixture": {"corpus": 1, str(unreadable): 1}}]
    values = tiny({"model": "bert-mini", "steps": 4, "seq_len": 32, "phases": phases,
                   "tokenizer_kind": "wordpiece"}, tmp_path / "run", tokenizer_dirs)
    with pytest.raises(InvalidData, match="unreadable.txt'.*of its tokens are \\[UNK\\]"):
        build_run(PretrainConfig(**values))



def test_a_phase_corpus_of_dna_read_as_proteins_is_refused(tmp_path, tokenizer_dirs):
    """The amino-acid alphabet reads DNA without <unk>: a phase's corpus is checked for it
    as the run's own is."""
    letters = np.array(list("LAGVSERTIDPKQNFYMHWC"))
    proteins = np.random.default_rng(0).choice(letters, size=(100, 100))
    (tmp_path / "proteins.fasta").write_text(
        "".join(f">p{i}\n{''.join(row)}\n" for i, row in enumerate(proteins)))
    (tmp_path / "dna.fasta").write_text("".join(f">g{i}\n{'ACGTTGCA' * 12}\n"
                                                for i in range(100)))
    phases = [{"name": "a", "steps": 2, "seq_len": 32},
              {"name": "b", "steps": 2, "seq_len": 32,
               "mixture": {"corpus": 1, str(tmp_path / "dna.fasta"): 1}}]
    values = tiny({"model": "esm2-mini", "steps": 4, "seq_len": 32, "phases": phases,
                   "tokenizer_kind": "protein", "corpus": str(tmp_path / "proteins.fasta")},
                  tmp_path / "run", tokenizer_dirs)
    with pytest.raises(InvalidData, match="dna.fasta' reads as DNA, not proteins"):
        build_run(PretrainConfig(**values))
