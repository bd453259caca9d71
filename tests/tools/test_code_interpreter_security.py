"""The code interpreter's sandbox, attacked through the real gateway: each promise of docs/code-interpreter.md.

The code cannot read the gateway's files, database or environment; cannot open any socket (loopback
included); cannot see or signal host processes; cannot write outside /mnt/data and /tmp. A fork bomb, a
memory bomb, an infinite loop, a 1 GB print and a 10 GB file write are each stopped within their limit and
reported to the model, while the gateway keeps serving other requests. One key cannot reach another key's
containers or files.
"""

from __future__ import annotations

import os
import threading
import time

import httpx
import openai
import pytest

from responses_gateway.configure import make as make_settings
from tests.support import needs
from tests.support.code_interpreter import AUTO, answer, call_of, code_call, logs, run_code
from tests.support.server import GatewayServer

needs.bubblewrap()  # skipped with what to install where it is missing; a failure in CI

SECRET = "rg-secret-env-value-7f3a"
KEYS = ("key-alpha-0001", "key-beta-0002")
TIMEOUT = 4.0  # the test gateway's wall limit per call
DISK = 64 << 20


@pytest.fixture(scope="module")
def secured(_upstream_server, tmp_path_factory):
    db = tmp_path_factory.mktemp("ci-sec") / "responses.db"
    os.environ["RG_PROBE_SECRET"] = SECRET  # the gateway's environment holds a secret the code must not see
    try:
        with GatewayServer(make_settings(upstream_url=_upstream_server.base_url, db=str(db), api_keys=",".join(KEYS),
                                    upstream_api_key=SECRET, code_interpreter="bubblewrap",
                                    code_interpreter_timeout=TIMEOUT, code_interpreter_disk_bytes=DISK,
                                    code_interpreter_processes=32)) as server:
            server.db = db
            yield server
    finally:
        os.environ.pop("RG_PROBE_SECRET", None)


def _client(gateway, key: str = KEYS[0]) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0, timeout=60)


@pytest.fixture
def client(secured):
    return _client(secured)


def _serves_meanwhile(gateway, upstream, long_call):
    """Run `long_call` in a thread; meanwhile the gateway answers /health, a plain response and another
    container's code, each within a few seconds. Returns the long call's result and those latencies."""
    result: dict = {}
    thread = threading.Thread(target=lambda: result.setdefault("value", long_call()), daemon=True)
    thread.start()
    time.sleep(1.0)  # the long call is running (its container started, its code under way)
    assert thread.is_alive()
    latencies = []
    with httpx.Client(timeout=10) as http:
        started = time.monotonic()
        assert http.get(f"{gateway.url}/health").status_code == 200
        latencies.append(time.monotonic() - started)
    thread.join(timeout=60)
    assert not thread.is_alive()
    return result["value"], latencies


def test_code_cannot_read_the_gateways_files_database_or_environment(client, upstream, secured):
    code = f"""
import os, glob
seen = {{}}
for path in ['/etc/shadow', '/etc/passwd', {str(secured.db)!r}, {str(secured.db) + "-wal"!r}, '/root/.bash_history',
             {os.path.abspath(__file__)!r}, '/proc/1/environ', '/proc/self/environ']:
    try:
        seen[path] = open(path, 'rb').read().decode(errors='replace')
    except OSError as exc:
        seen[path] = type(exc).__name__
for path in glob.glob('/proc/[0-9]*/environ'):
    try:
        seen[path] = open(path, 'rb').read().decode(errors='replace')
    except OSError as exc:
        seen[path] = type(exc).__name__
print(sorted(os.environ))
print(seen)
"""
    out = logs(call_of(run_code(client, upstream, code)))
    assert "RG_" not in out and SECRET not in out and not any(key in out for key in KEYS)
    assert "/etc/shadow': 'FileNotFoundError'" in out
    assert f"{str(secured.db)!r}: 'FileNotFoundError'" in out
    assert "/root/.bash_history': 'FileNotFoundError'" in out
    assert "sandbox:x:1000" in out  # the sandbox's own /etc/passwd, not the host's
    assert "root:x:0:0:root" not in out


