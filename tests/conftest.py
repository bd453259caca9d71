"""Fixtures of the end-to-end suite: a fake upstream and the real gateway on loopback.

The heavy imports (the openai SDK, the servers) happen inside the fixtures, so tests that use none of
them — the unit layer in tests/unit — start fast.
"""

import os
import uuid

import pytest

SESSION_MARK = "RG_TEST_SESSION"  # every process the suite starts inherits it: the leak check finds them


def pytest_configure(config):
    from tests.support import e2e_setup  # light: no server or SDK imports

    e2e_setup.pytest_config = config  # the end-to-end setup prints its installs past output capture
    os.environ.setdefault(SESSION_MARK, uuid.uuid4().hex)


def pytest_sessionfinish(session, exitstatus):
    """No process the suite started outlives it: one still running now is a leak — reported, killed, and the
    run fails (a gateway's workers left running, say, hold a port and memory on a developer's machine)."""
    from tests.support import leaks

    left = leaks.outliving(os.environ[SESSION_MARK])
    session.config.stash[leaks.KEY] = left
    if left:
        leaks.kill(left)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line per missing optional part (bubblewrap, chromium, ...): how many tests it skipped, and what to
    install; then any process that outlived the session."""
    from tests.support import leaks, needs

    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        if reason.startswith(needs.SKIP_PREFIX):
            counts[reason] = counts.get(reason, 0) + 1
    if counts:
        terminalreporter.section("skipped for missing parts")
        for reason, n in sorted(counts.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"{n} skipped: {reason}")
    left = config.stash.get(leaks.KEY, [])
    if left:
        terminalreporter.section("processes that outlived the session (killed)", red=True)
        for pid, command in left:
            terminalreporter.write_line(f"{pid}: {command}", red=True)


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
