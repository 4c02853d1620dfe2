"""YAML inputs of pretraining (acceptance check H1): `lr: 5e-4` is a number, a key twice is
refused (PyYAML's YAML 1.1 read `5e-4` as a string and kept a repeated key's last value)."""

from __future__ import annotations

import pytest

from mlmkit.core.yaml_values import DuplicateKey, load_yaml
from mlmkit.errors import MlmkitError


def test_exponent_floats_are_numbers_and_other_scalars_unchanged():
    values = load_yaml("lr: 5e-4\nmin: 1E-5\nbig: 1e5\nneg: -2.5e+3\nplain: 1.0e-5\n"
                       "n: 12\nword: e5\nunder: 1_000\nflag: true\n")
    assert values == {"lr": 5e-4, "min": 1e-5, "big": 1e5, "neg": -2500.0, "plain": 1e-5,
                      "n": 12, "word": "e5", "under": 1000, "flag": True}


def test_a_key_given_twice_is_refused_naming_it_and_its_lines():
    with pytest.raises(DuplicateKey, match=r"the key 'lr' is given twice \(lines 1 and 3\)"):
        load_yaml("lr: 1.0e-3\nsteps: 2\nlr: 5.0e-4\n")
    with pytest.raises(DuplicateKey, match="'steps' is given twice"):
        load_yaml("phases: [{steps: 1, steps: 2}]")


def test_config_file_override_and_phases_read_exponents_and_refuse_duplicates(tmp_path):
    from mlmkit.pretraining.config import load_config
    from mlmkit.pretraining.recipes import recipe_from_flags
    from mlmkit.pretraining.run_state import parse_overrides

    path = tmp_path / "run.yaml"
    path.write_text("model: tiny\nsteps: 2\nlr: 5e-4\nweight_decay: 1e-2\n")
    config = load_config(path)
    assert config.lr == 5e-4 and config.weight_decay == 0.01
    path.write_text("model: tiny\nsteps: 2\nsteps: 3\n")
    with pytest.raises(MlmkitError, match=r"not valid YAML: the key 'steps' is given twice"):
        load_config(path)
    assert parse_overrides(["min_lr=1e-2"]) == {"min_lr": 0.01}
    overrides = {"phases": "[{steps: 2, lr: {start: 1, end: 1e-2}}]"}
    recipe_from_flags(overrides, False, None, None)
    assert overrides["phases"] == [{"steps": 2, "lr": {"start": 1, "end": 0.01}}]


def test_masking_mapping_reads_exponents_and_refuses_duplicates():
    from mlmkit.masking.config import parse_masking_option

    assert parse_masking_option("{units: tokens, rate: 15e-2}")["rate"] == 0.15
    with pytest.raises(MlmkitError, match="'rate' is given twice"):
        parse_masking_option("{rate: 0.15, rate: 0.3}")


def test_merge_keys_work_and_may_be_overridden_and_strings_round_trip():
    """`<<: *base` is standard YAML (it failed: the duplicate scan built the merge key);
    a string that looks like an exponent float is written quoted, so a config read back
    keeps it a string."""
    from mlmkit.core.yaml_values import dump_yaml

    text = "base: &b\n  lr: 1.0e-3\n  steps: 5\nrun:\n  <<: *b\n  lr: 2e-3\n"
    assert load_yaml(text)["run"] == {"lr": 0.002, "steps": 5}
    assert load_yaml("a: &a {x: 1}\nb: &b {y: 2}\nc:\n  <<: [*a, *b]\n  z: 3\n")["c"] == \
        {"x": 1, "y": 2, "z": 3}
    values = {"tokenizer": "1e5", "lr": 5e-4, "min_lr": 1e-05, "run_dir": "runs/x"}
    assert load_yaml(dump_yaml(values)) == values
