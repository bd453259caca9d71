"""A container's /mnt/data as the gateway reads and writes it on the host.

The code can put anything there: symlinks to the gateway's own files, FIFOs that block a reader, a million
entries, files that grow while they are read. So the gateway never follows a link the code made (every
open is relative to a directory descriptor, with O_NOFOLLOW; only regular files are read), never blocks
on a special file (O_NONBLOCK, then a regular-file check), reads at most `max_bytes` of a file and walks at
most `MAX_ENTRIES` entries, `MAX_DEPTH` directories deep. What the gateway writes goes to a temporary name
and is renamed into place, so whatever the code left at that name (a link, a FIFO) is replaced, never
written through. These run in a thread (they block).
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass

MAX_ENTRIES = 10_000
MAX_DEPTH = 16
ROOT = "/mnt/data"


@dataclass(frozen=True)
class Seen:
    """A regular file of the directory as last seen: enough to tell it changed."""

    size: int
    mtime_ns: int
    inode: int


def scan(data: str) -> dict[str, Seen]:
    """Every regular file under `data`, by its path in the sandbox (/mnt/data/...)."""
    out: dict[str, Seen] = {}
    top = os.open(data, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _walk(top, ROOT, 0, out, [0])
    finally:
        os.close(top)
    return out


def _walk(fd: int, prefix: str, depth: int, out: dict[str, Seen], seen: list[int]) -> None:
    with os.scandir(fd) as entries:
        for entry in entries:
            seen[0] += 1
            if seen[0] > MAX_ENTRIES:
                return
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            path = f"{prefix}/{entry.name}"
            if stat.S_ISREG(st.st_mode):
                out[path] = Seen(st.st_size, st.st_mtime_ns, st.st_ino)
            elif stat.S_ISDIR(st.st_mode) and depth < MAX_DEPTH:
                try:
                    sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError:
                    continue
                try:
                    _walk(sub, path, depth + 1, out, seen)
                finally:
                    os.close(sub)


def relative(path: str) -> list[str]:
    """/mnt/data/a/b.csv → ["a", "b.csv"]; ValueError for anything outside /mnt/data or with `..`."""
    if not path.startswith(ROOT + "/"):
        raise ValueError(f"{path!r} is not under {ROOT}")
    parts = path[len(ROOT) + 1:].split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{path!r} is not a plain path")
    return parts


def _parent(data: str, parts: list[str], create: bool, owner: tuple[int, int] | None) -> int:
    """A descriptor of the directory holding `parts[-1]`, reached without following any link."""
    fd = os.open(data, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for name in parts[:-1]:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
                    if owner is not None:
                        os.chown(name, *owner, dir_fd=fd, follow_symlinks=False)
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


def read(data: str, path: str, max_bytes: int) -> bytes | None:
    """The file's bytes, or None when it is not a regular file (any more) or is larger than `max_bytes`."""
    parts = relative(path)
    try:
        parent = _parent(data, parts, False, None)
    except OSError:
        return None
    try:
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
    except OSError:
        return None
    finally:
        os.close(parent)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            return None
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        content = b"".join(chunks)
        return None if len(content) > max_bytes else content
    finally:
        os.close(fd)


def write(data: str, path: str, content: bytes, owner: tuple[int, int] | None) -> None:
    """Put `content` at `path` (replacing whatever is there, never writing through it)."""
    parts = relative(path)
    parent = _parent(data, parts, True, owner)
    temporary = f".rg-upload-{os.urandom(8).hex()}"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                     dir_fd=parent)
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view):]
            if owner is not None:
                os.fchown(fd, *owner)
            os.fchmod(fd, 0o644)
        finally:
            os.close(fd)
        os.rename(temporary, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=parent)
        raise
    finally:
        os.close(parent)


def remove(data: str, path: str) -> None:
    """Remove the file at `path` (a link is removed, not followed); nothing there is fine."""
    parts = relative(path)
    try:
        parent = _parent(data, parts, False, None)
    except OSError:
        return
    try:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, NotADirectoryError):
            os.unlink(parts[-1], dir_fd=parent)
    finally:
        os.close(parent)


def safe_name(filename: str) -> str:
    """An uploaded file's name as a single path component of /mnt/data."""
    name = os.path.basename(filename.replace("\\", "/")).strip().replace("\0", "")
    if name in ("", ".", "..") or name.startswith(".rg-upload-"):
        name = "file"
    return name[:255]
