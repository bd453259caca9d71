"""The computer kit: `{"type": "computer_use_preview", "display_width", "display_height", "environment"}` and
`{"type": "computer"}`, `computer_call` and `computer_call_output` items.

The model is offered one function, `computer`: one action a call with `computer_use_preview` (the item's
`action`), several with `computer` (the item's `actions`) — or, on an Anthropic route, Claude's own computer
tool, and on a Responses route the declaration as it is (the upstream runs the tool). The item the client
gets is OpenAI's, in the display's pixels, whatever frame the model answered in (profiles.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import APIError, invalid
from ...protocol.tools import Tool
from ..frame import Context, Declared, Item, Kit, Lowering, Runner
from . import NAME, actions, fitting, functions, screens
from .declaration import PREVIEW, Display
from .lowering import rewrite
from .profiles import Profile
from .runner import ComputerRunner
from .service import Computer, serve
from .settings import ComputerSettings

ENVIRONMENTS = ("windows", "mac", "linux", "ubuntu", "browser")
IMAGES = "computer_call_output.output.image_url"
CALL_STATUSES = ("in_progress", "completed", "incomplete")
OUTPUT_STATUSES = ("in_progress", "completed", "incomplete", "failed")

def parse(spec: dict[str, Any], where: str) -> Declared:
    kind = spec.get("type")
    known = {"type", "display_width", "display_height", "environment"} if kind == PREVIEW else {"type"}
    for key in spec:
        if key not in known:
            raise invalid(f"Unknown parameter: '{where}.{key}'.", f"{where}.{key}", "unknown_parameter")
    width = height = environment = None
    if kind == PREVIEW:
        for name in ("display_width", "display_height"):
            value = spec.get(name)
            if value is None:
                raise APIError(400, f"Missing required parameter: '{where}.{name}'.", param=f"{where}.{name}",
                               code="missing_required_parameter")
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 16384:
                raise invalid(f"Invalid '{where}.{name}': expected an integer from 1 to 16384.", f"{where}.{name}")
        width, height = spec["display_width"], spec["display_height"]
        environment = spec.get("environment")
        if environment not in ENVIRONMENTS:
            raise invalid(f"Invalid value for '{where}.environment': expected one of "
                          + ", ".join(f"'{e}'" for e in ENVIRONMENTS) + ".", f"{where}.environment")
    display = Display(str(kind), width, height, environment)
    return Declared(KIT, where, display, (function(display),))


def function(display: Display) -> Tool:
    """What the model is offered until its route is known (the runner offers it in the route's terms);
    `spec` is the declaration, for a Responses upstream that runs the tool itself."""
    several = display.shape != PREVIEW
    size = (display.width, display.height) if display.width and display.height else None
    frame = actions.Frame(Profile(), None, size)
    return Tool("computer", NAME, NAME, functions.description(frame, several), functions.parameters(frame, several),
                runner=NAME, spec=echo_display(display))


def echo_display(display: Display) -> dict[str, Any]:
    if display.shape != PREVIEW:
        return {"type": display.shape}
    return {"type": PREVIEW, "display_width": display.width, "display_height": display.height,
            "environment": display.environment}


def echo(declared: Declared) -> dict[str, Any]:
    return echo_display(declared.config)


def normalize(item: dict[str, Any], where: str) -> Item:
    kind = item["type"]
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise APIError(400, f"Missing required parameter: '{where}.call_id'.", param=f"{where}.call_id",
                       code="missing_required_parameter")
    out: Item = {"type": kind, "call_id": call_id}
    if isinstance(item.get("id"), str):
        out["id"] = item["id"]
    if kind == "computer_call":
        action, done = item.get("action"), item.get("actions")
        if action is None and done is None:
            raise APIError(400, f"Missing required parameter: '{where}.action'.", param=f"{where}.action",
                           code="missing_required_parameter")
        if action is not None and not isinstance(action, dict):
            raise invalid(f"Invalid type for '{where}.action': expected an object.", f"{where}.action", "invalid_type")
        if done is not None and (not isinstance(done, list) or not all(isinstance(a, dict) for a in done)):
            raise invalid(f"Invalid type for '{where}.actions': expected an array of objects.", f"{where}.actions",
                          "invalid_type")
        for key, given in (("action", [action] if action is not None else []), ("actions", done or [])):
            for i, one in enumerate(given):
                problem = actions.problem(one)
                if problem is not None:
                    at = f"{where}.{key}" + (f"[{i}]" if key == "actions" else "")
                    raise invalid(f"Invalid '{at}': {problem}.", at)
        if action is not None:
            out["action"] = action
        if done is not None:
            out["actions"] = done
        out["pending_safety_checks"] = _checks(item.get("pending_safety_checks"), f"{where}.pending_safety_checks")
        out["status"] = _status(item.get("status") or "completed", CALL_STATUSES, f"{where}.status")
        return out
    output = item.get("output")
    if not isinstance(output, dict):
        raise APIError(400, f"Missing required parameter: '{where}.output'.", param=f"{where}.output",
                       code="missing_required_parameter")
    if output.get("type") != "computer_screenshot":
        raise invalid(f"Invalid value for '{where}.output.type': expected 'computer_screenshot'.",
                      f"{where}.output.type")
    shot: Item = {"type": "computer_screenshot"}
    for key in ("image_url", "file_id", "current_url"):
        value = output.get(key)
        if value is not None:
            if not isinstance(value, str):
                raise invalid(f"Invalid type for '{where}.output.{key}': expected a string.", f"{where}.output.{key}",
                              "invalid_type")
            shot[key] = value
    if "image_url" not in shot and "file_id" not in shot:
        raise APIError(400, f"Missing required parameter: '{where}.output.image_url'.",
                       param=f"{where}.output.image_url", code="missing_required_parameter")
    out["output"] = shot
    checks = item.get("acknowledged_safety_checks")
    if checks is not None:
        out["acknowledged_safety_checks"] = _checks(checks, f"{where}.acknowledged_safety_checks")
    out["status"] = _status(item.get("status") or "completed", OUTPUT_STATUSES, f"{where}.status")  # as listed
    return out


def _checks(value: Any, where: str) -> list[Item]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(c, dict) and isinstance(c.get("id"), str) for c in value):
        raise invalid(f"Invalid '{where}': expected an array of objects with an 'id'.", where, "invalid_type")
    return [{k: c[k] for k in ("id", "code", "message") if k in c} for c in value]


def _status(value: Any, allowed: tuple[str, ...], where: str) -> str:
    if value not in allowed:
        raise invalid(f"Invalid value: '{value}'. Supported values are: " + ", ".join(f"'{s}'" for s in allowed)
                      + ".", where)
    return str(value)


def shown(item: Item, include: frozenset[str]) -> Item:
    """A screenshot's `image_url` only with include `computer_call_output.output.image_url` (it is large)."""
    if item.get("type") != "computer_call_output" or IMAGES in include:
        return item
    output = item.get("output") or {}
    if "image_url" not in output:
        return item
    return {**item, "output": {k: v for k, v in output.items() if k != "image_url"}}


def lower(item: Item) -> tuple[Item | None, Item | None]:
    """A Responses upstream runs the tool: the items go to it as they are (`rewrite` made the others' already)."""
    bare = {k: v for k, v in item.items() if k != "id"}
    return (bare, None) if item["type"] == "computer_call" else (None, bare)


def admit(declared: Sequence[Declared], items: Sequence[Item], service: Computer) -> None:
    """The request's whole input: each screenshot answers a call, is an image within the limit (a URL, or a
    data URL — a Files API `file_id` is not read), and acknowledges the call's pending safety checks."""
    limit = service.settings.max_image_bytes
    calls: dict[str, Item] = {}
    for item in items:
        kind = item.get("type")
        if kind == "computer_call":
            calls[item["call_id"]] = item
        elif kind == "computer_call_output":
            call_id = item["call_id"]
            call = calls.get(call_id)
            if call is None:
                raise APIError(400, f"No computer_call found with call_id '{call_id}' for this computer_call_output.",
                               param="input", code="invalid_value")
            output = item["output"]
            if "image_url" not in output:
                raise APIError(400, "A screenshot given as a Files API file_id is not read by this gateway: send it "
                               "as output.image_url (a data URL).", param="input", code="unsupported_parameter")
            try:
                screens.check(output["image_url"], limit, "computer_call_output.output.image_url")
            except ValueError as exc:
                raise APIError(400, f"Invalid screenshot for call '{call_id}': {exc}.", param="input",
                               code="invalid_image") from None
            pending = {c["id"] for c in call.get("pending_safety_checks") or ()}
            acknowledged = {c["id"] for c in item.get("acknowledged_safety_checks") or ()}
            if pending - acknowledged:
                raise APIError(400, f"The computer_call_output for call '{call_id}' must acknowledge its pending "
                               f"safety checks ({', '.join(sorted(pending - acknowledged))}) in "
                               "acknowledged_safety_checks.", param="input", code="invalid_value")


def fit(declared: Declared, lowering: Lowering, history: Sequence[Item]) -> tuple[Tool, ...]:
    """The tool in the route's terms (fitting.py), for the frame the model last saw the screen in."""
    settings = lowering.settings.group(ComputerSettings) if lowering.settings is not None else ComputerSettings()
    frame = fitting.frame_for(declared.config, lowering.route, lowering.model, settings, history)
    return (fitting.offer(declared.functions[0], declared.config, lowering.route, lowering.model, frame),)


def start(declared: Sequence[Declared], context: Context[Computer]) -> Runner:
    return ComputerRunner(declared[0], context)


KIT: Kit[ComputerSettings, Computer] = Kit(
    name=NAME,
    types=(PREVIEW, "computer"),
    item_types=("computer_call", "computer_call_output"),
    parse=parse,
    echo=echo,
    normalize=normalize,
    lower=lower,
    start=start,
    shown=shown,
    includes=(IMAGES,),
    rewrite=rewrite,
    settings=ComputerSettings,
    serve=serve,
    admit=admit,
    fit=fit,
)
