"""The shared range checks (runtime/checks.py) answer any number with one short line:
a whole number past a double's range was an OverflowError (math.isfinite converts it),
and its repr filled the message (past 4,300 digits Python refuses to write it)."""

import pytest

from mlmkit.core import checks
from mlmkit.errors import InvalidArgument


@pytest.mark.parametrize("value", [10**400, -(10**5000), 2**70], ids=["1e400", "-1e5000", "2^70"])
def test_a_huge_whole_number_is_one_short_line(value):
    with pytest.raises(InvalidArgument) as info:
        checks.count("stride", value, 1, 100)
    message = str(info.value)
    assert message.startswith("stride=<") and "--stride" in message
    assert "digits>" in message and len(message) < 120 and "\n" not in message


def test_a_huge_whole_number_within_an_open_range_passes():
    assert checks.count("stride", 10**400, 1) == 10**400
    assert checks.positive("lr", 10**400) == 10**400


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_a_float_that_is_not_finite_is_still_refused(value):
    with pytest.raises(InvalidArgument, match="finite"):
        checks.finite("temperature", value)


def test_usual_values_are_shown_as_they_are():
    with pytest.raises(InvalidArgument, match=r"^top_k=0 \(--top-k\)"):
        checks.count("top_k", 0, 1)
