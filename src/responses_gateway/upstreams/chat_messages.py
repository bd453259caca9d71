"""Responses input items → Chat Completions messages, in order and with full fidelity.

- `instructions` and the system/developer messages that open the conversation become one leading system
  message (many chat templates accept a system message only first); later ones stay in place as system.
- An assistant turn gathers its reasoning, text and tool calls into one assistant message; each call
  output becomes a `tool` message right after it.
- Custom (freeform) tool calls travel as function calls with `{"input": ...}` arguments: that is how the
  adapter offers custom tools to servers that know only functions.
- Reasoning goes back on the assistant turn per the `reasoning_history` setting.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..protocol.reasoning import unseal
from ..protocol.tools import wire_name
from .wire import tool_summary


def to_messages(instructions: str | None, items: list[dict[str, Any]], reasoning_history: str = "reasoning_content") -> list[Any]:
    b = _Builder(reasoning_history)
    if instructions:
        b.lead.append(instructions)
    for item in items:
        kind = item["type"]
        if kind == "message":
            role = item["role"]
            if role in ("system", "developer"):
                text = _text(item["content"])
                if not b.messages and b.assistant is None:
                    b.lead.append(text)
                else:
                    b.flush("system")
                    b.messages.append({"role": "system", "content": text})
            elif role == "user":
                b.flush("user")
                b.messages.append({"role": "user", "content": _user_content(item["content"])})
            else:
                turn = b.turn()
                if turn["tool_calls"]:  # text after tool calls starts a new assistant message
                    b.flush("assistant")
                    turn = b.turn()
                turn["content"].append(_text(item["content"]))
        elif kind in ("function_call", "custom_tool_call"):
            if kind == "function_call":
                arguments = item["arguments"]
            else:
                arguments = orjson.dumps({"input": item["input"]}).decode()
            b.turn()["tool_calls"].append({
                "id": item["call_id"],
                "type": "function",
                "function": {"name": wire_name(item["name"], item.get("namespace")), "arguments": arguments},
            })
        elif kind == "tool_search_call":
            b.turn()["tool_calls"].append({
                "id": item["call_id"], "type": "function",
                "function": {"name": "tool_search", "arguments": orjson.dumps(item["arguments"]).decode()},
            })
        elif kind == "tool_search_output":
            b.flush("tool")
            b.messages.append({"role": "tool", "tool_call_id": item["call_id"],
                               "content": orjson.dumps({"tools": tool_summary(item["tools"])}).decode()})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            b.flush("tool")
            output = item["output"]
            if isinstance(output, list):
                b.images.extend(_image(p) for p in output if p["type"] == "input_image")
                output = _text(output)
            b.messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": output})
        elif kind == "reasoning":
            if b.assistant is not None and (b.assistant["content"] or b.assistant["tool_calls"]):
                b.flush("assistant")
            text = _reasoning_text(item)
            if text:
                b.turn()["reasoning"].append(text)
    b.flush(None)
    if b.lead:
        b.messages.insert(0, {"role": "system", "content": "\n\n".join(b.lead)})
    return b.messages


class _Builder:
    def __init__(self, reasoning_history: str):
        self.reasoning_history = reasoning_history
        self.lead: list[str] = []
        self.messages: list[dict[str, Any]] = []
        self.assistant: dict[str, Any] | None = None
        self.images: list[dict[str, Any]] = []  # images returned by tools, shown to the model after the tool messages

    def turn(self) -> dict[str, Any]:
        if self.assistant is None:
            self._images()
            self.assistant = {"content": [], "tool_calls": [], "reasoning": []}
        return self.assistant

    def _images(self) -> None:
        if self.images:
            self.messages.append({"role": "user", "content": self.images})
            self.images = []

    def flush(self, next_role: str | None) -> None:
        """End the assistant turn being built; tool images wait until the run of tool messages ends."""
        turn, self.assistant = self.assistant, None
        if turn is not None and (turn["content"] or turn["tool_calls"]):
            msg: dict[str, Any] = {"role": "assistant", "content": "".join(turn["content"]) or None}
            if turn["tool_calls"]:
                msg["tool_calls"] = turn["tool_calls"]
            if turn["reasoning"] and self.reasoning_history != "drop":
                msg[self.reasoning_history] = "\n".join(turn["reasoning"])
            self.messages.append(msg)
        # (reasoning with nothing after it has no turn to ride on, and is dropped)
        if next_role != "tool":
            self._images()


def _text(parts: list[dict[str, Any]]) -> str:
    return "".join(p.get("text") or p.get("refusal") or "" for p in parts if p["type"] != "input_image")


def _image(part: dict[str, Any]) -> dict[str, Any]:
    detail = part.get("detail", "auto")
    # Chat Completions knows auto/low/high; "original" (full resolution) is closest to "high".
    return {"type": "image_url", "image_url": {"url": part["image_url"],
                                              "detail": "high" if detail == "original" else detail}}


def _user_content(parts: list[dict[str, Any]]) -> str | list[Any]:
    if len(parts) == 1 and parts[0]["type"] == "input_text":
        text: str = parts[0]["text"]
        return text
    return [_image(p) if p["type"] == "input_image" else {"type": "text", "text": p["text"]} for p in parts]


def _reasoning_text(item: dict[str, Any]) -> str:
    texts = [p["text"] for p in item.get("content") or () if p.get("text")]
    if not texts:
        sealed = unseal(item.get("encrypted_content"))
        if sealed:
            texts = [sealed[0]]
    if not texts:
        texts = [p["text"] for p in item.get("summary") or () if p.get("text")]
    return "\n".join(texts)
