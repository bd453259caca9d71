"""What the request path works with, typed: made once when the app starts, handed to every transport.

The app (app.py) builds one `Services` at startup and keeps it as `app.state.services`; the transports take
it from there once per request (`of`), and everything below them — respond.py, compaction, background —
receives it as an argument, never the untyped application state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .background import Background
    from .compaction.keys import Keyring
    from .config import Settings
    from .door import Door
    from .routing import Router
    from .store import Store
    from .tools.code_interpreter.service import CodeInterpreter
    from .tools.file_search.service import FileSearch
    from .tools.kits import Toolbox
    from .tools.web_search.service import WebSearch


@dataclass
class Services:
    settings: Settings
    router: Router
    door: Door  # admission and request bounds (door.py)
    store: Store | None = None  # None with --db none
    background: Background | None = None  # background responses need the store
    owners: dict[bytes, str] = field(default_factory=dict)  # API key -> owner id (api/auth.py)
    keyring: Keyring | None = None  # compaction's, made on first use (compaction/keys.py)
    toolbox: Toolbox | None = None  # the gateway-run tools this deployment can run (tools/kits.py)
    web_search: WebSearch | None = None  # the web search providers, when configured (docs/web-search.md)
    file_search: FileSearch | None = None  # file_search's service, with a store and the extra (docs/file-search.md)
    code_interpreter: CodeInterpreter | None = None  # its containers, when on and the sandbox works
    code_interpreter_problem: str | None = None  # why the code interpreter is not running, when it is not


def of(app: Any) -> Services:
    """The services of a Starlette app (`request.app`, `websocket.app`)."""
    services: Services = app.state.services
    return services
