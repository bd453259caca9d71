"""The code_interpreter kit: `{"type": "code_interpreter", "container": ...}`, `code_interpreter_call` items.

Its parsing and rendering are pure and cheap; `serve` makes the process's containers at start-up (the
sandbox tried once, service.py), and the Containers API is its HTTP API (containers_api.py).

The model is offered one freeform (`custom`) tool whose input is the code itself, so the adapters decode
it incrementally as it streams (upstreams/custom_input.py for servers that only know JSON functions) and
each piece goes out as `response.code_interpreter_call_code.delta` — no JSON is re-parsed per token. Earlier
calls are shown to the model as that tool's call and its output (the logs, then the value, then what else
the call produced), rendered from the stored item, whose `outputs` are kept even when the client was not
shown them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from ...errors import APIError, invalid
from ...protocol.tools import Tool
from ..frame import Context, Declared, Item, Kit, Runner
from . import NAME
from .containers_api import ROUTES
from .declaration import OUTPUTS, Container
from .runner import CodeRunner
from .service import CodeInterpreter, serve
from .settings import CodeInterpreterSettings

MEMORY_VALUES = ("1g", "4g", "16g", "64g")

DESCRIPTION = (
    "Run Python code in a stateful, sandboxed Jupyter-like environment and get its output back: what it prints "
    "(stdout and stderr) and the value of its last expression, as a notebook shows it. Variables, imports and "
    "files persist between calls. Files go in /mnt/data (the user's uploaded files are there too); matplotlib "
    "figures are saved and shown to the user as images. numpy, pandas and matplotlib are available; there is "
    "no internet access. Each call is limited in time, memory and output. To give the user a file, link it "
    "as [name](sandbox:/mnt/data/name). The input is the Python code itself, not JSON."
)



@functools.cache
def function() -> Tool:
    """What the model is offered (protocol.tools imports the registry of kits, so this is made on first use)."""
    return Tool("custom", NAME, NAME, DESCRIPTION, format={"type": "text"}, runner=NAME)


def parse(spec: dict[str, Any], where: str) -> Declared:
    for key in spec:
        if key not in ("type", "container", "allowed_callers"):
            raise APIError(400, f"Unknown parameter: '{where}.{key}'.", param=f"{where}.{key}",
                           code="unknown_parameter")
    container = spec.get("container")
    param = f"{where}.container"
    if container is None:
        raise APIError(400, f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")
    if isinstance(container, str):
        if not container.startswith("cntr_"):
            raise invalid(f"Invalid '{param}': expected a container id (cntr_...) or an object.", param)
        return Declared(KIT, where, Container(id=container), (function(),))
    if not isinstance(container, dict):
        raise APIError(400, f"Invalid type for '{param}': expected a string or an object.", param=param,
                       code="invalid_type")
    if container.get("type") != "auto":
        raise invalid(f"Invalid value for '{param}.type': expected 'auto'.", f"{param}.type")
    for key in container:
        if key not in ("type", "file_ids", "memory_limit", "network_policy"):
            raise APIError(400, f"Unknown parameter: '{param}.{key}'.", param=f"{param}.{key}",
                           code="unknown_parameter")
    file_ids = container.get("file_ids") or []
    if not isinstance(file_ids, list) or not all(isinstance(f, str) for f in file_ids):
        raise APIError(400, f"Invalid type for '{param}.file_ids': expected an array of strings.",
                       param=f"{param}.file_ids", code="invalid_type")
    memory = container.get("memory_limit")
    if memory is not None and memory not in MEMORY_VALUES:
        raise invalid(f"Invalid value: '{memory}'. Supported values are: '1g', '4g', '16g' and '64g'.",
                      f"{param}.memory_limit")
    policy = container.get("network_policy")
    if policy is not None and (not isinstance(policy, dict) or policy.get("type") != "disabled"):
        raise APIError(400, f"'{param}.network_policy': this gateway's containers have no network; only "
                       "{\"type\": \"disabled\"} is supported.", param=f"{param}.network_policy",
                       code="unsupported_parameter")
    return Declared(KIT, where, Container(None, tuple(file_ids), memory), (function(),))


def check(declared: Sequence[Declared]) -> None:
    if len(declared) > 1:
        raise invalid(f"Invalid '{declared[1].where}': only one code_interpreter tool may be declared.",
                      declared[1].where)


def echo(declared: Declared) -> dict[str, Any]:
    """As OpenAI echoes it: the container id, or `{"type": "auto"}` (with its file ids, if any)."""
    config: Container = declared.config
    if config.id is not None:
        return {"type": NAME, "container": config.id}
    container: dict[str, Any] = {"type": "auto"}
    if config.file_ids:
        container["file_ids"] = list(config.file_ids)
    return {"type": NAME, "container": container}


def normalize(item: dict[str, Any], where: str) -> Item:
    """A `code_interpreter_call` sent back as input (the stored copy replaces it when the gateway has one)."""
    if not isinstance(item.get("container_id"), str):
        raise APIError(400, f"Missing required parameter: '{where}.container_id'.", param=f"{where}.container_id",
                       code="missing_required_parameter")
    code = item.get("code")
    if code is not None and not isinstance(code, str):
        raise APIError(400, f"Invalid type for '{where}.code': expected a string.", param=f"{where}.code",
                       code="invalid_type")
    outputs = item.get("outputs")
    if outputs is not None and not (isinstance(outputs, list) and all(isinstance(o, dict) for o in outputs)):
        raise APIError(400, f"Invalid type for '{where}.outputs': expected an array of objects.",
                       param=f"{where}.outputs", code="invalid_type")
    out: Item = {"type": "code_interpreter_call", "status": item.get("status") or "completed", "code": code,
                 "container_id": item["container_id"], "outputs": outputs}
    if isinstance(item.get("id"), str):
        out["id"] = item["id"]
    return out


def rendered(item: Item) -> str:
    """What the model reads of a call's outcome: its logs and value, then images and notes."""
    pieces: list[str] = []
    for output in item.get("outputs") or ():
        if output.get("type") == "logs" and output.get("logs"):
            pieces.append(str(output["logs"]))
        elif output.get("type") == "image":
            pieces.append("[an image was shown to the user]")
    if not pieces:
        status = item.get("status") or "completed"
        return "(no output)" if status == "completed" else f"(the call ended {status}, without output)"
    return "\n".join(p.rstrip("\n") for p in pieces)


