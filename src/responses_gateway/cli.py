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
from dataclasses import fields, replace
from typing import Any

from . import __version__, logs, tracing
from .config import CHOICES, ENV, Settings, check, from_env
from .conformance.command import add_arguments as add_check_arguments
from .conformance.command import run as check_command

log = logging.getLogger("responses_gateway")


# Background responses (docs/background.md): flag, type, meaning.
BACKGROUND_FLAGS = (
    ("--max-background", int, "concurrent background responses per process (429 beyond)"),
    ("--lease-timeout", float, "seconds without a lease renewal after which a replica's background responses are "
                               "failed by another"),
    ("--background-poll", float, "seconds between event-log flushes and database polls of background responses"),
    ("--redis-event-ttl", float, "seconds a Redis event stream lives after its last event"),
)

# Files and file_search (docs/file-search.md): flag, type, meaning.
FILE_SEARCH_FLAGS = (
    ("--max-file-bytes", int, "largest file POST /v1/files accepts (413 beyond)"),
    ("--file-quota-bytes", int, "bytes of files one API key may keep, 0 for no quota (413 beyond)"),
    ("--embeddings-model", str, "embedding model for file_search; without one, search is keyword-only"),
    ("--embeddings-url", str, "OpenAI-compatible base URL serving /embeddings (default: the upstream's)"),
    ("--embeddings-api-key", str, "bearer token for --embeddings-url (default: the upstream's key)"),
    ("--embeddings-batch", int, "texts per embeddings request"),
    ("--embeddings-timeout", float, "seconds per embeddings request"),
    ("--ingest-workers", int, "files ingested at once per process"),
    ("--max-pdf-pages", int, "pages read from one PDF (more: the file fails)"),
    ("--max-extracted-chars", int, "characters of text one file may yield (more: the file fails)"),
    ("--pdf-timeout", float, "seconds one PDF's reader, a child process, may run (then it is killed; the file fails)"),
    ("--pdf-max-memory-mb", int, "MiB of memory one PDF's reader may use (more: the file fails)"),
    ("--file-search-timeout", float, "seconds one file_search call may take"),
)


