"""The package's public surface: exactly `__all__`, each name the object its module defines."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import responses_gateway

DEFINED_IN = {
    "Accumulator": "responses_gateway.client",
    "Event": "responses_gateway.client",
    "ResponseStream": "responses_gateway.client",
    "Settings": "responses_gateway.config",
    "create_app": "responses_gateway.app",
    "read_stream": "responses_gateway.client",
}


def test_all_is_sorted_and_complete():
    assert responses_gateway.__all__ == sorted(responses_gateway.__all__, key=str.casefold)
    assert set(responses_gateway.__all__) == {*DEFINED_IN, "__version__"}


def test_all_imports_are_exported():
    """As httpx checks it: every public name of the package (submodules aside) is in `__all__`."""
    for name in responses_gateway.__all__:
        getattr(responses_gateway, name)
    public = {name for name, value in vars(responses_gateway).items()
              if (not name.startswith("_") or name == "__version__") and not isinstance(value, types.ModuleType)}
    assert public == set(responses_gateway.__all__)


def test_every_exported_name_is_the_documented_object():
    for name, module in DEFINED_IN.items():
        assert getattr(responses_gateway, name) is getattr(importlib.import_module(module), name), name


def test_star_import_gives_exactly_all():
    namespace: dict = {}
    exec("from responses_gateway import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(responses_gateway.__all__)


def test_public_names_are_listed_and_others_are_not_attributes():
    assert set(responses_gateway.__all__) <= set(dir(responses_gateway))
    try:
        responses_gateway.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")


def test_submodules_still_import_by_name():
    from responses_gateway import generation, sse

    assert sse.encode and generation.TextDelta


def test_reading_streams_does_not_load_the_server():
    code = ("import sys, responses_gateway, responses_gateway.client; "
            "print(sorted(m for m in ('starlette', 'aiohttp', 'uvicorn', 'asyncpg', 'mcp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
