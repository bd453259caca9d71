"""One thread that runs what it is handed, in order: SQLite's writer (sqlite.py).

A `ThreadPoolExecutor(1)` does the same, but each hand-off costs a `Future`, a work item, the pool's
idle-thread semaphore and, on the thread, setting that future's result under its condition: Python work on
both threads for every group of writes, which the loop never reads (the writes' own results come back by
`call_soon_threadsafe`). `hand` is a bare `SimpleQueue.put` of the function; `submit` (what
`run_in_executor` uses: opening, closing) still returns a future.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from queue import SimpleQueue
from typing import Any, TypeVar

log = logging.getLogger("responses_gateway.store")

T = TypeVar("T")
Job = tuple[Callable[..., Any], tuple[Any, ...]]


class Worker(Executor):
    """A single thread, started at the first job; `shutdown` lets it finish the jobs handed before."""

    def __init__(self, name: str):
        self.name = name
        self.jobs: SimpleQueue[Job | None] = SimpleQueue()
        self.thread: threading.Thread | None = None
        self.guard = threading.Lock()
        self.stopped = False

    def hand(self, fn: Callable[..., object], *args: Any) -> None:
        """Run `fn(*args)` on the thread, after what was handed before; its result is dropped and an
        exception is logged (the function reports its outcome itself)."""
        if self.thread is None or self.stopped:
            self._start()
        self.jobs.put((fn, args))

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()

        def job() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)

        self.hand(job)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self.guard:
            self.stopped = True
            thread = self.thread
        if thread is None:
            return
        self.jobs.put(None)
        if wait:
            thread.join()

    def _start(self) -> None:
        with self.guard:
            if self.stopped:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self.thread.start()

    def _run(self) -> None:
        jobs = self.jobs
        while (job := jobs.get()) is not None:
            fn, args = job
            try:
                fn(*args)
            except BaseException:  # the thread must go on: every later write waits for it
                log.exception("the %s thread's job failed", self.name)
            del job, fn, args
