"""The default backend: bubblewrap (`bwrap`, Debian's package `bubblewrap`).

Each container's worker runs with every namespace of its own — user, mount, PID, network (no interface but
its own loopback), IPC, UTS, cgroup — as an unprivileged uid with no capabilities, an empty environment,
the seccomp filter of seccomp.py, and a root made of: /usr and the interpreter (with its site-packages)
read-only, a fresh /proc and minimal /dev, a private memory-backed /tmp of bounded size, and the container's
own host directory at /mnt/data — the only writable place that outlives the container's processes.

How the unprivileged uid is reached depends on who runs the gateway:

- an ordinary user: bubblewrap makes the user namespace itself (`--unshare-user --uid 1000`), mapped to the
  gateway's uid, and forbids nested ones (`--disable-userns`);
- root: the sandbox must not run as the host's root (root's processes escape the process limit, and own the
  host's files). The gateway makes a user namespace per container that maps the sandbox's uid 1000 to an
  unprivileged host uid (`--code-interpreter-uid`, 65534 by default) — and root to root, so that bubblewrap,
  joining it with `--userns`, can still mount paths only root may traverse (an interpreter under /root, as
  pyenv installs it). The worker starts as that namespace's root with only CAP_SETUID, CAP_SETGID and
  CAP_SETPCAP, empties its bounding and every other capability set, becomes uid 1000 and checks it holds
  nothing before it runs any code; exec cannot give privileges back (no_new_privs), and the namespace
  allows no nested user namespaces.

`probe` starts a real sandbox once at startup; where user namespaces are not allowed (a sysctl, AppArmor,
a container without privileges) it says so, and the tool is refused with a 400 that says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

from . import seccomp
from .sandbox import WORKER, Limits, Python, SandboxError, Spawned, Spec, worker_environment

SANDBOX_UID = 1000  # the code's uid inside its namespace
WORKER_PATH = "/opt/responses-gateway/worker.py"
SITE_PATH = "/opt/responses-gateway/site-{}"  # the interpreter's site directories, wherever the host has them
TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
HELPER_TIMEOUT = 10.0
# bubblewrap's own environment: its init stays in the sandbox (PID 1), and a process's environment can be
# read in /proc by a process of the same uid, so it gets nothing of the gateway's (no RG_*, no keys).
BARE = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


class Bubblewrap:
    name = "bubblewrap"

    def __init__(self, base: Path, *, host_uid: int = 65534, python: Python | None = None,
                 bwrap: str | None = None):
        """`base`: a directory of the gateway's own (the sandbox's /etc files are kept there)."""
        self.base = base
        self.host_uid = host_uid
        self.python = python or Python.current()
        self.bwrap = bwrap or shutil.which("bwrap") or "bwrap"
        self.root = os.geteuid() == 0
        self.filter = seccomp.program() if seccomp.supported() else None

    # -- the protocol --------------------------------------------------------------------------------------

    def data_owner(self) -> tuple[int, int] | None:
        return (self.host_uid, self.host_uid) if self.root else None

    def probe(self) -> str | None:
        if shutil.which(self.bwrap) is None:
            return ("bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
                    "bubblewrap)")
        if self.filter is None:
            return (f"the sandbox's seccomp filter has no program for this architecture ({seccomp.machine()}); "
                    "supported: " + ", ".join(seccomp.ARCHES))
        try:
            return asyncio.run(self._probe())
        except SandboxError as exc:
            return str(exc)

    async def _probe(self) -> str | None:
        from .channel import Interpreter  # the probe is a real start and a real cell

        probe_dir = self.base / "probe"
        shutil.rmtree(probe_dir, ignore_errors=True)
        probe_dir.mkdir(parents=True)
        self.prepare(probe_dir)
        interpreter = Interpreter(self, Spec(probe_dir, Limits(timeout=30.0), os.urandom(8).hex()))
        try:
            await interpreter.start()
            result = await interpreter.run("6 * 7")
        finally:
            await interpreter.stop()
            shutil.rmtree(probe_dir, ignore_errors=True)
        if result.value != "42":
            return f"the sandbox started but could not run code: {result.logs or result.kind}"
        return None

    def prepare(self, data: Path) -> None:
        """A container's /mnt/data, owned by the uid the code runs as."""
        data.mkdir(mode=0o700, parents=True, exist_ok=True)
        owner = self.data_owner()
        if owner is not None:
            os.chown(data, *owner)

    async def spawn(self, spec: Spec) -> Spawned:
        self._etc()
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        output_r, output_w = os.pipe()
        info_r, info_w = os.pipe()
        filter_r, filter_w = os.pipe()
        userns = -1
        child_fds = [requests_r, replies_w, info_w, filter_r]
        try:
            assert self.filter is not None
            os.write(filter_w, self.filter)
            os.close(filter_w)
            filter_w = -1
            if self.root:
                userns = await self._user_namespace()
                child_fds.append(userns)
            args = self.arguments(spec, requests_r, replies_w, info_w, filter_r, userns)
            os.write(requests_w, frame(self.config(spec, requests_r, replies_w)))  # the worker's first read
            process = await asyncio.create_subprocess_exec(
                self.bwrap, *args, stdin=subprocess.DEVNULL, stdout=output_w, stderr=output_w,
                pass_fds=child_fds, start_new_session=True, env=BARE)
        except BaseException:
            for fd in (requests_w, replies_r, output_r, info_r, output_w, filter_w):
                if fd >= 0:
                    os.close(fd)
            raise
        finally:
            for fd in child_fds:
                os.close(fd)
        os.close(output_w)
        try:
            pid = await _child_pid(info_r, spec.limits.start_timeout)
        except BaseException as exc:  # failed, or cancelled (the caller left): nothing is left running
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await asyncio.shield(process.wait())
            said = _drain(output_r)
            for fd in (requests_w, replies_r, output_r):
                os.close(fd)
            if isinstance(exc, SandboxError):
                raise SandboxError(said or str(exc)) from None
            raise
        return Spawned(process, pid, requests_w, replies_r, output_r)

    # -- the command line ---------------------------------------------------------------------------------

    def arguments(self, spec: Spec, requests: int, replies: int, info: int, filter_fd: int, userns: int) -> list[str]:
        # --as-pid-1: the worker is the PID namespace's init, so it can end every other process of the
        # container after each cell (worker.end_strays), and /proc/1/cmdline is its short command line rather
        # than bubblewrap's, which names the host's paths
        args = ["--die-with-parent", "--new-session", "--clearenv", "--info-fd", str(info), "--seccomp",
                str(filter_fd), "--unshare-pid", "--as-pid-1", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--hostname", "sandbox"]
        if userns >= 0:
            args += ["--userns", str(userns), "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                     "--cap-add", "CAP_SETPCAP"]
        else:
            args += ["--unshare-user", "--disable-userns", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        made: set[str] = {"/", "/usr", "/proc", "/dev", "/tmp"}

        def mount(option: str, source: str, dest: str) -> None:
            parent = os.path.dirname(dest)
            chain = []
            while parent not in made:
                chain.append(parent)
                parent = os.path.dirname(parent)
            for directory in reversed(chain):
                args.extend(["--perms", "0755", "--dir", directory])
                made.add(directory)
            args.extend([option, source, dest])
            made.add(dest)

        args += ["--ro-bind", "/usr", "/usr"]
        for top in TOP_LEVEL:
            if os.path.islink(top):
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
            made.add(top)
        args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(spec.limits.tmp_bytes),
                 "--tmpfs", "/tmp"]
        for name in ("passwd", "group", "hosts"):
            mount("--ro-bind", str(self.base / "etc" / name), f"/etc/{name}")
        if os.path.isdir("/etc/fonts"):  # fontconfig's settings (matplotlib asks fc-list for the system's fonts)
            mount("--ro-bind", "/etc/fonts", "/etc/fonts")
        for path in self.python.mounts():
            if not any(path == m or path.startswith(m.rstrip("/") + "/") for m in ("/usr",)):
                mount("--ro-bind", path, path)
        for number, path in enumerate(self.python.paths()):
            mount("--ro-bind", path, SITE_PATH.format(number))
        mount("--ro-bind", str(WORKER), WORKER_PATH)
        mount("--bind", str(spec.data), "/mnt/data")
        args += ["--chdir", "/mnt/data"]
        for name, value in worker_environment().items():
            args += ["--setenv", name, value]
        # the worker's settings come on its request pipe (`config`), not here: a command line is anyone's
        # to read in /proc
        args += ["--", self.python.executable, "-I", "-S", WORKER_PATH, str(requests), str(replies)]
        return args

    def config(self, spec: Spec, requests: int, replies: int) -> dict[str, object]:
        """The worker's settings, its first message: its uid, pipes, limits, sys.path and output marker."""
        return {"uid": SANDBOX_UID, "gid": SANDBOX_UID, "rfd": requests, "wfd": replies,
                "limits": spec.limits.worker(), "marker": spec.marker,
                "path": [SITE_PATH.format(number) for number in range(len(self.python.paths()))]}

    def _etc(self) -> None:
        """The sandbox's /etc files (written once): the code's user, and localhost — nothing of the host's."""
        etc = self.base / "etc"
        if (etc / "hosts").exists():
            return
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "passwd").write_text(f"root:x:0:0::/:/usr/sbin/nologin\nsandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:"
                                    "sandbox:/tmp:/bin/sh\nnobody:x:65534:65534::/:/usr/sbin/nologin\n")
        (etc / "group").write_text(f"root:x:0:\nsandbox:x:{SANDBOX_UID}:\nnogroup:x:65534:\n")
        (etc / "hosts").write_text("127.0.0.1 localhost sandbox\n::1 localhost\n")
        for name in ("passwd", "group", "hosts"):
            os.chmod(etc / name, 0o644)

    async def _user_namespace(self) -> int:
        """A user namespace for one container (the gateway runs as root): the sandbox's uid 1000 is the
        unprivileged host uid, root is root (for bubblewrap's mounts only, see the module's docstring), and
        no user namespace may be made inside it. Returns an fd of it for `bwrap --userns`."""
        helper = await asyncio.create_subprocess_exec(
            "unshare", "--user", "sh", "-c",
            "echo ready; read go; exec sh -c 'echo 0 > /proc/sys/user/max_user_namespaces && echo set; read done'",
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=BARE)
        assert helper.stdin is not None and helper.stdout is not None
        try:
            async with asyncio.timeout(HELPER_TIMEOUT):
                if (await helper.stdout.readline()).strip() != b"ready":
                    raise SandboxError(await _said(helper, "could not make a user namespace"))
                mapping = f"0 0 1\n{SANDBOX_UID} {self.host_uid} 1\n"
                for name in ("uid_map", "gid_map"):
                    with open(f"/proc/{helper.pid}/{name}", "w") as fh:
                        fh.write(mapping)
                helper.stdin.write(b"go\n")
                await helper.stdin.drain()
                if (await helper.stdout.readline()).strip() != b"set":
                    raise SandboxError(await _said(helper, "could not seal the user namespace"))
                userns = os.open(f"/proc/{helper.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
                helper.stdin.write(b"done\n")
                await helper.stdin.drain()
                await helper.wait()
                return userns
        except (OSError, TimeoutError) as exc:
            raise SandboxError(f"could not make the sandbox's user namespace: {exc}") from exc
        finally:
            if helper.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    helper.kill()
                await helper.wait()


def frame(message: dict[str, object]) -> bytes:
    """One message of the worker's protocol: a 4-byte big-endian length and the JSON object."""
    data = json.dumps(message).encode()
    return struct.pack(">I", len(data)) + data


async def _said(process: asyncio.subprocess.Process, what: str) -> str:
    err = b""
    if process.stderr is not None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1):
                err = await process.stderr.read(2000)
    return f"{what}: {err.decode(errors='replace').strip() or 'no explanation'}"


def _drain(fd: int) -> str:
    """What is left in a pipe whose writers are gone (bubblewrap's error message)."""
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    with contextlib.suppress(OSError):
        while len(chunks) < 16 and (chunk := os.read(fd, 4096)):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace").strip()[-2000:]


async def _child_pid(fd: int, timeout: float) -> int:
    """bubblewrap's --info-fd: the host pid of the sandbox's init, written once it is made."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", 0))
    try:
        async with asyncio.timeout(timeout):
            data = await reader.read()
    except TimeoutError:
        raise SandboxError(f"the sandbox did not start within {timeout:g} seconds") from None
    finally:
        transport.close()
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError):
        raise SandboxError("the sandbox did not start") from None
