"""A NUL character in any request — `%00` in a path or a query, `\\u0000` in a JSON body or a WebSocket
message — is a 400 naming the parameter, on SQLite and PostgreSQL alike (PostgreSQL's text cannot hold NUL:
before api/nul.py most of these were 500s with tracebacks there), and nothing reaches the model or the store.
Every route the app serves is swept: a new route without a case here fails `test_every_route_is_swept`."""

from __future__ import annotations

import json

import httpx
from starlette.routing import Route

from tests.support import backends

pg_database = backends.pg_database
backend = backends.backend
start_gateway = backends.start_gateway

NUL = "a\x00b"
IDS = {"response_id": "resp_1", "conversation_id": "conv_1", "item_id": "msg_1", "file_id": "file_1",
       "vector_store_id": "vs_1", "batch_id": "vsfb_1", "container_id": "cntr_1"}
USER = [{"role": "user", "content": "hi"}]

# what each POST route is sent, with a NUL where a client could put one, and the parameter named
BODIES: dict[str, list[tuple[dict, str]]] = {
    "/v1/responses": [
        ({"model": "m", "input": [{"role": "user", "content": NUL}]}, "input[0].content"),
        ({"model": "m", "input": "hi", "previous_response_id": NUL}, "previous_response_id"),
        ({"model": "m", "input": "hi", "conversation": NUL}, "conversation"),
        ({"model": NUL, "input": "hi"}, "model"),
        ({"model": "m", "input": "hi", "metadata": {NUL: "v"}}, "metadata.ab"),
        ({"model": "m", "input": "hi", "metadata": {"k": NUL}}, "metadata.k"),
        ({"model": "m", "input": "hi", "tools": [{"type": "function", "name": NUL, "parameters": {}}]},
         "tools[0].name"),
        ({"model": "m", "input": "hi", "include": [NUL]}, "include[0]"),
        ({"model": "m", "input": "hi", "background": True, "prompt_cache_key": NUL}, "prompt_cache_key"),
    ],
    "/v1/responses/input_tokens": [({"model": "m", "input": [{"role": "user", "content": NUL}]},
                                    "input[0].content")],
    "/v1/responses/compact": [({"model": "m", "input": USER, "previous_response_id": NUL},
                               "previous_response_id")],
    "/v1/responses/{response_id}/cancel": [({"x": NUL}, "x")],
    "/v1/conversations": [({"metadata": {"k": NUL}}, "metadata.k"),
                          ({"items": [{"role": "user", "content": NUL}]}, "items[0].content")],
    "/v1/conversations/{conversation_id}": [({"metadata": {"k": NUL}}, "metadata.k")],
    "/v1/conversations/{conversation_id}/items": [({"items": [{"role": "user", "content": NUL}]},
                                                   "items[0].content")],
    "/v1/vector_stores": [({"name": NUL}, "name"), ({"file_ids": [NUL]}, "file_ids[0]")],
    "/v1/vector_stores/{vector_store_id}": [({"name": NUL}, "name")],
    "/v1/vector_stores/{vector_store_id}/search": [({"query": NUL}, "query")],
    "/v1/vector_stores/{vector_store_id}/files": [({"file_id": NUL}, "file_id")],
    "/v1/vector_stores/{vector_store_id}/files/{file_id}": [({"attributes": {"k": NUL}}, "attributes.k")],
    "/v1/vector_stores/{vector_store_id}/file_batches": [({"file_ids": [NUL]}, "file_ids[0]")],
    "/v1/vector_stores/{vector_store_id}/file_batches/{batch_id}/cancel": [({"x": NUL}, "x")],
    "/v1/containers": [({"name": NUL}, "name"), ({"name": "c", "file_ids": [NUL]}, "file_ids[0]")],
    "/v1/containers/{container_id}/files": [({"file_id": NUL}, "file_id")],
    "/v1/files": [({"purpose": NUL}, "purpose")],  # a JSON body where a form is expected: refused the same
}
QUERIES = ("after", "order", "include[]", "purpose", "filter", "before", "starting_after", "stream")