def test_code_cannot_open_any_socket_loopback_included(client, upstream, secured):
    port = int(secured.url.rsplit(":", 1)[1])
    code = f"""
import socket
for family, kind in [(socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_DGRAM),
                     (socket.AF_INET6, socket.SOCK_STREAM), (socket.AF_NETLINK, socket.SOCK_RAW),
                     (socket.AF_PACKET, socket.SOCK_RAW)]:
    try:
        s = socket.socket(family, kind)
        s.connect(('127.0.0.1', {port})) if family == socket.AF_INET and kind == socket.SOCK_STREAM else None
        print(family.name, kind.name, 'OPEN')
    except OSError as exc:
        print(family.name, kind.name, type(exc).__name__, exc.errno)
try:
    socket.create_connection(('127.0.0.1', {port}), timeout=2)
    print('CONNECTED')
except OSError as exc:
    print('connect', type(exc).__name__)
"""
    out = logs(call_of(run_code(client, upstream, code)))
    assert "OPEN" not in out and "CONNECTED" not in out
    assert out.count("PermissionError 13") == 5 and "connect PermissionError" in out


def test_code_cannot_see_or_signal_host_processes(client, upstream, secured):
    code = f"""
import os, signal
pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
print('pids', pids)
print('self', os.getpid())
for target in ({os.getpid()}, 1):
    try:
        os.kill(target, signal.SIGTERM)
        print(target, 'SIGNALLED')
    except OSError as exc:
        print(target, type(exc).__name__)
try:
    os.kill(-1, signal.SIGKILL)  # every process it may signal
    print('kill -1 sent')
except OSError as exc:
    print('kill -1', type(exc).__name__)
"""
    call = call_of(run_code(client, upstream, code))
    out = logs(call)
    pids = eval(out.split("pids ", 1)[1].split("\n", 1)[0])
    assert pids == [1] and "self 1" in out  # the worker is its PID namespace's init: nothing else runs
    assert f"{os.getpid()} ProcessLookupError" in out
    # signalling pid 1 is signalling itself, an init without a SIGTERM handler (the kernel drops it): the call
    # completed, and kill(-1) reached nothing outside the sandbox
    assert call.status == "completed"
    # the gateway (and the rest of the machine) is untouched
    upstream.enqueue(answer("alive"))
    assert client.responses.create(model="m", input="x").output_text == "alive"


def test_code_cannot_write_outside_mnt_data_and_tmp(client, upstream):
    code = """
import os, sys
for path in ['/x', '/etc/x', '/usr/x', '/usr/lib/x', '/opt/responses-gateway/worker.py', sys.prefix + '/x',
             os.__file__, '/proc/sys/kernel/hostname', '/mnt/x', '/root/x', '/mnt/data/ok.txt', '/tmp/ok.txt']:
    try:
        with open(path, 'a') as fh:
            fh.write('x')
        print(path, 'WROTE')
    except OSError as exc:
        print(path, type(exc).__name__)
"""
    out = logs(call_of(run_code(client, upstream, code)))
    wrote = [line.split()[0] for line in out.splitlines() if line.endswith("WROTE")]
    assert wrote == ["/mnt/data/ok.txt", "/tmp/ok.txt"]


def test_a_fork_bomb_is_stopped_by_the_process_limit(client, upstream, secured):
    code = """
import os, time
children = 0
try:
    while True:
        if os.fork() == 0:
            end = time.time() + 3
            while time.time() < end:  # every child burns CPU
                pass
            os._exit(0)
        children += 1
except OSError as exc:
    print('stopped after', children, 'children:', exc)
time.sleep(2.5)
"""
    response, latencies = _serves_meanwhile(secured, upstream, lambda: run_code(client, upstream, code))
    out = logs(call_of(response))
    assert "Resource temporarily unavailable" in out
    assert int(out.split("stopped after ")[1].split()[0]) < 32
    assert max(latencies) < 3
    # the classic bomb, where every child forks too, dies out the same way
    again = run_code(client, upstream, "import os, time\ntime.sleep(3.5)\nwhile True:\n    os.fork()")
    assert "Resource temporarily unavailable" in logs(call_of(again))
    assert call_of(again).status == "completed"


