"""What `serve` checks before it serves, so that a first run explains itself (README, "First run").

- The database opens and is migrated (`db upgrade` does the same): if not, one line naming the database and
  the cause, and `serve` exits; not a traceback from inside the server's startup.
- The port is bound by `serve` itself, before the app starts: a port already taken is said in one line, and
  "listening" is logged only once the socket is bound and listening.
- Each upstream is asked for its model list: a base URL without `/v1` (a 404), a wrong key, a server that is
  down are logged with the URL called and what to change. The gateway starts anyway (the upstream may come
  up later); the check only speaks.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket

from . import causes
from .errors import UpstreamError
from .routing import Router
from .store import Store
from .upstreams.base import Upstream

log = logging.getLogger("responses_gateway")

UPSTREAM_CHECK_TIMEOUT = 5.0  # seconds for each upstream's model list at startup
BACKLOG = 2048  # uvicorn's default


def database_failed(label: str, exc: BaseException) -> str:
    """The one line for a database that cannot be used."""
    return f"responses-gateway: cannot use the database {label}: {causes.cause(exc)}"


async def ready_store(store: Store) -> int:
    """Open the store, bring its schema up to date, close it; returns the schema version."""
    await store.open()
    try:
        version: int = await store.upgrade()
        return version
    finally:
        await store.close()


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound and listening; SystemExit with one line when it cannot be."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    where = f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"
    try:
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            why = "the port is already in use (another gateway or program listens there); stop it or choose " \
                  "another with --port"
        elif exc.errno == errno.EACCES:
            why = "permission denied (ports below 1024 need privileges); choose another with --port"
        elif exc.errno == errno.EADDRNOTAVAIL:
            why = "this machine has no such address; check --host"
        else:
            why = exc.strerror or str(exc)
        raise SystemExit(f"responses-gateway: cannot listen on {where}: {why}") from None
    sock.set_inheritable(True)  # the workers of --workers N inherit it
    return sock


async def check_upstreams(router: Router) -> None:
    """Ask each upstream (the demo aside) for its models, all at once, logging what each answered. The
    connections are closed after: the server opens its own, in its own event loop."""
    try:
        await asyncio.gather(*(_check(upstream) for rule, upstream in zip(router.rules, router.upstreams, strict=True)
                               if rule.route.kind != "demo"))
    finally:
        await router.close()


async def _check(upstream: Upstream) -> None:
    try:
        async with asyncio.timeout(UPSTREAM_CHECK_TIMEOUT):
            models = await upstream.list_models()
    except UpstreamError:
        # (what it answered, with the URL and what to change, is logged where it was called)
        log.warning("upstream %s did not list its models at startup; requests to it fail until it does",
                    upstream.label)
    except TimeoutError:
        log.warning("upstream %s did not list its models within %g s at startup", upstream.label,
                    UPSTREAM_CHECK_TIMEOUT)
    else:
        names = ", ".join(str(m.get("id")) for m in models[:5]) + (", ..." if len(models) > 5 else "")
        log.info("upstream %s answers: %d models (%s)", upstream.label, len(models), names)
