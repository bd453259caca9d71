"""Responses history → an Anthropic Messages request (`POST /v1/messages`), in order and with full fidelity.

- `instructions` and every system/developer message, concatenated in order, become the one `system` field.
- Turns alternate user/assistant: consecutive items of the same role merge into one message with several
  content blocks (reasoning, text and tool calls of one assistant turn; tool results and text of one user turn).
- function_call / custom_tool_call / tool_search_call → assistant `tool_use` blocks (custom input travels as
  `{"input": raw}`); their outputs → user `tool_result` blocks, placed first in their message as Anthropic
  requires; images inside tool outputs stay inside the `tool_result`.
- reasoning items → assistant `thinking` / `redacted_thinking` blocks, rebuilt from the item's
  `encrypted_content` (our sealed envelope). A reasoning item without an Anthropic signature is dropped:
  Anthropic rejects unsigned thinking.
- Text that is empty or only whitespace is left out (Anthropic rejects such text blocks); a message left with
  no blocks is not sent.
- Call ids outside Anthropic's `^[a-zA-Z0-9_-]+$` (`functions.get_weather:0` from Kimi-style servers) are
  rewritten the same way in `tool_use` and `tool_result` (`safe_ids`); the ids Anthropic assigns to new calls
  are already safe, so nothing needs mapping back.

What OpenAI accepts and Anthropic refuses (`build_body`)
------------------------------------------------------
- `thinking` with a forced `tool_choice` (`required` → `any`, a named tool → `tool`): Anthropic refuses the
  pair, so the call goes without thinking; the forced choice is kept, since the client relies on it.
- `thinking` when the request continues a tool-use turn whose assistant message does not start with a signed
  thinking block (the client left the reasoning out, or sent it by id and no stored copy had the signature):
  Anthropic refuses that too, so that call goes without thinking.
- `temperature` above 1 (OpenAI allows up to 2, Anthropic up to 1) is sent as 1; with thinking on it is not
  sent at all (Anthropic then allows only its default).
- `top_p` below 0.95 with thinking on is sent as 0.95, the nearest value Anthropic accepts then (it refuses
  the request otherwise); without thinking it is sent as given.

How thinking blocks live in `encrypted_content`
-----------------------------------------------
The adapter reports each block's signature as `ReasoningDelta("", signature=...)`; the composer concatenates
the signatures of one reasoning item and seals them with the item's text (`protocol.reasoning.seal`). The
signature string it seals is:

    <segment> ( "\\n" <offset> ":" <segment> )*

- the common case, one `thinking` block: the signature exactly as Anthropic sent it;
- a `redacted_thinking` block: `"redacted:" + data` (its `data` is opaque and carries no text);
- several blocks that the composer merged into one reasoning item (thinking and redacted thinking in a row,
  with no text or tool call between them): each further block's segment is prefixed with a newline and the
  character offset in the item's text where that block's thinking starts. Anthropic signatures and redacted
  data are base64, so neither a newline nor a colon can occur inside a segment.

`thinking_blocks(text, signature)` turns that back into the exact blocks Anthropic sent.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_to_bytes

import orjson

from ..errors import UpstreamError
from ..protocol.reasoning import unseal
from ..protocol.tools import Tool, ToolSet, wire_name
from .base import Call, Route
from .wire import EMPTY_PARAMETERS, RESPONSES_SIGNATURE, as_function, tool_summary

REDACTED = "redacted:"
DEFAULT_MAX_TOKENS = 4096
MIN_BUDGET = 1024  # Anthropic's minimum thinking budget
THINKING_MIN_TOP_P = 0.95  # with thinking on, Anthropic takes top_p from this to 1
EFFORT_BUDGET = {"minimal": 1024, "low": 1024, "medium": 4096, "high": 16384, "xhigh": 32000}


# -- the request body ---------------------------------------------------------------------------------------


def build_body(call: Call, route: Route) -> dict[str, Any]:
    """The Messages request for one generation step. Raises UpstreamError (400) for what Anthropic lacks."""
    req = call.request
    _refuse_unsupported(call)
    system, messages = to_messages(call.instructions, call.items)
    if not messages:
        raise UpstreamError("The input has no content this model's upstream (Anthropic Messages) accepts: "
                            "empty or whitespace-only text is not sent.", status=400, code="invalid_value",
                            type="invalid_request_error", param="input")
    max_tokens, budget = _token_limits(call, route)
    body: dict[str, Any] = {"model": call.model, "max_tokens": max_tokens, "messages": messages, "stream": True}
    if system:
        body["system"] = system
    tools = call.tools
    if tools.offered:
        body["tools"] = [tool_spec(t) for t in tools.offered]
        body["tool_choice"] = tool_choice(tools, req.parallel_tool_calls)
    elif _uses_tools(messages):
        # Anthropic refuses tool_use / tool_result blocks in a request that defines no tools (a chained
        # request need not repeat them). The tools named in the history are declared and made uncallable.
        body["tools"] = [{"name": n, "input_schema": EMPTY_PARAMETERS} for n in _history_tool_names(messages)]
        body["tool_choice"] = {"type": "none"}
    if budget is not None and (_forces_tool(body) or not _continuable_with_thinking(messages)):
        budget = None  # Anthropic refuses thinking here (module docstring)
    if req.temperature is not None and budget is None:
        body["temperature"] = min(req.temperature, 1.0)
    if req.top_p is not None:
        body["top_p"] = req.top_p if budget is None else max(req.top_p, THINKING_MIN_TOP_P)
    if budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    return body


def computer_beta(body: dict[str, Any]) -> str | None:
    """The beta a request's computer tool needs (`computer_20250124` → `computer-use-2025-01-24`), or None."""
    for tool in body.get("tools") or ():
        found = COMPUTER_TYPE.fullmatch(str(tool.get("type")))
        if found is not None:
            return "computer-use-{}-{}-{}".format(*found.groups())
    return None


