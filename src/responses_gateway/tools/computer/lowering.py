"""Earlier computer calls and screenshots as the route's model is to see them (the kit's `rewrite`).

- A Responses upstream runs the tool itself: its items go to it as they are (the kit's `lower`).
- Chat Completions: a `computer_call` becomes a call of the function the route's model is offered (functions.py:
  `computer` or Qwen's `computer_use`), in the model's frame on the screenshot it was looking at; a
  `computer_call_output` becomes that call's output with the screenshot as an image (the Chat Completions
  adapter shows tool images in a user message after the tool messages, where every chat template takes them).
- UI-TARS's action language (no tool calling): a call is the assistant's `Action: click(...)` in its frame, the
  screenshot a user message with the image (uitars.py).
- Anthropic: a call of Claude's computer tool in Claude's frame (claude.py), the screenshot a `tool_result` image.
Only the last N screenshots (`--computer-keep-screenshots`) are images: older ones become a line of text, so a
long session does not fill the model's context with images.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..frame import Lowering
from . import NAME, claude, functions, screens, uitars
from .actions import Frame
from .declaration import Display
from .fitting import profile_for
from .profiles import Profile, Size
from .settings import ComputerSettings

Item = dict[str, Any]
LEFT_OUT = "[an earlier screenshot, left out to save context]"


def rewrite(items: list[Item], lowering: Lowering) -> list[Item]:
    route = lowering.route
    kind = route.kind if route is not None else "chat_completions"
    if kind == "responses" or not any(item["type"] in ("computer_call", "computer_call_output") for item in items):
        return items
    settings = lowering.settings.group(ComputerSettings) if lowering.settings is not None else ComputerSettings()
    to_claude = kind == "anthropic"
    profile = profile_for(route, lowering.model, settings)
    in_text = not to_claude and profile.function == "ui-tars"
    declared = _declared(lowering)
    shots = [i for i, item in enumerate(items) if item["type"] == "computer_call_output"]
    keep = settings.computer_keep_screenshots
    old = set(shots[:-keep] if keep else shots)
    out: list[Item] = []
    image: Size | None = None  # the screenshot the model was looking at
    for i, item in enumerate(items):
        if item["type"] == "computer_call":
            frame = Frame(profile, image, declared)
            out.append(written(item, frame) if in_text else call(item, frame, profile, claude_tool=to_claude))
        elif item["type"] == "computer_call_output":
            output = item.get("output") or {}
            image = screens.size(output.get("image_url")) or image
            shown = result(item, image=i not in old)
            out.append({"type": "message", "role": "user", "content": shown["output"]} if in_text else shown)
        else:
            out.append(item)
    return out


def _declared(lowering: Lowering) -> Size | None:
    """The display the request's computer tool names (None: the `computer` tool, or none declared)."""
    for declared in lowering.declared:
        if declared.kit.name == NAME and isinstance(declared.config, Display):
            display = declared.config
            return (display.width, display.height) if display.width and display.height else None
    return None


def call(item: Item, frame: Frame, profile: Profile, *, claude_tool: bool) -> Item:
    """A computer call as the call the model made (in its own terms)."""
    done = item.get("actions") or ([item["action"]] if isinstance(item.get("action"), dict) else [])
    if claude_tool:
        arguments: Any = claude.to_claude(done[0], frame) if done else {"action": "screenshot"}
        name = "computer"
    else:
        arguments = functions.arguments(done, frame, several="actions" in item)
        name = profile.function
    return {"type": "function_call", "call_id": item["call_id"], "name": name,
            "arguments": orjson.dumps(arguments).decode()}


def written(item: Item, frame: Frame) -> Item:
    """A computer call as a model that writes its actions in text wrote it (UI-TARS: `Action: click(...)`)."""
    done = item.get("actions") or ([item["action"]] if isinstance(item.get("action"), dict) else [])
    return said(orjson.dumps({"ui_tars": uitars.write(done[0], frame) if done else "wait()"}).decode())


def said(arguments: str) -> Item:
    """The assistant's answer that made a call in text, from the call's arguments (`{"ui_tars": action}`)."""
    try:
        action = orjson.loads(arguments).get("ui_tars", "")
    except (orjson.JSONDecodeError, AttributeError):
        action = ""
    return {"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": f"Action: {action}", "annotations": []}]}


def user_text(text: str) -> Item:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def result(item: Item, *, image: bool) -> Item:
    """A screenshot as the call's output: an image (the latest ones) or a line of text."""
    output = item.get("output") or {}
    url = output.get("image_url")
    page = output.get("current_url")
    text = "The screen after the action." + (f" The page is {page}." if isinstance(page, str) and page else "")
    parts: list[Item] = [{"type": "input_text", "text": text}]
    if image and isinstance(url, str) and url:
        parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
    else:
        parts = [{"type": "input_text", "text": LEFT_OUT if url else text}]
    return {"type": "function_call_output", "call_id": item["call_id"], "output": parts}
