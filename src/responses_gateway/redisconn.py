"""Opening Redis: one server (or a proxy that looks like one), or a Redis Cluster (`--redis-cluster`).

A Cluster needs its own client: it learns which node holds which hash slot from the node in the URL (any
one will do) and sends each command to the node that holds its key; commands that touch several keys must
keep them in one slot (a `{hash tag}` in each key). Both clients speak the same commands, so callers use
either the same way. The URL's database must be 0 on a Cluster (it has no others).
"""

from __future__ import annotations

from typing import Any


def connect(url: str, cluster: bool, **options: Any) -> Any:
    """A redis-py asyncio client for `url` (the cluster client when `cluster`); `options` go to both."""
    if cluster:
        from redis.asyncio.cluster import RedisCluster

        return RedisCluster.from_url(url, **options)
    import redis.asyncio as aioredis

    return aioredis.from_url(url, **options)
