"""A stalled PostgreSQL (through a proxy that holds every byte): stored requests fail cleanly within the
database deadline — one terminal event, an OpenAI-style error — and work again once it answers."""

from __future__ import annotations

from urllib.parse import urlparse

import httpx

from responses_gateway.config import Settings
from tests.support import backends
from tests.support.fake_chat import text_stream
from tests.support.server import GatewayServer
from tests.support.stream_check import check_stream
from tests.support.tcp_proxy import PausableProxy

pg_database = backends.pg_database


def test_stalled_postgres_fails_requests_cleanly_and_recovers(pg_database, upstream):
    url = urlparse(pg_database)
    proxy = PausableProxy((url.hostname or "127.0.0.1", url.port or 5432))
    proxied = pg_database.replace(f"{url.hostname}:{url.port or 5432}", f"127.0.0.1:{proxy.port}", 1)
    settings = Settings(upstream_url=upstream.base_url, db=proxied, db_timeout=1.0)
    try:
        with GatewayServer(settings) as gw, httpx.Client(base_url=gw.url, timeout=30) as http:
            upstream.enqueue(text_stream(["stored"]))
            kept = http.post("/v1/responses", json={"model": "m", "input": "x"}).json()
            assert kept["status"] == "completed"

            proxy.pause()
            upstream.enqueue(text_stream(["lost"]))
            raw = http.post("/v1/responses", json={"model": "m", "input": "x", "stream": True}).content
            result = check_stream(raw)
            assert result.terminal["type"] == "response.failed" and result.text == "lost"
            assert result.events[-2]["code"] == "storage_error"
            got = http.get(f"/v1/responses/{kept['id']}")
            assert got.status_code == 503 and got.json()["error"]["code"] == "store_unavailable"

            proxy.resume()
            for _ in range(3):  # the pool replaces the connections the stall broke
                if http.get(f"/v1/responses/{kept['id']}").status_code == 200:
                    break
            assert http.get(f"/v1/responses/{kept['id']}").json()["id"] == kept["id"]
    finally:
        proxy.close()
