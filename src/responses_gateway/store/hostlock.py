"""One writer at a time across every process on the host that opens the same SQLite file, without sleeping.

SQLite lets one connection write at a time. A connection that finds the write lock taken calls its busy
handler, which sleeps — 1, 2, 5, 10 … 100 ms between tries — so under load the lock sits free while the
waiters sleep: the whole host stopped near 800 stored responses/s whatever the number of `--workers`
(issue 24). Here every writer (each worker's writer thread, `db purge`, another replica's process on the same
file) first takes an exclusive `flock` on a file beside the database. Waiters queue in the kernel and the
next one wakes the moment the holder releases; once it holds this lock, SQLite's own lock is free (unless a
process outside the gateway writes: then the busy handler still applies, and is counted).

A wait has a deadline: the blocking `flock` runs on a thread of its own, and a writer that gives up leaves
the lock to be released by that thread as soon as it is granted. The kernel releases the lock of a process
that dies, so a crashed worker never leaves it held.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable
from pathlib import Path


class HostLock:
    def __init__(self, path: Path):
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self.cond = threading.Condition()
        self.wanted = False  # a writer is waiting for the acquirer thread
        self.granted = False  # the acquirer got the lock for that writer
        self.closed = False
        self.acquirer: threading.Thread | None = None

    def acquire(self, timeout: float, on_wait: Callable[[], None] | None = None) -> None:
        """Hold the lock. When another process holds it, `on_wait` is called and this one waits, at most
        `timeout` seconds (then TimeoutError)."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        if on_wait is not None:
            on_wait()
        with self.cond:
            if self.acquirer is None:
                self.acquirer = threading.Thread(target=self._acquire_forever, name="rg-sqlite-hostlock",
                                                 daemon=True)
                self.acquirer.start()
            self.wanted = True
            self.cond.notify_all()
            if not self.cond.wait_for(lambda: self.granted, timeout):
                self.wanted = False  # the acquirer releases it when the kernel grants it
                raise TimeoutError(f"the writer lock {self.path} was not released within {timeout:g} s")
            self.granted = False

    def release(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)

    def _acquire_forever(self) -> None:
        """The acquirer thread: a blocking flock (in the kernel: no polling) each time a writer waits. It
        closes the descriptor when the lock closes."""
        while True:
            with self.cond:
                self.cond.wait_for(lambda: self.wanted or self.closed)
                if self.closed:
                    os.close(self.fd)
                    return
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            with self.cond:
                if self.wanted and not self.closed:
                    self.wanted, self.granted = False, True
                    self.cond.notify_all()
                else:  # its writer gave up meanwhile
                    fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """The last call. The acquirer thread, if one was started, closes the descriptor as it ends (at once
        when idle; when the kernel grants it the lock if it is waiting)."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()
            if self.acquirer is None:
                os.close(self.fd)
