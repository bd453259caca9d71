"""A container's /mnt/data as a filesystem of its own, the size of its disk limit.

Measuring /mnt/data while a cell runs cannot hold a limit: a cell writes gigabytes between two looks (the
probe wrote 1.5 GB in one second, and 3,000 MiB into a 1 GiB container over 12 fast cells). So where the
gateway may mount (it runs as root, with loop devices and `mkfs.ext4` — Debian's e2fsprogs), each live
container's /mnt/data is an ext4 filesystem in a sparse image of exactly `disk_bytes`, mounted
`nosuid,nodev` on the container's host directory: a write past it fails at once with ENOSPC, which the code
sees as `OSError: [Errno 28] No space left on device`, and the call's item says the disk is full. Its pages
are the page cache's, reclaimable (a memory-backed tmpfs would count the files against the container's
memory). The image lives next to the directory and goes with it.

Elsewhere (an unprivileged gateway) the limit stays polled, four times a second while a cell runs, and each
file is capped by RLIMIT_FSIZE: the start-up block says which is in force (`mode()`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

FILESYSTEM = "filesystem"
POLLED = "polled"
IMAGE = "disk.img"
TIMEOUT = 20.0  # seconds for mkfs, mount or umount

_mode: str | None = None


def mode() -> str:
    """`filesystem` where a container's /mnt/data can be a filesystem of its own, else `polled`. Found out
    once per process by making, mounting and removing a small one (blocking: call it in a thread)."""
    global _mode
    if _mode is None:
        _mode = FILESYSTEM if _can_mount() else POLLED
    return _mode


def _can_mount() -> bool:
    if os.geteuid() != 0 or shutil.which("mkfs.ext4") is None or shutil.which("mount") is None:
        return False
    with tempfile.TemporaryDirectory(prefix="rg-disk-probe-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        try:
            make(data, 8 << 20, None)
            return os.path.ismount(data)
        except (OSError, subprocess.SubprocessError):
            return False
        finally:
            unmake(data)


def make(data: Path, size: int, owner: tuple[int, int] | None) -> None:
    """Mount a fresh ext4 filesystem of `size` bytes on the (empty, existing) directory `data`, owned by
    `owner` (the sandbox's host uid) with mode 0700, as the directory was."""
    image = data.parent / IMAGE
    with open(image, "wb") as fh:
        fh.truncate(size)
    os.chmod(image, 0o600)
    _run("mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1", str(image))
    _run("mount", "-o", "loop,nosuid,nodev", str(image), str(data))
    with contextlib.suppress(OSError):
        os.rmdir(data / "lost+found")  # not the code's: an empty /mnt/data, as before
    os.chmod(data, 0o700)
    if owner is not None:
        os.chown(data, *owner)


def unmake(data: Path) -> None:
    """Unmount `data` if a filesystem is mounted there (lazily, if something still holds it open)."""
    if not os.path.ismount(data):
        return
    try:
        _run("umount", str(data))
    except (OSError, subprocess.SubprocessError):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            _run("umount", "-l", str(data))


def unmake_all(root: Path) -> None:
    """Unmount every container filesystem under `root` (a dead gateway process's, before its tree goes)."""
    for image in root.rglob(IMAGE):
        unmake(image.parent / "data")


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, timeout=TIMEOUT, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    if done.returncode != 0:
        raise OSError(f"{argv[0]} failed: {done.stderr.decode(errors='replace').strip()[:300]}")
