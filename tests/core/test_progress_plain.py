"""Without a terminal, long work prints a plain progress line now and then (a log shows that
it moves), never a bar; MLMKIT_PROGRESS=0 and an explicit progress=False silence it."""

from __future__ import annotations

import pytest

from mlmkit.core import progress


@pytest.fixture
def clock(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: now[0])
    return now


def test_a_plain_line_every_interval_without_a_terminal(clock, monkeypatch, capsys):
    monkeypatch.setenv("MLMKIT_PROGRESS_EVERY", "30")
    monkeypatch.delenv("MLMKIT_PROGRESS", raising=False)
    with progress.Progress("fine-tuning sst2", 100, "steps") as bar:
        clock[0] += 10
        bar.advance(10)  # 10 s: too soon
        clock[0] += 20
        bar.advance(20)  # 30 s: a line
        clock[0] += 5
        bar.advance(5)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["fine-tuning sst2: 30/100 steps (1.0 steps/s, about 1m 10s left)"]


@pytest.mark.parametrize("setting", [{"MLMKIT_PROGRESS": "0"}, {"MLMKIT_PROGRESS_EVERY": "0"},
                                     {"enabled": False}])
def test_the_plain_lines_can_be_silenced(setting, clock, monkeypatch, capsys):
    for name, value in setting.items():
        if name.startswith("MLMKIT"):
            monkeypatch.setenv(name, value)
    with progress.Progress("scoring", 10, "texts", enabled=setting.get("enabled")) as bar:
        clock[0] += 60
        bar.advance(5)
    assert capsys.readouterr().err == ""


def test_durations_read_as_people_write_them():
    assert progress._duration(12.4) == "12s"
    assert progress._duration(185) == "3m 05s"
    assert progress._duration(3720) == "1h 02m"
