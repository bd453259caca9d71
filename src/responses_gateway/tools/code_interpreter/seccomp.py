"""The sandbox's seccomp filter, as the classic BPF program bubblewrap loads (`--seccomp FD`).

Namespaces already give the code no network, no host processes and no host files; the filter closes what
namespaces leave open to an unprivileged process:

- sockets of any family but AF_UNIX (the sandbox's own loopback included: `socket(AF_INET, ...)` fails with
  EACCES), so a dependency's "phone home" or a port scan fails at once and clearly;
- io_uring (it can open sockets past this filter), ptrace and process_vm_*, bpf, perf_event_open,
  userfaultfd, the kernel keyring, module and kexec loading, every mount call, and new namespaces: unshare,
  setns, clone with a CLONE_NEW* flag, clone3 (ENOSYS: the C library falls back to clone, which can be
  checked) — the usual ways from an unprivileged process to the kernel's less-trodden paths;
- any other system call ABI (32-bit x86, x32): the process is killed.

Written by hand (no libseccomp binding needed): one program per architecture, x86_64 and aarch64.
"""

from __future__ import annotations

import errno
import platform
import struct

# BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h)
LD_W_ABS = 0x20
JEQ_K = 0x15
JGE_K = 0x35
JSET_K = 0x45
RET_K = 0x06
ALLOW = 0x7FFF0000
KILL_PROCESS = 0x80000000


def _errno(code: int) -> int:
    return 0x00050000 | code


NR, ARCH, ARG0 = 0, 4, 16  # offsets in struct seccomp_data (args[0]'s low half: both ABIs are little-endian)
AF_UNIX = 1
CLONE_NEW = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80
X32_BIT = 0x40000000

BLOCKED = ("ptrace", "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open", "userfaultfd", "keyctl",
           "add_key", "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register", "init_module",
           "finit_module", "delete_module", "kexec_load", "kexec_file_load", "mount", "umount2", "pivot_root",
           "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "unshare",
           "setns", "open_by_handle_at", "name_to_handle_at", "swapon", "swapoff", "reboot", "acct",
           "quotactl", "pidfd_getfd", "fanotify_init")

ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, {
        "socket": 41, "socketpair": 53, "clone": 56, "clone3": 435, "ptrace": 101, "process_vm_readv": 310,
        "process_vm_writev": 311, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "keyctl": 250,
        "add_key": 248, "request_key": 249, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "init_module": 175, "finit_module": 313, "delete_module": 176,
        "kexec_load": 246, "kexec_file_load": 320, "mount": 165, "umount2": 166, "pivot_root": 155,
        "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "unshare": 272, "setns": 308, "open_by_handle_at": 304, "name_to_handle_at": 303,
        "swapon": 167, "swapoff": 168, "reboot": 169, "acct": 163, "quotactl": 179, "pidfd_getfd": 438,
        "fanotify_init": 300,
    }),
    "aarch64": (0xC00000B7, {
        "socket": 198, "socketpair": 199, "clone": 220, "clone3": 435, "ptrace": 117, "process_vm_readv": 270,
        "process_vm_writev": 271, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "keyctl": 219,
        "add_key": 217, "request_key": 218, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "init_module": 105, "finit_module": 273, "delete_module": 106,
        "kexec_load": 104, "kexec_file_load": 294, "mount": 40, "umount2": 39, "pivot_root": 41,
        "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "unshare": 97, "setns": 268, "open_by_handle_at": 265, "name_to_handle_at": 264,
        "swapon": 224, "swapoff": 225, "reboot": 142, "acct": 89, "quotactl": 60, "pidfd_getfd": 438,
        "fanotify_init": 262,
    }),
}


def machine() -> str:
    name = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(name.lower(), name)


def supported() -> bool:
    return machine() in ARCHES


def program(arch: str | None = None) -> bytes:
    """The filter for this machine's architecture, as `struct sock_filter[]` bytes."""
    audit, numbers = ARCHES[arch or machine()]
    code: list[tuple[int, int, int, int]] = []

    def op(kind: int, k: int, jt: int = 0, jf: int = 0) -> None:
        code.append((kind, jt, jf, k))

    op(LD_W_ABS, ARCH)
    op(JEQ_K, audit, 1, 0)  # another ABI (32-bit x86, ...): killed
    op(RET_K, KILL_PROCESS)
    op(LD_W_ABS, NR)
    if audit == ARCHES["x86_64"][0]:
        op(JGE_K, X32_BIT, 0, 1)
        op(RET_K, KILL_PROCESS)
    for name in ("socket", "socketpair"):  # AF_UNIX only
        op(JEQ_K, numbers[name], 0, 4)
        op(LD_W_ABS, ARG0)
        op(JEQ_K, AF_UNIX, 0, 1)
        op(RET_K, ALLOW)
        op(RET_K, _errno(errno.EACCES))
    op(JEQ_K, numbers["clone"], 0, 4)  # a process or thread, but no new namespace
    op(LD_W_ABS, ARG0)
    op(JSET_K, CLONE_NEW, 0, 1)
    op(RET_K, _errno(errno.EPERM))
    op(RET_K, ALLOW)
    op(JEQ_K, numbers["clone3"], 0, 1)  # its flags are behind a pointer: ENOSYS, and libc uses clone
    op(RET_K, _errno(errno.ENOSYS))
    for name in BLOCKED:
        op(JEQ_K, numbers[name], 0, 1)
        op(RET_K, _errno(errno.EPERM))
    op(RET_K, ALLOW)
    return b"".join(struct.pack("<HBBI", kind, jt, jf, k) for kind, jt, jf, k in code)
