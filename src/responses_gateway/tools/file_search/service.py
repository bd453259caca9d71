"""The file_search service of one process: the embedder, the vector cache, the searcher, the ingestor, and
the hourly sweep of expired vector stores.

Made by the kit's `serve` at start-up when there is a store and the `file-search` extra is installed; the
Vector Stores API (vector_stores_api.py) and the file_search tool's runners use it; closed at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ...config import Settings
from ...store.base import Engine
from ...store.files import FileQueries, blobs_for
from .bounds import Limits
from .embeddings import Embedder
from .ingest import Ingestor, IngestSettings, IngestStore
from .search import Searcher
from .settings import FileSearchSettings
from .store import VectorStoreQueries
from .vectors import VectorCache

log = logging.getLogger("responses_gateway.file_search")

SWEEP_SECONDS = 3600.0  # expired vector stores are removed at start-up and then every hour


class FileSearchStore(FileQueries, VectorStoreQueries):
    """file_search's roles over the store's engine: the files (the store's own role) and the vector stores
    (this package's, store.py)."""

    def __init__(self, engine: Engine, retention: int):
        super().__init__(engine, retention)
        self.blobs = blobs_for(engine)


def make_embedder(settings: Settings, group: FileSearchSettings) -> Embedder | None:
    """`--embeddings-model` at `--embeddings-url` (default: the upstream's URL and key); None: keyword-only."""
    if not group.embeddings_model:
        return None
    url = group.embeddings_url
    key = group.embeddings_api_key
    if url is None:
        if settings.is_demo or not settings.upstream_url.startswith(("http://", "https://")):
            raise ValueError("--embeddings-model needs --embeddings-url when the upstream is the demo")
        url = settings.upstream_url
        key = key or settings.upstream_api_key
    return Embedder(url, group.embeddings_model, key, group.embeddings_batch, group.embeddings_timeout)


class FileSearch:
    def __init__(self, settings: Settings, group: FileSearchSettings, store: IngestStore,
                 embedder: Embedder | None = None):
        self.settings = group
        self.store = store
        self.embedder = embedder if embedder is not None else make_embedder(settings, group)
        self.vectors = VectorCache(store)
        self.searcher = Searcher(store, self.embedder, self.vectors)
        self.ingestor = Ingestor(store, self.embedder, IngestSettings(
            group.ingest_workers, settings.lease_timeout,
            Limits(group.max_extracted_chars, group.max_pdf_pages, group.pdf_timeout,
                   group.pdf_max_memory_mb << 20)))
        self.sweeper: asyncio.Task[None] | None = None

    @property
    def embedding_model(self) -> str | None:
        return self.embedder.model if self.embedder is not None else None

    def start(self) -> None:
        self.ingestor.start()
        self.sweeper = asyncio.create_task(self.sweep_forever())

    def describe(self) -> str:
        if self.embedder is None:
            return "keyword-only search (--embeddings-model adds vector search)"
        return f"hybrid search, embeddings from {self.embedder.url} ({self.embedder.model})"

    async def sweep_forever(self) -> None:
        while True:
            try:
                removed = await self.store.purge_vector_stores()
                if removed:
                    log.info("expiry removed %d vector stores", removed)
            except Exception:
                log.exception("vector store expiry sweep failed")
            await asyncio.sleep(SWEEP_SECONDS)

    async def aclose(self) -> None:
        if self.sweeper is not None:
            self.sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.sweeper
        await self.ingestor.close()
        if self.embedder is not None:
            await self.embedder.close()
