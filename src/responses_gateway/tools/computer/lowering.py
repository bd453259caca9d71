"""Earlier computer calls and screenshots as the route's model is to see them (the kit's `rewrite`).

- A Responses upstream runs the tool itself: its items go to it as they are (the kit's `lower`).
- Chat Completions and Anthropic: a `computer_call` becomes a call of the `computer` function (in the model's
  coordinates: the route's profile, on the screen of the screenshot the model was looking at) or of Claude's
  computer tool; a `computer_call_output` becomes that call's output with the screenshot as an image (the
  Chat Completions adapter shows tool images in a user message after the tool messages). Only the last N
  screenshots (`--computer-keep-screenshots`) are images: older ones become a line of text, so a long session
  does not fill the model's context with images.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..frame import Lowering
from . import actions, screens
from .service import profile_for
from .settings import ComputerSettings

Item = dict[str, Any]
FUNCTION = "computer"
LEFT_OUT = "[an earlier screenshot, left out to save context]"


def rewrite(items: list[Item], lowering: Lowering) -> list[Item]:
    route = lowering.route
    kind = route.kind if route is not None else "chat_completions"
    if kind == "responses" or not any(item["type"] in ("computer_call", "computer_call_output") for item in items):
        return items
    settings = lowering.settings.group(ComputerSettings) if lowering.settings is not None else ComputerSettings()
    profile = profile_for(route, settings)
    shots = [i for i, item in enumerate(items) if item["type"] == "computer_call_output"]
    keep = settings.computer_keep_screenshots
    old = set(shots[:-keep] if keep else shots)
    out: list[Item] = []
    screen: tuple[int, int] | None = None
    for i, item in enumerate(items):
        if item["type"] == "computer_call":
            out.append(call(item, actions.Frame(profile, screen), claude=kind == "anthropic"))
        elif item["type"] == "computer_call_output":
            output = item.get("output") or {}
            screen = screens.size(output.get("image_url")) or screen
            out.append(result(item, image=i not in old))
        else:
            out.append(item)
    return out


def call(item: Item, frame: actions.Frame, *, claude: bool) -> Item:
    """A computer call as the function call the model made (in its own terms)."""
    done = item.get("actions") or ([item["action"]] if isinstance(item.get("action"), dict) else [])
    if claude:
        arguments: Any = actions.to_claude(done[0]) if done else {"action": "screenshot"}
    elif len(done) == 1 and not item.get("actions"):
        arguments = actions.to_function(done[0], frame)
    else:
        arguments = {"actions": [actions.to_function(a, frame) for a in done]}
    return {"type": "function_call", "call_id": item["call_id"], "name": FUNCTION,
            "arguments": orjson.dumps(arguments).decode()}


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