# The code interpreter (docs/code-interpreter.md): flag, type, meaning.
CODE_INTERPRETER_FLAGS = (
    ("--code-interpreter-dir", str, "directory on this host for the containers' /mnt/data (default: under the "
                                    "system's temporary directory)"),
    ("--code-interpreter-uid", int, "unprivileged host uid the code runs as when the gateway runs as root"),
    ("--code-interpreter-timeout", float, "wall seconds one call may run (then it is interrupted)"),
    ("--code-interpreter-max-memory", str, "the largest memory_limit a container may ask for (1g, 4g, 16g, 64g)"),
    ("--code-interpreter-processes", int, "processes and threads one container may run at once"),
    ("--code-interpreter-output-bytes", int, "output kept per call (a marker says how much more there was)"),
    ("--code-interpreter-disk-bytes", int, "bytes a container's /mnt/data may hold"),
    ("--code-interpreter-file-bytes", int, "largest file kept as a container file (in the database)"),
    ("--code-interpreter-idle-minutes", int, "minutes of inactivity after which a container expires"),
    ("--code-interpreter-key-containers", int, "running containers per API key"),
    ("--code-interpreter-max-live", int, "containers with a live interpreter in this process"),
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="responses-gateway", description="The OpenAI Responses API for any model.")
    parser.add_argument("--version", action="version", version=f"responses-gateway {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the gateway")
    serve.add_argument("--upstream", dest="upstream_url", metavar="URL",
                       help="Chat Completions base URL, e.g. http://127.0.0.1:8000/v1, or 'demo' for the built-in "
                            f"scripted demo model [{ENV['upstream_url']}; default: demo]")
    serve.add_argument("--config", metavar="FILE",
                       help=f"TOML file routing model names to upstreams (see docs/routing.md) [{ENV['config']}]")
    serve.add_argument("--upstream-api-key", metavar="KEY", help=f"bearer token for the upstream "
                                                                 f"[{ENV['upstream_api_key']}]")
    serve.add_argument("--host", help=f"address to listen on [{ENV['host']}; default 127.0.0.1]")
    serve.add_argument("--port", type=int, help=f"port to listen on [{ENV['port']}; default 8080]")
    serve.add_argument("--workers", type=int, help=f"worker processes [{ENV['workers']}; default 1]")
    serve.add_argument("--hosted-tools", choices=CHOICES["hosted_tools"],
                       help=f"what to do with hosted tools the gateway cannot run [{ENV['hosted_tools']}; "
                            "default drop]")
    serve.add_argument("--reasoning-history", choices=CHOICES["reasoning_history"],
                       help="how earlier reasoning is sent back upstream "
                            f"[{ENV['reasoning_history']}; default reasoning_content]")
    serve.add_argument("--max-tokens-field", choices=CHOICES["max_tokens_field"],
                       help=f"upstream field for max_output_tokens [{ENV['max_tokens_field']}; default max_tokens]")
    for flag, name, default, what in (
            ("--upstream-connect-timeout", "upstream_connect_timeout", 30, "to connect"),
            ("--upstream-first-byte-timeout", "upstream_first_byte_timeout", 300, "for the upstream's answer"),
            ("--upstream-idle-timeout", "upstream_read_timeout", 600, "of upstream silence mid-stream"),
            ("--upstream-total-timeout", "upstream_total_timeout", 3600, "for a whole upstream call")):
        serve.add_argument(flag, dest=name, type=float, metavar="S",
                           help=f"seconds {what} [{ENV[name]}; default {default}]")
    serve.add_argument("--drain-timeout", type=float, metavar="S",
                       help=f"on SIGTERM, seconds running responses get to finish [{ENV['drain_timeout']}; "
                            "default 30]")
    serve.add_argument("--sse-keepalive", type=float, metavar="S",
                       help=f"SSE comment after this many seconds of silence [{ENV['sse_keepalive']}; default 15]")
    serve.add_argument("--max-body-bytes", type=int, help=f"request size limit [{ENV['max_body_bytes']}]")
    serve.add_argument("--max-json-depth", type=int,
                       help=f"deepest JSON nesting accepted [{ENV['max_json_depth']}; default 64]")
    serve.add_argument("--max-json-containers", type=int,
                       help=f"objects + arrays in one body [{ENV['max_json_containers']}; default 200000]")
    serve.add_argument("--max-input-items", type=int,
                       help=f"items in one request's input [{ENV['max_input_items']}; default 20000]")
    edge_flags: list[tuple[str, type, str, str]] = [
        ("--header-timeout", float, "30", "seconds a client has to send a request's headers"),
        ("--body-timeout", float, "60", "seconds a client has to send a request's body"),
        ("--min-body-rate", float, "500", "bytes a second a request's body must average after its grace (0 = off)"),
        ("--body-rate-grace", float, "10", "seconds a request's body may take before --min-body-rate applies"),
        ("--keep-alive-timeout", float, "5", "seconds an idle keep-alive connection is kept"),
        ("--max-connections", int, "0 = 3/4 of the open-file limit", "open client connections per process"),
        ("--max-header-bytes", int, "65536", "bytes of a request's request line and headers (431 beyond)"),
        ("--max-headers", int, "100", "headers in one request (431 beyond)"),
        ("--send-timeout", float, "60", "seconds a client may read nothing of a response before it is ended "
                                        "(stored as failed) and the connection dropped; 0 = none"),
        ("--max-in-flight", int, "512", "requests in flight per process (429 beyond)"),
        ("--key-max-in-flight", int, "0 = off", "concurrent requests per API key (429 beyond)"),
        ("--key-requests-per-minute", float, "0 = off", "requests per minute per API key (429 beyond)"),
    ]
    for flag, kind, shown, what in edge_flags:
        name = flag[2:].replace("-", "_")
        serve.add_argument(flag, type=kind, help=f"{what} [{ENV[name]}; default {shown}]")
    serve.add_argument("--otel", action="store_true", default=None,
                       help=f"OpenTelemetry traces over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT [{ENV['otel']}; "
                            "on when that variable is set]")
    serve.add_argument("--log-format", choices=("text", "json"),
                       help=f"json: one object per line with the response id [{ENV['log_format']}; default text]")
    serve.add_argument("--access-log", action="store_true", default=None,
                       help="one line per request (status, bytes, time, response id), and per WebSocket "
                            f"connection opened and closed [{ENV['access_log']}; default off]")
    add_check_arguments(sub.add_parser("check", help="check a Responses API endpoint's conformance (docs/check.md)"))
    for command in (serve, _db(sub)):
        command.add_argument("--db", metavar="URL",
                             help="where responses are stored: a SQLite path or sqlite:///path, "
                                  "postgresql://user@host/db, or 'none' "
                                  f"[{ENV['db']}; default: SQLite in the user's data directory]")
        command.add_argument("--retention-days", type=float,
                             help=f"how long stored responses are kept [{ENV['retention_days']}; default 30]")
        command.add_argument("--event-retention-hours", type=float,
                             help="how long background event logs stay in the database (resume after the end) "
                                  f"[{ENV['event_retention_hours']}; default 24]")
        command.add_argument("--db-timeout", type=float, metavar="S",
                             help="seconds for a database connection and each statement (a purge's batch) "
                                  f"[{ENV['db_timeout']}; default 10]")
        command.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                             help=f"[{ENV['log_level']}; default info]")
    serve.add_argument("--health-db-timeout", type=float, metavar="S",
                       help=f"seconds /health waits for the database [{ENV['health_db_timeout']}; default 2]")
    serve.add_argument("--api-keys-file", metavar="PATH",
                       help=f"file with one accepted API key per line [{ENV['api_keys_file']}]")
    serve.add_argument("--api-keys", metavar="K1,K2", help=f"accepted API keys [{ENV['api_keys']}]")
    serve.add_argument("--owner-secret", metavar="SECRET",
                       help="HMAC secret for the owner ids derived from API keys; default: generated once and "
                            f"kept in the database [{ENV['owner_secret']}]")
    serve.add_argument("--mcp-allow-hosts", metavar="H1,H2",
                       help="MCP hosts admitted although loopback/private (host, host:port, IP or CIDR) "
                            f"[{ENV['mcp_allow_hosts']}]")
    serve.add_argument("--mcp-timeout", type=float, help=f"seconds per MCP call [{ENV['mcp_timeout']}; default 60]")
    _web_search_flags(serve)
    serve.add_argument("--max-tool-rounds", type=int,
                       help=f"cap on model/tool rounds in one response [{ENV['max_tool_rounds']}; default 16]")
    serve.add_argument("--compaction-key", metavar="K1,K2",
                       help="secrets sealing compaction items; the first seals, all open (rotation) "
                            f"[{ENV['compaction_key']}; default: a key generated once and kept in the store]")
    serve.add_argument("--websocket", choices=CHOICES["websocket"],
                       help="WebSocket mode on GET /v1/responses; off answers 426 so clients use HTTP "
                            f"[{ENV['websocket']}; default on]")
    serve.add_argument("--websocket-max-minutes", type=float,
                       help=f"lifetime of one WebSocket connection [{ENV['websocket_max_minutes']}; default 60]")
    serve.add_argument("--websocket-ping-interval", type=float,
                       help="seconds between keepalive pings, 0 for none; a pong later than that closes the "
                            f"connection [{ENV['websocket_ping_interval']}; default 20]")
    serve.add_argument("--redis", dest="redis_url", metavar="URL",
                       help="Redis for the live event logs and cancel signals of background responses, and "
                            "the per-key limits, across workers and replicas, e.g. redis://127.0.0.1:6379/0 "
                            f"[{ENV['redis_url']}]")
    serve.add_argument("--redis-cluster", action="store_true", default=None,
                       help="the --redis URL names a node of a Redis Cluster: use the cluster client "
                            f"[{ENV['redis_cluster']}]")
    for flag, kind, what in BACKGROUND_FLAGS:
        name = flag[2:].replace("-", "_")
        serve.add_argument(flag, type=kind, help=f"{what} [{ENV[name]}; default {getattr(Settings, name):g}]")
    for flag, kind, what in FILE_SEARCH_FLAGS:
        name = flag[2:].replace("-", "_")
        default = getattr(Settings, name)
        shown = "none" if default is None else default
        serve.add_argument(flag, type=kind, help=f"{what} [{ENV[name]}; default {shown}]")
    serve.add_argument("--code-interpreter", choices=CHOICES["code_interpreter"],
                       help="the code_interpreter tool: auto (in bubblewrap where this machine allows it, else "
                            "the tool is refused with a 400 saying why), bubblewrap (the same, but the gateway "
                            f"does not start without it) or off [{ENV['code_interpreter']}; default auto]")
    for flag, kind, what in CODE_INTERPRETER_FLAGS:
        name = flag[2:].replace("-", "_")
        default = getattr(Settings, name)
        serve.add_argument(flag, type=kind, help=f"{what} [{ENV[name]}"
                                                 + (f"; default {default}]" if default is not None else "]"))
    serve.add_argument("--public-url", metavar="URL",
                       help="the gateway's address as clients reach it, for URLs it hands out (code interpreter "
                            f"images); default: URLs relative to the gateway [{ENV['public_url']}]")
    return parser


