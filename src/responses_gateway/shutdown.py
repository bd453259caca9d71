"""Graceful drain: on SIGTERM the server stops accepting (uvicorn does that) and running responses get
`drain_timeout` seconds to finish; those still running then end with a stored `response.failed`
(`server_shutting_down`) instead of a cut connection."""

from __future__ import annotations

import asyncio
import signal
import threading
from types import FrameType
from typing import Any

from .pipeline import end_all


def on_sigterm(drain_timeout: float) -> None:
    """Chain a SIGTERM handler to the server's own (which still decides when to stop). Only the main thread
    can handle signals: an app served from another thread (the tests' in-process servers) has no drain."""
    if threading.current_thread() is not threading.main_thread():
        return
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGTERM)

    def handler(sig: int, frame: FrameType | None) -> None:
        loop.call_soon_threadsafe(_later, loop, drain_timeout)
        if callable(previous):
            previous(sig, frame)

    signal.signal(signal.SIGTERM, handler)


def _later(loop: asyncio.AbstractEventLoop, seconds: float) -> Any:
    return loop.call_later(seconds, end_all)
