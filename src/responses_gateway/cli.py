"""The `responses-gateway` command."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from . import configure, logs, tracing
from .config import Settings
from .conformance.command import add_arguments as add_check_arguments
from .conformance.command import run as check_command
from .version import __version__

log = logging.getLogger("responses_gateway")


def _parser() -> argparse.ArgumentParser:
    """The commands; each setting's flag comes from its one declaration (configure.py)."""
    parser = argparse.ArgumentParser(prog="responses-gateway", description="The OpenAI Responses API for any model.")
    parser.add_argument("--version", action="version", version=f"responses-gateway {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the gateway")
    configure.add_arguments(serve, "serve")
    add_check_arguments(sub.add_parser("check", help="check a Responses API endpoint's conformance (docs/check.md)"))
    db: argparse.ArgumentParser = sub.add_parser("db", help="manage the response store")
    db.add_argument("action", choices=("upgrade", "purge"),
                    help="upgrade: apply schema migrations; purge: remove expired responses, files and the tools' "
                         "expired rows (vector stores)")
    configure.add_arguments(db, "db")
    return parser


def settings_from(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    return configure.settings_from(args, environ)


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "check":
        sys.exit(check_command(args))
    try:
        settings = settings_from(args)
    except ValueError as exc:
        sys.exit(f"responses-gateway: {exc}")
    if args.command == "serve":
        serve(settings)
    elif args.command == "db":
        db_command(settings, args.action)


def db_command(settings: Settings, action: str) -> None:
    import asyncio

    from .app import make_store
    from .startup import database_failed
    from .tools import kits

    store = make_store(settings)
    if store is None:
        sys.exit("responses-gateway: no store configured (--db none)")

    logs.setup(settings.log_level, settings.log_format)  # a long purge logs its progress (stderr)

    async def go() -> str:
        await store.open()
        try:
            if action == "upgrade":
                return f"schema at version {await store.upgrade()} ({store.label})"
            await store.upgrade()
            purged = await store.purge(settings.event_retention_hours * 3600)
            files = await store.purge_files()
            tools = "".join([f" and {await kit.purge(store)}" for kit in kits.all_kits() if kit.purge is not None])
            return f"purged {purged} expired responses and event logs older than " \
                   f"{settings.event_retention_hours:g} hours ({store.label}); {files} expired files{tools}"
        finally:
            await store.close()

    try:
        print(asyncio.run(go()))
    except Exception as exc:  # the database's failure, said in one line (startup.database_failed)
        sys.exit(database_failed(store.label, exc))


def serve(settings: Settings) -> None:
    import asyncio

    import uvicorn

    from .app import configure_edge, create_app, freeze_startup, make_router, make_store
    from .startup import check_upstreams, database_failed, listen, ready_store

    logs.setup(settings.log_level, settings.log_format)
    try:
        router = make_router(settings)
    except (OSError, ValueError) as exc:
        sys.exit(f"responses-gateway: {exc}")
    if tracing.wanted(settings.otel) and not tracing.installed():  # one clear error, not one per worker
        sys.exit("responses-gateway: tracing needs the otel extra: pip install 'responses-gateway[otel]'")
    store = make_store(settings)
    if store is not None:
        try:
            asyncio.run(ready_store(store))
        except Exception as exc:  # one line, not the server's startup traceback
            sys.exit(database_failed(store.label, exc))
    asyncio.run(check_upstreams(router))
    sock = listen(settings.host, settings.port)
    if settings.metrics_port:  # /metrics on its own listener, served by this process (the supervisor)
        from .scrape import serve_metrics

        try:
            serve_metrics(settings.metrics_host, settings.metrics_port, settings.metrics_key)
        except OSError as exc:
            sys.exit(f"responses-gateway: --metrics-port {settings.metrics_port}: cannot listen on "
                     f"{settings.metrics_host}: {exc.strerror or exc}")
    log.info("responses-gateway %s listening on http://%s:%d", __version__, settings.host, settings.port)
    # what is on and off, and why, is said by each process once its services have started (startup.summary)
    # uvicorn's own lines go to our handler (no log_config of its own): one format for every line.
    common: dict[str, Any] = dict(host=settings.host, port=settings.port, log_level=settings.log_level,
                                  access_log=False, log_config=None,
                                  timeout_graceful_shutdown=settings.drain_timeout + 5, **settings.server_options(),
                                  timeout_keep_alive=settings.keep_alive_timeout,
                                  http="responses_gateway.edge:EdgeProtocol",
                                  ws="responses_gateway.edge:EdgeWebSocketProtocol")
    if settings.workers > 1:
        # Each worker builds its own app from the environment (and sets its own tracing up), and serves the
        # socket bound here.
        if settings.owner_secret is None and settings.db == "none":
            # No database to keep a shared one: one secret for this serve's workers, so an API key is the same
            # owner in each of them (per-key limits in Redis count it once).
            settings = replace(settings, owner_secret=secrets.token_urlsafe(32))
        os.environ.update(configure.to_env(settings))
        from uvicorn.supervisors import Multiprocess

        config = uvicorn.Config("responses_gateway.app:app_from_env", factory=True, workers=settings.workers,
                                **common)
        try:
            supervisor = Multiprocess(config, sockets=[sock])
        except TypeError:  # uvicorn before the supervisor took the target from the config
            supervisor = Multiprocess(config, target=uvicorn.Server(config).run, sockets=[sock])  # type: ignore[call-arg]
        with metrics_dir(), contextlib.suppress(KeyboardInterrupt):
            supervisor.run()
    else:
        configure_edge(settings)
        if tracing.wanted(settings.otel):
            tracing.setup()
        app = create_app(settings, router=router)
        freeze_startup()
        server = uvicorn.Server(uvicorn.Config(app, **common))
        with contextlib.suppress(KeyboardInterrupt):
            server.run(sockets=[sock])
        if not server.started:
            sys.exit(3)  # the app failed to start (its error is logged): uvicorn's exit code for that


@contextlib.contextmanager
def metrics_dir() -> Iterator[str]:
    """Several workers: each counts into files in one fresh directory that /metrics sums (prometheus_client's
    multiprocess mode). The workers are started after this and inherit it; it goes when serving ends. A
    directory the operator set in PROMETHEUS_MULTIPROC_DIR is used as given and kept."""
    from .metrics import MULTIPROC_ENV

    if os.environ.get(MULTIPROC_ENV):
        yield os.environ[MULTIPROC_ENV]
        return
    path = tempfile.mkdtemp(prefix="responses-gateway-metrics-")
    os.environ[MULTIPROC_ENV] = path
    try:
        yield path
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(path, ignore_errors=True)
