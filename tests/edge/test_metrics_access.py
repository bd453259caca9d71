"""Who may read /metrics (issue 34, item 13; scrape.py): open without API keys, off the public port with them
unless --metrics-key is given (then only that bearer), and on a listener of its own with --metrics-port."""

from __future__ import annotations

import httpx

from responses_gateway.config import Settings
from responses_gateway.scrape import authorized, public_access
from tests.support.backends import GatewayProcess, free_port
from tests.support.server import GatewayServer


def test_without_api_keys_metrics_are_open(upstream):
    with GatewayServer(Settings(upstream_url=upstream.base_url, db="none")) as gw:
        answer = httpx.get(f"{gw.url}/metrics", timeout=10)
        assert answer.status_code == 200 and "responses_gateway_responses_in_flight" in answer.text


def test_with_api_keys_metrics_are_off_the_public_port(upstream):
    with GatewayServer(Settings(upstream_url=upstream.base_url, db="none", api_keys="key-a")) as gw:
        for headers in ({}, {"authorization": "Bearer key-a"}):  # an API key is not a metrics key
            answer = httpx.get(f"{gw.url}/metrics", headers=headers, timeout=10)
            assert answer.status_code == 404
            assert answer.json()["error"]["message"] == "Invalid URL (GET /metrics)"


def test_a_metrics_key_is_asked_for(upstream):
    settings = Settings(upstream_url=upstream.base_url, db="none", api_keys="key-a", metrics_key="scrape-me")
    with GatewayServer(settings) as gw:
        for headers in ({}, {"authorization": "Bearer key-a"}, {"authorization": "Bearer scrape-m"}):
            answer = httpx.get(f"{gw.url}/metrics", headers=headers, timeout=10)
            assert answer.status_code == 401
            assert answer.json()["error"]["code"] == "invalid_api_key"
        answer = httpx.get(f"{gw.url}/metrics", headers={"authorization": "Bearer scrape-me"}, timeout=10)
        assert answer.status_code == 200 and "responses_gateway_responses_in_flight" in answer.text


def test_a_metrics_port_of_its_own(upstream, tmp_path):
    """`serve --metrics-port`: the public port answers /metrics 404; the metrics port serves it (with the key
    when one is set), summing the workers' counters when there are several."""
    port = free_port()
    gw = GatewayProcess(upstream.base_url, "none", "--metrics-port", str(port), "--metrics-key", "scrape-me",
                        "--workers", "2", log_path=tmp_path / "gw.log")
    try:
        gw.wait_ready()
        for _ in range(4):
            httpx.post(f"{gw.url}/v1/responses", json={"model": "m", "input": 5}, timeout=10)  # 400s, counted
        assert httpx.get(f"{gw.url}/metrics", timeout=10).status_code == 404
        own = f"http://127.0.0.1:{port}/metrics"
        assert httpx.get(own, timeout=10).status_code == 401
        answer = httpx.get(own, headers={"authorization": "Bearer scrape-me"}, timeout=10)
        assert answer.status_code == 200 and "responses_gateway_responses_in_flight" in answer.text
        assert httpx.get(f"http://127.0.0.1:{port}/other", timeout=10).status_code == 404
    finally:
        gw.kill()


def test_public_access_in_order():
    assert public_access(None, 0, api_keys=False) == "open"
    assert public_access(None, 0, api_keys=True) == "off"
    assert public_access("k", 0, api_keys=True) == "key"
    assert public_access("k", 0, api_keys=False) == "key"
    assert public_access("k", 9100, api_keys=False) == "off"
    assert authorized("Bearer k", "k") and not authorized("Bearer k2", "k") and not authorized(None, "k")
    assert not authorized("k", "k")