def _forces_tool(body: dict[str, Any]) -> bool:
    return body.get("tool_choice", {}).get("type") in ("any", "tool")


def _continuable_with_thinking(messages: list[dict[str, Any]]) -> bool:
    """Whether thinking may be on: a request that continues a tool-use turn (it ends with tool results) needs
    that turn's assistant message to start with a thinking block."""
    last = messages[-1]
    if last["role"] != "user" or last["content"][0]["type"] != "tool_result" or len(messages) < 2:
        return True
    return messages[-2]["content"][0]["type"] in ("thinking", "redacted_thinking")


def _token_limits(call: Call, route: Route) -> tuple[int, int | None]:
    """(max_tokens, thinking budget or None). Anthropic needs max_tokens, and a budget below it.

    A client's `max_output_tokens` caps thinking and answer together (as at OpenAI), so the budget is cut to
    at most half of it (at least Anthropic's minimum of 1024; no thinking when the cap leaves no room for
    that). A route default only sizes the answer: the budget is added on top when the default is too small.
    """
    req = call.request
    effort = req.reasoning.effort if req.reasoning is not None else None
    budget = EFFORT_BUDGET.get(effort or "")
    if req.max_output_tokens is not None:
        max_tokens = req.max_output_tokens
        if budget is not None:
            budget = min(budget, max(MIN_BUDGET, max_tokens // 2)) if max_tokens > MIN_BUDGET else None
        return max_tokens, budget
    max_tokens = route.max_tokens or DEFAULT_MAX_TOKENS
    if budget is not None and max_tokens <= budget:
        max_tokens += budget
    return max_tokens, budget


def _refuse_unsupported(call: Call) -> None:
    req = call.request
    fmt = req.text.format if req.text else None
    if fmt is not None and fmt.type in ("json_object", "json_schema"):
        raise _unsupported("text.format", f"text.format '{fmt.type}'")
    for name in ("presence_penalty", "frequency_penalty"):
        if getattr(req, name) is not None:
            raise _unsupported(name, f"'{name}'")
    if call.want_logprobs:
        raise _unsupported("include", "Logprobs ('message.output_text.logprobs')")


def _unsupported(param: str, what: str) -> UpstreamError:
    return UpstreamError(f"{what} is not supported by this model's upstream (Anthropic Messages).", status=400,
                         code="unsupported_parameter", type="invalid_request_error", param=param)


# -- tools --------------------------------------------------------------------------------------------------


COMPUTER_TYPE = re.compile(r"computer_(\d{4})(\d{2})(\d{2})")  # Claude's versioned computer-use tool types
COMPUTER_TOOL = "computer_20250124"  # the version a computer tool not fitted to the model is given
DEFAULT_DISPLAY = (1024, 768)  # for OpenAI's `computer` tool, which declares no size


def tool_spec(tool: Tool) -> dict[str, Any]:
    if tool.kind == "computer":  # computer use: Claude's own tool, answering in the display's pixels
        declared = tool.spec or {}
        if COMPUTER_TYPE.fullmatch(str(declared.get("type"))):  # fitted to the model (tools/computer/claude.py)
            return dict(declared)
        width = declared.get("display_width") or DEFAULT_DISPLAY[0]
        height = declared.get("display_height") or DEFAULT_DISPLAY[1]
        return {"type": COMPUTER_TOOL, "name": tool.wire_name, "display_width_px": width,
                "display_height_px": height}
    spec = as_function(tool)
    spec["input_schema"] = spec.pop("parameters")
    return spec


def tool_choice(tools: ToolSet, parallel_tool_calls: bool | None) -> dict[str, Any]:
    if tools.forced is not None:
        choice: dict[str, Any] = {"type": "tool", "name": tools.forced.wire_name}
    elif tools.mode == "required":
        choice = {"type": "any"}
    elif tools.mode == "none":
        return {"type": "none"}  # (no disable_parallel_tool_use on this one)
    else:
        choice = {"type": "auto"}
    if parallel_tool_calls is False:
        choice["disable_parallel_tool_use"] = True
    return choice


def _uses_tools(messages: list[dict[str, Any]]) -> bool:
    return any(b["type"] in ("tool_use", "tool_result") for m in messages for b in m["content"])


def _history_tool_names(messages: list[dict[str, Any]]) -> list[str]:
    names = dict.fromkeys(b["name"] for m in messages for b in m["content"] if b["type"] == "tool_use")
    return list(names) or ["tool"]


# -- messages -----------------------------------------------------------------------------------------------


def to_messages(instructions: str | None, items: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(system text, alternating messages) for the history."""
    system: list[str] = [instructions] if instructions else []
    b = _Builder()
    ids = safe_ids(items)
    for item in items:
        kind = item["type"]
        if kind == "message":
            role = item["role"]
            if role in ("system", "developer"):
                text = _text(item["content"])
                if text:
                    system.append(text)
            elif role == "user":
                b.add("user", [_user_block(p) for p in item["content"]])
            else:
                b.add("assistant", [_text_block(p.get("text") or p.get("refusal") or "") for p in item["content"]])
        elif kind == "function_call":
            b.add("assistant", [{"type": "tool_use", "id": ids(item["call_id"]),
                                 "name": wire_name(item["name"], item.get("namespace")),
                                 "input": _arguments(item["arguments"])}])
        elif kind == "custom_tool_call":
            b.add("assistant", [{"type": "tool_use", "id": ids(item["call_id"]),
                                 "name": wire_name(item["name"], item.get("namespace")),
                                 "input": {"input": item["input"]}}])
        elif kind == "tool_search_call":
            args = item["arguments"]
            b.add("assistant", [{"type": "tool_use", "id": ids(item["call_id"]), "name": "tool_search",
                                 "input": args if isinstance(args, dict) else {"query": args}}])
        elif kind in ("function_call_output", "custom_tool_call_output"):
            b.add("user", [_tool_result(ids(item["call_id"]), item["output"])])
        elif kind == "tool_search_output":
            text = orjson.dumps({"tools": tool_summary(item["tools"])}).decode()
            b.add("user", [_tool_result(ids(item["call_id"]), text)])
        elif kind == "reasoning":
            sealed = unseal(item.get("encrypted_content"))
            if sealed is not None and sealed[1] and not sealed[1].startswith(RESPONSES_SIGNATURE):
                b.add("assistant", thinking_blocks(*sealed))
            # else: not signed by Anthropic (another upstream's reasoning, or a client's): Anthropic would
            # reject it, so it is left out.
    return "\n\n".join(system), b.finish()


SAFE_ID = re.compile(r"[a-zA-Z0-9_-]+")
CALL_ID_KINDS = ("function_call", "custom_tool_call", "tool_search_call", "function_call_output",
                 "custom_tool_call_output", "tool_search_output")


def safe_ids(items: list[dict[str, Any]]) -> Callable[[str], str]:
    """call_id → the id Anthropic accepts, the same for a call and its output.

    Safe ids stay as they are. Any other character becomes `_` and its code point in hex (`.` → `_2e`), and
    should that collide with another id of the request, a counter is added: distinct ids stay distinct.
    """
    taken = {item["call_id"] for item in items if item["type"] in CALL_ID_KINDS and SAFE_ID.fullmatch(item["call_id"])}
    safe = set(taken)
    mapped: dict[str, str] = {}

    def to_safe(call_id: str) -> str:
        if call_id in safe:
            return call_id
        if call_id not in mapped:
            base = "".join(c if SAFE_ID.fullmatch(c) else f"_{ord(c):x}" for c in call_id) or "call"
            candidate, n = base, 1
            while candidate in taken:
                candidate, n = f"{base}-{n}", n + 1
            taken.add(candidate)
            mapped[call_id] = candidate
        return mapped[call_id]

    return to_safe


class _Builder:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def add(self, role: str, blocks: list[Any]) -> None:
        blocks = [blk for blk in blocks if blk is not None]
        if not blocks:
            return
        if self.messages and self.messages[-1]["role"] == role:
            self.messages[-1]["content"].extend(blocks)
        else:
            self.messages.append({"role": role, "content": blocks})

    def finish(self) -> list[dict[str, Any]]:
        for msg in self.messages:
            if msg["role"] == "user":
                # tool_result blocks must open the user message that answers the tool calls
                msg["content"].sort(key=lambda blk: blk["type"] != "tool_result")
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "assistant" and last["content"][-1]["type"] == "text":
            # a final (prefilled) assistant text must not end in whitespace
            text = last["content"][-1]["text"].rstrip()
            if text:
                last["content"][-1]["text"] = text
            else:
                last["content"].pop()
                if not last["content"]:
                    self.messages.pop()
        return self.messages


def _text(parts: list[dict[str, Any]]) -> str:
    return "".join(p.get("text") or p.get("refusal") or "" for p in parts if p["type"] != "input_image")


def _text_block(text: str) -> dict[str, Any] | None:
    # Anthropic rejects empty and whitespace-only text blocks
    return {"type": "text", "text": text} if text and not text.isspace() else None


def _user_block(part: dict[str, Any]) -> dict[str, Any] | None:
    if part["type"] == "input_image":
        return image_block(part["image_url"])
    return _text_block(part.get("text") or "")


def image_block(url: str) -> dict[str, Any]:
    """A data URL becomes a base64 source; anything else is fetched by Anthropic from its URL."""
    if url.startswith("data:"):
        header, _, data = url[5:].partition(",")
        media_type, *params = header.split(";")
        if "base64" not in params:
            data = base64.b64encode(unquote_to_bytes(data)).decode()
        return {"type": "image", "source": {"type": "base64", "media_type": media_type or "image/png",
                                            "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _tool_result(call_id: str, output: str | list[Any]) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
    if isinstance(output, list):
        content = [image_block(p["image_url"]) if p["type"] == "input_image" else _text_block(p.get("text") or "")
                   for p in output]
        content = [c for c in content if c is not None]
        if content:
            block["content"] = content
    elif output and not output.isspace():
        block["content"] = output
    return block


def _arguments(arguments: str) -> dict[str, Any]:
    try:
        value = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


# -- thinking blocks in the sealed signature -----------------------------------------------------------------


def continued(offset: int) -> str:
    """The prefix of the signature segment of a thinking block that continues a reasoning item at `offset`."""
    return f"\n{offset}:"


def thinking_blocks(text: str, signature: str | None) -> list[dict[str, Any]]:
    """The Anthropic blocks that one reasoning item stands for (see the module docstring)."""
    if not signature:
        return []
    first, *rest = signature.split("\n")
    segments: list[tuple[int, str]] = [(0, first)]
    for part in rest:
        offset, _, segment = part.partition(":")
        try:
            start = int(offset)
        except ValueError:
            return []  # not an envelope this adapter wrote
        segments.append((min(max(start, segments[-1][0]), len(text)), segment))
    blocks: list[dict[str, Any]] = []
    for i, (start, segment) in enumerate(segments):
        end = segments[i + 1][0] if i + 1 < len(segments) else len(text)
        if segment.startswith(REDACTED):
            blocks.append({"type": "redacted_thinking", "data": segment[len(REDACTED):]})
        elif segment:
            blocks.append({"type": "thinking", "thinking": text[start:end], "signature": segment})
        # (a block that never got a signature cannot be sent back)
    return blocks
