"""The sandbox's hard limits (issue 34, items 1-4), attacked from the model's code through the real gateway
(running as root, bubblewrap), as the independent probe did: the disk limit holds however fast the code
writes; no process outlives its call, and the per-call CPU limit counts every process of the call; the
container's memory is one total; and /proc shows nothing of the host's paths."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import openai
import pytest

from responses_gateway.configure import make as make_settings
from responses_gateway.tools.code_interpreter import cgroups, disk
from responses_gateway.tools.code_interpreter.channel import process_tree
from tests.support import needs
from tests.support.code_interpreter import call_of, logs, run_code
from tests.support.server import GatewayServer

needs.bubblewrap()

DISK = 64 << 20
TIMEOUT = 20.0


@pytest.fixture(scope="module")
def gateway(_upstream_server, tmp_path_factory):
    base = tmp_path_factory.mktemp("ci-limits")
    with GatewayServer(make_settings(upstream_url=_upstream_server.base_url, db=str(base / "responses.db"),
                                     code_interpreter="bubblewrap", code_interpreter_timeout=TIMEOUT,
                                     code_interpreter_disk_bytes=DISK, code_interpreter_processes=64,
                                     code_interpreter_dir=str(base / "containers"))) as server:
        server.base = base / "containers"
        yield server


@pytest.fixture
def client(gateway):
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, timeout=120)


def _in(container_id: str) -> list[dict]:
    return [{"type": "code_interpreter", "container": container_id}]


def _value(call) -> str:
    return logs(call).strip().splitlines()[-1] if logs(call).strip() else ""


def test_the_disk_limit_holds_however_fast_the_code_writes(client, upstream):
    needs.need("a gateway that may mount a filesystem", os.geteuid() == 0 and disk.mode() == disk.FILESYSTEM,
               "run the gateway as root with loop devices and mkfs.ext4 (e2fsprogs)")
    one_second = """
import time
written, start, i = 0, time.monotonic(), 0
try:
    while time.monotonic() - start < 1:
        with open(f'/mnt/data/fast{i}.bin', 'wb') as fh:
            for _ in range(16):
                fh.write(bytes(1 << 20)); written += 1 << 20
        i += 1
finally:
    print('written', written)
"""
    call = call_of(run_code(client, upstream, one_second))
    out = logs(call)
    assert "No space left on device" in out and "Disk limit exceeded" in out
    assert call.status == "incomplete"
    assert int(out.split("written ", 1)[1].split()[0]) <= DISK
    used = "import os\nst = os.statvfs('/mnt/data')\nprint((st.f_blocks - st.f_bfree) * st.f_frsize)"
    for _ in range(12):  # twelve fast cells, each writing 16 MiB more
        run_code(client, upstream, "import os\nopen(f'/mnt/data/more{len(os.listdir(\"/mnt/data\"))}.bin', "
                                   "'wb').write(bytes(16 << 20))", tools=_in(call.container_id))
    total = int(_value(call_of(run_code(client, upstream, used, tools=_in(call.container_id)))))
    assert total <= DISK


def test_no_process_outlives_its_call(client, upstream, gateway):
    detach = """
import subprocess
p = subprocess.Popen(['sh', '-c', 'while :; do :; done'], start_new_session=True)
print('started', p.pid)
"""
    first = call_of(run_code(client, upstream, detach))
    assert "started" in logs(first) and "stopped at the end of the call" in logs(first)
    listed = "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"
    assert _value(call_of(run_code(client, upstream, listed, tools=_in(first.container_id)))) == "[1]"

    bomb = """
import os, time
children = 0
try:
    while True:
        if os.fork() == 0:
            while True:
                pass
        children += 1
except OSError:
    pass
print('children', children)
time.sleep(60)
"""
    started = time.monotonic()
    call = call_of(run_code(client, upstream, bomb, tools=_in(first.container_id)))
    assert call.status == "incomplete" and time.monotonic() - started < TIMEOUT + 10
    assert "CPU time limit exceeded" in logs(call) or "timed out" in logs(call)
    time.sleep(0.5)
    assert _busy_sandbox_processes() == []  # nothing of the bomb burns the machine's cores after its call
    assert _value(call_of(run_code(client, upstream, listed, tools=_in(first.container_id)))) == "[1]"


def test_the_cpu_limit_counts_every_process_of_the_call(client, upstream):
    spin = """
import os, time
for _ in range(6):
    if os.fork() == 0:
        while True:
            pass
time.sleep(60)
"""
    started = time.monotonic()
    call = call_of(run_code(client, upstream, spin))
    took = time.monotonic() - started
    assert call.status == "incomplete" and "CPU time limit exceeded" in logs(call)
    assert took < TIMEOUT  # stopped by its CPU seconds (20, all processes together), before its wall time


def test_memory_is_one_total_for_the_container(client, upstream):
    found = cgroups.Cgroups.find()
    needs.need("a memory cgroup the gateway may make", found.parent is not None,
               "delegate a cgroup v2 subtree to the gateway (docs/code-interpreter.md), or cgroup v1's memory hierarchy")
    for processes in (4, 8):
        code = f"""
import os, time
for _ in range({processes}):
    if os.fork() == 0:
        blocks = []
        for _ in range(12):
            blocks.append(b'x' * (50 << 20))
        time.sleep(5)
        os._exit(0)
time.sleep(8)
"""
        peak = _peak_while(lambda code=code: run_code(client, upstream, code))
        assert peak <= 1.1 * (1 << 30), f"{processes} processes reached {peak >> 20} MiB in a 1 GiB container"


def test_proc_shows_nothing_of_the_host(client, upstream, gateway):
    code = """
import glob
seen = []
for path in glob.glob('/proc/[0-9]*/cmdline') + glob.glob('/proc/[0-9]*/environ'):
    try:
        seen.append(open(path, 'rb').read().decode(errors='replace'))
    except OSError:
        pass
import sys
print(repr('\\n'.join(seen + sys.path)))
"""
    out = logs(call_of(run_code(client, upstream, code)))
    for host in (str(gateway.base), str(Path.cwd()), "site-packages", "/tmp/pytest"):
        assert host not in out, host


# -- the host's view --------------------------------------------------------------------------------------------

def _workers() -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"/opt/responses-gateway/worker.py" in argv and not argv[0].endswith(b"bwrap") and _init(pid):
            out.append(int(pid))  # a worker: its namespace's init (not the bubblewrap that started it, nor a fork)
    return out


def _init(pid: str) -> bool:
    """The process is the init (pid 1) of its PID namespace."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return line.split()[-1] == "1"
    except OSError:
        pass
    return False


def _busy_sandbox_processes() -> list[int]:
    """Processes under the sandboxes' workers (their children) that are still running."""
    busy = []
    for worker in _workers():
        for pid in process_tree(worker)[1:]:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state in ("R", "S", "D"):
                busy.append(pid)
    return busy


def _pss(pid: int) -> int:
    """A process's proportional share of resident memory (pages shared by forks counted once in all)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _peak_while(call) -> int:
    """The largest memory of all the sandboxes' processes together while `call` runs."""
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, sum(_pss(pid) for worker in _workers() for pid in process_tree(worker)))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        call()
    finally:
        done.set()
        sampler.join()
    return peak
