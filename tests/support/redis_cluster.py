"""A real three-node Redis Cluster on loopback, started for the test session (Debian's `redis-server` in
cluster mode, joined with `redis-cli --cluster create`, no replicas), and stopped at its end.

    from tests.support import redis_cluster
    redis_cluster_url = redis_cluster.redis_cluster_url   # the URL of one node: a cluster client finds the rest

Without `redis-server` on PATH the tests that use it are skipped (or fail when the environment variable CI
is set).
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import needs

NODES = 3


def _cluster_port() -> int:
    """A free port whose cluster bus port (+10000, Redis's fixed offset) is free and valid too."""
    for _ in range(100):
        port = random.randint(20000, 50000)
        try:
            for candidate in (port, port + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


def _unusable(message: str) -> None:
    needs.need("Redis Cluster", False, message)


def _cluster_ok(port: int) -> bool:
    done = subprocess.run(["redis-cli", "-p", str(port), "cluster", "info"], capture_output=True, text=True,
                          timeout=10)
    return "cluster_state:ok" in done.stdout


@pytest.fixture(scope="session")
def redis_cluster_url() -> Iterator[str]:
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        _unusable("redis-server and redis-cli are needed for the Redis Cluster tests")
    workdir = Path(tempfile.mkdtemp(prefix="rg-redis-cluster-"))
    ports = [_cluster_port() for _ in range(NODES)]
    procs = []
    try:
        for port in ports:
            node = workdir / str(port)
            node.mkdir()
            procs.append(subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                 "--cluster-config-file", str(node / "nodes.conf"), "--dir", str(node), "--save", "",
                 "--appendonly", "no", "--logfile", str(node / "redis.log")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 15
        for port in ports:
            while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True,
                                 timeout=10).stdout.strip() != "PONG":
                if time.monotonic() > deadline:
                    _unusable(f"redis-server on port {port} did not start")
                time.sleep(0.05)
        created = subprocess.run(["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
                                  "--cluster-replicas", "0", "--cluster-yes"], capture_output=True, text=True,
                                 timeout=60)
        if created.returncode != 0:
            _unusable(f"redis-cli --cluster create failed: {created.stdout[-500:]} {created.stderr[-500:]}")
        while not all(_cluster_ok(p) for p in ports):
            if time.monotonic() > deadline + 30:
                _unusable("the Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{ports[0]}/0"
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
