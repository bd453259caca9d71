"""The Responses adapter: a request → `POST {base}/responses` on another Responses server, its stream → generation
events (vLLM's native endpoint, OpenAI, another gateway).

State stays here: the upstream gets `store: false` and the full resolved history as `input` every time, so
`previous_response_id` works whichever upstream served the earlier turns. The upstream stream is read with the
tolerant reader of `responses_gateway.client` (out-of-order, duplicate, unknown and missing events), and
everything is re-emitted through our composer with our own ids and sequence numbers.

Reasoning round-trips: an upstream reasoning item's `encrypted_content` becomes the signature our composer
seals into our own `encrypted_content`, tagged with the upstream it came from; on a later turn sent to the
same upstream it goes back as `encrypted_content`. Reasoning that only has text goes back as
`reasoning_text` content (what vLLM reads), unless the route's reasoning_history is "drop".

Damaged streams (docs/routing.md, "what each upstream kind repairs"):
- A tool call's input deltas are held until the upstream closes the call (its `.done`, its
  `output_item.done` or the terminal event), then passed on: as they came when they add up to the upstream's
  final text, else that final text as one delta. Deltas can be lost, come after their item closed or carry
  another item's id, and the final text is the one that is right; what we emit must add up to what we
  finally report, and emitted deltas cannot be taken back. The cost: tool input from these upstreams arrives
  whole at the end of each call instead of token by token.
- A function call's `.done` whose arguments are not JSON and not what its deltas add up to (one character
  short) does not settle the call: its `output_item.done` or the terminal event does, with the first version
  that is JSON of the final item's, the deltas' and the `.done`'s. Valid arguments received are never traded
  for invalid ones.
- A terminal event that lists the items under other ids and call ids, and leaves out some it streamed (vLLM;
  with a Qwen3.5 model an empty message before a tool call): the reader matches its items to the streamed
  ones by kind, order and name, and keeps the ids first streamed, so no call starts twice.
- A terminal event without `usage` gets the gateway's documented estimate (tokens.py): input from the
  request's items, instructions and tools, output from the text, reasoning and tool input produced.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncGenerator
from typing import Any

import orjson

from .. import generation as g
from .. import offload
from ..client import TERMINAL, Accumulator, Event
from ..errors import UpstreamError
from ..ids import new_id
from ..net import http1
from ..protocol.reasoning import unseal
from ..protocol.tools import Tool, wire_name
from .base import Batch, Call, Route
from .custom_input import CustomInputDecoder
from .http import NETWORK_ERRORS, BodyStream
from .wire import (
    RESPONSES_SIGNATURE,
    OpenAIShaped,
    ToolCallBuffer,
    add_sampling,
    as_function,
    json_object,
    tool_summary,
)

log = logging.getLogger("responses_gateway.upstream")

INCOMPLETE = {"max_output_tokens": "length", "max_tokens": "length", "content_filter": "content_filter"}
DRAIN_TIMEOUT = 1.0  # seconds to wait for the end of the body after the terminal event


def signature_tag(route: Route) -> str:
    """The prefix that marks a signature as this upstream's own encrypted_content."""
    return RESPONSES_SIGNATURE + hashlib.sha256(route.base_url.rstrip("/").encode()).hexdigest()[:10] + "."


# -- the request ------------------------------------------------------------------------------------------


def build_body(call: Call, route: Route) -> dict[str, Any]:
    req = call.request
    include = ["reasoning.encrypted_content"]
    if call.want_logprobs:
        include.append("message.output_text.logprobs")
    body: dict[str, Any] = {
        "model": call.model,
        "input": to_input(call.items, signature_tag(route), route.reasoning_history),
        "stream": True,
        "store": False,
        "include": include,
    }
    if call.instructions:
        body["instructions"] = call.instructions
    tools = call.tools
    if tools.offered:
        body["tools"] = [_tool(t) for t in tools.offered]
        if tools.forced is not None:
            kind = "custom" if tools.forced.kind == "custom" else "function"
            body["tool_choice"] = {"type": kind, "name": tools.forced.wire_name}
        else:
            body["tool_choice"] = tools.mode
        if req.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = req.parallel_tool_calls
    add_sampling(body, call, route, "max_output_tokens")
    if req.reasoning is not None:
        reasoning: dict[str, Any] = {}
        if req.reasoning.effort is not None:
            reasoning["effort"] = req.reasoning.effort
        summary = req.reasoning.summary or req.reasoning.generate_summary
        if summary is not None:
            reasoning["summary"] = summary
        if reasoning:
            body["reasoning"] = reasoning
    if req.text is not None:
        text: dict[str, Any] = {}
        fmt = req.text.format
        if fmt is not None:
            if fmt.type == "json_schema":
                text["format"] = {"type": "json_schema", "name": fmt.name, "schema": fmt.json_schema}
                if fmt.strict is not None:
                    text["format"]["strict"] = fmt.strict
                if fmt.description:
                    text["format"]["description"] = fmt.description
            else:
                text["format"] = {"type": fmt.type}
        if req.text.verbosity:
            text["verbosity"] = req.text.verbosity
        if text:
            body["text"] = text
    if call.want_logprobs and req.top_logprobs:
        body["top_logprobs"] = req.top_logprobs
    return body


