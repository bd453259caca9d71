"""The sandbox itself, below the gateway: bubblewrap as an unprivileged gateway user would run it (the
common deployment; the suite otherwise runs as root, which takes the other path), and the seccomp program.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from responses_gateway.tools.code_interpreter import seccomp
from tests.support import needs

SRC = Path(__file__).resolve().parents[2] / "src"

needs.bubblewrap()  # skipped with what to install where it is missing; a failure in CI

NON_ROOT = """
import asyncio, json, os, shutil, sys, tempfile
from pathlib import Path
from responses_gateway.tools.code_interpreter.bubblewrap import Bubblewrap
from responses_gateway.tools.code_interpreter.channel import Interpreter
from responses_gateway.tools.code_interpreter.sandbox import Limits, Python, Spec

async def main():
    base = Path(tempfile.mkdtemp())  # nobody's own, under /tmp
    sandbox = Bubblewrap(base, python=Python(os.path.realpath(sys.executable), "/usr", ()))
    data = base / "c" / "data"
    sandbox.prepare(data)
    interpreter = Interpreter(sandbox, Spec(data, Limits(timeout=10), os.urandom(8).hex()))
    await interpreter.start()
    out = {}
    for name, code in json.loads(sys.argv[1]).items():
        result = await interpreter.run(code)
        out[name] = [result.kind, result.logs, result.value]
    await interpreter.stop()
    shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(out))

asyncio.run(main())
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists("/usr/bin/python3"),
                    reason="needs root (to become an unprivileged user), setpriv and the system's python3")
def test_as_an_unprivileged_gateway_user_the_sandbox_holds_too():
    """The gateway as uid 65534 (nobody) with a secret in its environment; the system's python3 stands in for
    the gateway's interpreter (the suite's lives under /root, which nobody may read)."""
    cells = {
        "uid": "import os\nos.getuid(), os.geteuid()",
        "env": "import glob\nsorted(open(p, 'rb').read().decode() for p in glob.glob('/proc/[0-9]*/environ'))",
        "socket": "import socket\nsocket.socket()",
        "userns": "import ctypes\nctypes.CDLL(None, use_errno=True).unshare(0x10000000), ctypes.get_errno()",
        "pids": "import os\nsorted(p for p in os.listdir('/proc') if p.isdigit())",
        "write": "open('/mnt/data/x', 'w').write('x'), open('/tmp/y', 'w').write('y')",
    }
    import json

    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", NON_ROOT,
         json.dumps(cells)],
        capture_output=True, text=True, timeout=60, cwd="/",
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC), "RG_API_KEYS": "sk-secret-key"})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["uid"][2] == "(1000, 1000)"
    assert "sk-secret-key" not in out["env"][2] and "RG_" not in out["env"][2]
    assert "PermissionError" in out["socket"][1]
    assert out["userns"][2] in ("(-1, 1)", "(-1, 28)", "(-1, 22)")  # EPERM, ENOSPC or EINVAL: no new namespace
    assert out["pids"][2] == "['1']"  # the worker is its PID namespace's init
    assert out["write"][2] == "(1, 1)"


def test_the_seccomp_program_is_well_formed_for_each_architecture():
    for arch in seccomp.ARCHES:
        program = seccomp.program(arch)
        assert len(program) % 8 == 0 and 10 < len(program) // 8 < 256  # within BPF's jump range
    # every blocked call has a number on every architecture
    for arch, (_, numbers) in seccomp.ARCHES.items():
        assert set(seccomp.BLOCKED) | {"socket", "socketpair", "clone", "clone3"} <= set(numbers), arch


def test_the_worker_runs_without_the_gateway_on_its_path():
    """worker.py is run by the sandbox's interpreter alone (`-I -S`): nothing but the standard library."""
    from responses_gateway.tools.code_interpreter.sandbox import WORKER

    done = subprocess.run([sys.executable, "-I", "-S", "-c",
                           f"import ast, sys; tree = ast.parse(open({str(WORKER)!r}).read()); "
                           "names = {a.name.split('.')[0] for n in ast.walk(tree) if isinstance(n, ast.Import) "
                           "for a in n.names} | {n.module.split('.')[0] for n in ast.walk(tree) "
                           "if isinstance(n, ast.ImportFrom) and n.module}; "
                           "print(sorted(names - set(sys.stdlib_module_names)))"],
                          capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_a_cell_that_breaks_its_own_output_does_not_break_the_worker(tmp_path):
    import asyncio

    from responses_gateway.tools.code_interpreter.bubblewrap import Bubblewrap
    from responses_gateway.tools.code_interpreter.channel import Interpreter
    from responses_gateway.tools.code_interpreter.sandbox import Limits, Spec

    async def main():
        tmp_path.chmod(0o711)
        sandbox = Bubblewrap(tmp_path / "base")
        data = tmp_path / "c" / "data"
        sandbox.prepare(data)
        interpreter = Interpreter(sandbox, Spec(data, Limits(timeout=10), os.urandom(8).hex()))
        await interpreter.start()
        try:
            results = [await interpreter.run(code) for code in (
                "import sys\nsys.stdout = None\nsys.stderr = 3", "1 + 1", "import os\nos.close(1)\nos.close(2)",
                "2 + 2", "import os\nos._exit(3)", "3 + 3")]
        finally:
            await interpreter.stop()
        return results

    replaced, after_replace, closed, after_close, exited, after_exit = asyncio.run(main())
    assert after_replace.value == "2" and after_close.value == "4"
    assert exited.kind == "crashed" and exited.restarted  # the code ended the worker itself: reported
    assert after_exit.kind == "crashed"  # this Interpreter is done; the registry starts a new one
