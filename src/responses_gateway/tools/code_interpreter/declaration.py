"""What a request declares of the code interpreter, as the kit parses it (kit.py) and the runner uses it."""

from __future__ import annotations

from dataclasses import dataclass

OUTPUTS = "code_interpreter_call.outputs"  # the include[] value that shows a call's outputs


@dataclass(frozen=True)
class Container:
    """The declaration's `container`: an id to run in, or `auto` (with files to copy in, a memory limit)."""

    id: str | None = None
    file_ids: tuple[str, ...] = ()
    memory_limit: str | None = None