def _web_search_flags(serve: argparse.ArgumentParser) -> None:
    """Web search (docs/web-search.md). Keys are best given through their environment variables."""
    serve.add_argument("--web-search", metavar="KIND=URL,...",
                       help="search providers for the web_search tool, a fallback chain: searxng=URL, brave, "
                            f"tavily, exa (their public API unless =URL), mcp=URL[#tool] [{ENV['web_search']}]")
    for kind in ("brave", "tavily", "exa"):
        serve.add_argument(f"--{kind}-api-key", metavar="KEY",
                           help=f"{kind.capitalize()} API key; prefer the variable [{ENV[kind + '_api_key']}]")
    serve.add_argument("--web-search-mcp-key", metavar="KEY",
                       help=f"bearer token for the mcp search provider [{ENV['web_search_mcp_key']}]")
    serve.add_argument("--web-search-allow-domains", metavar="D1,D2",
                       help="web search results and pages from these domains (and subdomains) only "
                            f"[{ENV['web_search_allow_domains']}]")
    serve.add_argument("--web-search-deny-domains", metavar="D1,D2",
                       help=f"never results or pages from these domains [{ENV['web_search_deny_domains']}]")
    for flag, number, default, what in (
            ("--web-search-rate", float, "5", "requests per second to each provider (0: unlimited)"),
            ("--web-search-cache-ttl", float, "600", "seconds a provider's results are cached (0: off)"),
            ("--web-search-timeout", float, "10", "seconds per provider request"),
            ("--web-fetch-timeout", float, "15", "seconds to fetch a page, redirects included"),
            ("--web-fetch-max-bytes", int, "8388608", "bytes of a page read (a larger one is cut)")):
        name = flag[2:].replace("-", "_")
        serve.add_argument(flag, type=number, help=f"{what} [{ENV[name]}; default {default}]")
    serve.add_argument("--web-fetch-allow-hosts", metavar="H1,H2",
                       help="page hosts admitted although loopback/private (host, host:port, IP or CIDR) "
                            f"[{ENV['web_fetch_allow_hosts']}]")


