"""GET /metrics (Prometheus text, read back with prometheus_client's parser) and /readyz."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from mlmkit.serve import ServeConfig, create_app


def samples(client) -> dict:
    response = client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith(
        "text/plain")
    out = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_count_requests_latencies_batches_and_rejections(tiny_mlm):
    app = create_app({"bert": tiny_mlm("bert")}, ServeConfig(threads=1, max_queued_tokens=10))
    with TestClient(app) as c:
        assert c.post("/v1/fill", json={"texts": "A [MASK]."}).status_code == 200
        assert c.post("/v1/fill", json={"texts": ["A [MASK]."] * 2}).status_code == 200
        assert c.post("/v1/score", json={"texts": "Open the file for reading."}
                      ).status_code == 413
        assert c.get("/no/such/path").status_code == 404
        got = samples(c)
    assert got[("mlmkit_requests_total", (("route", "/v1/fill"), ("status", "200")))] == 2
    assert got[("mlmkit_requests_total", (("route", "/v1/score"), ("status", "413")))] == 1
    assert got[("mlmkit_requests_total", (("route", "other"), ("status", "404")))] == 1
    assert got[("mlmkit_request_seconds_count", (("route", "/v1/fill"),))] == 2
    assert got[("mlmkit_model_calls_total", (("model", "bert"),))] == 2
    assert got[("mlmkit_batch_inputs_sum", (("model", "bert"),))] == 3
    assert got[("mlmkit_model_tokens_total", (("model", "bert"),))] > 0
    assert got[("mlmkit_batch_tokens_count", (("model", "bert"),))] == 2
    assert got[("mlmkit_queue_tokens", (("model", "bert"),))] == 0
    assert got[("mlmkit_admitted_requests", ())] == 0
    assert ("mlmkit_rejected_total", ()) in got


def test_rejections_are_counted(tiny_mlm):
    app = create_app({"bert": tiny_mlm("bert")}, ServeConfig(threads=1,
                                                              max_concurrent_requests=1))
    server = app.state.server
    with TestClient(app) as c:
        server.admitted = 1  # as if one request were running
        response = c.post("/v1/fill", json={"texts": "A [MASK]."})
        assert response.status_code == 429 and response.headers["retry-after"]
        ready = c.get("/readyz")
        assert ready.status_code == 503 and ready.json()["status"] == "saturated"
        assert int(ready.headers["retry-after"]) >= 1
        server.admitted = 0
        assert c.get("/readyz").status_code == 200
        got = samples(c)
    assert got[("mlmkit_rejected_total", ())] == 1
    assert got[("mlmkit_requests_total", (("route", "/v1/fill"), ("status", "429")))] == 1


@pytest.mark.parametrize("path", ["/readyz", "/healthz"])
def test_probes_need_no_key(tiny_mlm, path):
    app = create_app({"bert": tiny_mlm("bert")}, ServeConfig(threads=1, api_key="k" * 16))
    with TestClient(app) as c:
        assert c.get(path).status_code == 200
        assert c.get("/metrics").status_code == 401
        assert c.get("/metrics", headers={"X-API-Key": "k" * 16}).status_code == 200


def test_the_access_log_is_one_json_line_per_request(tiny_mlm, caplog):
    import json
    import logging

    app = create_app({"bert": tiny_mlm("bert")}, ServeConfig(threads=1, access_log=True))
    with caplog.at_level(logging.INFO, logger="mlmkit.serve.access"), TestClient(app) as c:
        c.get("/healthz")
        c.post("/v1/fill", json={"texts": "A [MASK]."})
    lines = [json.loads(r.getMessage()) for r in caplog.records
             if r.name == "mlmkit.serve.access"]
    assert [(x["method"], x["path"], x["status"]) for x in lines] == [
        ("GET", "/healthz", 200), ("POST", "/v1/fill", 200)]
    assert all(x["seconds"] >= 0 for x in lines)


def test_tls_needs_both_files():
    from mlmkit.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="--ssl-keyfile"):
        ServeConfig(ssl_certfile="cert.pem")
