"""Run state: metrics rows keyed by step, signals (first: stop after the step; second: quit
at once)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from mlmkit.train.metrics_log import MetricsLog, unique_by_step


def _rows(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_metrics_rows_are_keyed_by_step_and_split(tmp_path):
    log = MetricsLog(tmp_path, tensorboard=False)
    log.log({"step": 2, "split": "train", "loss": 3.0})
    log.log({"step": 2, "split": "eval", "loss": 2.9})
    log.log({"step": 2, "split": "eval", "loss": 2.8})  # evaluated again after a resume
    log.log({"step": 4, "split": "train", "loss": 2.5})
    log.close()
    rows = _rows(tmp_path)
    assert [(r["step"], r["split"]) for r in rows] == [(2, "train"), (2, "eval"), (4, "train")]
    assert rows[1]["loss"] == 2.8 and log.history == rows
    # a resumed log starts from the saved history, duplicates dropped
    history = rows + [{"step": 4, "split": "train", "loss": 2.4}]
    again = MetricsLog(tmp_path, history, resume_step=4, tensorboard=False)
    again.log({"step": 4, "split": "eval", "loss": 2.0})
    again.close()
    assert [(r["step"], r["split"], r["loss"]) for r in _rows(tmp_path)] == [
        (2, "train", 3.0), (2, "eval", 2.8), (4, "train", 2.4), (4, "eval", 2.0)]


def test_unique_by_step_keeps_order_and_the_last_record():
    records = [{"step": 1, "split": "eval", "v": 1}, {"step": 1, "split": "eval", "v": 2},
               {"step": 0, "v": 0}]
    assert unique_by_step(records) == [{"step": 1, "split": "eval", "v": 2}, {"step": 0, "v": 0}]


SLOW_LOOP = """
import sys, time
from mlmkit.train.signals import StopOnSignal
with StopOnSignal() as stop:
    print("ready", flush=True)
    for step in range(1000):
        time.sleep(0.05)  # a training step
        if stop.requested:
            print(f"stopped {stop.requested} after step {step}", flush=True)
            time.sleep(float(sys.argv[1]))  # the save
            print("saved", flush=True)
            break
"""


def _start(save_seconds: float):
    process = subprocess.Popen([sys.executable, "-c", SLOW_LOOP, str(save_seconds)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    return process


def test_first_signal_stops_after_the_step():
    for sig in (signal.SIGTERM, signal.SIGINT):
        process = _start(0.1)
        process.send_signal(sig)
        out, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert f"stopped {sig.name}" in out and "saved" in out
        assert "saving after this step" in err and "Traceback" not in err


def test_second_signal_quits_at_once():
    for sig in (signal.SIGTERM, signal.SIGINT):
        process = _start(60)  # a save that would take a minute
        process.send_signal(sig)
        assert process.stdout.readline().startswith("stopped")
        started = time.monotonic()
        process.send_signal(sig)
        out, _ = process.communicate(timeout=30)
        assert time.monotonic() - started < 10
        assert process.returncode == -sig  # ended by the signal's default action
        assert "saved" not in out
