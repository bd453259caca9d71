"""The code interpreter's settings (docs/code-interpreter.md), declared once (settings.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ...settings import setting


@dataclass(frozen=True)
class CodeInterpreterSettings:
    """Code interpreter (docs/code-interpreter.md)"""

    code_interpreter: str = setting(
        "auto", choices=("auto", "bubblewrap", "off"),
        help="the code_interpreter tool: auto (in bubblewrap where this machine allows it, else the tool is "
             "refused with a 400 saying why), bubblewrap (the same, but the gateway does not start without it) "
             "or off (left to --hosted-tools)",
        doc="the `code_interpreter` tool, run in bubblewrap ([docs/code-interpreter.md](docs/code-interpreter.md)): "
            "`auto` where this machine allows it (else the tool is refused with a 400 saying why), `bubblewrap` "
            "refuses to start without it, `off` leaves it to `--hosted-tools`")
    code_interpreter_dir: str | None = setting(
        None, metavar="DIR", shown="a temporary directory",
        help="directory on this host for the containers' /mnt/data")
    code_interpreter_uid: int = setting(65534, help="unprivileged host uid the code runs as when the gateway runs "
                                                    "as root")
    code_interpreter_timeout: float = setting(
        120.0, check="positive",
        help="wall (and CPU) seconds one call may run; then the cell is interrupted and the call is incomplete")
    code_interpreter_max_memory: str = setting(
        "4g", choices=("1g", "4g", "16g", "64g"),
        help="the largest memory_limit a container may ask for (a container's default: 1g)")
    code_interpreter_processes: int = setting(64, check="positive",
                                              help="processes and threads one container may run at once")
    code_interpreter_output_bytes: int = setting(
        64 * 1024, check="positive", shown="64 KiB",
        help="output kept per call (then a marker says how much more there was)")
    code_interpreter_disk_bytes: int = setting(1 << 30, check="positive", shown="1 GiB",
                                               help="bytes a container's /mnt/data may hold")
    code_interpreter_file_bytes: int = setting(32 << 20, check="positive", shown="32 MiB",
                                               help="largest file kept as a container file (in the database)")
    code_interpreter_idle_minutes: int = setting(
        20, check="positive", help="minutes of inactivity after which a container expires (its files go)")
    code_interpreter_key_containers: int = setting(100, check="positive",
                                                   help="running containers per API key (429 beyond)")
    code_interpreter_max_live: int = setting(
        16, check="positive",
        help="containers with a live interpreter in this process (the least recently used idle one makes room)")
