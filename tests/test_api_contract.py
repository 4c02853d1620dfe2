"""The Python API contract of docs/API.md, held by walking the public API.

- `import mlmkit` imports no torch and exposes every public function and subpackage lazily;
- every model-taking entry point takes `model` first, the inputs second, and spells the
  common keywords the contract's way (`batch_tokens`, `precision`, `device`, `threads`,
  `seed` where randomness exists, `progress`), with the contract's defaults;
- results are dataclasses with `to_dict()` whose output `json.dumps` accepts (no NaN);
- a script-like test calls every entry point on a tiny model with the contract's keywords.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys

import pytest

import mlmkit

# The entry points that run a model, by their name in mlmkit.__all__.
MODEL_ENTRY_POINTS = ["score", "rescore", "evaluate_pairs", "fill_mask", "generate", "infill",
                      "elbo", "cloze_classify", "rank_statements", "knowledge_probe", "audit",
                      "finetune", "train_embeddings", "evaluate_suite"]
# Those whose result depends on random draws take `seed` too.
RANDOM_ENTRY_POINTS = {"generate", "infill", "elbo", "audit", "finetune", "train_embeddings",
                       "evaluate_suite"}
# The runtime keywords of every model-taking entry point and their contract defaults
# (device: None or "auto"; the others exactly these).
RUNTIME_DEFAULTS = {"batch_tokens": None, "precision": "auto", "threads": None,
                    "progress": None}
# Names the contract replaced: a token budget is `batch_tokens`, the model is `model`.
FORBIDDEN = {"batch_rows", "mlm", "model_or_name", "name_or_path"}
SUBPACKAGES = ["bias", "core", "corpus", "engine", "errors", "generation", "masking", "models",
               "probe", "scoring", "training", "pretraining", "finetuning", "evaluation"]
PUBLIC_FUNCTIONS = ["score", "fill", "fill_mask", "generate", "infill", "elbo", "rescore",
                    "load_mlm", "build_mlm", "as_mlm", "pretrain", "cloze_classify",
                    "rank_statements", "knowledge_probe", "audit", "train_tokenizer",
                    "model_info", "finetune", "train_embeddings", "evaluate_suite", "compare_suites", "predict",
                    "evaluate_classifier", "load_classifier"]
# Entry points that take a fine-tuned classifier (not a masked LM) first.
CLASSIFIER_ENTRY_POINTS = ["predict", "evaluate_classifier"]


def entry_point(name: str):
    """The function behind `mlmkit.<name>`."""
    obj = getattr(mlmkit, name)
    assert inspect.isfunction(obj), f"mlmkit.{name} is {obj!r}, not a function"
    return obj


# --- import mlmkit --------------------------------------------------------------------------

def test_import_mlmkit_does_not_import_torch():
    code = ("import sys, mlmkit; dir(mlmkit); mlmkit.__version__; mlmkit.__all__; "
            "heavy = [m for m in ('torch', 'transformers', 'numpy') if m in sys.modules]; "
            "print(heavy)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"import mlmkit imported {done.stdout.strip()}"


def test_errors_module_is_light():
    code = "import sys, mlmkit; mlmkit.errors.MlmkitError; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_subpackages_are_attributes_without_importing_them_by_name():
    # One fresh interpreter; before each access the attribute that an earlier import may
    # have bound on the package is removed, so every access takes the lazy path.
    code = ("import mlmkit, types\n"
            f"for name in {SUBPACKAGES!r}:\n"
            "    mlmkit.__dict__.pop(name, None)\n"
            "    m = getattr(mlmkit, name)\n"
            "    assert isinstance(m, types.ModuleType) and m.__name__ == 'mlmkit.' + name, m\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_public_functions_are_attributes(name):
    assert name in mlmkit.__all__
    assert callable(getattr(mlmkit, name))


def test_every_name_in_all_resolves():
    for name in mlmkit.__all__:
        assert getattr(mlmkit, name) is not None, name
    assert set(mlmkit.__all__) <= set(dir(mlmkit))


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        mlmkit.nonexistent  # noqa: B018


def test_verbs_are_functions_and_their_packages_nouns_whatever_the_import_order():
    import mlmkit.finetuning as finetuning
    import mlmkit.generation as generation
    import mlmkit.pretraining as pretraining

    assert mlmkit.generation is generation and inspect.ismodule(generation)
    assert mlmkit.generate is mlmkit.mlm.generate and inspect.isfunction(mlmkit.generate)
    assert mlmkit.finetune is finetuning.finetune and inspect.isfunction(mlmkit.finetune)
    assert mlmkit.pretraining is pretraining and inspect.isfunction(mlmkit.pretrain)
    assert mlmkit.fill is mlmkit.fill_mask
    # the free functions are the bound model's shims, documented as the task functions
    assert mlmkit.score is mlmkit.mlm.score and mlmkit.score.__doc__ == mlmkit.scoring.score.__doc__
    assert mlmkit.fill_mask.__doc__ == generation.fill_mask.__doc__


# --- signatures -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", MODEL_ENTRY_POINTS)
def test_model_first_then_inputs(name):
    parameters = list(inspect.signature(entry_point(name)).parameters.values())
    assert parameters[0].name == "model", f"mlmkit.{name}: first parameter {parameters[0].name}"
    assert parameters[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert len(parameters) > 1 and parameters[1].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


@pytest.mark.parametrize("name", MODEL_ENTRY_POINTS)
def test_runtime_keywords_are_spelled_the_contract_way(name):
    signature = inspect.signature(entry_point(name))
    parameters = signature.parameters
    missing = [k for k in [*RUNTIME_DEFAULTS, "device"] if k not in parameters]
    if name in RANDOM_ENTRY_POINTS and "seed" not in parameters:
        missing.append("seed")
    assert not missing, f"mlmkit.{name} lacks {missing}"
    wrong = {k: parameters[k].default for k, v in RUNTIME_DEFAULTS.items()
             if parameters[k].default != v}
    assert not wrong, f"mlmkit.{name}: defaults {wrong}, the contract's are {RUNTIME_DEFAULTS}"
    assert parameters["device"].default in (None, "auto")
    for keyword in [*RUNTIME_DEFAULTS, "device", "seed"]:
        if keyword in parameters:
            assert parameters[keyword].kind is inspect.Parameter.KEYWORD_ONLY, \
                f"mlmkit.{name}: {keyword} should be keyword-only"
    forbidden = FORBIDDEN & set(parameters)
    assert not forbidden, f"mlmkit.{name} has {sorted(forbidden)}"
    if "batch_size" in parameters:  # only as a deprecated alias of batch_tokens
        assert parameters["batch_size"].default is None, \
            f"mlmkit.{name}: batch_size={parameters['batch_size'].default} is a batch " \
            "size beside the token budget: use batch_tokens"
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()), \
        f"mlmkit.{name} takes **kwargs: name every option, so none is silently ignored"


@pytest.mark.parametrize("package", ["scoring", "generation", "probe", "bias", "models"])
def test_no_public_function_takes_mlm_first(package):
    module = getattr(mlmkit, package)
    offenders = []
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isfunction(obj):
            parameters = list(inspect.signature(obj).parameters)
            if parameters and parameters[0] in FORBIDDEN:
                offenders.append(f"mlmkit.{package}.{name}({parameters[0]}, ...)")
    assert not offenders, offenders


def test_pretrain_config_spells_the_runtime_fields_the_contract_way():
    fields = {f.name: f.default for f in dataclasses.fields(mlmkit.PretrainConfig)}
    for name in ("device", "precision", "threads", "seed", "progress"):
        assert name in fields, f"PretrainConfig has no {name}"
    assert fields["precision"] == "auto"
    assert fields["device"] in (None, "auto")
    assert fields["threads"] is None


# --- calling every entry point ----------------------------------------------------------------

RUNTIME = dict(batch_tokens=512, precision="fp32", device="cpu", threads=1, progress=False)


def _results(value):
    return value if isinstance(value, list) else [value]


def _check_result(value):
    for result in _results(value):
        assert dataclasses.is_dataclass(result) and not isinstance(result, type), \
            f"{type(result).__name__} is not a dataclass"
        assert hasattr(result, "to_dict"), f"{type(result).__name__} has no to_dict()"
        data = result.to_dict()
        assert isinstance(data, dict) and data
        json.dumps(data, allow_nan=False)


@pytest.fixture(scope="module")
def data_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("api-contract")
    nbest = folder / "nbest.json"
    nbest.write_text(json.dumps({"u1": {
        "hyp_1": {"score": -4.1, "text": "return the number of items"},
        "hyp_2": {"score": -4.0, "text": "return the numb err of items"},
        "ref": "return the number of items"}}))
    pairs = folder / "pairs.jsonl"
    pairs.write_text(json.dumps({"sentence_good": "The list is sorted.",
                                 "sentence_bad": "The list are sorted.", "UID": "agreement",
                                 "field": "syntax"}) + "\n")
    table = folder / "table.jsonl"
    table.write_text("".join(json.dumps({"text": f"Return item {i}.", "label": "ab"[i % 2]})
                             + "\n" for i in range(12)))
    return {"nbest": nbest, "pairs": pairs, "table": table}


def _call(name, mlm, files, shared_data):
    texts = ["Return the number of items in a container.", "Open the file for reading."]
    if name == "score":
        return mlmkit.score(mlm, texts, **RUNTIME)
    if name == "rescore":
        return mlmkit.rescore(mlm, mlmkit.scoring.read_nbest(files["nbest"]), weight=0.3,
                              **RUNTIME)
    if name == "evaluate_pairs":
        return mlmkit.evaluate_pairs(mlm, mlmkit.scoring.read_pairs(files["pairs"]), **RUNTIME)
    if name == "fill_mask":
        return mlmkit.fill_mask(mlm, ["Return a [MASK] of the values."], top_k=3, **RUNTIME)
    if name == "generate":
        return mlmkit.generate(mlm, "Return the", length=4, steps=2, seed=0, **RUNTIME)
    if name == "infill":
        return mlmkit.infill(mlm, "Return the [MASK] of the list.", seed=0, **RUNTIME)
    if name == "elbo":
        return mlmkit.elbo(mlm, "Return the value.", samples=4, seed=0, **RUNTIME)
    if name == "cloze_classify":
        return mlmkit.cloze_classify(mlm, texts, "{text} It was [MASK].",
                                     {"yes": ["good"], "no": ["bad"]}, **RUNTIME)
    if name == "rank_statements":
        return mlmkit.rank_statements(mlm, [texts], **RUNTIME)
    if name == "knowledge_probe":
        return mlmkit.knowledge_probe(
            mlm, [{"masked_sentence": "Open the [MASK] for reading.", "obj_label": "file"}],
            **RUNTIME)
    if name == "audit":
        data = shared_data / "crows_pairs" / "crows_pairs_anonymized.csv"
        return mlmkit.audit(mlm, "crows", data, limit=4, n_boot=10, seed=0, **RUNTIME)
    if name == "finetune":
        return mlmkit.finetune(mlm, "mine", train=files["table"], text_field="text", epochs=1,
                               seed=0, **RUNTIME)
    if name == "train_embeddings":
        return mlmkit.train_embeddings(mlm, files["table"], loss="simcse", text_field="text",
                                       dropout=0.1, batch_size=4, seed=0, **RUNTIME)
    if name == "evaluate_suite":
        return mlmkit.evaluate_suite(mlm, None, parts="pppl", texts=files["table"], seed=0,
                                     **RUNTIME)
    raise AssertionError(name)


@pytest.mark.parametrize("name", MODEL_ENTRY_POINTS)
def test_each_entry_point_runs_with_the_contract_keywords(name, tiny_mlm, data_files,
                                                          request):
    shared_data = request.getfixturevalue("shared_data") if name == "audit" else None
    result = _call(name, tiny_mlm("bert"), data_files, shared_data)
    _check_result(result)


@pytest.mark.parametrize("name", ["score", "fill_mask", "generate"])
def test_entry_points_accept_a_path_and_a_model_tokenizer_pair(name, tiny_mlm,
                                                               saved_tiny_mlm, data_files):
    mlm = tiny_mlm("bert")
    for model in (str(saved_tiny_mlm("bert")), (mlm.model, mlm.tokenizer)):
        _check_result(_call(name, model, data_files, None))


@pytest.mark.parametrize("keyword,value,flag", [("batch_tokens", 0, "batch_tokens"),
                                                ("precision", "fp16", "precision"),
                                                ("threads", 0, "threads")])
def test_bad_runtime_keywords_are_mlmkit_errors_naming_the_keyword(keyword, value, flag,
                                                                    tiny_mlm):
    from mlmkit.errors import MlmkitError

    with pytest.raises(MlmkitError, match=flag) as raised:
        mlmkit.score(tiny_mlm("bert"), ["Return the value."], **{**RUNTIME, keyword: value})
    assert "\n" not in str(raised.value)


def test_pretrain_runs_with_the_contract_fields_and_returns_a_result(wordpiece_tokenizer,
                                                                     corpus_sample, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(corpus_sample[:300]) + "\n")
    config = mlmkit.PretrainConfig(
        model="tiny", tokenizer=wordpiece_tokenizer.name_or_path, corpus=str(corpus),
        seq_len=32, batch_size=4, steps=2, eval_every=0, eval_blocks=2, pppl_sentences=2,
        save_every=0, fill_mask_examples=0, run_dir=str(tmp_path / "run"),
        device="cpu", precision="fp32", threads=1, seed=0, progress=False)
    _check_result(mlmkit.pretrain(config))


def test_a_training_runs_thread_count_ends_with_the_run(wordpiece_tokenizer, corpus_sample,
                                                        tmp_path, monkeypatch):
    """pretrain sets its own thread count (asked, or chosen from the load) for its steps and
    its evaluations; after it returns, later library calls get the count from before."""
    import torch

    import mlmkit.core.devices as devices
    import mlmkit.pretraining.loop as loop

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(corpus_sample[:300]) + "\n")
    at_the_end = []

    def finish(run, stop_reason, _finish=loop.finish):
        result = _finish(run, stop_reason)  # evaluates: PPPL scoring with threads=None
        at_the_end.append(torch.get_num_threads())
        return result

    monkeypatch.setattr(loop, "finish", finish)
    config = mlmkit.PretrainConfig(
        model="tiny", tokenizer=wordpiece_tokenizer.name_or_path, corpus=str(corpus),
        seq_len=32, batch_size=4, steps=2, eval_every=0, eval_blocks=2, pppl_sentences=2,
        save_every=0, fill_mask_examples=0, run_dir=str(tmp_path / "run"),
        device="cpu", precision="fp32", threads=2, seed=0, progress=False)
    torch.set_num_threads(1)
    mlmkit.pretrain(config)
    assert at_the_end == [2]
    assert torch.get_num_threads() == 1 and devices._asked_threads is None


@pytest.mark.parametrize("name", CLASSIFIER_ENTRY_POINTS)
def test_classifier_entry_points_follow_the_contract(name):
    parameters = inspect.signature(entry_point(name)).parameters
    assert list(parameters)[0] == "model"
    for keyword, default in RUNTIME_DEFAULTS.items():
        assert parameters[keyword].default == default, (name, keyword)
        assert parameters[keyword].kind is inspect.Parameter.KEYWORD_ONLY
    assert parameters["device"].default in (None, "auto")


def test_classifier_entry_points_run_and_return_results(tiny_mlm, data_files, tmp_path):
    run = mlmkit.finetune(tiny_mlm("bert"), "mine", train=data_files["table"], text_field="text",
                          epochs=1, seed=0, run_dir=tmp_path / "run", **RUNTIME)
    best = run.runs[0].best_dir
    _check_result(mlmkit.predict(best, ["Return item 1."], **RUNTIME))
    _check_result(mlmkit.evaluate_classifier(best, data_files["table"], text_field="text",
                                             **RUNTIME))
