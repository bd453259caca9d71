"""What the console keeps for one process: its key, its reads of the store, the live responses."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from ..store import Store
from ..store.browse import BrowseQueries
from .live import Live
from .session import Keys
from .shared import Shared

log = logging.getLogger("responses_gateway.console")


@dataclass
class Console:
    keys: Keys
    browse: BrowseQueries
    live: Live
    indexing: asyncio.Task[Any] | None = None  # the console's indexes being made (store/browse.py)
    shared: Shared | None = None  # the replicas' live responses, with --redis (shared.py)

    async def close(self) -> None:
        if self.indexing is not None:
            self.indexing.cancel()
        if self.shared is not None:
            await self.shared.close()


async def start(key: str, store: Store, redis_url: str | None = None, cluster: bool = False) -> Console:
    """The console's service; its indexes are made in the background (a large table takes a while, and the
    gateway serves meanwhile — the lists are only slower until they exist). With Redis, this process's live
    responses are shared with the other replicas' consoles."""
    shared = Shared(redis_url, cluster) if redis_url else None
    if shared is not None:
        await shared.open()
    console = Console(Keys(key), store.role(BrowseQueries), Live(shared), shared=shared)
    console.indexing = asyncio.create_task(_prepare(console.browse))
    return console


async def _prepare(browse: BrowseQueries) -> None:
    try:
        seconds = await browse.prepare()
        log.info("console: indexes ready (%.1f s)", seconds)
    except Exception:
        log.exception("console: its indexes could not be made; its lists are slower without them")


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console