def lower(item: Item) -> tuple[Item, Item]:
    call = {"type": "custom_tool_call", "call_id": item["id"], "name": NAME, "input": item.get("code") or ""}
    return call, {"type": "custom_tool_call_output", "call_id": item["id"], "output": rendered(item)}


def shown(item: Item, include: frozenset[str]) -> Item:
    """`outputs` only when `include` asks for them (null otherwise, as OpenAI shows it)."""
    if OUTPUTS in include or item.get("outputs") is None:
        return item
    return {**item, "outputs": None}


async def preflight(declared: Sequence[Declared], service: CodeInterpreter, owner: str) -> None:
    """Before the response starts: the declared container is the caller's and running, the memory limit is
    one this gateway allows, the file ids are the caller's files (a 404 or 400, not a failed call)."""
    for one in declared:
        config: Container = one.config
        param = f"{one.where}.container"
        if config.id is not None:
            try:
                await service.registry.usable(owner, config.id)
            except APIError as exc:
                exc.param = param
                raise
        else:
            service.registry.memory_limit(config.memory_limit, f"{param}.memory_limit")
            await service.check_files(owner, config.file_ids, f"{param}.file_ids")


def start(declared: Sequence[Declared], context: Context[CodeInterpreter]) -> Runner:
    return CodeRunner(declared[0].config, context)


KIT: Kit[CodeInterpreterSettings, CodeInterpreter] = Kit(
    name=NAME,
    types=(NAME,),
    item_types=("code_interpreter_call",),
    parse=parse,
    echo=echo,
    normalize=normalize,
    lower=lower,
    start=start,
    shown=shown,
    includes=(OUTPUTS,),
    check=check,
    preflight=preflight,
    settings=CodeInterpreterSettings,
    serve=serve,  # the sandbox, tried once at start-up (service.py)
    routes=ROUTES,
)