def test_a_memory_bomb_is_stopped_at_the_memory_limit(client, upstream, secured):
    first = run_code(client, upstream, "keep = 7\nbig = bytearray(8 * 1024 ** 3)")
    call = call_of(first)
    assert call.status == "incomplete" and "MemoryError" in logs(call) and "Memory limit" in logs(call)
    tools = [{"type": "code_interpreter", "container": call.container_id}]
    # many processes, each under its own limit, together over the container's: the whole tree is killed
    code = """
import os, time
for _ in range(6):
    if os.fork() == 0:
        block = b'x' * (600 << 20)
        time.sleep(30)
        os._exit(0)
time.sleep(30)
"""
    response, latencies = _serves_meanwhile(secured, upstream,
                                            lambda: run_code(client, upstream, code, tools=tools))
    call = call_of(response)
    assert "Memory limit exceeded" in logs(call)
    assert max(latencies) < 3
    after = run_code(client, upstream, "'keep' in globals()", tools=tools)
    # held by a memory cgroup (cgroups.py), the kernel ends the children over the limit and the cell is stopped
    # (incomplete, the interpreter's state kept); held by the watcher, the whole tree is killed (failed, a new
    # interpreter in the same container)
    if call.status == "incomplete":
        assert logs(call_of(after)) == "True"
    else:
        assert call.status == "failed" and "restarted" in logs(call) and logs(call_of(after)) == "False"


def test_an_infinite_loop_is_stopped_at_the_time_limit_and_the_gateway_keeps_serving(client, upstream, secured):
    first = run_code(client, upstream, "state = 'kept'")
    tools = [{"type": "code_interpreter", "container": call_of(first).container_id}]
    # the model's later steps answer by what they are asked (two responses run at once here)
    upstream.default = lambda request: answer("plain" if "plain-please" in str(request.body) else "Done.")
    upstream.enqueue(code_call("while True:\n    pass"))
    box: dict = {}
    started = time.monotonic()
    thread = threading.Thread(daemon=True, target=lambda: box.setdefault("r", client.responses.create(
        model="m", input="loop", tools=tools, include=["code_interpreter_call.outputs"])))
    thread.start()
    time.sleep(1.5)
    assert thread.is_alive()
    other = _client(secured)
    t = time.monotonic()
    assert other.responses.create(model="m", input="plain-please").output_text == "plain"
    served_in = time.monotonic() - t
    thread.join(timeout=60)
    elapsed = time.monotonic() - started
    call = call_of(box["r"])
    assert call.status == "incomplete" and f"timed out after {TIMEOUT:g} seconds" in logs(call)
    assert TIMEOUT <= elapsed < TIMEOUT + 10
    assert served_in < 2
    after = run_code(client, upstream, "state", tools=tools)
    assert logs(call_of(after)) == "'kept'"  # interrupted, not killed: the state is kept


def test_a_1gb_print_is_cut_and_reported(client, upstream):
    started = time.monotonic()
    response = run_code(client, upstream, "for _ in range(1024):\n    print('x' * (1 << 20))")
    call = call_of(response)
    out = logs(call)
    assert call.status == "incomplete" and "Output limit exceeded" in out
    assert "[... output truncated:" in out and len(out) < 70_000
    assert time.monotonic() - started < 30
    model_saw = upstream.requests[-1].body["messages"][-1]["content"]
    assert "Output limit exceeded" in model_saw


