"""What the request path works with, typed: made once when the app starts, handed to every transport.

The app (app.py) builds one `Services` at startup and keeps it as `app.state.services`; the transports take
it from there once per request (`of`), and everything below them — respond.py, compaction, background —
receives it as an argument, never the untyped application state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .protocol.tools import EMPTY, Toolbox
from .tools.frame import ToolServices

if TYPE_CHECKING:
    from .background import Background
    from .compaction.keys import Keyring
    from .config import Settings
    from .door import Door
    from .routing import Router
    from .store import Store


@dataclass
class Services:
    settings: Settings
    router: Router
    door: Door  # admission and request bounds (door.py)
    store: Store | None = None  # None with --db none
    background: Background | None = None  # background responses need the store
    owners: dict[bytes, str] = field(default_factory=dict)  # API key -> owner id (api/auth.py)
    keyring: Keyring | None = None  # compaction's, made on first use (compaction/keys.py)
    tools: ToolServices = field(default_factory=ToolServices)  # each gateway-run tool's service, or why not
    toolbox: Toolbox = EMPTY  # the gateway-run tools as requests meet them (tools/kits.toolbox)


def of(app: Any) -> Services:
    """The services of a Starlette app (`request.app`, `websocket.app`)."""
    services: Services = app.state.services
    return services
