"""Ids shaped like OpenAI's (prefix + 48 hex digits), so clients that sniff prefixes keep working.

The random bytes come from the OS (`os.urandom`) 4 KiB at a time, per thread: one system call per 170
ids instead of one each. Each call releases the GIL, and on the event loop's thread getting it back can
mean waiting for the store's thread to give it up.
"""

import os
import threading

_SIZE = 24  # bytes of randomness in an id
_POOL = 4096 // _SIZE * _SIZE
_local = threading.local()
# A forked child must not hand out the ids left in its parent's pool.
os.register_at_fork(after_in_child=lambda: _local.__dict__.clear())


def new_id(prefix: str) -> str:
    local = _local
    at = getattr(local, "at", _POOL)
    if at >= _POOL:
        local.pool, at = os.urandom(_POOL), 0
    local.at = at + _SIZE
    return f"{prefix}_{local.pool[at:at + _SIZE].hex()}"
