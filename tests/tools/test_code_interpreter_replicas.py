"""A container across two gateway processes (replicas A and B) on one PostgreSQL database.

Its files live in the database, its interpreter in one process: a request naming the container on the other
replica restarts it there with its files (its variables are those of the replica it last ran on), and the
replica it left knows, at its next call, that its worker is stale (docs/code-interpreter.md).
"""

from __future__ import annotations

import openai
import pytest

from tests.support import backends, needs
from tests.support.code_interpreter import AUTO, call_of, logs, run_code

needs.bubblewrap()  # skipped with what to install where it is missing; a failure in CI

pg_database = backends.pg_database
KEY = "replica-key-0001"


@pytest.fixture
def replicas(pg_database, upstream, tmp_path):
    procs = [backends.GatewayProcess(upstream.base_url, pg_database, "--api-keys", KEY,
                                     "--code-interpreter", "bubblewrap", log_path=tmp_path / f"{name}.log")
             for name in "ab"]
    try:
        for proc in procs:
            proc.wait_ready(timeout=60)
        yield [openai.OpenAI(base_url=f"{proc.url}/v1", api_key=KEY, max_retries=0, timeout=60) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()


def test_a_container_moves_between_replicas_with_its_files(replicas, upstream):
    a, b = replicas
    first = run_code(a, upstream, "x = 41\nopen('/mnt/data/a.txt', 'w').write('from a')\nx + 1", tools=[AUTO])
    call = call_of(first)
    assert logs(call) == "42"
    container = call.container_id
    named = [{"type": "code_interpreter", "container": container}]

    # B has never run it: it starts it from the stored files; the variables stayed on A
    on_b = run_code(b, upstream, "import os\nopen('/mnt/data/b.txt', 'w').write('from b')\n"
                                 "sorted(os.listdir('/mnt/data')), 'x' in globals()", tools=named)
    assert logs(call_of(on_b)) == "(['a.txt', 'b.txt'], False)"
    y = run_code(b, upstream, "y = 'on b'\ny", tools=named)
    assert logs(call_of(y)) == "'on b'"

    # back on A: its worker is stale (B ran the container since), so it restarts with B's files too
    back = run_code(a, upstream, "import os\nsorted(os.listdir('/mnt/data')), open('/mnt/data/b.txt').read(), "
                                 "'x' in globals(), 'y' in globals()", tools=named)
    assert logs(call_of(back)) == "(['a.txt', 'b.txt'], 'from b', False, False)"

    # a file uploaded through B reaches the interpreter running on A
    b.containers.files.create(container, file=("c.txt", b"uploaded on b", "text/plain"))
    seen = run_code(a, upstream, "open('/mnt/data/c.txt').read()", tools=named)
    assert logs(call_of(seen)) == "'uploaded on b'"

    # both replicas serve the container and its files alike
    assert a.containers.retrieve(container).model_dump() == b.containers.retrieve(container).model_dump()
    paths = sorted(f.path for f in b.containers.files.list(container).data)
    assert paths == ["/mnt/data/a.txt", "/mnt/data/b.txt", "/mnt/data/c.txt"]
    (a_txt,) = [f for f in a.containers.files.list(container).data if f.path.endswith("a.txt")]
    assert b.containers.files.content.retrieve(a_txt.id, container_id=container).content == b"from a"

    # deleted through A, it is gone for B
    a.containers.delete(container)
    with pytest.raises(openai.NotFoundError):
        run_code(b, upstream, "1", tools=named)
