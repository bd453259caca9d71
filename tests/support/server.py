"""Real servers for the tests: an ASGI app under uvicorn on a loopback port, in a background thread."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import threading
import time

import httpx
import uvicorn

from responses_gateway.app import create_app
from responses_gateway.config import Settings


class UvicornThread:
    def __init__(self, app, name: str = "asgi-server", **options):
        self.app = app
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        # keep-alive longer than any test: a loaded machine must not turn the idle-close race into failures
        config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1,
                                timeout_keep_alive=120, **options)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        asyncio.run(self.server.serve(sockets=[self.sock]))

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"{self.thread.name} did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


class GatewayServer(UvicornThread):
    """The real gateway (uvicorn + the ASGI app)."""

    def __init__(self, settings: Settings, upstream=None, router=None, **options):
        """`router`: an already built router (its rules' routes are what the request path reads);
        `options`: more uvicorn settings (e.g. ssl_certfile/ssl_keyfile)."""
        self.settings = settings
        # The gateway's own protocols (edge.py), as `serve` runs them; GATEWAY_TEST_EDGE=0 runs uvicorn's
        # plain ones (the ASGI path the app also serves under another server), `http="httptools"` one test's.
        if os.environ.get("GATEWAY_TEST_EDGE", "1") != "0":
            options.setdefault("http", "responses_gateway.edge:EdgeProtocol")
            options.setdefault("ws", "responses_gateway.edge:EdgeWebSocketProtocol")
        super().__init__(create_app(settings, upstream, router), name="gateway", **settings.server_options(), **options)


def wait_healthy(url: str, proc: subprocess.Popen, seconds: float = 30) -> bool:
    """Wait until a gateway process answers `GET url/health` with 200; False if it exits or the time runs out."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return True
        except httpx.TransportError:
            time.sleep(0.1)
    return False
