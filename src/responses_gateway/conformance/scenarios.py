"""The requests `responses-gateway check` sends, and what each answer must satisfy besides the stream rules.

Each scenario is one thing clients do (a plain answer, a stream, reasoning, a function call, a free-form custom
tool call, a previous_response_id chain with a retrieve, an invalid request, the WebSocket transport). A
scenario records every exchange (request, status, streamed events or JSON body) with the violations found in
it, so the report can quote them. Stream rules come from rules.py; the object rules (``http.*``,
``object.*``, ``scenario.*``) and the optional spec validation (``schema.*``) are checked here.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from .rules import StreamResult, Violation, inspect_events, inspect_stream

#: The rules checked here, beside the stream rules of rules.RULES.
OBJECT_RULES: dict[str, str] = {
    "http.status": "the server answers 200 (a 4xx for the invalid request), with the right content type",
    "object.response": "a JSON answer is a response object: object, id, status, and output items with a type",
    "object.error": 'errors are {"error": {"message", "type", "param", "code"}} (what OpenAI clients parse)',
    "schema.event": "every streamed event matches its schema in the Open Responses document (with --spec)",
    "schema.response": "every response object matches ResponseResource (with --spec)",
    "scenario.output": "the answer holds what was asked for: text, a function call with JSON arguments, ...",
    "scenario.chain": "a chained response echoes previous_response_id; the first one can be retrieved as created",
    "transport.error": "the request could be sent and its answer read completely",
}

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Get weather for a location.",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string"}},
        "required": ["location"],
        "additionalProperties": False,
    },
    "strict": True,
}
SQL_TOOL = {"type": "custom", "name": "run_sql", "description": "Run one SQL query against the orders database."}
RESPONSE_STATUSES = {"completed", "incomplete", "failed", "in_progress", "queued", "cancelled"}


@dataclass
class Exchange:
    """One request and its answer, with what was wrong with it."""

    label: str
    method: str
    path: str
    request: dict[str, Any] | None = None
    status: int | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    body: Any = None
    violations: list[Violation] = field(default_factory=list)

    def add(self, rule: str, message: str, event: dict[str, Any] | None = None, position: int | None = None) -> None:
        self.violations.append(Violation(rule, message, position, event))


@dataclass
class ScenarioResult:
    name: str
    title: str
    exchanges: list[Exchange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: bool = False

    @property
    def violations(self) -> list[Violation]:
        return [v for ex in self.exchanges for v in ex.violations]

    @property
    def status(self) -> str:
        if self.skipped:
            return "skip"
        return "fail" if self.violations else "pass"


class Validator:
    """The optional spec validation (SpecValidator of schema.py, or nothing)."""

    def __init__(self, spec: Any = None):
        self.spec = spec

    def stream_checked(self, ex: Exchange, result: StreamResult) -> None:
        """The stream's rule violations, its events' shapes and its final response, into ``ex``."""
        ex.events = result.events
        ex.violations.extend(result.violations)
        self.events(ex)
        if result.terminal is not None:
            ex.body = result.terminal.get("response")
            self.object_checked(ex, ex.body, result.terminal)

    def object_checked(self, ex: Exchange, obj: Any, event: dict[str, Any] | None = None) -> None:
        problem = response_problem(obj)
        if problem:
            ex.add("object.response", problem, event)
        else:
            self.response(ex, obj, event)

    def events(self, exchange: Exchange) -> None:
        if self.spec is None:
            return
        for position, event in enumerate(exchange.events):
            error = self._error(self.spec.validate_event, event)
            if error:
                exchange.add("schema.event", error, event, position)

    def response(self, exchange: Exchange, obj: dict[str, Any], event: dict[str, Any] | None = None) -> None:
        if self.spec is not None and (error := self._error(self.spec.validate_response, obj)):
            exchange.add("schema.response", error, event)

    @staticmethod
    def _error(validate: Callable[..., None], obj: Any) -> str | None:
        try:
            validate(obj, upstream=True)
        except Exception as exc:  # jsonschema.ValidationError; the import is optional
            return getattr(exc, "message", str(exc))
        return None


class Client:
    """The HTTP side of a run: one aiohttp session, every answer turned into a checked Exchange."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str, validator: Validator):
        self.session = session
        self.base_url = base_url.rstrip("/")
        self.validator = validator

    async def create(self, label: str, body: dict[str, Any]) -> Exchange:
        """POST /responses; a streamed answer is checked event by event, a JSON one as an object."""
        ex = Exchange(label, "POST", "/responses", request=body)
        try:
            async with self.session.post(f"{self.base_url}/responses", json=body) as resp:
                ex.status = resp.status
                raw = await resp.read()
                content_type = resp.headers.get("content-type", "")
        except (TimeoutError, aiohttp.ClientError) as exc:
            ex.add("transport.error", f"{type(exc).__name__}: {exc}")
            return ex
        if resp.status != 200:
            ex.add("http.status", f"status {resp.status}, expected 200: {raw[:300].decode(errors='replace')}")
            ex.body = _json(raw)
            return ex
        if body.get("stream"):
            if not content_type.startswith("text/event-stream"):
                ex.add("http.status", f"content-type {content_type!r} for a stream, expected text/event-stream")
            result = inspect_stream(raw, require_done=False)
            self.validator.stream_checked(ex, result)
        else:
            ex.body = _json(raw)
            self.validator.object_checked(ex, ex.body)
        return ex

    async def request(self, label: str, method: str, path: str, body: dict[str, Any] | None = None) -> Exchange:
        """Any other call, answered with JSON; status and shape are left to the scenario."""
        ex = Exchange(label, method, path, request=body)
        try:
            async with self.session.request(method, f"{self.base_url}{path}", json=body) as resp:
                ex.status = resp.status
                ex.body = _json(await resp.read())
        except (TimeoutError, aiohttp.ClientError) as exc:
            ex.add("transport.error", f"{type(exc).__name__}: {exc}")
        return ex


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def response_problem(obj: Any) -> str | None:
    """What keeps ``obj`` from being a response object clients can read, or None."""
    if not isinstance(obj, dict):
        return f"not a JSON object: {str(obj)[:200]!r}"
    if obj.get("object") != "response":
        return f"object is {obj.get('object')!r}, expected 'response'"
    if not isinstance(obj.get("id"), str) or not obj["id"]:
        return f"id is {obj.get('id')!r}"
    if obj.get("status") not in RESPONSE_STATUSES:
        return f"status is {obj.get('status')!r}"
    output = obj.get("output")
    if not isinstance(output, list):
        return f"output is {output!r}, expected a list"
    for i, item in enumerate(output):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            return f"output[{i}] has no type: {item!r:.200}"
    return None


