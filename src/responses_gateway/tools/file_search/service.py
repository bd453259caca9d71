"""The file_search service of one process: the embedder, the vector cache, the searcher and the ingestor.

Made in app.py's lifespan when the store is on (`services.file_search`), closed with it; the Vector Stores
API and the file_search tool reach it there.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...config import Settings
from .embeddings import Embedder
from .extract import Limits
from .ingest import Ingestor, IngestSettings, IngestStore
from .search import Searcher
from .vectors import VectorCache

if TYPE_CHECKING:
    from ...services import Services

log = logging.getLogger("responses_gateway.file_search")


def make_embedder(settings: Settings) -> Embedder | None:
    """`--embeddings-model` at `--embeddings-url` (default: the upstream's URL and key); None: keyword-only."""
    if not settings.embeddings_model:
        return None
    url = settings.embeddings_url
    key = settings.embeddings_api_key
    if url is None:
        if settings.is_demo or not settings.upstream_url.startswith(("http://", "https://")):
            raise ValueError("--embeddings-model needs --embeddings-url when the upstream is the demo")
        url = settings.upstream_url
        key = key or settings.upstream_api_key
    return Embedder(url, settings.embeddings_model, key, settings.embeddings_batch, settings.embeddings_timeout)


class FileSearch:
    def __init__(self, settings: Settings, store: IngestStore, embedder: Embedder | None = None):
        self.settings = settings
        self.store = store
        self.embedder = embedder if embedder is not None else make_embedder(settings)
        self.vectors = VectorCache(store)
        self.searcher = Searcher(store, self.embedder, self.vectors)
        self.ingestor = Ingestor(store, self.embedder, IngestSettings(
            settings.ingest_workers, settings.lease_timeout,
            Limits(settings.max_extracted_chars, settings.max_pdf_pages, settings.pdf_timeout,
                   settings.pdf_max_memory_mb << 20)))

    @property
    def embedding_model(self) -> str | None:
        return self.embedder.model if self.embedder is not None else None

    def start(self) -> None:
        self.ingestor.start()
        log.info("file_search: %s", f"embeddings from {self.embedder.url} ({self.embedder.model})"
                 if self.embedder else "keyword-only search (no --embeddings-model)")

    async def close(self) -> None:
        await self.ingestor.close()
        if self.embedder is not None:
            await self.embedder.close()


def available(services: Services) -> str | None:
    """None when file_search can run here; else how to enable it."""
    if getattr(services, "file_search", None) is not None:
        return None
    try:
        import bpe_openai  # noqa: F401
        import numpy  # noqa: F401
        import pypdf  # noqa: F401
    except ImportError:
        return "file_search needs pip install 'responses-gateway[file-search]'"
    return "file_search needs a store (it is off with --db none)"
