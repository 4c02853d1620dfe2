"""A pretraining run directory read cold: its README, config, step folders, tokenizer,
closing examples, summary and progress lines say what the run was and how to use it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch
from rich.console import Console
from safetensors.torch import load_file
from typer.testing import CliRunner

import mlmkit
from mlmkit.cli import app
from mlmkit.cli.pretrain import _summary_table
from mlmkit.core.run_layout import model_name, shared_tokenizer_dir
from mlmkit.pretraining import PretrainConfig, pretrain
from mlmkit.pretraining.config import load_config
from mlmkit.pretraining.examples import pick_examples
from mlmkit.training.checkpoint import list_states, load_latest_state


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory, corpus_sample) -> Path:
    """A small corpus with a held-out share."""
    path = tmp_path_factory.mktemp("corpus") / "notes.txt"
    path.write_text("\n".join(corpus_sample[:400]) + "\n")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory, small_corpus):
    """12 steps saving every 4 (states kept: 2), so the last save is the run's end."""
    root = tmp_path_factory.mktemp("run-directory")
    config = PretrainConfig(model="tiny", corpus=str(small_corpus), vocab_size=1000,
                            validation_share=0.2, seq_len=32, batch_size=8, steps=10,
                            eval_every=0, eval_blocks=4, pppl_sentences=0, save_every=4,
                            keep_checkpoints=2, log_every=2, run_dir=str(root / "notes"),
                            progress=False, fill_mask_examples=3, threads=1,
                            precision="fp32")
    return pretrain(config)


def test_config_records_the_tokenizer_the_run_used(run, tmp_path, small_corpus,
                                                   wordpiece_tokenizer):
    tokenizer = mlmkit.load(Path(run.run_dir) / "final").tokenizer
    assert load_config(Path(run.run_dir) / "config.yaml").vocab_size == len(tokenizer)
    # a given tokenizer of another size: config.yaml says its size, not the default 8192
    given = pretrain(PretrainConfig(model="tiny", tokenizer=wordpiece_tokenizer.name_or_path,
                                    corpus=str(small_corpus), seq_len=32, batch_size=8,
                                    steps=1, eval_every=0, eval_blocks=2, pppl_sentences=0,
                                    save_every=0, run_dir=str(tmp_path / "given"),
                                    progress=False, fill_mask_examples=0, threads=1,
                                    precision="fp32"))
    assert len(wordpiece_tokenizer) != 8192
    assert load_config(Path(given.run_dir) / "config.yaml").vocab_size == \
        len(wordpiece_tokenizer)


def test_config_yaml_says_what_auto_resolved_to_and_loads_back(run):
    text = (Path(run.run_dir) / "config.yaml").read_text()
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert any("device cpu" in line and "precision fp32" in line and "1 CPU thread(s)" in line
               for line in header)
    assert load_config(Path(run.run_dir) / "config.yaml").threads == 1  # comments only


def test_step_folders_match_the_states_kept_and_hold_their_step(run):
    run_dir = Path(run.run_dir)
    states = sorted(int(p.name[6:14]) for p in list_states(run_dir))
    steps = sorted(int(p.name[5:]) for p in run_dir.glob("step-*"))
    assert states == [8, 10]  # the states of steps 8 and 10 (the end) are kept
    assert steps == [8]  # step-4 went with its state; the end's model is final/
    # step-8/ holds the weights of the state of step 8
    state = load_latest_state(run_dir)[0]
    assert state["counters"]["step"] == 10
    saved = torch.load(run_dir / "checkpoints" / "state-00000008.pt", weights_only=False)
    weights = load_file(str(run_dir / "step-8" / "model.safetensors"))
    module = saved["modules"][next(iter(saved["modules"]))]
    key = next(k for k in weights if k.endswith("word_embeddings.weight"))
    assert torch.equal(module[key], weights[key])


def test_the_tokenizer_is_stored_once_and_a_step_folder_still_loads(run):
    run_dir = Path(run.run_dir)
    step = run_dir / "step-8"
    assert not (step / "tokenizer.json").exists() and not (step / "tokenizer_config.json").exists()
    assert (run_dir / "tokenizer" / "tokenizer.json").is_file()
    assert shared_tokenizer_dir(step) == (run_dir / "tokenizer").absolute()
    mlm = mlmkit.load(step, device="cpu")
    assert len(mlm.fill(f"Return the {mlm.tokenizer.mask_token}.").masks[0].candidates) > 0
    assert (run_dir / "final" / "tokenizer.json").is_file()  # final/ stands alone


