"""The computer tool in the terms of the route a request goes to: the frame its model answers in, and the tool
it is offered (the kit's `fit`, before the first step; the runner reads calls in the same frame).

- Chat Completions: the route's profile (profiles.py) on the screenshot the model last saw — the function it
  takes (`computer` or Qwen's `computer_use`, functions.py) described in that frame, or UI-TARS's action
  language in text (uitars.py: the tool's `text_calls`, upstreams/text_calls.py);
- Anthropic: Claude's frame (claude.py) and its own versioned tool, told the screen's size in that frame;
- Responses: the declaration as the client gave it (the upstream runs the tool).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ...protocol.tools import Tool
from ...route import Route
from . import claude, functions, screens
from .actions import Frame
from .declaration import PREVIEW, Display
from .profiles import Profile, for_route
from .settings import ComputerSettings
from .uitars import UiTars

Item = dict[str, Any]
UI_TARS = UiTars()


def profile_for(route: Route | None, model: str, settings: ComputerSettings) -> Profile:
    """The frame the route's model answers in: Claude's, or the route's profile (else the deployment's)."""
    if route is not None and route.kind == "anthropic":
        return claude.profile(model)
    return for_route(route, settings.computer_profile)


def frame_for(display: Display, route: Route | None, model: str, settings: ComputerSettings,
              history: Sequence[Item]) -> Frame:
    """Where the route's model answers: its profile, the last screenshot it saw, the declared display."""
    shot = screens.latest(history)
    image = shot.size if shot is not None else None
    declared = (display.width, display.height) if display.width and display.height else None
    return Frame(profile_for(route, model, settings), image, declared)


def offer(tool: Tool, display: Display, route: Route | None, model: str, frame: Frame) -> Tool:
    """The tool as the route's model takes it."""
    kind = route.kind if route is not None else "chat_completions"
    if kind == "responses":
        return tool  # the declaration as the client gave it (Tool.spec)
    if kind == "anthropic":
        return replace(tool, spec=claude.declaration(model, frame))
    if frame.profile.function == "ui-tars":  # no tool calling: its action language, in the instructions
        return replace(tool, text_calls=UI_TARS)
    several = display.shape != PREVIEW
    return replace(tool, wire_name=function_name(route, frame), description=functions.description(frame, several),
                   parameters=functions.parameters(frame, several))


def function_name(route: Route | None, frame: Frame) -> str:
    """The name the model calls the computer by (Claude's tool is `computer`, a text action language's calls
    are the tool's own)."""
    if (route is not None and route.kind == "anthropic") or frame.profile.function == "ui-tars":
        return "computer"
    return frame.profile.function
