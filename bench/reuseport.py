"""Several processes serving one port (SO_REUSEPORT), for the bench's servers on many-core machines.

Each process has a listening socket of its own on the same port and the kernel spreads new connections over
them, which is what the fake upstream (`--processes`) and the lean translator (`--workers`) use to take more
than one core. The siblings are forked before any event loop exists, each binds its own socket, and the
port is handed back only once every sibling listens, so the first connections are spread too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections.abc import Callable


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening socket that other processes can bind too: the kernel spreads new connections over every
    process listening on the port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def fork_siblings(processes: int, host: str, port: int,
                  child: Callable[[int, socket.socket, int], None]) -> tuple[socket.socket, list[int]]:
    """This process's socket and `processes - 1` forked siblings, each running `child(index, its socket,
    parent pid)` and exiting when it returns. Returns once every sibling listens (or died trying)."""
    first = listening_socket(host, port)
    port = first.getsockname()[1]
    ready_r, ready_w = os.pipe()
    children = []
    for index in range(1, processes):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(ready_r)
                first.close()
                sock = listening_socket(host, port)
                os.write(ready_w, b"1")
                os.close(ready_w)
                child(index, sock, os.getppid())
            except BaseException:  # noqa: BLE001 - a forked child must never return into the parent's code
                code = 1
            finally:
                os._exit(code)
        children.append(pid)
    os.close(ready_w)
    started = 0
    while started < len(children):
        got = os.read(ready_r, 64)
        if not got:
            break  # a sibling died before listening: the others serve
        started += len(got)
    os.close(ready_r)
    return first, children


def reap(children: list[int], timeout: float = 5.0) -> None:
    """SIGTERM the siblings and wait for them, bounded."""
    for pid in children:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + timeout
    for pid in children:
        while True:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
            except ChildProcessError:
                break
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.05)
