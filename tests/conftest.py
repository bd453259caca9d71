"""Fixtures of the end-to-end suite: a fake upstream and the real gateway on loopback.

The heavy imports (the openai SDK, the servers) happen inside the fixtures, so tests that use none of
them — the unit layer in tests/unit — start fast.
"""

import pytest


def pytest_configure(config):
    from tests.support import e2e_setup  # light: no server or SDK imports

    e2e_setup.pytest_config = config  # the end-to-end setup prints its installs past output capture


@pytest.fixture(scope="session")
def _upstream_server():
    from tests.support.fake_chat import FakeChatUpstream

    with FakeChatUpstream() as up:
        yield up


@pytest.fixture
def upstream(_upstream_server):
    """The fake Chat Completions server, emptied for each test."""
    _upstream_server.reset()
    _upstream_server.default = None
    yield _upstream_server
    _upstream_server.reset()


@pytest.fixture(scope="session")
def gateway(_upstream_server, tmp_path_factory):
    """The real gateway on loopback, in front of the fake upstream, storing in a fresh SQLite file."""
    from responses_gateway.config import Settings
    from tests.support.server import GatewayServer

    db = tmp_path_factory.mktemp("store") / "responses.db"
    with GatewayServer(Settings(upstream_url=_upstream_server.base_url, db=str(db))) as server:
        yield server


@pytest.fixture
def http(gateway):
    import httpx

    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        yield client


@pytest.fixture
def client(gateway):
    import openai

    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="test-key", max_retries=0)


@pytest.fixture(scope="session")
def _fake_web():
    from tests.support.fake_web import FakeWeb

    with FakeWeb() as web:
        yield web


@pytest.fixture
def web(_fake_web):
    """Fake search providers and web pages on loopback (tests/support/fake_web.py), emptied for each test."""
    _fake_web.reset()
    return _fake_web


@pytest.fixture(scope="session")
def _fake_images():
    from tests.support.fake_images import FakeImages

    with FakeImages() as images:
        yield images


@pytest.fixture
def images(_fake_images):
    """The fake images server on loopback (tests/support/fake_images.py), its modes reset for each test."""
    _fake_images.reset()
    return _fake_images


@pytest.fixture(scope="module")
def mcp_server():
    """A real MCP server (tests/support/mcp_server.py) on loopback, fresh for each test module."""
    from tests.support.mcp_server import MCPTestServer

    with MCPTestServer() as server:
        yield server