def _tool(tool: Tool) -> dict[str, Any]:
    """Offered flat: namespace members under their wire names, a client tool_search as a function; a hosted
    tool the upstream runs itself (computer use) as the client declared it."""
    if tool.kind == "computer" and tool.spec is not None:
        return dict(tool.spec)
    if tool.kind == "custom":
        out: dict[str, Any] = {"type": "custom", "name": tool.wire_name}
        if tool.description:
            out["description"] = tool.description
        out["format"] = tool.format or {"type": "text"}
        return out
    out = {"type": "function", **as_function(tool)}
    if tool.strict is not None:
        out["strict"] = tool.strict
    return out


def to_input(items: list[dict[str, Any]], tag: str, reasoning_history: str = "reasoning_content") -> list[dict[str, Any]]:
    """The resolved history as Responses input items the upstream accepts without state: no ids (they would
    be looked up, and `store` is false), our names flattened to wire names, reasoning as the upstream needs it."""
    out: list[dict[str, Any]] = []
    for item in items:
        kind = item["type"]
        if kind == "message":
            role = item["role"]
            out.append({"type": "message", "role": role,
                        "content": [_content(p, role) for p in item["content"]]})
        elif kind == "function_call":
            out.append({"type": "function_call", "call_id": item["call_id"],
                        "name": wire_name(item["name"], item.get("namespace")), "arguments": item["arguments"]})
        elif kind == "custom_tool_call":
            out.append({"type": "custom_tool_call", "call_id": item["call_id"],
                        "name": wire_name(item["name"], item.get("namespace")), "input": item["input"]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item["output"]
            if isinstance(output, list):
                output = [_content(p, "user") for p in output]
            out.append({"type": kind, "call_id": item["call_id"], "output": output})
        elif kind == "tool_search_call":
            out.append({"type": "function_call", "call_id": item["call_id"], "name": "tool_search",
                        "arguments": orjson.dumps(item.get("arguments") or {}).decode()})
        elif kind == "tool_search_output":
            out.append({"type": "function_call_output", "call_id": item["call_id"],
                        "output": orjson.dumps({"tools": tool_summary(item["tools"])}).decode()})
        elif kind in ("computer_call", "computer_call_output"):  # the upstream runs computer use: as they are
            out.append({k: v for k, v in item.items() if k not in ("id", "status")})
        elif kind == "reasoning":
            reasoning = _reasoning(item, tag, reasoning_history)
            if reasoning is not None:
                out.append(reasoning)
        # item_reference never gets here: the history is resolved before adapters see it
    return out


def _content(part: dict[str, Any], role: str) -> dict[str, Any]:
    kind = part["type"]
    if kind == "input_image":
        return {"type": "input_image", "image_url": part["image_url"], "detail": part.get("detail", "auto")}
    if kind == "refusal":
        return {"type": "refusal", "refusal": part["refusal"]}
    if role == "assistant":
        return {"type": "output_text", "text": part.get("text", "")}
    return {"type": "input_text", "text": part.get("text", "")}


def _reasoning(item: dict[str, Any], tag: str, reasoning_history: str) -> dict[str, Any] | None:
    sealed = unseal(item.get("encrypted_content"))
    summary = [{"type": "summary_text", "text": p["text"]} for p in item.get("summary") or () if p.get("text")]
    if sealed is not None and sealed[1] and sealed[1].startswith(tag):
        # This upstream's own encrypted reasoning: all it needs to continue its chain of thought.
        return {"type": "reasoning", "summary": summary, "encrypted_content": sealed[1][len(tag):]}
    # Anything else (another upstream's signature, a token we did not issue) it could not decrypt.
    texts = [p["text"] for p in item.get("content") or () if p.get("text")]
    if not texts and sealed is not None and sealed[0]:
        texts = [sealed[0]]
    if not texts:
        texts = [p["text"] for p in summary]
    if not texts or reasoning_history == "drop":
        return None
    return {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "\n".join(texts)}]}


