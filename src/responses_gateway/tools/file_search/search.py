"""One search over vector stores, for POST /v1/vector_stores/{id}/search and for the file_search tool alike.

The stores must be the caller's (another key's store is not found) and not expired. `filters` pick the files
first (on their attributes); each query then ranks chunks by keyword (the engine's index) and, when the
stores have an embedding model, by vector (vectors.py); ranking.py fuses them. A store whose embedding model
is not the gateway's present one is refused: its vectors and the query's would not be comparable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import APIError, UpstreamError
from .embeddings import Embedder, EmbeddingError
from .filters import Filter, matches
from .ranking import Ranking, final, fuse, merge
from .store import Hit, StoreInfo, VectorStores
from .vectors import VectorCache

CANDIDATES = 100  # chunks each ranking contributes per query, before fusion
DEFAULT_RESULTS = 10
MAX_RESULTS = 50
MAX_QUERIES = 10


@dataclass(frozen=True)
class Result:
    vector_store_id: str
    file_id: str
    filename: str
    attributes: dict[str, Any] | None
    score: float
    text: str
    position: int


def store_not_found(vector_store_id: str) -> APIError:
    return APIError(404, f"Vector store with id '{vector_store_id}' not found.", param="vector_store_id", code=None)


class Searcher:
    def __init__(self, store: VectorStores, embedder: Embedder | None, vectors: VectorCache):
        self.store = store
        self.embedder = embedder
        self.vectors = vectors

    async def stores(self, ids: Sequence[str], owner: str) -> dict[str, StoreInfo]:
        """The caller's live stores by id; a 404 naming the first that is missing, a 400 for an expired one."""
        infos = await self.store.store_infos(list(dict.fromkeys(ids)), owner)
        for vs_id in ids:
            info = infos.get(vs_id)
            if info is None:
                raise store_not_found(vs_id)
            if info.expired:
                raise APIError(400, f"Vector store '{vs_id}' has expired.", param="vector_store_id",
                               code="vector_store_expired")
            if info.embedding_model is not None and (
                    self.embedder is None or self.embedder.model != info.embedding_model):
                now = self.embedder.model if self.embedder else "none (keyword-only search)"
                raise APIError(400, f"Vector store '{vs_id}' was embedded with '{info.embedding_model}', but this "
                               f"gateway's embedding model is {now!r}: its vectors cannot be searched.",
                               param="vector_store_id", code="embedding_model_mismatch")
        return infos

    async def _vectors(self, embedded: list[StoreInfo], queries: Sequence[str],
                       permitted: set[str] | None) -> list[list[tuple[Hit, float]]]:
        """For each query, the stores' best chunks by cosine, with it."""
        assert self.embedder is not None
        try:
            matrix = await self.embedder.embed(list(queries))
        except EmbeddingError as exc:
            raise UpstreamError(f"Embedding the query failed: {exc}", status=502, code="embeddings_failed") from None
        vector: list[list[tuple[Hit, float]]] = [[] for _ in queries]
        for info in embedded:
            if matrix.shape[1] != info.dimension:
                raise UpstreamError(f"The embeddings server now answers {matrix.shape[1]} dimensions; vector "
                                    f"store '{info.id}' has {info.dimension}.", status=502,
                                    code="embedding_dimension_mismatch")
            found = await self.vectors.search(info.id, info.version, matrix, permitted, CANDIDATES)
            for i, hits in enumerate(found):
                vector[i] += hits
        return vector

    async def search(self, ids: Sequence[str], owner: str, queries: Sequence[str], filters: Filter | None,
                     limit: int, ranking: Ranking) -> list[Result]:
        infos = await self.stores(ids, owner)
        store_ids = list(infos)
        files = await self.store.searchable_files(store_ids)
        chosen = [f for f in files if matches(filters, f[3])]
        names = {(vs, fid): (name, attrs) for vs, fid, name, attrs in chosen}
        allowed = None if filters is None else sorted({fid for _, fid, _, _ in chosen})
        queries = [q for q in queries if q.strip()][:MAX_QUERIES]
        if not queries or (allowed is not None and not allowed) or not files:
            await self.store.touch_vector_stores(store_ids)
            return []
        embedded = [info for info in infos.values() if info.embedding_model is not None and info.dimension]
        use_vectors = bool(embedded) and self.embedder is not None and ranking.embedding_weight > 0
        # the keyword side (the database's threads) and the vector side (the query's embedding, then a scan in
        # a worker thread) run at once: a search takes the longer of the two, not their sum
        keyword_task = asyncio.gather(*(self.store.keyword_search(q, store_ids, allowed, CANDIDATES, not use_vectors)
                                        for q in queries)) if ranking.text_weight > 0 else None
        vector: list[list[tuple[Hit, float]]] = [[] for _ in queries]
        try:
            if use_vectors:
                vector = await self._vectors(embedded, queries, None if allowed is None else set(allowed))
            keyword = await keyword_task if keyword_task is not None else [[] for _ in queries]
        except BaseException:
            if keyword_task is not None:
                keyword_task.cancel()
                await asyncio.gather(keyword_task, return_exceptions=True)
            raise
        # several stores' candidates compete by their cosine with the query
        by_vector = [[hit for hit, _ in sorted(pairs, key=lambda p: -p[1])[:CANDIDATES]] for pairs in vector]
        fused = merge([fuse(k, v, ranking) for k, v in zip(keyword, by_vector, strict=True)])
        ranked = [(hit, score) for hit, score in final(fused, ranking, limit * 2)
                  if isinstance(hit, Hit) and (hit.vector_store_id, hit.file_id) in names][:limit]
        texts = await self.store.chunk_texts([hit for hit, _ in ranked])
        await self.store.touch_vector_stores(store_ids)
        out = []
        for hit, score in ranked:
            name, attrs = names[(hit.vector_store_id, hit.file_id)]
            if hit in texts:
                out.append(Result(hit.vector_store_id, hit.file_id, name, attrs, round(score, 6), texts[hit],
                                  hit.position))
        return out
