"""Background responses: jobs that run detached from any client, on a lease, with a log anyone can follow.

`POST /v1/responses` with `background: true` starts the response (respond.start, as every transport does)
and hands its batches to a `Job`: a task of its own, so a client that goes away never stops it. The job
appends every event to its event log (eventlog.py) and, with Redis, to a Redis stream (redisbus.py).

One ticker per process, every `background_poll` seconds:
- flushes new events of its jobs to the database (one transaction for all jobs);
- renews the leases of its jobs and reads their cancel flags (how a cancel from another replica arrives
  without Redis);
- reaps: a background response whose lease has run out lost its replica (SIGKILL, lost host) — the first
  replica to see it stores it as failed (or cancelled, if that was asked) and appends the terminal event,
  so followers end. With the default 10 s lease that happens within ~12 s of the replica's death.

On shutdown (SIGTERM) the process takes no new jobs and gives running ones `drain_timeout` seconds; those
still running then end as failed, properly, with their terminal event.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from .composer import Composer
from .errors import APIError
from .eventlog import ACTIVE, Ended, LiveLog, follow_db
from .pipeline import GATEWAY_FAILED, Cancelled, Ending, Failed, NotEnded, Started, end
from .sse import encode, is_terminal

if TYPE_CHECKING:
    from .config import Settings
    from .door import Ticket
    from .redisbus import RedisBus
    from .store import Store

log = logging.getLogger("responses_gateway.background")

SHUTDOWN_MESSAGE = "The gateway shut down before this background response finished."
LOST_MESSAGE = ("The gateway replica running this background response stopped (its lease expired) before the "
                "response finished.")


def _ms() -> int:
    return int(time.time() * 1000)


class _Stop(Exception):
    pass


class Job:
    """One background response running in this process."""

    def __init__(self, manager: Background, started: Started, ticket: Ticket | None = None):
        self.manager = manager
        self.started = started
        self.ticket = ticket  # the request's admission (door.py), held until the response ends
        self.id: str = started.final["id"]
        self.log = LiveLog()
        self.flushed = 0  # frames already in the database
        self.stop_reason: str | None = None  # "cancel", "shutdown" or "lost"
        self.busy = False  # publishing a batch: a stop waits for the batch to be whole
        self.running = False  # consuming: before, a stop is seen after the first batch (which opens nothing)
        self.task: asyncio.Task[None] | None = None

    def stop(self, reason: str) -> None:
        if self.stop_reason is not None or self.started.composer.closed:
            return
        self.stop_reason = reason
        if self.running and not self.busy and self.task is not None:
            self.task.cancel()

    async def publish(self, events: list[dict[str, Any]]) -> None:
        frames = [encode(e) for e in events]
        first = len(self.log.frames)
        self.log.extend(frames)
        bus = self.manager.bus
        if bus is not None:
            try:
                await bus.add(self.id, first, frames)
            except Exception as exc:  # followers on other replicas fall back to the database copy
                log.warning("response %s: Redis append failed: %s", self.id, exc)

    async def _consume(self) -> None:
        batches = self.started.batches
        self.running = True
        try:
            first = True
            async for events in batches:
                self.busy = True
                await self.publish(events)
                if first:  # response.created (queued) and response.in_progress: GET shows in_progress now
                    first = False
                    await self.manager.store.progress(self.started.final)
                self.busy = False
                if self.stop_reason is not None:
                    raise _Stop
        finally:
            await batches.aclose()  # closes the upstream request (and MCP sessions)

    async def run(self) -> None:
        try:
            try:
                await self._consume()
            except asyncio.CancelledError:
                if self.stop_reason is None:
                    raise
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
            except _Stop:
                pass
            except Exception:
                log.exception("background response %s failed inside the gateway", self.id)
                self.stop_reason = self.stop_reason or "error"
            if self.stop_reason is not None and self.stop_reason != "lost":
                await self._end_early()
        finally:
            self.log.close()
            if self.ticket is not None:
                await self.ticket.release()
            await self.manager.finished(self)

    async def _end_early(self) -> None:
        how: Ending
        if self.stop_reason == "cancel":
            how = Cancelled()
        elif self.stop_reason == "shutdown":
            how = Failed("server_shutting_down", SHUTDOWN_MESSAGE)
        else:
            how = Failed("server_error", GATEWAY_FAILED)
        events = await end(self.started.composer, how, self.started.on_final, self.started.seen)
        if events:
            await self.publish(events)


class Background:
    """This process's background jobs, its ticker, and what GET / cancel need to reach any replica's jobs."""

    def __init__(self, settings: Settings, store: Store, bus: RedisBus | None = None):
        self.settings = settings
        self.store = store
        self.bus = bus
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"
        self.jobs: dict[str, Job] = {}
        self.accepting = True
        self.ticker: asyncio.Task[None] | None = None
        self.flushing = asyncio.Lock()  # one flush at a time: the runs a flush writes never overlap
        self.idle = asyncio.Event()
        self.idle.set()

    # -- lifecycle -------------------------------------------------------------------------------------------

    async def open(self) -> None:
        if self.bus is not None:
            await self.bus.open(self._cancel_signal)
        self.ticker = asyncio.create_task(self._tick_forever())

    async def drain(self, timeout: float) -> None:
        """Take no new jobs; wait up to `timeout` s for running ones, then end the rest as failed."""
        self.accepting = False
        if self.jobs:
            log.info("draining %d background responses (up to %g s)", len(self.jobs), timeout)
            try:
                await asyncio.wait_for(self.idle.wait(), timeout)
            except TimeoutError:
                for job in list(self.jobs.values()):
                    job.stop("shutdown")
                await asyncio.wait([j.task for j in self.jobs.values() if j.task is not None], timeout=10)

    async def close(self) -> None:
        if self.ticker is not None:
            self.ticker.cancel()
        try:
            await self._flush()
        except Exception:
            log.exception("flushing background event logs failed")
        if self.bus is not None:
            await self.bus.close()

    # -- jobs --------------------------------------------------------------------------------------------

    def admit(self) -> None:
        """Before a background response is started: refuse it when this process is full or stopping."""
        if not self.accepting:
            raise APIError(503, "This gateway replica is shutting down; retry the request.", type="server_error",
                           code="server_shutting_down")
        if len(self.jobs) >= self.settings.max_background:
            raise APIError(429, f"Too many background responses in progress on this server (the limit is "
                                f"{self.settings.max_background}); retry when one has finished.",
                           type="requests", code="rate_limit_exceeded")

    async def submit(self, started: Started, ticket: Ticket | None = None) -> dict[str, Any]:
        """Store the queued response and start its job, which holds `ticket` (the request's admission) until
        the response ends; returns the queued response."""
        queued = dict(started.final)
        await self.store.queue(queued, started.owner, self.worker, _ms() + int(self.settings.lease_timeout * 1000))
        job = Job(self, started, ticket)
        self.jobs[job.id] = job
        self.idle.clear()
        job.task = asyncio.create_task(job.run(), name=f"background {job.id}")
        return queued

    async def finished(self, job: Job) -> None:
        try:
            await self._flush([job])
        except Exception:
            log.exception("response %s: event log not flushed", job.id)
        self.jobs.pop(job.id, None)
        if not self.jobs:
            self.idle.set()

    def _cancel_signal(self, response_id: str) -> None:
        job = self.jobs.get(response_id)
        if job is not None:
            job.stop("cancel")

    # -- what the API needs ---------------------------------------------------------------------------------

    async def cancel(self, response: dict[str, Any], owner: str) -> dict[str, Any]:
        """Cancel a queued or running background response wherever it runs; returns its final state (or its
        current one, if its replica has not stopped it within the wait)."""
        rid = response["id"]
        if response["status"] not in ACTIVE:
            return response
        job = self.jobs.get(rid)
        if job is not None:
            job.stop("cancel")
            if job.task is not None:
                await asyncio.wait([job.task], timeout=max(5.0, self.settings.lease_timeout))
            return job.started.final
        if not await self.store.request_cancel(rid, owner):
            return await self.store.get(rid, owner) or response
        if self.bus is not None:
            await self.bus.cancel(rid)
        deadline = time.monotonic() + max(5.0, 1.5 * self.settings.lease_timeout)
        current = response
        while time.monotonic() < deadline:
            await asyncio.sleep(min(0.05, self.settings.background_poll))
            await self.reap(rid)
            current = await self.store.get(rid, owner) or current
            if current["status"] not in ACTIVE:
                break
        return current

    async def log_expired(self, response: dict[str, Any]) -> bool:
        """True when a finished response's event log is gone (older than the event retention). A younger
        response without logged events is one whose log is still being written (a replica flushes it right
        after storing the final state): its followers wait for it."""
        if response["id"] in self.jobs or response["status"] in ACTIVE:
            return False
        if time.time() - response["created_at"] < self.settings.event_retention_hours * 3600:
            return False
        last: int = await self.store.last_event(response["id"])
        return last < 0

    def follow(self, response_id: str, owner: str, after: int) -> AsyncGenerator[bytes, None]:
        """The SSE frames of a background response after sequence number `after`, live until its end."""
        async def ended() -> dict[str, Any] | None:
            current = await self.store.get(response_id, owner)
            return current if current is None or current["status"] not in ACTIVE else None

        poll = self.settings.background_poll
        job = self.jobs.get(response_id)
        if job is not None:
            return self._follow_local(job, after, poll, ended)
        if self.bus is not None:
            return self.bus.follow(self.store, response_id, after, poll, ended)
        return follow_db(self.store, response_id, after, poll, ended)

    async def _follow_local(self, job: Job, after: int, poll: float, ended: Ended) -> AsyncGenerator[bytes, None]:
        """The job's memory log; if it ended without a terminal event (its lease was lost and another replica
        ended the response), the rest comes from the database."""
        async for chunk in job.log.follow(after):
            yield chunk
        frames = job.log.frames
        if not frames or not is_terminal(frames[-1]):
            async for chunk in follow_db(self.store, job.id, max(after, len(frames) - 1), poll, ended):
                yield chunk

    # -- the ticker --------------------------------------------------------------------------------------

    async def _tick_forever(self) -> None:
        every = self.settings.background_poll
        reap_every = max(every, min(5.0, self.settings.lease_timeout / 4))
        next_reap = 0.0
        while True:
            await asyncio.sleep(every)
            try:
                await self._flush()
                if self.jobs:
                    await self._renew()
                if time.monotonic() >= next_reap:
                    next_reap = time.monotonic() + reap_every
                    await self.reap()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("background ticker failed; retrying")

    async def _flush(self, jobs: list[Job] | None = None) -> None:
        """Write each job's new frames as one run (one row) per job, all jobs in one transaction."""
        async with self.flushing:
            rows, marks = [], []
            for job in jobs if jobs is not None else list(self.jobs.values()):
                frames = job.log.frames
                end = len(frames)
                if end > job.flushed:
                    rows.append((job.id, job.flushed, end - 1, b"".join(frames[job.flushed:end]).decode()))
                    marks.append((job, end))
            if rows:
                await self.store.append_events(rows)
                for job, end in marks:
                    job.flushed = end

    async def _renew(self) -> None:
        owned = await self.store.renew(self.worker, _ms() + int(self.settings.lease_timeout * 1000))
        for rid, job in list(self.jobs.items()):
            if rid not in owned:
                if not job.started.composer.closed:
                    log.warning("response %s: lease lost (another replica declared it failed); stopping", rid)
                    job.stop("lost")
            elif owned[rid]:
                job.stop("cancel")

    async def reap(self, response_id: str | None = None) -> None:
        """Fail (or cancel, if asked) active background responses whose replica's lease has run out."""
        now = _ms()
        for rid, body, cancel in await self.store.expired(now, response_id):
            if rid in self.jobs:
                continue
            last = await self.store.last_event(rid)
            if self.bus is not None:
                last = max(last, await self.bus.last(rid))
            composer = Composer.resume(body, last + 1)

            async def abandon(final: dict[str, Any], composer: Composer = composer, rid: str = rid) -> None:
                try:
                    claimed = await self.store.abandon(composer.stored(), now)
                except Exception as exc:  # still active in the store: the next reap tries again
                    log.warning("response %s: storing it as ended failed: %s", rid, exc)
                    raise NotEnded from None
                if not claimed:
                    raise NotEnded  # another replica was first

            events = await end(composer, Cancelled() if cancel else Failed("server_error", LOST_MESSAGE), abandon)
            if not events:
                continue
            log.warning("response %s: its replica's lease expired; stored as %s", rid, composer.final["status"])
            frames = [encode(e) for e in events]
            await self.store.append_events([(rid, last + 1, last + len(frames), b"".join(frames).decode())])
            if self.bus is not None:
                await self.bus.add(rid, last + 1, frames)
