"""Scripting the fake model to run code through the gateway's code_interpreter tool."""

from __future__ import annotations

import json
from typing import Any

from tests.support.fake_chat import Stream, text_stream, tool_calls_stream

AUTO = {"type": "code_interpreter", "container": {"type": "auto"}}
OUTPUTS = ["code_interpreter_call.outputs"]


def code_call(code: str, call_id: str = "call_code", pieces: int = 3) -> Stream:
    """The model calls the code_interpreter tool (offered to Chat Completions as a function whose `input` is
    the code), its arguments split in `pieces` deltas."""
    arguments = json.dumps({"input": code})
    size = max(1, len(arguments) // pieces)
    fragments = [arguments[i:i + size] for i in range(0, len(arguments), size)]
    return Stream(tool_calls_stream([(call_id, "code_interpreter", fragments)]))


def answer(text: str = "Done.") -> Stream:
    return Stream(text_stream([text]))


def run_code(client: Any, upstream: Any, code: str, *, tools: list[dict[str, Any]] | None = None,
             reply: str = "Done.", **kw: Any) -> Any:
    """One response in which the model runs `code` and then answers; returns the response (outputs included)."""
    upstream.enqueue(code_call(code), answer(reply))
    kw.setdefault("include", OUTPUTS)
    return client.responses.create(model="m", input="Run it.", tools=tools or [AUTO], **kw)


def call_of(response: Any) -> Any:
    return next(item for item in response.output if item.type == "code_interpreter_call")


def logs(call: Any) -> str:
    return "".join(o.logs for o in call.outputs or () if o.type == "logs")
