"""The computer calls of one response: the tool offered in the route's terms, each call shown to the client
only once whole, in the display's pixels.

The gateway does not run a computer call: the response ends with it, for the client to act and answer with a
screenshot (a `computer_call_output`) on its next request. What the gateway does is make the model able to
drive the client's computer and the call OpenAI's:
- the kit's `fit` offered the tool as the route's model takes it (fitting.py), in the frame read here;
- the action(s) the model wrote — in its own frame and shape (actions.py) — are checked and mapped to the
  display (profiles.py), with the pending safety checks the deployment asks for (a page on a denied domain).
A call the model got wrong (an unknown action, a point off the screen) never reaches the client: the model
sees why on its next step, in the same response, and tries again (tools/calls.py, `WholeCalls`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson

from ...generation import ToolCallStart
from ...ids import new_id
from ...protocol.tools import ToolSet
from ..frame import Annotator, Calls, Context, Declared, Events, Item, OpenItem, Spec
from . import actions, fitting, lowering, screens, uitars
from .declaration import PREVIEW, Display
from .service import Computer


class ComputerRunner:
    timeout = 5.0  # never run by the gateway (the client runs the calls): the loop's deadline is moot

    def __init__(self, declared: Declared, context: Context[Computer]):
        self.display: Display = declared.config
        route = context.route
        self.native = route.kind if route is not None else "chat_completions"
        model = (route.model if route is not None and route.model else None) or context.request.model
        history = context.history
        self.frame = fitting.frame_for(self.display, route, model, context.service.settings, history)
        self.name = fitting.function_name(route, self.frame)  # as the kit's `fit` offered it
        self.cursor = screens.pointer(history)
        self.pending: list[Item] = []
        shot = screens.latest(history)
        domain = screens.denied(shot.current_url if shot is not None else None, context.service.settings.deny())
        if domain is not None:
            self.pending = [{"id": new_id("cu_sc"), "code": "sensitive_domain",
                             "message": f"The current page is on {domain}, a domain this deployment lists as "
                                        "denied (--computer-deny-domains): confirm before acting on it."}]

    async def prelude(self, calls: Calls, tools: ToolSet) -> AsyncIterator[Events]:
        return
        yield

    def item(self, start: ToolCallStart) -> Item:
        return {"id": new_id("cu"), "type": "computer_call", "call_id": start.call_id, "status": "in_progress",
                "pending_safety_checks": []}

    def added(self, call: OpenItem) -> list[Spec]:
        return []

    def delta(self, call: OpenItem, text: str) -> list[Spec]:
        return []  # no argument events: the call is shown whole (OpenAI's order)

    def finished(self, call: OpenItem) -> Item | tuple[Item, Item]:
        """The call as the client sees it, or — the model got it wrong — what the model is to read."""
        item = call.item
        try:
            arguments: Any = orjson.loads(call.arguments or "{}")
        except orjson.JSONDecodeError:
            return self.wrong(call, "the arguments are not valid JSON")
        if self.native == "responses":  # the upstream ran OpenAI's tool: its item as it is
            for key in ("action", "actions", "pending_safety_checks"):
                if key in arguments:
                    item[key] = arguments[key]
            return item
        try:
            if self.frame.profile.function == "ui-tars":  # its action as it wrote it (uitars.py)
                arguments = uitars.actions(arguments if isinstance(arguments, dict) else {})
            done = actions.from_model(arguments, self.frame, self.cursor)
        except actions.BadAction as exc:
            return self.wrong(call, str(exc))
        if self.display.shape == PREVIEW:
            if len(done) != 1:
                return self.wrong(call, "give exactly one action per call")
            item["action"] = done[0]
        else:
            item["actions"] = done
        for action in done:
            self.cursor = actions.pointer_after(action, self.cursor)
        item["pending_safety_checks"] = list(self.pending)
        return item  # added `in_progress`, with its action; done `completed` (complete)

    def wrong(self, call: OpenItem, why: str) -> tuple[Item, Item]:
        call_id = call.item["call_id"]
        said = f"Error: {why}. Nothing was done on the screen; call the tool again, corrected."
        if self.frame.profile.function == "ui-tars":  # no tool calls: its action as it wrote it, then why
            return lowering.said(call.arguments or "{}"), lowering.user_text(said)
        return ({"type": "function_call", "call_id": call_id, "name": self.name, "arguments": call.arguments or "{}"},
                {"type": "function_call_output", "call_id": call_id, "output": said})

    def complete(self, call: OpenItem) -> tuple[list[Spec], bool]:
        call.item["status"] = "completed"
        return [], False  # the client runs it: the response ends with it

    async def run(self, call: OpenItem, calls: Calls) -> AsyncIterator[Events]:
        yield calls.fail_call(call, "computer calls are run by the client")

    def failed(self, call: OpenItem, message: str) -> tuple[str | None, list[Spec]]:
        return "incomplete", []

    def annotator(self) -> Annotator | None:
        return None

    async def aclose(self) -> None:
        pass