# -- the upstream -----------------------------------------------------------------------------------------


class ResponsesUpstream(OpenAIShaped):
    kind = "responses"
    path = "/responses"

    async def open(self, call: Call) -> ResponsesStream:
        resp = await self.post_call(call, await offload.run(build_body, call, self.route))
        return ResponsesStream(resp, call, self.route, signature_tag(self.route))


class ResponsesStream(BodyStream):
    def __init__(self, resp: http1.Response, call: Call, route: Route, tag: str):
        super().__init__(resp, call, route)
        self.tag = tag  # marks the encrypted reasoning this upstream gave, to send it back only here

    async def _events(self) -> AsyncGenerator[Batch, None]:
        resp = self.resp
        acc = Accumulator()
        mapper = EventMapper(self.call, acc, self.tag)
        if resp.content_type == "application/json":
            # A server that ignored `stream: true` and answered with the whole Response.
            raw = await self.read_whole()
            batch = mapper.map(acc.feed_event(whole_response_event(raw)) + acc.close())
            if batch:
                yield batch
            if mapper.error:
                raise mapper.error
            return
        try:
            async for data in self.chunks():
                batch = mapper.map(acc.feed(data))
                if batch:
                    yield batch
                if mapper.error:
                    raise mapper.error
                if mapper.finished:
                    break
            else:
                batch = mapper.map(acc.close())
                if batch:
                    yield batch
                if mapper.error:
                    raise mapper.error
                self._complete = True
                return
        except NETWORK_ERRORS:
            raise UpstreamError("The connection to the upstream model server was lost mid-stream.") from None
        # The terminal event came: what may follow (`data: [DONE]`) is read so the connection can be reused,
        # but an upstream that keeps the body open after it does not hold the response back.
        try:
            await asyncio.wait_for(resp.read(), timeout=DRAIN_TIMEOUT)
            self._complete = True
        except NETWORK_ERRORS:
            pass  # aclose() closes the connection instead


def whole_response_event(raw: bytes) -> dict[str, Any]:
    obj = json_object(raw, "a body")
    if obj.get("error") and not obj.get("status"):
        return {"type": "error", "error": obj["error"]}
    status = obj.get("status")
    kind = f"response.{status}" if f"response.{status}" in TERMINAL else "response.completed"
    return {"type": kind, "response": obj}


