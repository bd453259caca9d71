"""/health reports the database: a trivial query within --health-db-timeout, else 503 saying what is down."""

from urllib.parse import urlsplit

import httpx

from responses_gateway.config import Settings
from tests.support.backends import pg_database  # noqa: F401 (fixture)
from tests.support.server import GatewayServer
from tests.support.tcp_proxy import PausableProxy


def test_health_is_503_while_postgresql_is_stalled(pg_database):  # noqa: F811
    url = urlsplit(pg_database)
    proxy = PausableProxy((url.hostname, url.port or 5432))
    try:
        proxied = pg_database.replace(url.netloc, f"{url.username}@127.0.0.1:{proxy.port}")
        with GatewayServer(Settings(db=proxied, health_db_timeout=0.5)) as gw, \
                httpx.Client(base_url=gw.url, timeout=30) as c:
            assert c.get("/health").status_code == 200
            proxy.pause()
            resp = c.get("/health")
            assert resp.status_code == 503
            assert resp.json() == {"status": "unavailable",
                                   "database": "the database did not answer within 0.5s"}
            proxy.resume()
            assert c.get("/health").status_code == 200
    finally:
        proxy.close()
