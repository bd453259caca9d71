"""What several adapters put on the wire, or read from it, alike: how client tools are offered as plain
functions, what a tool search found, the tag on a Responses upstream's reasoning signatures, the JSON-object
guard, the error answers of OpenAI-style servers, and the buffer of a tool call streaming in.

Adapters import from here and never from each other, so each adapter module is about one protocol.
"""

from __future__ import annotations

from typing import Any

import orjson

from .. import generation as g
from ..errors import UpstreamError, upstream_status_error
from ..net import http1
from ..net.urls import safe_url
from ..protocol.tools import Tool, wire_name
from .base import Call, Route
from .custom_input import CustomInputDecoder
from .http import HTTPUpstream, bearer_headers

TOOL_SEARCH_DESCRIPTION = "Search for more tools to use."
TOOL_SEARCH_PARAMETERS = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
CUSTOM_INPUT_PARAMETERS = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The raw input for the tool."}},
    "required": ["input"],
}
EMPTY_PARAMETERS = {"type": "object", "properties": {}}

CONTEXT_PHRASES = ("context length", "context window", "maximum context")  # vLLM, SGLang, OpenAI, llama.cpp

RESPONSES_SIGNATURE = "rsp."
"""Opens every reasoning signature the Responses adapter seals (a Responses upstream's encrypted content,
tagged with the upstream it came from); no other upstream could read one."""


def as_function(tool: Tool, custom_parameters: dict[str, Any] = CUSTOM_INPUT_PARAMETERS) -> dict[str, Any]:
    """A client tool as the plain function every upstream knows: `{name, description?, parameters}`.

    A custom (freeform) tool takes its raw input as an `input` string, and its description says so (with
    the grammar, when it has one); a client-run tool_search takes a query."""
    if tool.kind == "tool_search":
        return {"name": "tool_search", "description": tool.description or TOOL_SEARCH_DESCRIPTION,
                "parameters": tool.parameters or TOOL_SEARCH_PARAMETERS}
    if tool.kind == "custom":
        fmt = tool.format or {}
        note = "Put the complete raw input of this tool, as plain text, in the `input` string."
        if fmt.get("type") == "grammar":
            note += f" The input must follow this {fmt.get('syntax', '')} grammar:\n{fmt.get('definition', '')}"
        return {"name": tool.wire_name, "description": f"{tool.description or ''}\n\n{note}".strip(),
                "parameters": custom_parameters}
    fn: dict[str, Any] = {"name": tool.wire_name}
    if tool.description:
        fn["description"] = tool.description
    fn["parameters"] = tool.parameters if tool.parameters is not None else EMPTY_PARAMETERS
    return fn


def tool_summary(tools: list[Any]) -> list[dict[str, Any]]:
    """What a tool search found, as the model will see it: names it can now call, with their descriptions."""
    out = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            for member in tool.get("tools") or ():
                if isinstance(member, dict) and member.get("name"):
                    out.append({"name": wire_name(member["name"], tool.get("name")),
                                "description": member.get("description") or ""})
        elif tool.get("name"):
            out.append({"name": tool["name"], "description": tool.get("description") or ""})
    return out


def json_object(data: bytes | str, what: str) -> dict[str, Any]:
    """One JSON object the upstream sent (`what`: "a chunk", "an event", "a body"); anything else fails the
    response with an UpstreamError naming it."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise UpstreamError(f"The upstream model server sent {what} that is not JSON.") from None
    if not isinstance(obj, dict):
        raise UpstreamError(f"The upstream model server sent {what} that is not a JSON object.")
    return obj


def openai_http_error(status: int, raw: bytes, model: str | None) -> UpstreamError:
    """An OpenAI-style server's error answer (Chat Completions, Responses), before any stream, as OpenAI's error.
    A 404 is about the model when the server says so (its code, or a message naming the model); a bare
    `{"detail": "Not Found"}` is a path the server does not have."""
    message, code, param = _error_fields(raw)
    return upstream_status_error(status, message, model, code=code,
                                 param=param if isinstance(param, str) else None,
                                 model_missing=code in ("model_not_found", "404") or "model" in message.lower(),
                                 context_phrases=CONTEXT_PHRASES)


def _error_fields(raw: bytes) -> tuple[str, str | None, object]:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode(errors="replace").strip()[:500] or "no details", None, None
    err = obj.get("error", obj) if isinstance(obj, dict) else obj
    if isinstance(err, dict):
        code = err.get("code")
        return str(err.get("message") or err.get("detail") or obj)[:2000], \
            (str(code) if code is not None else None), err.get("param")
    return str(err)[:2000], None, None


class ToolCallBuffer:
    """One tool call as it streams in: its input is held until the call can start (its name known), then
    passed on — through the custom-input decoder when a custom tool travels as a function."""

    __slots__ = ("call_id", "name", "started", "pending", "decoder", "finished")

    def __init__(self, call_id: str = "", name: str | None = None) -> None:
        self.call_id = call_id
        self.name = name
        self.started = False
        self.pending: list[str] = []
        self.decoder: CustomInputDecoder | None = None
        self.finished = False

    def feed(self, text: str, key: int, batch: list[Any]) -> None:
        if not self.started:
            self.pending.append(text)
            return
        if self.decoder is not None:
            text = self.decoder.feed(text)
        if text:
            batch.append(g.ToolCallDelta(key, text))

    def begin(self, key: int, batch: list[Any]) -> None:
        """The call has started (its ToolCallStart is in `batch`): the input held so far follows it."""
        self.started = True
        if self.pending:
            pending, self.pending = "".join(self.pending), []
            self.feed(pending, key, batch)

    def finish(self, key: int, batch: list[Any]) -> None:
        if self.finished or not self.started:
            return
        self.finished = True
        if self.decoder is not None:
            rest = self.decoder.finish()
            self.decoder = None
            if rest:
                batch.append(g.ToolCallDelta(key, rest))


def add_sampling(body: dict[str, Any], call: Call, route: Route, max_tokens_field: str) -> None:
    """The sampling fields the request set, and its output limit (the route's default when it sets none)
    under the field name this upstream reads."""
    req = call.request
    for name in ("temperature", "top_p", "presence_penalty", "frequency_penalty"):
        value = getattr(req, name)
        if value is not None:
            body[name] = value
    max_tokens = req.max_output_tokens if req.max_output_tokens is not None else route.max_tokens
    if max_tokens is not None:
        body[max_tokens_field] = max_tokens


class OpenAIShaped(HTTPUpstream):
    """A server of OpenAI's shape (Chat Completions, Responses): a bearer key, `GET {base}/models`, errors in
    OpenAI's body, generations posted to `{base}{path}`."""

    kind = ""
    path = ""

    def __init__(self, route: Route):
        super().__init__(route)
        self.label = f"{self.base} ({self.kind})"
        self.headers = bearer_headers(route.api_key)

    def hint(self, status: int) -> str:
        """A 404 from a base URL without `/v1` (`--upstream http://host:8000`): what to change."""
        if status != 404 or self.base.endswith("/v1"):
            return ""
        return f"; an OpenAI-compatible base URL usually ends in /v1: try {safe_url(self.base)}/v1"

    async def list_models(self) -> list[dict[str, Any]]:
        return await self.openai_models(openai_http_error)

    async def post_call(self, call: Call, body: dict[str, Any]) -> http1.Response:
        return await self.post(f"{self.base}{self.path}", body, call.request.model, openai_http_error)