class EventMapper:
    """The reader's normalized Responses events → generation events. One instance per upstream stream."""

    def __init__(self, call: Call, acc: Accumulator, tag: str):
        self.call = call
        self.tools = call.tools.by_wire_name
        self.want_logprobs = call.want_logprobs
        self.acc = acc
        self.tag = tag
        self.calls: dict[int, _CallState] = {}  # output_index -> tool call
        self.reasoning: dict[int, _Reasoning] = {}  # output_index -> what of it streams
        self.signed: set[int] = set()
        self.started_calls = 0
        self.produced = 0  # characters of text and tool input passed on (for a usage estimate)
        self.reasoned = 0  # characters of reasoning passed on
        self.error: UpstreamError | None = None  # raised once the events before it are delivered
        self.finished = False

    def map(self, events: list[Event]) -> list[Any]:
        batch: list[Any] = []
        try:
            for ev in events:
                self._event(ev, batch)
        except UpstreamError as exc:
            self.error = exc
            return batch
        for index, state in self.calls.items():
            if not state.started:
                self._start(index, state, batch)
        return batch

    def _event(self, ev: Event, batch: list[Any]) -> None:
        if not ev.known:
            return
        kind = ev.type
        data = ev.data
        if kind == "response.output_text.delta":
            if data.get("delta"):
                self.produced += len(data["delta"])
                logprobs = data.get("logprobs") if self.want_logprobs else None
                batch.append(g.TextDelta(data["delta"], logprobs if isinstance(logprobs, list) and logprobs else None))
        elif kind == "response.refusal.delta":
            if data.get("delta"):
                self.produced += len(data["delta"])
                batch.append(g.RefusalDelta(data["delta"]))
        elif kind in ("response.reasoning_text.delta", "response.reasoning.delta"):
            self._reasoning(data, "text", batch)
        elif kind == "response.reasoning_summary_text.delta":
            self._reasoning(data, "summary", batch)
        elif kind in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            self._call(data["output_index"], batch).held.append(data.get("delta") or "")
        elif kind == "response.function_call_arguments.done":
            # (the reader gives every call one, carrying the upstream's final input when it sent one)
            index = data["output_index"]
            final = data.get("arguments")
            state = self._call(index, batch)
            if isinstance(final, str) and final and not state.agrees(final):
                state.doubtful = final  # not JSON, unlike its deltas: the final item decides (module docstring)
            else:
                self._settle(index, final, batch)
        elif kind == "response.custom_tool_call_input.done":
            self._settle(data["output_index"], data.get("input"), batch)
        elif kind == "response.output_item.added":
            if (data.get("item") or {}).get("type") in ("function_call", "custom_tool_call"):
                self._call(data["output_index"], batch)
        elif kind == "response.output_item.done":
            self._item_done(data, batch)
        elif kind == "error":
            raise _upstream_error(self.acc.error or {})
        elif kind in TERMINAL:
            self._terminal(ev, batch)

    def _reasoning(self, data: dict[str, Any], kind: str, batch: list[Any]) -> None:
        index: Any = data.get("output_index")
        state = self.reasoning.setdefault(index, _Reasoning(kind))
        if state.kind != kind:
            return  # this item streams both its summary and its raw text: one of them is enough
        text = data.get("delta") or ""
        if not text:
            return
        if kind == "summary":
            part = data.get("summary_index", 0)
            if state.part is not None and part != state.part:
                text = "\n\n" + text  # summary parts are paragraphs
            state.part = part
        self.reasoned += len(text)
        batch.append(g.ReasoningDelta(text))

    def _item_done(self, data: dict[str, Any], batch: list[Any]) -> None:
        item = data.get("item") or {}
        index = data["output_index"]
        kind = item.get("type")
        if kind == "reasoning":
            encrypted = item.get("encrypted_content")
            if isinstance(encrypted, str) and encrypted and index not in self.signed:
                self.signed.add(index)
                batch.append(g.ReasoningDelta("", signature=self.tag + encrypted))
            if item.get("status") in (None, "completed"):
                batch.append(g.ItemEnd())
        elif kind == "message" and item.get("status") in (None, "completed"):
            batch.append(g.ItemEnd())  # (a cut item is closed by the terminal event, with its real status)
        elif kind in ("function_call", "custom_tool_call"):
            self._settle(index, item.get("arguments" if kind == "function_call" else "input"), batch)
        elif kind == "computer_call":
            self._computer(index, item, batch)

    def _computer(self, index: int, item: dict[str, Any], batch: list[Any]) -> None:
        """The upstream's computer call, whole (OpenAI streams no argument events for it): to the computer kit,
        which makes it the client's item as it is (tools/computer/)."""
        tool = self.tools.get("computer")
        given = item.get("call_id")
        call_id = given if isinstance(given, str) and given else new_id("call")
        batch.append(g.ToolCallStart(index, call_id, "computer", "computer", None,
                                     tool.runner if tool is not None else None))
        fields = {k: item[k] for k in ("action", "actions", "pending_safety_checks") if k in item}
        batch.append(g.ToolCallDelta(index, orjson.dumps(fields).decode()))

    def _settle(self, index: int, final: Any, batch: list[Any]) -> None:
        """Pass on a call's input once the upstream closed it (module docstring), and finish the call."""
        state = self._call(index, batch, final=True)
        final = final if isinstance(final, str) and final else None
        if state.doubtful is not None:
            final = state.best(final)
        self.produced += state.settle(final, index, batch)
        state.finish(index, batch)

    def _call(self, index: int, batch: list[Any], final: bool = False) -> _CallState:
        state = self.calls.get(index)
        if state is None:
            state = self.calls[index] = _CallState()
        if not state.started:
            self._start(index, state, batch, final)
        return state

    def _start(self, index: int, state: _CallState, batch: list[Any], final: bool = False) -> None:
        item = self.acc.item(index) or {}
        name = item.get("name")
        if not isinstance(name, str) or not name:
            if not final:
                return  # its name has not come yet: hold the input
            name = "unknown"
        given = item.get("call_id")
        call_id = given if isinstance(given, str) and given else new_id("call")
        tool = self.tools.get(name)
        custom_item = item.get("type") == "custom_tool_call"
        if tool is None:
            batch.append(g.ToolCallStart(index, call_id, name, "custom" if custom_item else "function",
                                         item.get("namespace")))
        else:
            kind = tool.kind
            if kind == "custom" and not custom_item:
                state.decoder = CustomInputDecoder()  # a server that made it a function: {"input": "..."}
            elif kind != "custom" and custom_item:
                kind = "custom"
            batch.append(g.ToolCallStart(index, call_id, tool.name, kind, tool.namespace, tool.runner))
        state.started = True
        self.started_calls += 1

    def _terminal(self, ev: Event, batch: list[Any]) -> None:
        response = ev.data.get("response") or {}
        if ev.type == "response.failed":
            if ev.synthesized and not self.acc.error:
                raise UpstreamError("The upstream model server ended the stream before finishing.")
            raise _upstream_error(self.acc.error or response.get("error") or {})
        for index in list(self.calls):
            self._settle(index, None, batch)
        usage = response.get("usage")
        batch.append(_usage(usage) if isinstance(usage, dict) else self.call.estimated_usage(self.produced, self.reasoned))
        if ev.type == "response.incomplete":
            reason = (response.get("incomplete_details") or {}).get("reason")
            batch.append(g.Finish(INCOMPLETE.get(reason, "length") if isinstance(reason, str) else "length"))
        else:
            batch.append(g.Finish("tool_calls" if self.started_calls else "stop"))
        self.finished = True

