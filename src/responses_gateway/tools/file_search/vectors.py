"""Exact nearest-neighbour search over a vector store's embeddings, held in memory per process.

A store's vectors are loaded once (one query) into a float32 matrix and kept while the store's `version` is
unchanged; a search is then one matrix product and a partial sort, in a worker thread. The matrices are kept
within `max_bytes` (least recently used go first). This is an exact scan: 100k chunks of 384 dimensions are
~150 MB and ~10 ms a query on one core (docs/benchmarks.md has the figures).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from .store import Hit, VectorStores


@dataclass
class Matrix:
    version: int
    keys: list[tuple[str, int]]  # (file id, position) of each row
    files: Any  # int32 code of each row's file
    codes: dict[str, int]  # file id → code
    vectors: Any  # float32 [rows, dimension]

    @property
    def nbytes(self) -> int:
        return int(self.vectors.nbytes) + 64 * len(self.keys)


def build(version: int, rows: list[tuple[str, int, bytes]]) -> Matrix:
    import numpy as np

    codes: dict[str, int] = {}
    keys = [(file_id, position) for file_id, position, _ in rows]
    files = np.asarray([codes.setdefault(file_id, len(codes)) for file_id, _, _ in rows], dtype=np.int32)
    if rows:
        vectors = np.frombuffer(b"".join(blob for _, _, blob in rows), dtype=np.float32).reshape(len(rows), -1)
    else:
        vectors = np.zeros((0, 0), dtype=np.float32)
    return Matrix(version, keys, files, codes, vectors)


def nearest(matrix: Matrix, queries: Any, allowed: set[str] | None, limit: int) -> list[list[tuple[int, float]]]:
    """(row number, cosine) of the `limit` best rows for each query (best first), among the allowed files'."""
    import numpy as np

    if matrix.vectors.shape[0] == 0:
        return [[] for _ in range(len(queries))]
    scores = queries @ matrix.vectors.T  # [queries, rows]: cosines (both sides are unit vectors)
    if allowed is not None:
        codes = [matrix.codes[f] for f in allowed if f in matrix.codes]
        mask = np.isin(matrix.files, np.asarray(codes, dtype=np.int32))
        scores[:, ~mask] = -np.inf
    out: list[list[tuple[int, float]]] = []
    for row in scores:
        k = min(limit, len(row))
        top = np.argpartition(row, len(row) - k)[len(row) - k:]  # the k best, unordered: one pass, no sort
        top = top[np.argsort(-row[top], kind="stable")]
        # unrelated (or opposite) vectors, and rows of files the filters left out, are no match at all
        out.append([(int(i), float(row[i])) for i in top if row[i] > 0])
    return out


class VectorCache:
    def __init__(self, store: VectorStores, max_bytes: int = 1024 * 1024 * 1024):
        self.store = store
        self.max_bytes = max_bytes
        self.entries: OrderedDict[str, Matrix] = OrderedDict()
        self.locks: dict[str, asyncio.Lock] = {}

    async def matrix(self, vector_store_id: str, version: int) -> Matrix:
        found = self.entries.get(vector_store_id)
        if found is not None and found.version == version:
            self.entries.move_to_end(vector_store_id)
            return found
        lock = self.locks.setdefault(vector_store_id, asyncio.Lock())
        async with lock:
            found = self.entries.get(vector_store_id)
            if found is not None and found.version == version:
                return found
            rows = await self.store.store_vectors(vector_store_id)
            matrix = await asyncio.to_thread(build, version, rows)
            self.entries[vector_store_id] = matrix
            self.entries.move_to_end(vector_store_id)
            self._trim()
            return matrix

    def _trim(self) -> None:
        total = sum(m.nbytes for m in self.entries.values())
        while total > self.max_bytes and len(self.entries) > 1:
            _, gone = self.entries.popitem(last=False)
            total -= gone.nbytes

    async def search(self, vector_store_id: str, version: int, queries: Any, allowed: set[str] | None,
                     limit: int) -> list[list[tuple[Hit, float]]]:
        """For each query, the best chunks and their cosines, best first."""
        matrix = await self.matrix(vector_store_id, version)
        rows = await asyncio.to_thread(nearest, matrix, queries, allowed, limit)
        return [[(Hit(vector_store_id, *matrix.keys[i]), cosine) for i, cosine in found] for found in rows]

