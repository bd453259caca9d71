"""The ASGI application: routes, error handlers, and the upstream's lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import Receive, Scope, Send

from . import logs, metrics, tracing
from .api import conversations
from .api.admission import Admission, AdmissionLimits
from .api.auth import KeyAuth, start_owners
from .api.compact import compact_response
from .api.errors import HANDLERS
from .api.input_tokens import count_input_tokens
from .api.responses import create_response
from .api.shared_limits import SharedLimits
from .api.stored import cancel_response, delete_response, get_response, list_input_items
from .api.streaming import SERVER_SEND
from .api.websocket import responses_websocket
from .background import Background
from .config import Settings
from .routing import Router, Rule, load_rules
from .shutdown import on_sigterm
from .store import Store, open_store
from .upstreams.base import Upstream

log = logging.getLogger("responses_gateway")


def make_router(settings: Settings, upstream: Upstream | None = None) -> Router:
    if upstream is not None:
        return Router.single(upstream, settings.route())
    if settings.config:
        return Router(load_rules(settings.config))
    return Router([Rule("*", settings.route())])


def make_store(settings: Settings) -> Store | None:
    return None if settings.db == "none" else open_store(settings.db, settings.retention_days, settings.db_timeout)


def make_background(settings: Settings, store: Store) -> Background:
    """Background jobs need the store; Redis (optional) makes them live across replicas."""
    bus = None
    if settings.redis_url:
        from .redisbus import RedisBus

        bus = RedisBus(settings.redis_url, settings.redis_event_ttl)
    return Background(settings, store, bus)


def make_shared_limits(settings: Settings) -> SharedLimits | None:
    """With Redis, the per-key limits are kept there, so they hold across workers and replicas."""
    if not settings.redis_url or not (settings.key_max_in_flight > 0 or settings.key_requests_per_minute > 0):
        return None
    return SharedLimits(settings.redis_url, settings.key_max_in_flight, settings.key_requests_per_minute)


async def purge_forever(store: Store, every: float = 3600.0, event_retention: float | None = None) -> None:
    """Retention: expired responses (and old event logs) are removed at startup and then every hour."""
    while True:
        try:
            await store.purge(event_retention)  # in batches; it logs and counts its progress itself
        except Exception:
            log.exception("retention purge failed")
        await asyncio.sleep(every)


async def metrics_endpoint(request: Request) -> Response:
    return Response(metrics.render(), headers={"content-type": metrics.CONTENT_TYPE})


async def health(request: Request) -> Response:
    """200 when the gateway can serve; 503 naming what is down. The database answers one trivial query
    within --health-db-timeout seconds (a stalled database makes stored requests fail, so it is down)."""
    store = request.app.state.store
    if store is None:
        return Response(b'{"status":"ok"}', media_type="application/json")
    timeout = request.app.state.settings.health_db_timeout
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


async def list_models(request: Request) -> Response:
    models = await request.app.state.router.list_models()
    return Response(orjson.dumps({"object": "list", "data": models}), media_type="application/json")


class Gateway(Starlette):
    """The app, keeping the server's own `send` in the scope: a stream's body goes out through it, not
    through starlette's wrappers (api/streaming.py)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[SERVER_SEND] = send
        await super().__call__(scope, receive, send)


def create_app(settings: Settings, upstream: Upstream | None = None, router: Router | None = None) -> Starlette:
    """`upstream`: serve every model from this adapter (tests); `router`: an already built router."""
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.settings = settings
        app.state.router = live = router or make_router(settings, upstream)
        app.state.store = store = make_store(settings)
        purger = jobs = None
        if store is not None:
            await store.open()
            await store.upgrade()
            purger = asyncio.create_task(purge_forever(store, event_retention=settings.event_retention_hours * 3600))
            jobs = make_background(settings, store)
            await jobs.open()
        app.state.background = jobs
        app.state.owners = await start_owners(keys, settings.owner_secret, store)
        if shared is not None and keys and store is None and not settings.owner_secret:
            log.warning("per-key limits in Redis need the same owner secret in every process: without a "
                        "database, set --owner-secret, or each process limits its keys apart")
        on_sigterm(settings.drain_timeout)
        try:
            yield
        finally:
            if jobs is not None:
                await jobs.drain(settings.drain_timeout)
                await jobs.close()
            if purger is not None:
                purger.cancel()
            await live.close()
            if shared is not None:
                await shared.close()
            if store is not None:
                await store.close()
            await asyncio.to_thread(tracing.flush)  # spans still batched go out before the process ends

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
        ],
        exception_handlers=HANDLERS,
        lifespan=lifespan,
    )
    keys = settings.load_api_keys()
    shared = make_shared_limits(settings)
    app.add_middleware(Admission, limits=AdmissionLimits(settings.max_in_flight, settings.key_max_in_flight,
                                                         settings.key_requests_per_minute), shared=shared)
    app.add_middleware(KeyAuth, keys=keys)  # added last, so it runs first: Admission knows the owner
    return app


def app_from_env() -> Starlette:
    """The factory each worker process calls when `--workers` is more than one."""
    from dataclasses import replace

    from .config import check, from_env

    settings = check(replace(Settings(), **from_env()))
    logs.setup(settings.log_level, settings.log_format)
    configure_edge(settings)
    if tracing.wanted(settings.otel):
        tracing.setup()
    app = create_app(settings)
    freeze_startup()
    return app


def freeze_startup() -> None:
    """What is alive now (modules, schemas, the app) lives as long as the process: out of the collector's
    sight, a full collection walks only what requests made. A collection holds the GIL, so this is a pause
    of every thread made shorter (a 30 MB request's: 34 → none over 5 ms, docs/limits.md). `serve` calls it
    once the app is built; tests, which start many apps in one process, do not."""
    gc.collect()
    gc.freeze()


def configure_edge(settings: Settings) -> None:
    """This process's connection limits (`edge.EdgeProtocol`, which `serve` gives uvicorn)."""
    from .edge import EdgeLimits, EdgeProtocol

    EdgeProtocol.configure(EdgeLimits(settings.header_timeout, settings.body_timeout, settings.max_connections))