def test_a_step_folder_initialises_a_new_run(run, tmp_path, small_corpus):
    result = pretrain(PretrainConfig(init=str(Path(run.run_dir) / "step-8"),
                                     corpus=str(small_corpus), seq_len=32, batch_size=8,
                                     steps=1, eval_every=0, eval_blocks=2, pppl_sentences=0,
                                     save_every=0, run_dir=str(tmp_path / "more"),
                                     progress=False, fill_mask_examples=0, threads=1,
                                     precision="fp32"))
    assert result.final_dir is not None and (Path(result.final_dir) / "tokenizer.json").is_file()


def test_readme_says_what_each_file_is_and_how_to_resume_and_load(run):
    text = (Path(run.run_dir) / "README.md").read_text()
    for part in ("config.yaml", "tokenizer/", "metrics.jsonl", "summary.json",
                 "checkpoints/state-N.pt", "step-N/", "final/",
                 f"mlmkit pretrain --resume {run.run_dir}",
                 f'mlmkit.load("{run.run_dir}/final")', "AutoModelForMaskedLM.from_pretrained"):
        assert part in text, part


def test_closing_examples_come_from_the_runs_held_out_text(run, small_corpus):
    examples = run.summary["fill_mask_examples"]
    assert len(examples) == 3
    corpus = small_corpus.read_text()
    for example in examples:
        assert "{mask}" in example["template"]
        assert example["template"].replace("{mask}", example["answer"]) in corpus
    assert not any("Return a {mask} of the items" in e["template"] for e in examples)


def test_pick_examples_masks_one_whole_word_token(wordpiece_tokenizer):
    documents = ["The parser reads the file and returns a list of tokens. Short one.",
                 "Every module has a name and a docstring that explains it."]
    examples = pick_examples(documents, wordpiece_tokenizer, 2, seed=0)
    assert len(examples) == 2
    for example in examples:
        assert example.template.count("{mask}") == 1
        assert len(wordpiece_tokenizer.tokenize(example.answer)) == 1
    assert pick_examples(documents, wordpiece_tokenizer, 2, seed=0) == examples  # seeded
    assert pick_examples(documents, wordpiece_tokenizer, 0, seed=0) == []


def test_the_summary_of_a_stopped_run_shows_no_none(tmp_path, small_corpus):
    stopped = pretrain(PretrainConfig(model="tiny", corpus=str(small_corpus),
                                      validation_share=0.2, seq_len=32, batch_size=8, steps=6,
                                      halt_after=2, eval_every=0, eval_blocks=2,
                                      pppl_sentences=0, save_every=0,
                                      run_dir=str(tmp_path / "stopped"), progress=False,
                                      fill_mask_examples=0, threads=1, precision="fp32"))
    assert stopped.final_dir is None
    out = Console(file=io.StringIO(), width=120)
    out.print(_summary_table(stopped))
    shown = out.file.getvalue()
    assert "None" not in shown and "resume" in shown


def test_a_plain_progress_line_every_n_seconds_without_a_terminal(monkeypatch):
    from mlmkit.pretraining import progress

    lines = []
    monkeypatch.setattr(progress, "status", lines.append)
    monkeypatch.setattr(progress, "progress_wanted", lambda enabled: False)  # no terminal
    with progress.TrainProgress(True, every=1e-9) as bar:
        bar.update(0.1, 10, 7.5, 1200.0)
        bar.update(0.2, 20)
    assert len(lines) == 2 and "step 20" in lines[1] and "loss 7.500" in lines[1]
    assert "tokens/s" in lines[1] and "left" in lines[1]
    lines.clear()
    with progress.TrainProgress(True, every=3600.0) as bar:
        bar.update(0.5, 5, 1.0, 10.0)
    assert lines == []  # not yet due
    for enabled, every in ((False, 1e-9), (True, 0.0)):
        with progress.TrainProgress(enabled, every=every) as bar:
            bar.update(0.5, 5, 1.0, 10.0)
    assert lines == []  # --no-progress, or --progress-every 0: silent


def test_help_states_how_threads_are_chosen():
    result = CliRunner().invoke(app, ["pretrain", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "load average" in result.stdout


def test_a_run_model_folder_is_named_after_its_run(run, tmp_path):
    run_dir = Path(run.run_dir)
    assert model_name(run_dir / "final") == run_dir.name
    assert model_name(run_dir / "step-8") == f"{run_dir.name}-step-8"
    plain = tmp_path / "final"
    plain.mkdir()
    assert model_name(plain) == "final"  # not inside a run: the folder's own name
    assert model_name("bert-base-uncased") == "bert-base-uncased"


def test_summary_json_records_the_examples(run):
    summary = json.loads((Path(run.run_dir) / "summary.json").read_text())
    assert summary["fill_mask_examples"] == run.summary["fill_mask_examples"]
