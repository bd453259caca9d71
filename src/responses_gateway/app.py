"""The ASGI application: routes, error handlers, and the upstream's lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import access, logs, metrics, scrape, tap, tracing
from .api import conversations
from .api.admission import Admission
from .api.auth import KeyAuth, start_owners
from .api.body import BodyPace
from .api.compact import compact_response
from .api.errors import HANDLERS, render
from .api.input_tokens import count_input_tokens
from .api.nul import NulGuard
from .api.responses import create_response
from .api.stored import cancel_response, delete_response, get_response, list_input_items
from .api.streaming import SERVER_SEND
from .api.websocket import responses_websocket
from .background import Background
from .config import Settings
from .door import Door, Limits
from .errors import APIError
from .routing import Router, Rule, load_rules, pool_rule
from .services import Services, of
from .shared_limits import SharedLimits
from .shutdown import on_sigterm
from .startup import summary
from .store import Store, open_store
from .tools import kits
from .upstreams.base import Upstream

log = logging.getLogger("responses_gateway")


def make_router(settings: Settings, upstream: Upstream | None = None) -> Router:
    if upstream is not None:
        return Router.single(upstream, settings.route())
    if settings.config:
        return Router(load_rules(settings.config), max_load=settings.affinity_max_load)
    if "," in settings.upstream_url:  # --upstream a,b,...: a pool
        return Router([pool_rule(settings.upstream_url, settings.route())], max_load=settings.affinity_max_load)
    return Router([Rule("*", settings.route())])


def make_store(settings: Settings) -> Store | None:
    return None if settings.db == "none" else open_store(settings.db, settings.retention_days, settings.db_timeout)


def make_background(settings: Settings, store: Store) -> Background:
    """Background jobs need the store; Redis (optional) makes them live across replicas."""
    bus = None
    if settings.redis_url:
        from .redisbus import RedisBus

        bus = RedisBus(settings.redis_url, settings.redis_event_ttl, settings.redis_cluster)
    return Background(settings, store, bus)


def make_shared_limits(settings: Settings) -> SharedLimits | None:
    """With Redis, the per-key limits are kept there, so they hold across workers and replicas."""
    if not settings.redis_url or not (settings.key_max_in_flight > 0 or settings.key_requests_per_minute > 0):
        return None
    return SharedLimits(settings.redis_url, settings.key_max_in_flight, settings.key_requests_per_minute,
                        settings.redis_cluster)


async def purge_forever(store: Store, every: float = 3600.0, event_retention: float | None = None) -> None:
    """Retention: expired responses (and old event logs) are removed at startup and then every hour."""
    while True:
        try:
            await store.purge(event_retention)  # in batches; it logs and counts its progress itself
        except Exception:
            log.exception("retention purge failed")
        await asyncio.sleep(every)


async def sweep_files_forever(store: Store, every: float = 3600.0) -> None:
    """Expired files (and the bytes of uploads that died) are removed at startup and then every hour (a tool's
    own expired rows — vector stores — are its service's to sweep)."""
    while True:
        try:
            swept = await store.purge_files()
            if swept:
                log.info("expiry removed %d files", swept)
        except Exception:
            log.exception("file expiry sweep failed")
        await asyncio.sleep(every)


async def metrics_endpoint(request: Request) -> Response:
    """/metrics on the public port, as `scrape.public_access` decides (off: the 404 of any unknown path)."""
    services = of(request.app)
    settings = services.settings
    # the keys as loaded at start-up (`owners`): a scrape never reads --api-keys-file on the event loop
    access = scrape.public_access(settings.metrics_key, settings.metrics_port, bool(services.owners))
    if access == "off":
        return render(APIError(404, "Invalid URL (GET /metrics)"))
    if access == "key" and not scrape.authorized(request.headers.get("authorization"), settings.metrics_key or ""):
        return render(scrape.UNAUTHORIZED)
    return Response(metrics.render(), headers={"content-type": metrics.CONTENT_TYPE})


async def health(request: Request) -> Response:
    """200 when the gateway can serve; 503 naming what is down. The database answers one trivial query
    within --health-db-timeout seconds (a stalled database makes stored requests fail, so it is down)."""
    services = of(request.app)
    store = services.store
    if services.router.pools():
        return await pool_health(services)
    if store is None:
        return Response(b'{"status":"ok"}', media_type="application/json")
    timeout = services.settings.health_db_timeout
    # Not asyncio.timeout: a driver cancelled mid-query may wait on the stalled socket to clean up, so the
    # probe is left to finish (or fail) on its own and only the answer is bounded.
    ping = asyncio.ensure_future(store.ping())
    ping.add_done_callback(lambda t: t.cancelled() or t.exception())
    done, _ = await asyncio.wait({ping}, timeout=timeout)
    if not done:
        ping.cancel()
        problem = f"the database did not answer within {timeout:g}s"
    elif ping.exception() is not None:
        exc = ping.exception()
        problem = f"the database failed: {type(exc).__name__}: {str(exc)[:200]}"
    else:
        return Response(b'{"status":"ok","database":"ok"}', media_type="application/json")
    log.warning("health: %s", problem)
    return Response(orjson.dumps({"status": "unavailable", "database": problem}), status_code=503,
                    media_type="application/json")


async def pool_health(services: Services) -> Response:
    """/health with pools of replicas: each replica's health too (a pool with none healthy is down)."""
    body: dict[str, Any] = {"status": "ok"}
    if services.store is not None:
        try:
            async with asyncio.timeout(services.settings.health_db_timeout):
                await services.store.ping()
            body["database"] = "ok"
        except Exception as exc:  # noqa: BLE001 (any failure is the database being down)
            body.update(status="unavailable", database=f"the database failed: {type(exc).__name__}")
    body["pools"] = {pool.name: pool.health() for pool in services.router.pools()}
    if any(not any(r["healthy"] for r in replicas) for replicas in body["pools"].values()):
        body["status"] = "unavailable"
    return Response(orjson.dumps(body), status_code=200 if body["status"] == "ok" else 503,
                    media_type="application/json")


async def list_models(request: Request) -> Response:
    models = await of(request.app).router.list_models()
    return Response(orjson.dumps({"object": "list", "data": models}), media_type="application/json")


class Endpoint:
    """One route's endpoint as the innermost layer, with the app's exception handlers: what starlette's
    ExceptionMiddleware, router, route and `request_response` do for a request that reaches it (two
    `Request`s, two exception wrappers, each with its own `send` wrapper, and a scan of the routes), in one
    layer. An exception with a handler is answered by it unless the response has started (then, as
    starlette, a RuntimeError goes on to the server error layer); one without goes on as it is."""

    def __init__(self, endpoint: Callable[[Request], Awaitable[Any]], handlers: dict[Any, Any]):
        self.endpoint = endpoint
        self.handlers = {key: value for key, value in handlers.items() if not isinstance(key, int)}
        self.status_handlers = {key: value for key, value in handlers.items() if isinstance(key, int)}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["endpoint"], scope["path_params"] = self.endpoint, {}  # as the route's match sets them
        request = Request(scope, receive, send)
        started = False

        async def sender(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            response = await self.endpoint(request)
            await response(scope, receive, sender)
        except Exception as exc:
            handler = self.status_handlers.get(exc.status_code) if isinstance(exc, HTTPException) else None
            if handler is None:
                handler = next((self.handlers[cls] for cls in type(exc).__mro__ if cls in self.handlers), None)
            if handler is None:
                raise
            if started:
                raise RuntimeError("Caught handled exception, but response already started.") from exc
            response = await handler(request, exc)
            if response is not None:
                await response(scope, receive, sender)
            exc.__traceback__ = None


class Gateway(Starlette):
    """The app, keeping the server's own `send` in the scope: a stream's body goes out through it, not
    through starlette's wrappers (api/streaming.py). With `access_log`, each HTTP request is served through
    `access.served`, whose counting `send` is the one kept (access.py).

    `POST /v1/responses`, the request nearly all traffic is, and `GET /health`, which load balancers ask
    every few seconds, go past starlette's router: through the same middleware (the same instances: the
    server error layer, KeyAuth, Admission) to their endpoint, with the app's exception handlers applied by
    `Endpoint`."""

    access_log = False
    endpoints: dict[tuple[str, str], Callable[[Request], Awaitable[Any]]] = {}  # (method, path): endpoint
    direct: dict[tuple[str, str], ASGIApp] | None = None  # their ways, made on the first request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.access_log and scope["type"] == "http":
            await access.served(scope, receive, send, self._serve)
            return
        await self._serve(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[SERVER_SEND] = send
        if scope["type"] == "http":
            if self.direct is None:
                self.direct = {key: self._around(Endpoint(endpoint, self.exception_handlers))
                               for key, endpoint in self.endpoints.items()}
            app = self.direct.get((scope["method"], scope["path"]))
            if app is not None:
                scope["app"], scope["router"] = self, self.router
                await app(scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    def _around(self, endpoint: ASGIApp) -> ASGIApp:
        """`endpoint` inside the app's middleware down to (not including) starlette's exception layer: each
        layer a shallow copy of the app's own, so what they hold (the door, the body readers) is shared."""
        if self.middleware_stack is None:
            self.middleware_stack = self.build_middleware_stack()
        layers: list[Any] = []
        layer: Any = self.middleware_stack
        while not isinstance(layer, ExceptionMiddleware):
            layers.append(layer)
            layer = layer.app
        app = endpoint
        for outer in reversed(layers):
            outer = copy.copy(outer)
            outer.app = app
            app = outer
        return app


def create_app(settings: Settings, upstream: Upstream | None = None, router: Router | None = None) -> Starlette:
    """`upstream`: serve every model from this adapter (tests); `router`: an already built router."""
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Each resource's closing is registered the moment it exists, so they close in the reverse order of their
        # opening, and one that failed to open leaves the others closed.
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(asyncio.to_thread, tracing.flush)  # spans still batched go out last
            live = router or make_router(settings, upstream)
            stack.push_async_callback(live.close)
            store = make_store(settings)
            jobs = None
            if store is not None:
                await store.open()
                stack.push_async_callback(store.close)
                await store.upgrade()
                stack.callback(asyncio.create_task(
                    purge_forever(store, event_retention=settings.event_retention_hours * 3600)).cancel)
                stack.callback(asyncio.create_task(sweep_files_forever(store)).cancel)  # files (tools/file_search/files_api.py)
            if shared is not None:
                stack.push_async_callback(shared.close)
                await shared.open()
            owners = await start_owners(keys, settings.owner_secret, store)
            tools = await kits.serve_all(settings, store, stack)  # each gateway-run tool's service, or why not
            if store is not None:
                jobs = make_background(settings, store)
                stack.push_async_callback(jobs.close)
                await jobs.open()
                stack.push_async_callback(jobs.drain, settings.drain_timeout)  # first: running jobs end properly
            if settings.console and store is not None:  # the web console (console/, docs/console.md)
                from . import console

                app.state.console = await console.start(settings.console_key or "", store, settings.redis_url,
                                                        settings.redis_cluster)
                stack.push_async_callback(app.state.console.close)
                tap.install(app.state.console.live)
                stack.callback(tap.install, None)
            app.state.services = Services(settings, live, door, store, jobs, owners, tools=tools,
                                          toolbox=kits.toolbox(tools))
            for line in summary(settings, live, store, len(keys), tools, kits.all_kits()).splitlines():
                log.info("%s", line)  # a line a record: every line of the log keeps its format
            if shared is not None and keys and store is None and not settings.owner_secret:
                log.warning("per-key limits in Redis need the same owner secret in every process: without a "
                            "database, set --owner-secret, or each process limits its keys apart")
            on_sigterm(settings.drain_timeout)
            yield

    app = Gateway(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/v1/responses", create_response, methods=["POST"]),
            WebSocketRoute("/v1/responses", responses_websocket),
            Route("/v1/responses/input_tokens", count_input_tokens, methods=["POST"]),
            Route("/v1/responses/compact", compact_response, methods=["POST"]),
            Route("/v1/responses/{response_id}", get_response, methods=["GET"]),
            Route("/v1/responses/{response_id}", delete_response, methods=["DELETE"]),
            Route("/v1/responses/{response_id}/cancel", cancel_response, methods=["POST"]),
            Route("/v1/responses/{response_id}/input_items", list_input_items, methods=["GET"]),
            Route("/v1/conversations", conversations.create_conversation, methods=["POST"]),
            Route("/v1/conversations/{conversation_id}", conversations.get_conversation, methods=["GET"]),
            Route("/v1/conversations/{conversation_id}", conversations.update_conversation, methods=["POST"]),
            Route("/v1/conversations/{conversation_id}", conversations.delete_conversation, methods=["DELETE"]),
            Route("/v1/conversations/{conversation_id}/items", conversations.add_items, methods=["POST"]),
            Route("/v1/conversations/{conversation_id}/items", conversations.list_items, methods=["GET"]),
            Route("/v1/conversations/{conversation_id}/items/{item_id}", conversations.get_item, methods=["GET"]),
            Route("/v1/conversations/{conversation_id}/items/{item_id}", conversations.delete_item,
                  methods=["DELETE"]),
            # each gateway-run tool's own HTTP API (the Files, Vector Stores and Containers APIs)
            *(route for kit in kits.all_kits() for route in kit.routes),
            *console_routes(settings),
        ],
        exception_handlers=HANDLERS,
        lifespan=lifespan,
    )
    app.access_log = settings.access_log
    app.endpoints = {("POST", "/v1/responses"): create_response, ("GET", "/health"): health}
    keys = settings.load_api_keys()
    shared = make_shared_limits(settings)
    door = Door(Limits.of(settings), shared)
    app.add_middleware(NulGuard)  # inside Admission: the body has been read (api/nul.py)
    app.add_middleware(Admission, door=door, pace=BodyPace(settings.min_body_rate, settings.body_rate_grace,
                                                              settings.body_idle_timeout))
    app.add_middleware(KeyAuth, keys=keys)  # added last, so it runs first: Admission knows the owner
    return app


def console_routes(settings: Settings) -> list[Any]:
    """The web console's pages, with --console only (nothing of it is imported otherwise)."""
    if not settings.console:
        return []
    from . import console

    return console.routes()


def app_from_env() -> Starlette:
    """The factory each worker process calls when `--workers` is more than one."""
    die_with_supervisor()
    from .configure import settings_from_env

    settings = settings_from_env()
    logs.setup(settings.log_level, settings.log_format)
    configure_edge(settings)
    if tracing.wanted(settings.otel):
        tracing.setup()
    app = create_app(settings)
    freeze_startup()
    return app


def die_with_supervisor() -> None:
    """A worker of `--workers N` ends when the process that started it does, however that one ended: without
    this, a supervisor killed with SIGKILL (an OOM kill, a crash) leaves its workers running, orphaned, still
    holding the listening socket. Linux's parent-death signal, SIGTERM, gives the worker the usual drain; where
    it is not available (another OS), nothing is done."""
    import ctypes
    import ctypes.util
    import os
    import signal

    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the supervisor died before the signal was asked for
        os.kill(os.getpid(), signal.SIGTERM)


GC_YOUNG = 20_000  # allocations between collections of the youngest generation (CPython: 700)


def freeze_startup() -> None:
    """What is alive now (modules, schemas, the app) lives as long as the process: out of the collector's
    sight, a full collection walks only what requests made. A collection holds the GIL, so this is a pause
    of every thread made shorter (a 30 MB request's: 34 → none over 5 ms, docs/limits.md). `serve` calls it
    once the app is built; tests, which start many apps in one process, do not.

    The youngest generation is collected every 20,000 allocations instead of 700: a response allocates a few
    thousand container objects, nearly all freed by reference counting, so the default collected (and walked
    the survivors of) several young generations per response for almost nothing (bench.instructions: about
    4 % of a 1-token response's instructions)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])


def configure_edge(settings: Settings) -> None:
    """This process's connection limits (`edge.EdgeProtocol`, which `serve` gives uvicorn)."""
    from .bodies import BUDGET
    from .edge import EdgeLimits, EdgeProtocol

    EdgeProtocol.configure(EdgeLimits(settings.header_timeout, settings.body_timeout, settings.max_connections,
                                      settings.max_header_bytes, settings.max_headers, settings.send_timeout,
                                      settings.body_idle_timeout))
    BUDGET.limit = settings.max_bodies_bytes
