"""The SQLite writer's thread (store/thread.py): jobs in order, a failing job does not stop it, and it is an
executor `run_in_executor` can use."""

from __future__ import annotations

import asyncio
import threading

import pytest

from responses_gateway.store.thread import Worker


def test_jobs_run_in_order_on_one_thread_and_a_failing_one_does_not_stop_it():
    worker = Worker("rg-test")
    seen: list[tuple[int, str]] = []
    done = threading.Event()

    def fail() -> None:
        raise ValueError("boom")

    worker.hand(seen.append, (1, threading.current_thread().name))
    worker.hand(lambda: seen.append((2, threading.current_thread().name)))
    worker.hand(fail)
    worker.hand(lambda: seen.append((3, threading.current_thread().name)))
    worker.hand(done.set)
    assert done.wait(5)
    assert [n for n, _ in seen] == [1, 2, 3]
    assert {name for _, name in seen[1:]} == {"rg-test"}
    worker.shutdown()


def test_run_in_executor_gets_results_and_exceptions_and_shutdown_refuses_more():
    worker = Worker("rg-test")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(worker, lambda: threading.current_thread().name) == "rg-test"
        with pytest.raises(KeyError):
            await loop.run_in_executor(worker, {}.__getitem__, "x")

    asyncio.run(main())
    worker.shutdown(wait=True)
    assert worker.thread is not None and not worker.thread.is_alive()
    with pytest.raises(RuntimeError):
        worker.submit(print)
    with pytest.raises(RuntimeError):
        worker.hand(print)


def test_a_worker_never_used_starts_no_thread():
    worker = Worker("rg-test")
    worker.shutdown()
    assert worker.thread is None
