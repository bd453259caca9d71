"""responses-gateway: the OpenAI Responses API in front of any model server.

The public surface is `__all__`: the server factory (`create_app`, with its `Settings`) and the stream
reader (`read_stream` and its types, docs/client.md). Everything else may change without notice.

The names are resolved on first use, so `import responses_gateway.client` stays light: a program that only
reads streams does not load the server (Starlette, aiohttp, the database drivers).
"""


import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from .app import create_app
    from .client import Accumulator, Event, ResponseStream, read_stream
    from .config import Settings

from .version import __version__

# public name -> the module that defines it
_EXPORTS = {
    "Accumulator": "client",
    "Event": "client",
    "ResponseStream": "client",
    "Settings": "config",
    "create_app": "app",
    "read_stream": "client",
}

__all__ = ["__version__", "Accumulator", "create_app", "Event", "read_stream", "ResponseStream", "Settings"]


def __getattr__(name: str) -> _typing.Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