class _CallState(ToolCallBuffer):
    """A ToolCallBuffer whose input is held until the upstream closes the call (module docstring)."""

    __slots__ = ("held", "settled", "doubtful")

    def __init__(self) -> None:
        super().__init__()
        self.held: list[str] = []  # input deltas, until the upstream closes the call
        self.settled = False
        self.doubtful: str | None = None  # a `.done`'s arguments that are not JSON and not what the deltas say

    def agrees(self, final: str) -> bool:
        """Whether a function call's `.done` arguments can settle it: they are what the deltas add up to, or
        JSON (parsed only when they differ, once per call)."""
        return final == "".join(self.held) or _is_json(final)

    def best(self, final: str | None) -> str:
        """The arguments to pass on when the `.done` was doubtful: the first that is JSON of the final item's
        (`final`, from output_item.done or the terminal), the deltas', the `.done`'s; none being JSON, the
        final item's."""
        doubtful = self.doubtful or ""
        versions = [v for v in (final, "".join(self.held), doubtful) if v]
        return next((v for v in versions if _is_json(v)), final or doubtful)

    def settle(self, final: str | None, index: int, batch: list[Any]) -> int:
        """The held input passed on once: as it came when it adds up to `final` (or there is no final),
        else `final` alone. Returns the characters passed on."""
        if self.settled:
            return 0
        self.settled = True
        pieces, self.held = self.held, []
        if final is not None and "".join(pieces) != final:
            pieces = [final]
        for text in pieces:
            if self.decoder is not None:
                text = self.decoder.feed(text)
            if text:
                batch.append(g.ToolCallDelta(index, text))
        return sum(len(p) for p in pieces)


class _Reasoning:
    """A reasoning item as it streams: which of its texts is followed ("text" or "summary"), and the
    summary part seen last."""

    __slots__ = ("kind", "part")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.part: int | None = None


def _is_json(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def _upstream_error(error: dict[str, Any]) -> UpstreamError:
    code = error.get("code")
    code = str(code) if code is not None else "upstream_error"
    message = error.get("message") if isinstance(error.get("message"), str) else ""
    kind = error.get("type") if isinstance(error.get("type"), str) else None
    param = error.get("param") if isinstance(error.get("param"), str) else None
    if kind is None:
        kind = "invalid_request_error" if code in ("context_length_exceeded", "invalid_prompt") else "server_error"
    return UpstreamError(message or f"The upstream model server failed ({code}).", code=code, type=kind,
                           param=param)


def _usage(u: dict[str, Any]) -> g.Usage:
    details = u.get("input_tokens_details") or {}
    reasoning = (u.get("output_tokens_details") or {}).get("reasoning_tokens") or 0
    return g.Usage(u.get("input_tokens") or 0, u.get("output_tokens") or 0, details.get("cached_tokens") or 0,
                   reasoning, details.get("cache_write_tokens") or 0)
