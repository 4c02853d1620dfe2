"""The hostile-client script (benchmarks/serve_hostile.py) against a real server on a thread:
/healthz answers within seconds throughout, every attack gets its 4xx, the flood no 5xx,
and the idle connections are closed (a short read deadline here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mlmkit.serve import ServeConfig, create_app
from mlmkit.serve.framing import json_errors_protocol
from tests.uvicorn_thread import uvicorn_in_thread

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "serve_hostile.py"


def test_the_server_holds_under_the_hostile_clients(tiny_mlm):
    spec = importlib.util.spec_from_file_location("serve_hostile", SCRIPT)
    hostile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hostile)
    app = create_app({"bert": tiny_mlm("bert")},
                     ServeConfig(threads=1, max_queued_tokens=2_000_000, timeout=20),
                     host="127.0.0.1")
    protocol = json_errors_protocol(read_timeout=2.0, max_connections=200)
    with uvicorn_in_thread(app, log_level="critical", lifespan="on", http=protocol,
                           limit_concurrency=200) as port:
        figures = hostile.attack(port, seconds=6, idle=60, flood_clients=4)
    print(figures)
    # The bounds are loose on purpose: the suite runs this beside other tests on 2 cores, and
    # what it guards against took tens of seconds (a blocked event loop, a queued fill).
    assert figures["healthz"]["max_s"] < 5.0, figures
    assert figures["template_amplification"]["statuses"] == {413: 3}, figures
    assert figures["template_amplification"]["slowest_s"] < 10, figures
    assert figures["long_verbalizer_word"]["statuses"] == {413: 1}, figures
    assert figures["forged_host"]["statuses"] == {421: 1}, figures
    assert figures["idle_connections"]["closed_by_server"] == figures["idle_connections"][
        "opened"] == 60, figures
    assert not any(status >= 500 or status == 0 for status in figures["flood"]), figures
    assert figures["flood"].get(200, 0) > 0 and figures["after"] == 200, figures
    assert figures["small_fill"]["max_s"] < 15, figures
