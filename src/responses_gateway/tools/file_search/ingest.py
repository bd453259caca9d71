"""Ingestion: vector store files become chunks (and embeddings), as durable jobs.

Each process runs one `Ingestor`: it claims `in_progress` files whose lease is free (tools/file_search/store.py),
at most `--ingest-workers` at a time, and renews their leases while it works. A file is read from the store,
its text extracted and chunked in worker threads (the event loop never waits on them), embedded in batches,
and written — its chunks in short transactions of bounded size, each only while the file is still this
worker's, then its status (`completed` once every chunk is in). A process that
dies leaves leases that run out (`--lease-timeout`): another process, or this one restarted, takes the files
up. A file that has already been tried MAX_ATTEMPTS times (a crash each time) fails instead of being tried
forever. Files added by this process are started at once (`wake`); others are found by polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from dataclasses import dataclass
from typing import Protocol

from ...ids import new_id
from ...store.files import Files
from .bounds import ExtractError, Limits
from .chunking import chunk
from .embeddings import Embedder, EmbeddingError
from .extract import extract, not_supported, readable
from .store import ChunkRow, Job, VectorStores

log = logging.getLogger("responses_gateway.file_search")

MAX_ATTEMPTS = 3
POLL = 1.0  # seconds between looks for files another process added (or left behind)


@dataclass(frozen=True)
class IngestSettings:
    workers: int
    lease: float
    limits: Limits


class IngestStore(Files, VectorStores, Protocol):
    """The store's roles file_search uses."""


class Ingestor:
    def __init__(self, store: IngestStore, embedder: Embedder | None, settings: IngestSettings):
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{new_id('ing')[-8:]}"
        self.slots = asyncio.Semaphore(settings.workers)
        self.woken = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()
        self.loop_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.loop_task = asyncio.create_task(self._run())

    def wake(self) -> None:
        self.woken.set()

    async def close(self) -> None:
        if self.loop_task is not None:
            self.loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.loop_task
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        try:  # what was being ingested is taken up at once by the next process, not after the lease
            await self.store.release_jobs(self.worker)
        except Exception:
            log.warning("could not release this process's ingestion jobs; their leases will run out")

    async def _run(self) -> None:
        while True:
            await self.slots.acquire()
            try:
                job = await self.store.claim_job(self.worker, self.settings.lease)
            except Exception:
                log.exception("claiming an ingestion job failed")
                job = None
            if job is None:
                self.slots.release()
                self.woken.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.woken.wait(), POLL)
                continue
            task = asyncio.create_task(self._job(job))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _job(self, job: Job) -> None:
        renew = asyncio.create_task(self._renew(job))
        try:
            await self.ingest(job)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug: the file fails, the store and other files go on
            log.exception("ingesting %s into %s failed", job.file_id, job.vector_store_id)
            await self._fail(job, "server_error", f"Ingestion failed: {type(exc).__name__}.")
        finally:
            renew.cancel()
            self.slots.release()

    async def _renew(self, job: Job) -> None:
        while True:
            await asyncio.sleep(self.settings.lease / 3)
            try:
                if not await self.store.renew_job(job, self.worker, self.settings.lease):
                    return  # cancelled, deleted or taken over: the result will not be written
            except Exception:
                log.warning("renewing the lease of %s failed", job.file_id)

    async def _fail(self, job: Job, code: str, message: str) -> None:
        with contextlib.suppress(Exception):
            await self.store.fail_job(job, self.worker, code, message)
            await self.store.drop_abandoned(job)  # what a failure in the middle of writing it left

    async def ingest(self, job: Job) -> None:
        if job.attempts > MAX_ATTEMPTS:
            await self._fail(job, "server_error", f"Ingestion did not finish in {MAX_ATTEMPTS} attempts.")
            return
        file = await self.store.get_file(job.file_id, job.owner)
        if file is None:
            await self._fail(job, "invalid_file", "The file was deleted or has expired.")
            return
        parts: list[bytes] = []
        async for part in self.store.blobs.read(job.file_id):
            if not parts and not readable(part, file["filename"]):  # a binary: never read past its first part
                await self._fail(job, "unsupported_file", not_supported(file["filename"]).message)
                return
            parts.append(part)
        data = b"".join(parts)
        del parts
        try:
            text = await asyncio.to_thread(extract, data, file["filename"], self.settings.limits)
        except ExtractError as exc:
            await self._fail(job, exc.code, exc.message)
            return
        del data
        static = job.chunking["static"]
        chunks = await asyncio.to_thread(chunk, text, static["max_chunk_size_tokens"], static["chunk_overlap_tokens"])
        if not chunks:
            await self._fail(job, "invalid_file", "The file has no text to index.")
            return
        infos = await self.store.store_infos([job.vector_store_id], job.owner)
        info = infos.get(job.vector_store_id)
        if info is None:
            return  # the store was deleted meanwhile: nothing to write
        blobs: list[bytes | None] = [None] * len(chunks)
        dimension = None
        if info.embedding_model is not None:
            if self.embedder is None or self.embedder.model != info.embedding_model:
                now = self.embedder.model if self.embedder else "none"
                await self._fail(job, "server_error", f"The vector store was made with the embedding model "
                                                      f"'{info.embedding_model}'; this gateway's is '{now}'.")
                return
            try:
                vectors = await self.embedder.embed([c.text for c in chunks])
            except EmbeddingError as exc:
                await self._fail(job, "server_error", str(exc))
                return
            dimension = int(vectors.shape[1])
            if info.dimension is not None and info.dimension != dimension:
                await self._fail(job, "server_error", f"The embeddings have {dimension} dimensions; the vector store's "
                                                      f"have {info.dimension}.")
                return
            blobs = [row.tobytes() for row in vectors]
        rows = [ChunkRow(i, c.start, c.end, c.tokens, c.text, blobs[i]) for i, c in enumerate(chunks)]
        usage = sum(len(c.text.encode("utf-8")) for c in chunks) + sum(len(b) for b in blobs if b)
        if not await self.store.finish_job(job, self.worker, rows, usage, dimension):
            log.info("%s in %s was cancelled or taken over; its chunks were not written", job.file_id,
                     job.vector_store_id)
