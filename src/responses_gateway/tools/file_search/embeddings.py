"""Embeddings from an OpenAI-compatible `POST /embeddings` (vLLM, Ollama, llama.cpp, TEI, OpenAI), checked.

Texts go in batches (`--embeddings-batch`), each request under `--embeddings-timeout`. An answer is used only
if it is exactly what was asked for: one embedding per input, each index once, every vector of the same
dimension, finite and not all zeros; anything else is an `EmbeddingError` (a file's `server_error`, a search's
failure) rather than vectors that would silently rank wrong. Vectors come back L2-normalised (float32), so a
dot product is the cosine.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import aiohttp
import orjson

INLINE = 10  # answers of at most this many vectors are checked on the event loop (a search's: under 1 ms)


class EmbeddingError(Exception):
    pass


class Embedder:
    def __init__(self, base_url: str, model: str, api_key: str | None, batch: int = 64, timeout: float = 60.0):
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.api_key = api_key
        self.batch = batch
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(json_serialize=lambda o: orjson.dumps(o).decode())
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def embed(self, texts: list[str]) -> Any:
        """A float32 array, one unit row per text."""
        import numpy as np

        rows: list[Any] = []
        for at in range(0, len(texts), self.batch):
            rows.append(await self._request(texts[at:at + self.batch]))
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        dims = {r.shape[1] for r in rows}
        if len(dims) != 1:
            raise EmbeddingError(f"The embeddings server answered vectors of different dimensions {sorted(dims)}.")
        return np.concatenate(rows)

    async def _request(self, texts: list[str]) -> Any:
        headers = {"content-type": "application/json"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        body = {"model": self.model, "input": texts, "encoding_format": "float"}
        try:
            async with asyncio.timeout(self.timeout):
                async with self.session().post(self.url, data=orjson.dumps(body), headers=headers) as resp:
                    raw = await resp.read()
                    status = resp.status
        except TimeoutError:
            raise EmbeddingError(f"The embeddings server did not answer within {self.timeout:g} s.") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise EmbeddingError(f"Could not reach the embeddings server ({type(exc).__name__}).") from None
        if status != 200:
            raise EmbeddingError(f"The embeddings server failed (HTTP {status}): {_message(raw)}"[:500])
        if len(texts) <= INLINE:  # a search's queries: less work than a hop to a thread
            return checked(raw, len(texts))
        return await asyncio.to_thread(checked, raw, len(texts))


def _message(raw: bytes) -> str:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw[:200].decode("utf-8", "replace")
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return raw[:200].decode("utf-8", "replace")


def checked(raw: bytes, count: int) -> Any:
    """The answer's vectors in input order, normalised; EmbeddingError for anything not exactly right."""
    import numpy as np

    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise EmbeddingError("The embeddings server's answer is not JSON.") from None
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or len(data) != count:
        got = len(data) if isinstance(data, list) else "no"
        raise EmbeddingError(f"The embeddings server answered {got} embeddings for {count} inputs.")
    rows: list[Any] = [None] * count
    dimension = None
    for entry in data:
        index = entry.get("index") if isinstance(entry, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count or rows[index] is not None:
            raise EmbeddingError(f"The embeddings server answered a missing, repeated or out-of-range index {index!r}.")
        vector = entry.get("embedding")
        if not isinstance(vector, list) or not vector or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in vector):
            raise EmbeddingError(f"Embedding {index} is not a list of numbers.")
        if dimension is None:
            dimension = len(vector)
        elif len(vector) != dimension:
            raise EmbeddingError(f"Embedding {index} has dimension {len(vector)}, not {dimension} like the others.")
        row = np.asarray(vector, dtype=np.float64)
        if not np.all(np.isfinite(row)):
            raise EmbeddingError(f"Embedding {index} has a value that is not finite.")
        norm = math.sqrt(float(row @ row))
        if norm == 0 or not math.isfinite(norm):
            raise EmbeddingError(f"Embedding {index} is all zeros.")
        rows[index] = (row / norm).astype(np.float32)
    return np.stack(rows)
