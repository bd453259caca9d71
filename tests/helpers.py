"""Shared test steps: stream a request through the gateway and check everything a stream must satisfy."""

from __future__ import annotations

import httpx
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.support.schema import validate_event, validate_response
from tests.support.stream_check import check_stream

# The official openai SDK's own models, validated strictly: what its typed clients will parse. Two
# deliberate differences, both what OpenAI's endpoint itself sends: `context_length_exceeded` in
# `response.error.code` (recordings/openai_responses/error-context_length_exceeded-stream.yaml), outside the SDK's
# enum; and a `web_search_call` announced without its `action` (recordings/openai_builtin_tools/
# builtin-tool-web_search-stream.yaml), which the SDK's type requires (it builds events without validating).
SDK_EVENT = TypeAdapter(ResponseStreamEvent)


def sdk_validate(event: dict) -> None:
    error = (event.get("response") or {}).get("error") or {}
    if error.get("code") == "context_length_exceeded":
        event = {**event, "response": {**event["response"], "error": {**error, "code": "invalid_prompt"}}}
    item = event.get("item") or {}
    if event["type"] == "response.output_item.added" and item.get("type") == "web_search_call" \
            and "action" not in item:
        event = {**event, "item": {**item, "action": {"type": "search"}}}
    assert SDK_EVENT.validate_python(event).type == event["type"]


def stream(http: httpx.Client, body: dict):
    """POST a streaming request; return the checked StreamResult (every event schema-validated)."""
    resp = http.post("/v1/responses", json={**body, "stream": True})
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/event-stream")
    result = check_stream(resp.content, require_done=True)
    for event in result.events:
        validate_event(event)
        sdk_validate(event)
    validate_response(result.response)
    return result


def create(http: httpx.Client, body: dict) -> dict:
    resp = http.post("/v1/responses", json={**body, "stream": False})
    assert resp.status_code == 200, resp.text
    obj = resp.json()
    validate_response(obj)
    Response.model_validate(obj)
    return obj


def without_volatile(obj):
    """A response with ids and timestamps blanked, for comparing two runs of the same content."""
    if isinstance(obj, dict):
        return {k: (None if k in ("id", "created_at", "completed_at", "call_id") else without_volatile(v))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [without_volatile(v) for v in obj]
    return obj


def tool_output(upstream, step: int) -> str:
    """What the model was shown of the gateway-run calls, on upstream call `step` (0-based): the tool messages."""
    messages = upstream.requests[step].body["messages"]
    return "\n".join(m["content"] for m in messages if m["role"] == "tool")


def item_events(result, item_type: str) -> list[dict]:
    """The events of a stream about items of `item_type` (its own events, and the items' added/done)."""
    return [e for e in result.events if item_type in e["type"]
            or (e["type"].startswith("response.output_item") and e["item"]["type"] == item_type)]
