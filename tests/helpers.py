"""Shared test steps: stream a request through the gateway and check everything a stream must satisfy."""

from __future__ import annotations

import httpx

from tests.support.schema import validate_event, validate_response
from tests.support.stream_check import check_stream


def stream(http: httpx.Client, body: dict):
    """POST a streaming request; return the checked StreamResult (every event schema-validated)."""
    resp = http.post("/v1/responses", json={**body, "stream": True})
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/event-stream")
    result = check_stream(resp.content, require_done=True)
    for event in result.events:
        validate_event(event)
    validate_response(result.response)
    return result


def create(http: httpx.Client, body: dict) -> dict:
    resp = http.post("/v1/responses", json={**body, "stream": False})
    assert resp.status_code == 200, resp.text
    obj = resp.json()
    validate_response(obj)
    return obj


def without_volatile(obj):
    """A response with ids and timestamps blanked, for comparing two runs of the same content."""
    if isinstance(obj, dict):
        return {k: (None if k in ("id", "created_at", "completed_at", "call_id") else without_volatile(v))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [without_volatile(v) for v in obj]
    return obj
