"""YAML as mlmkit reads configs, --override values, --phases and --masking mappings.

`yaml.safe_load` (YAML 1.1) has two traps for a training config: `lr: 5e-4` is the string
'5e-4' (1.1 floats need a dot: `5.0e-4`), so a number the user wrote was refused as "not a
number"; and a key given twice keeps its last value silently (`lr: 1e-3` ... `lr: 5e-4`).
`load_yaml` reads `1e-3`, `5E-4`, `1e5` as floats (as YAML 1.2 and JSON do) and refuses a
duplicate key with a `yaml.YAMLError` naming the key and its line, which the callers'
"is not valid YAML" messages already carry.

It also refuses a NaN or an infinity anywhere in the document (`.nan`, `.inf`): no option
of mlmkit means one, and a NaN slips through every range check written as `x <= 0` (a
Beta rate's `a: .nan` made the masking sampler loop forever). Every nested number is then
finite before any field's own range check runs, as a flag's value is.
"""

from __future__ import annotations

import math
import re

import yaml


class DuplicateKey(yaml.YAMLError):
    """A mapping gives a key twice (YAML keeps the last value silently)."""


class NotFinite(yaml.YAMLError):
    """A number in the document is a NaN or an infinity."""


class _Loader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *base`: merged keys may be overridden, as YAML means
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: SafeLoader's own error follows
                    break
                if first is not None:
                    lines = sorted({first.line + 1, key_node.start_mark.line + 1})
                    raise DuplicateKey(f"the key {key!r} is given twice (line"
                                       f"{'s' if len(lines) > 1 else ''} "
                                       f"{' and '.join(map(str, lines))}): keep one")
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


class _Dumper(yaml.SafeDumper):
    pass


_EXPONENT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
for _kind in (_Loader, _Dumper):  # the dumper then quotes a string such as '1e5'
    _kind.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT, list("-+0123456789"))


def dump_yaml(values) -> str:
    """`yaml.safe_dump(values, sort_keys=False)` that `load_yaml` reads back as it was (a
    string that looks like an exponent float is quoted)."""
    return yaml.dump(values, Dumper=_Dumper, sort_keys=False)


def _check_finite(value, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise NotFinite(f"{where or 'the value'} is {value!r}: give a finite number")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_finite(item, f"{where}[{index}]")


def load_yaml(text: str):
    """`yaml.safe_load(text)`, with exponent floats and duplicate keys refused, and every
    number finite (a `NotFinite` names the key path, e.g. `rate.a`)."""
    values = yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)
    _check_finite(values, "")
    return values
