"""ids.py: OpenAI's shape, and no id handed out twice — across threads, or in a forked child."""

from __future__ import annotations

import os
import re
import threading

from responses_gateway.ids import new_id


def test_the_shape_is_a_prefix_and_48_hex_digits():
    assert re.fullmatch(r"resp_[0-9a-f]{48}", new_id("resp"))


def test_threads_never_share_an_id():
    found: list[list[str]] = []

    def make() -> None:
        found.append([new_id("msg") for _ in range(5_000)])

    threads = [threading.Thread(target=make) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [i for batch in found for i in batch] + [new_id("msg") for _ in range(5_000)]
    assert len(set(ids)) == len(ids) == 25_000


def test_a_forked_child_does_not_repeat_its_parents_next_ids():
    new_id("x")  # a pool with ids left in it
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, "\n".join(new_id("x") for _ in range(10)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as f:
        child = set(f.read().split("\n"))
    assert not child & {new_id("x") for _ in range(10)}