def app_routes(gw) -> list[tuple[str, str]]:
    return [(method, route.path) for route in gw.app.routes if isinstance(route, Route)
            for method in sorted(route.methods or ()) if method != "HEAD"]


def fill(path: str, nul_param: str | None = None) -> str:
    for name, value in IDS.items():
        path = path.replace("{" + name + "}", "a%00b" if name == nul_param else value)
    return path


def params_of(path: str) -> list[str]:
    return [name for name in IDS if "{" + name + "}" in path]


def cases(routes: list[tuple[str, str]]) -> list[tuple[str, str, dict | None, str | None, str]]:
    """(method, url, JSON body, query parameter set to NUL, the parameter the error must name)"""
    out: list[tuple[str, str, dict | None, str | None, str]] = []
    for method, path in routes:
        for name in params_of(path):
            out.append((method, fill(path, name), None, None, name))
        if method in ("GET", "DELETE") or not BODIES.get(path):
            for query in QUERIES[:2] if method == "GET" else QUERIES[:1]:
                out.append((method, fill(path), None, query, query))
        for body, param in BODIES.get(path, []) if method == "POST" else []:
            out.append((method, fill(path), body, None, param))
    return out


def check(http: httpx.Client, method: str, url: str, body: dict | None, query: str | None, param: str) -> str | None:
    """What is wrong with the answer ('' when nothing)."""
    if query is not None:
        url += ("&" if "?" in url else "?") + f"{query}=x%00y"
    resp = http.request(method, url, content=json.dumps(body).encode() if body is not None else None,
                        headers={"content-type": "application/json"} if body is not None else {})
    try:
        error = resp.json().get("error") or {}
    except ValueError:
        return f"{method} {url}: {resp.status_code} {resp.text[:200]!r}"
    if resp.status_code != 400 or error.get("param") != param or "NUL" not in (error.get("message") or ""):
        return f"{method} {url} {json.dumps(body)[:80] if body else ''}: {resp.status_code} {error}"
    return None


def test_every_route_is_swept(start_gateway):
    gw = start_gateway()
    posts = {path for method, path in app_routes(gw) if method == "POST"}
    assert posts - {"/v1/responses/{response_id}/cancel"} <= set(BODIES) | {
        "/v1/vector_stores/{vector_store_id}/file_batches/{batch_id}/cancel"}, posts - set(BODIES)
    assert set(IDS) >= {name for _, path in app_routes(gw) for name in params_of(path)}


def test_nul_anywhere_is_a_400_naming_the_param(start_gateway, backend, upstream):
    gw = start_gateway(api_keys="key-a")
    routes = app_routes(gw)
    problems = []
    with httpx.Client(base_url=gw.url, timeout=30, headers={"authorization": "Bearer key-a"}) as http:
        for method, url, body, query, param in cases(routes):
            problem = check(http, method, url, body, query, param)
            if problem:
                problems.append(problem)
        assert http.get("/v1/models%00").status_code in (400, 404)  # no route at all: never a 500
        assert http.get("/health").status_code == 200
    assert not problems, f"{len(problems)} of {len(cases(routes))}:\n" + "\n".join(problems)
    assert not upstream.requests  # nothing reached the model
    # the escaped backslash before u0000 is text, not NUL: accepted
    with httpx.Client(base_url=gw.url, timeout=30, headers={"authorization": "Bearer key-a"}) as http:
        resp = http.post("/v1/conversations", json={"metadata": {"k": "a\\u0000b"}})
        assert resp.status_code == 200 and resp.json()["metadata"] == {"k": "a\\u0000b"}


def test_a_websocket_message_with_nul_is_an_error_frame(start_gateway, backend, upstream):
    from websockets.sync.client import connect

    gw = start_gateway()
    with connect(gw.url.replace("http", "ws") + "/v1/responses") as ws:
        ws.send(json.dumps({"type": "response.create", "model": "m", "input": "hi", "previous_response_id": NUL}))
        frame = json.loads(ws.recv(timeout=30))
        assert frame["type"] == "error" and frame["status"] == 400, frame
        assert frame["error"]["param"] == "previous_response_id", frame
    assert not upstream.requests