def error_problem(body: Any) -> str | None:
    """What keeps ``body`` from being an OpenAI-style error, or None."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return f"body is not {{'error': {{...}}}}: {str(body)[:200]!r}"
    missing = [key for key in ("message", "type", "param", "code") if key not in error]
    if missing:
        return f"error object lacks {', '.join(missing)}: {error!r:.200}"
    if not isinstance(error["message"], str) or not error["message"]:
        return "error.message is not a non-empty string"
    return None


def output_items(ex: Exchange, kind: str) -> list[dict[str, Any]]:
    body = ex.body if isinstance(ex.body, dict) else {}
    return [item for item in body.get("output") or [] if isinstance(item, dict) and item.get("type") == kind]


def output_text(ex: Exchange) -> str:
    return "".join(
        part.get("text") or ""
        for item in output_items(ex, "message")
        for part in item.get("content") or []
        if isinstance(part, dict) and part.get("type") == "output_text"
    )


def expect(ex: Exchange, ok: bool, rule: str, message: str) -> None:
    """A scenario expectation, checked only on an answer that arrived (otherwise it is reported already)."""
    if ex.status == 200 and not ok:
        ex.add(rule, message)


# --------------------------------------------------------------------------- the scenarios


async def text(client: Client, model: str, result: ScenarioResult) -> None:
    ex = await client.create("create", {"model": model, "input": "Say hello in one short sentence."})
    result.exchanges.append(ex)
    expect(ex, bool(output_text(ex)), "scenario.output", "no output_text in a message item")


async def stream(client: Client, model: str, result: ScenarioResult) -> None:
    ex = await client.create("create, streamed",
                             {"model": model, "input": "Say hello in one short sentence.", "stream": True})
    result.exchanges.append(ex)
    expect(ex, bool(output_text(ex)), "scenario.output", "no output_text in the streamed message")


async def reasoning(client: Client, model: str, result: ScenarioResult) -> None:
    body = {"model": model, "input": "What is 17 * 23? Answer with the number only.", "stream": True,
            "reasoning": {"effort": "low", "summary": "auto"}}
    ex = await client.create("create with reasoning, streamed", body)
    result.exchanges.append(ex)
    if ex.status == 200 and not output_items(ex, "reasoning"):
        result.notes.append("no reasoning item in the answer (the model may not reason, or not show it)")


async def forced_call(client: Client, model: str, result: ScenarioResult, tool: dict[str, Any], prompt: str,
                      kind: str) -> tuple[Exchange, list[dict[str, Any]]]:
    """Stream a request that must call ``tool``; the exchange and the ``kind`` items it produced."""
    body = {"model": model, "input": prompt, "tools": [tool], "tool_choice": "required", "stream": True}
    ex = await client.create(f"{tool['type']} tool, streamed", body)
    result.exchanges.append(ex)
    calls = output_items(ex, kind)
    expect(ex, bool(calls), "scenario.output", f"no {kind} item although tool_choice is required")
    return ex, calls


async def function_tool(client: Client, model: str, result: ScenarioResult) -> None:
    ex, calls = await forced_call(client, model, result, WEATHER_TOOL,
                                  "Call the function get_weather for Paris and do not answer directly.", "function_call")
    for call in calls:
        expect(ex, call.get("name") == "get_weather", "scenario.output", f"call of {call.get('name')!r}")
        expect(ex, bool(call.get("call_id")), "scenario.output", "function_call without call_id")
        try:
            args = json.loads(call.get("arguments") or "")
        except ValueError:
            args = None
        expect(ex, isinstance(args, dict), "scenario.output",
               f"arguments are not a JSON object: {call.get('arguments')!r:.200}")


async def custom_tool(client: Client, model: str, result: ScenarioResult) -> None:
    ex, calls = await forced_call(client, model, result, SQL_TOOL,
                                  "Use run_sql to count the rows of the orders table.", "custom_tool_call")
    for call in calls:
        expect(ex, isinstance(call.get("input"), str) and bool(call.get("call_id")), "scenario.output",
               f"custom_tool_call without a string input and a call_id: {call!r:.200}")


async def chain(client: Client, model: str, result: ScenarioResult) -> None:
    first = await client.create("first turn", {"model": model, "input": "My name is Ada. Reply with OK.",
                                               "store": True})
    result.exchanges.append(first)
    first_id = first.body.get("id") if first.status == 200 and isinstance(first.body, dict) else None
    if not first_id:
        result.notes.append("no first response to chain from")
        return
    second = await client.create("second turn (previous_response_id), streamed",
                                 {"model": model, "input": "What is my name?", "previous_response_id": first_id,
                                  "store": True, "stream": True})
    result.exchanges.append(second)
    echoed = second.body.get("previous_response_id") if isinstance(second.body, dict) else None
    expect(second, echoed == first_id, "scenario.chain", f"previous_response_id is {echoed!r}, sent {first_id!r}")
    got = await client.request("retrieve the first turn", "GET", f"/responses/{first_id}")
    result.exchanges.append(got)
    if got.status != 200:
        got.add("scenario.chain", f"GET /responses/{first_id} answered {got.status}: {str(got.body)[:200]}")
        return
    client.validator.object_checked(got, got.body)
    same = isinstance(got.body, dict) and got.body.get("id") == first_id and \
        json.dumps(got.body.get("output"), sort_keys=True) == json.dumps(first.body.get("output"), sort_keys=True)
    expect(got, same, "scenario.chain", "the retrieved response differs from the created one (id or output)")


async def error(client: Client, model: str, result: ScenarioResult) -> None:
    bad = await client.request("invalid request (temperature is a string)", "POST", "/responses",
                               {"model": model, "input": "hi", "temperature": "hot"})
    result.exchanges.append(bad)
    missing = await client.request("retrieve an unknown id", "GET", "/responses/resp_does_not_exist_0000")
    result.exchanges.append(missing)
    for ex, wanted in ((bad, (400, 422)), (missing, (404,))):
        if ex.status is None:
            continue
        if ex.status not in wanted:
            ex.add("http.status", f"status {ex.status}, expected {' or '.join(map(str, wanted))}: "
                                  f"{str(ex.body)[:200]}")
        elif problem := error_problem(ex.body):
            ex.add("object.error", problem)


async def websocket(client: Client, model: str, result: ScenarioResult) -> None:
    """Responses over a WebSocket: `response.create` messages in, the stream's events as messages out."""
    url = client.base_url.replace("http", "ws", 1) + "/responses"
    ex = Exchange("response.create over WebSocket", "WS", "/responses",
                  request={"type": "response.create", "model": model, "input": "Say hello in one short sentence."})
    try:
        async with client.session.ws_connect(url) as ws:
            await ws.send_json(ex.request)
            ex.status = 101
            async for message in ws:
                if message.type != aiohttp.WSMsgType.TEXT:
                    break
                event = _json(message.data)
                ex.events.append(event if isinstance(event, dict) else {"type": "(not JSON)", "data": event})
                if ex.events[-1].get("type") in ("response.completed", "response.incomplete", "response.failed"):
                    break
    except aiohttp.WSServerHandshakeError as exc:
        if exc.status in (400, 404, 405, 426):
            result.skipped = True
            result.notes.append(f"the server does not offer the WebSocket transport (handshake answered "
                                f"{exc.status})")
            return
        ex.add("transport.error", f"WebSocket handshake answered {exc.status}: {exc.message}")
    except (TimeoutError, aiohttp.ClientError) as exc:
        ex.add("transport.error", f"{type(exc).__name__}: {exc}")
    result.exchanges.append(ex)
    if ex.events:
        client.validator.stream_checked(ex, inspect_events([e for e in ex.events if "type" in e]))


Scenario = Callable[[Client, str, ScenarioResult], Awaitable[None]]

#: name -> (title, scenario), in the order they run.
SCENARIOS: dict[str, tuple[str, Scenario]] = {
    "text": ("a plain answer (JSON)", text),
    "stream": ("a streamed answer", stream),
    "reasoning": ("a streamed answer with reasoning requested", reasoning),
    "function-tool": ("a function call (tool_choice required), streamed", function_tool),
    "custom-tool": ("a free-form custom tool call, streamed", custom_tool),
    "chain": ("a previous_response_id chain, and a retrieve", chain),
    "error": ("an invalid request and an unknown id: OpenAI-style errors", error),
    "websocket": ("the WebSocket transport (skipped when the server has none)", websocket),
}


async def run(base_url: str, model: str, names: list[str], *, api_key: str | None = None,
              spec: Any = None, timeout: float = 120) -> list[ScenarioResult]:
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    validator = Validator(spec)
    results = []
    async with aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        client = Client(session, base_url, validator)
        for name in names:
            title, scenario = SCENARIOS[name]
            result = ScenarioResult(name, title)
            await scenario(client, model, result)
            results.append(result)
    return results
