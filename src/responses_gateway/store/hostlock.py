"""One writer at a time across every process on the host that opens the same SQLite file, without sleeping.

SQLite lets one connection write at a time. A connection that finds the write lock taken calls its busy
handler, which sleeps — 1, 2, 5, 10 … 100 ms between tries — so under load the lock sits free while the
waiters sleep: the whole host stopped near 800 stored responses/s whatever the number of `--workers`
(issue 24). Here every writer (each worker's writer thread, `db purge`, another gateway process on the same
file) first takes an exclusive `flock` on a file beside the database. Waiters queue in the kernel and the
next one wakes the moment the holder releases; once it holds this lock, SQLite's own lock is free (unless a
process outside the gateway writes: then the busy handler still applies, and is counted). The kernel
releases the lock of a process that dies, so a crashed worker never leaves it held.

The blocking `acquire` has no deadline of its own: sqlite.py gives up on the writes waiting for it instead
(and releases the lock unused if it is granted after that).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class HostLock:
    def __init__(self, path: Path):
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    def try_acquire(self) -> bool:
        """Take the lock if no other process holds it; False if one does."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def acquire(self) -> None:
        """Wait in the kernel until the lock is granted (no polling)."""
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def release(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self.fd)