def _db(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    db: argparse.ArgumentParser = sub.add_parser("db", help="manage the response store")
    db.add_argument("action", choices=("upgrade", "purge"),
                    help="upgrade: apply schema migrations; purge: remove expired responses, files and vector stores")
    return db


def settings_from(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    values = from_env(environ)
    for f in fields(Settings):
        value = getattr(args, f.name, None)
        if value is not None:
            values[f.name] = value
    return check(replace(Settings(), **values))


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
            files, vector_stores = await store.purge_files(), await store.purge_vector_stores()
            return f"purged {purged} expired responses and event logs older than " \
                   f"{settings.event_retention_hours:g} hours ({store.label}); " \
                   f"{files} expired files and {vector_stores} expired vector stores"
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
    log.info("responses-gateway %s listening on http://%s:%d", __version__, settings.host, settings.port)
    if settings.config:
        for line in router.labels:
            log.info("route: %s", line)
    else:
        log.info("upstream: %s", router.upstreams[0].label)
    if store is None:
        log.info("store: none (responses are not kept)")
    else:
        log.info("store: %s, retention %g days", store.label, settings.retention_days)
    if settings.redis_url:
        shared = " and per-key limits" if settings.key_max_in_flight or settings.key_requests_per_minute else ""
        log.info("background responses%s: Redis%s %s", shared, " Cluster" if settings.redis_cluster else "",
                 settings.redis_url.split("@")[-1])  # no password
    if settings.load_api_keys():
        log.info("API keys required on /v1 (%d configured)", len(settings.load_api_keys()))
    if any(rule.route.kind == "demo" for rule in router.rules):
        log.warning("DEMO MODE: answers come from a scripted demo model, not a real one. "
                    "Use --upstream URL to serve a real model server.")
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
        for name, var in ENV.items():
            value = getattr(settings, name)
            if value is not None:
                os.environ[var] = str(value)
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