def test_a_10gb_file_write_is_stopped_at_the_disk_limit(client, upstream):
    one_file = "with open('/mnt/data/big.bin', 'wb') as fh:\n    for _ in range(10240):\n        fh.write(bytes(1 << 20))"
    call = call_of(run_code(client, upstream, one_file))
    # a filesystem of the disk limit's size (disk.py): it is full before the file size limit is reached
    assert "No space left on device" in logs(call) or "File too large" in logs(call)
    many = "for i in range(10240):\n    open(f'/mnt/data/part{i}.bin', 'wb').write(bytes(1 << 20))"
    call = call_of(run_code(client, upstream, many, tools=[{"type": "code_interpreter",
                                                            "container": call.container_id}]))
    assert call.status == "incomplete" and "Disk limit exceeded" in logs(call)
    tmp = "open('/tmp/big.bin', 'wb').write(bytes(1 << 30))"
    call = call_of(run_code(client, upstream, tmp))
    assert "No space left on device" in logs(call) or "MemoryError" in logs(call)


def test_one_key_cannot_reach_another_keys_container_or_files(secured, upstream):
    alice, bob = _client(secured, KEYS[0]), _client(secured, KEYS[1])
    container = alice.containers.create(name="alice's")
    stored = alice.containers.files.create(container.id, file=("private.txt", b"alice only", "text/plain"))
    for attempt in (lambda: bob.containers.retrieve(container.id),
                    lambda: bob.containers.delete(container.id),
                    lambda: bob.containers.files.list(container.id),
                    lambda: bob.containers.files.retrieve(stored.id, container_id=container.id),
                    lambda: bob.containers.files.content.retrieve(stored.id, container_id=container.id),
                    lambda: bob.containers.files.delete(stored.id, container_id=container.id),
                    lambda: bob.containers.files.create(container.id, file=("x.txt", b"x", "text/plain"))):
        with pytest.raises(openai.NotFoundError):
            attempt()
    assert container.id not in [c.id for c in bob.containers.list(limit=100).data]
    with pytest.raises(openai.NotFoundError):  # naming it in a response: a 404 before the model runs
        run_code(bob, upstream, "open('/mnt/data/private.txt').read()",
                 tools=[{"type": "code_interpreter", "container": container.id}])
    upstream.reset()
    with pytest.raises(openai.NotFoundError):  # nor can bob copy alice's Files API files in
        alice_file = alice.files.create(file=("secret.csv", b"a,b\n1,2\n"), purpose="user_data")
        run_code(bob, upstream, "1", tools=[{"type": "code_interpreter",
                                             "container": {"type": "auto", "file_ids": [alice_file.id]}}])
    upstream.reset()
    # bob's own `auto` container is a different one, without alice's files
    response = run_code(bob, upstream, "import os\nos.listdir('/mnt/data')", tools=[AUTO])
    assert call_of(response).container_id != container.id and logs(call_of(response)) == "[]"
    assert alice.containers.files.content.retrieve(stored.id, container_id=container.id).content == b"alice only"


def test_links_and_special_files_the_code_makes_are_never_followed_by_the_gateway(client, upstream, secured,
                                                                                   tmp_path):
    host_file = tmp_path / "host.txt"  # a file of the host that the gateway (root, here) could reach
    host_file.write_text("host original")
    host_file.chmod(0o666)
    code = f"""
import os
os.symlink('/etc/shadow', '/mnt/data/shadow.txt')
os.symlink({str(secured.db)!r}, '/mnt/data/db.sqlite')
os.symlink({str(host_file)!r}, '/mnt/data/upload.txt')
os.symlink('/', '/mnt/data/root')
os.mkfifo('/mnt/data/pipe')
open('/mnt/data/real.txt', 'w').write('mine')
"""
    call = call_of(run_code(client, upstream, code))
    container = call.container_id
    stored = sorted(f.path for f in client.containers.files.list(container).data)
    assert stored == ["/mnt/data/real.txt"]  # links and the FIFO are not files the gateway reads
    # an upload over the code's link replaces the link: the host file it pointed at is untouched
    client.containers.files.create(container, file=("upload.txt", b"uploaded", "text/plain"))
    assert host_file.read_text() == "host original"
    again = run_code(client, upstream, "import os\nos.path.islink('/mnt/data/upload.txt'), "
                                       "open('/mnt/data/upload.txt').read()",
                     tools=[{"type": "code_interpreter", "container": container}])
    assert logs(call_of(again)) == "(False, 'uploaded')"
