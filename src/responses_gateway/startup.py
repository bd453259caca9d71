"""What `serve` checks before it serves, so that a first run explains itself (README, "First run").

- The database opens and is migrated (`db upgrade` does the same): if not, one line naming the database and
  the cause, and `serve` exits; not a traceback from inside the server's startup.
- The port is bound by `serve` itself, before the app starts: a port already taken is said in one line, and
  "listening" is logged only once the socket is bound and listening.
- Each upstream is asked for its model list: a base URL without `/v1` (a 404), a wrong key, a server that is
  down are logged with the URL called and what to change. The gateway starts anyway (the upstream may come
  up later); the check only speaks.
- Once its services have started, each process says in one block what is on and what is off, and why: the
  upstreams, the store, the keys, Redis, the limits, and each gateway-run tool with the reason it does not run
  and how to enable it (`summary`). A tool the deployment did not ask for is never an error.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Sequence
from typing import Any

from . import causes
from .config import Settings
from .errors import UpstreamError
from .routing import Router
from .store import Store
from .tools.frame import Described, ToolServices
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


def summary(settings: Settings, router: Router, store: Store | None, keys: int, tools: ToolServices,
            kits: Sequence[Any]) -> str:
    """What this process serves, one block: each line a part, on or off, and why (docs/observability.md)."""
    lines = ["what this gateway serves:"]

    def part(name: str, text: str) -> None:
        lines.append(f"  {name:<17}{text}")  # (the app logs each line as a record of its own)

    if settings.config:
        for label in router.labels:
            part("route", label)
    elif any(rule.route.kind == "demo" for rule in router.rules):
        part("upstream", "DEMO MODE: answers come from a scripted demo model, not a real model "
                         "(--upstream URL serves a real model server)")
    else:
        part("upstream", f"upstream: {router.upstreams[0].label}")
    part("store", "none: responses are not kept (--db)" if store is None
         else f"{store.label}, retention {settings.retention_days:g} days")
    part("keys", f"API keys required on /v1 ({keys} configured)" if keys
         else "none: any client that reaches the port may call it (--api-keys)")
    if settings.redis_url:
        shared = ", per-key limits" if settings.key_max_in_flight or settings.key_requests_per_minute else ""
        cluster = " Cluster" if settings.redis_cluster else ""
        part("redis", f"Redis{cluster} {settings.redis_url.split('@')[-1]}: background responses{shared}")
    else:
        part("redis", "off: background responses and per-key limits live in this process (--redis)")
    part("console", "on: /console (its own key, RG_CONSOLE_KEY)" if settings.console
         else "off: no web console (--console)")
    per_key = (f"{settings.key_max_in_flight or 'any'} in flight and {settings.key_requests_per_minute or 'any'}"
               " a minute per key") if settings.key_max_in_flight or settings.key_requests_per_minute \
        else "no per-key limits"
    part("limits", f"{settings.max_body_bytes >> 20} MiB bodies, {settings.max_in_flight} requests in flight, "
                   f"{settings.max_background} background, {per_key}, {settings.max_tool_rounds} tool rounds")
    for kit in kits:
        why = tools.why(kit.name)
        service = tools.service(kit)
        if why is None:
            detail = service.describe() if isinstance(service, Described) else ""
            part(kit.name, "on" + (f": {detail}" if detail else ""))
        elif why.refuse:
            part(kit.name, f"refused: {why.why} (requests declaring it get a 400 saying so)")
        else:
            part(kit.name, f"off: {why.why}")
    return "\n".join(lines)
