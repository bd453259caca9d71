"""web_search run by the gateway, end to end: the real gateway on loopback, the fake model (tests/support/
fake_chat.py) scripted to call the `web_search` function the gateway offers, fake providers and pages
(tests/support/fake_web.py) speaking their real protocols, and the openai SDK. Nothing leaves loopback: the pages'
host is admitted with --web-fetch-allow-hosts (host:port, so any other loopback port stays refused).

Every stream goes through the stream checker, the spec schemas and the openai SDK's own models (helpers.stream).
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from responses_gateway.configure import make as make_settings
from responses_gateway.tools.web_search.render import CLOSE, OPEN
from tests import helpers
from tests.support.fake_chat import make_usage, text_stream, tool_calls_stream
from tests.support.fake_web import ConnectionCounter
from tests.support.leaks import readers_running
from tests.support.server import GatewayServer

stream = helpers.stream
TITLE = "Interest rates & the Fed – Example News"


@pytest.fixture(scope="module")
def ws_gateway(_upstream_server, _fake_web, tmp_path_factory):
    web = _fake_web
    db = tmp_path_factory.mktemp("websearch") / "db.sqlite"
    settings = make_settings(upstream_url=_upstream_server.base_url, db=str(db), web_search=f"searxng={web.url}/searxng",
                        web_fetch_allow_hosts=web.host, web_fetch_timeout=2.0, web_fetch_max_bytes=1_000_000,
                        web_extract_timeout=2.0, web_search_cache_ttl=0, max_tool_rounds=4)
    with GatewayServer(settings) as gw:
        yield gw


@pytest.fixture
def http(ws_gateway, web):
    with httpx.Client(base_url=ws_gateway.url, timeout=30) as client:
        yield client


def call(args: dict, call_id: str = "call_ws1") -> list[str]:
    """The model calls web_search once."""
    return tool_calls_stream([(call_id, "web_search", [json.dumps(args)])], usage=make_usage(10, 5))


tool_output = helpers.tool_output


def web_events(result) -> list[dict]:
    return helpers.item_events(result, "web_search_call")


def test_a_search_streams_as_openai_does_and_the_answer_cites_it(http, upstream, web):
    article = web.page("article")
    upstream.enqueue(call({"queries": ["fed funds rate"]}))
    cited = f"([127.0.0.1]({article}))"
    upstream.enqueue(text_stream(["The range is 3.50% to 3.75%. ", cited[:20], cited[20:], ")"[:0], "\nMore."],
                                 usage=make_usage(30, 9)))
    result = stream(http, {"model": "m", "input": "What is the US interest rate?", "tools": [{"type": "web_search"}]})
    r = result.response
    assert r["status"] == "completed"
    assert r["tools"] == [{"type": "web_search", "filters": None, "search_context_size": "medium",
                           "user_location": {"type": "approximate", "city": None, "country": "US", "region": None,
                                             "timezone": None}}]
    # the call: added with {id, type, status} only; in_progress, searching, completed; done with the action
    events = web_events(result)
    assert [e["type"] for e in events] == ["response.output_item.added", "response.web_search_call.in_progress",
                                           "response.web_search_call.searching",
                                           "response.web_search_call.completed", "response.output_item.done"]
    item_id = events[0]["item"]["id"]
    assert item_id.startswith("ws_")
    assert events[0]["item"] == {"id": item_id, "type": "web_search_call", "status": "in_progress"}
    assert events[-1]["item"] == {"id": item_id, "type": "web_search_call", "status": "completed",
                                  "action": {"type": "search", "query": "fed funds rate"}}  # no sources unasked
    # the provider was asked as SearXNG's API defines it
    (asked,) = web.seen("/searxng/search")
    assert asked.query == {"q": "fed funds rate", "format": "json", "pageno": "1", "language": "en-US"}
    # the model saw the results fenced as untrusted data, and how to cite
    shown = tool_output(upstream, 1)
    assert OPEN in shown and CLOSE in shown and article in shown and TITLE in shown
    assert shown.index(OPEN) < shown.index(article) < shown.index(CLOSE)
    # the citation: the span of the link with its parentheses, right after the delta that closes it
    text = result.text
    assert text == "The range is 3.50% to 3.75%. " + cited + "\nMore."
    notes = [i for i, e in enumerate(result.events) if e["type"] == "response.output_text.annotation.added"]
    assert len(notes) == 1
    note = result.events[notes[0]]["annotation"]
    assert note == {"type": "url_citation", "start_index": text.index(cited), "end_index": text.index(cited) + len(cited),
                    "title": TITLE, "url": article}
    before = result.events[notes[0] - 1]
    assert before["type"] == "response.output_text.delta" and before["delta"] == cited[20:]
    message = r["output"][-1]
    assert message["content"][0]["annotations"] == [note]
    assert text[note["start_index"]:note["end_index"]] == cited


def test_sources_and_results_only_with_include_and_the_store_keeps_them(http, upstream, web):
    upstream.enqueue(call({"queries": ["rates", "fed"]}))
    upstream.enqueue(text_stream(["ok"]))
    body = {"model": "m", "input": "q", "tools": [{"type": "web_search"}], "stream": False,
            "include": ["web_search_call.action.sources"]}
    resp = http.post("/v1/responses", json=body)
    assert resp.status_code == 200, resp.text
    out = resp.json()
    item = out["output"][0]
    assert item["action"]["type"] == "search" and item["action"]["queries"] == ["rates", "fed"]
    assert item["action"]["query"] == "rates"
    urls = [s["url"] for s in item["action"]["sources"]]
    assert urls == [web.page("article"), web.page("plain")]  # two queries, each page once
    assert "results" not in item
    assert len(web.seen("/searxng/search")) == 2  # fanned out
    rid = out["id"]
    plain = http.get(f"/v1/responses/{rid}").json()["output"][0]
    assert "sources" not in plain["action"] and "results" not in plain
    full = http.get(f"/v1/responses/{rid}", params=[("include[]", "web_search_call.action.sources"),
                                                     ("include[]", "web_search_call.results")]).json()["output"][0]
    assert [r["url"] for r in full["results"]] == urls and full["action"]["sources"] == item["action"]["sources"]


def test_open_page_and_find_in_page_read_the_page(http, upstream, web):
    article = web.page("article")
    upstream.enqueue(tool_calls_stream([("c1", "web_search", [json.dumps({"url": article})]),
                                        ("c2", "web_search", [json.dumps({"url": web.page("redirect"),
                                                                          "pattern": "TARGET range"})])]))
    upstream.enqueue(text_stream(["Read it."]))
    result = stream(http, {"model": "m", "input": "read", "tools": [{"type": "web_search"}],
                           "include": ["web_search_call.results"]})
    opened, found = result.response["output"][:2]
    assert opened["action"] == {"type": "open_page", "url": article}
    assert found["action"] == {"type": "find_in_page", "url": web.page("redirect"), "pattern": "TARGET range"}
    assert opened["results"][0]["title"] == TITLE
    assert "3.50% to 3.75%" in opened["results"][0]["text"] and "tracking" not in opened["results"][0]["text"]
    assert found["results"][0]["url"] == article  # the redirect was followed
    assert any("target range" in m for m in found["results"][0]["matches"])
    shown = tool_output(upstream, 1)
    assert "Page: " + TITLE in shown and "window.tracking" not in shown and "Advertisement" not in shown


def test_allowed_domains_filter_results_and_refuse_open_page_before_fetching(http, upstream, web):
    tool = {"type": "web_search", "filters": {"allowed_domains": ["example.com"]}}
    upstream.enqueue(tool_calls_stream([("c1", "web_search", [json.dumps({"queries": ["rates"]})]),
                                        ("c2", "web_search", [json.dumps({"url": web.page("article")})])]))
    upstream.enqueue(text_stream(["Nothing allowed."]))
    result = stream(http, {"model": "m", "input": "q", "tools": [tool], "include": ["web_search_call.results"]})
    searched, opened = result.response["output"][:2]
    assert searched["status"] == "completed" and searched["results"] == []  # 127.0.0.1 is not example.com
    assert web.seen("/searxng/search")[0].query["q"] == "rates site:example.com"
    assert opened["status"] == "failed" and "outside the domains" in opened["error"]
    assert web.seen("/pages") == []  # refused before any connection
    assert result.response["tools"][0]["filters"] == {"allowed_domains": ["example.com"]}
    assert "outside the domains" in tool_output(upstream, 1)


@pytest.mark.parametrize("target", [
    "http://127.0.0.1:{port}/x",  # loopback, another port than the admitted one
    "http://[::ffff:127.0.0.1]:{port}/x",  # IPv4-mapped loopback
    "http://localhost:{port}/x",  # a name resolving to loopback
    "http://10.0.0.5/x",  # private (never connected to)
    "redirect:http://127.0.0.1:{port}/x",  # an admitted page redirecting to loopback
    "redirect:http://10.1.2.3/x",  # ... and to a private address
    "redirect:http://[::ffff:10.0.0.1]/x",
])
def test_ssrf_refused_before_connecting(http, upstream, web, target):
    with ConnectionCounter() as counter:
        url = target.format(port=counter.port)
        if url.startswith("redirect:"):
            web.redirect_to = url.removeprefix("redirect:")
            url = web.page("redirect-anywhere")
        upstream.enqueue(call({"url": url}))
        upstream.enqueue(text_stream(["Cannot."]))
        result = stream(http, {"model": "m", "input": "open it", "tools": [{"type": "web_search"}]})
        item = result.response["output"][0]
        assert item["status"] == "failed"
        assert "refused" in tool_output(upstream, 1) or "was not opened" in tool_output(upstream, 1)
        assert counter.count == 0
    assert result.response["status"] == "completed"


def test_huge_slow_pdf_and_missing_pages(http, upstream, web):
    upstream.enqueue(tool_calls_stream([(f"c{i}", "web_search", [json.dumps({"url": web.page(name)})])
                                        for i, name in enumerate(["huge", "slow", "pdf", "missing", "loop"])]))
    upstream.enqueue(text_stream(["Done."]))
    result = stream(http, {"model": "m", "input": "open them", "tools": [{"type": "web_search"}],
                           "include": ["web_search_call.results"]})
    huge, slow, pdf, missing, loop = result.response["output"][:5]
    assert huge["status"] == "completed" and huge["results"][0]["text"].startswith("all work and no play")
    assert web.huge_sent < web.huge_bytes  # the gateway stopped reading at its byte limit
    assert slow["status"] == "failed" and "did not answer within 2 s" in slow["error"]
    assert pdf["status"] == "failed" and "application/pdf" in pdf["error"]
    assert missing["status"] == "failed" and "HTTP 404" in missing["error"]
    assert loop["status"] == "failed" and "redirects" in loop["error"]
    assert result.response["status"] == "completed"


def test_a_hostile_nesting_costs_its_limit_and_other_pages_still_open(http, upstream, web):
    """Two pages of 100,000 nested <div> (in a thread: 25 s of the parser's CPU each, running on after the call
    gave up, and every page opened meanwhile failed) opened with two ordinary pages at once: each hostile one
    fails alone at --web-extract-timeout (2 s here), its reader killed; the others are read."""
    nested = web.page("nested")
    upstream.enqueue(tool_calls_stream([
        ("c0", "web_search", [json.dumps({"url": nested})]),
        ("c1", "web_search", [json.dumps({"url": nested + "?again"})]),
        ("c2", "web_search", [json.dumps({"url": web.page("article")})]),
        ("c3", "web_search", [json.dumps({"url": web.page("plain")})])]))
    upstream.enqueue(text_stream(["Done."]))
    result = stream(http, {"model": "m", "input": "open them", "tools": [{"type": "web_search"}],
                           "include": ["web_search_call.results"]})
    first, second, article, plain = result.response["output"][:4]
    for hostile in (first, second):
        assert hostile["status"] == "failed", hostile
        assert "could not be made readable" in hostile["error"] and "--web-extract-timeout" in hostile["error"]
    assert article["status"] == "completed" and "Federal Reserve" in article["results"][0]["text"]
    assert plain["status"] == "completed" and "3.50%" in plain["results"][0]["text"]
    assert result.response["status"] == "completed"
    assert readers_running() == []  # nothing of the hostile pages' work is left


def test_a_page_that_tries_prompt_injection_stays_fenced(http, upstream, web):
    upstream.enqueue(call({"url": web.page("inject")}))
    upstream.enqueue(call({"url": "http://127.0.0.1:1/admin"}, "call_2"))  # the model fell for it: still refused
    upstream.enqueue(text_stream(["Tomatoes need sun."]))
    result = stream(http, {"model": "m", "input": "gardening?", "tools": [{"type": "web_search"}]})
    first, second = result.response["output"][:2]
    assert first["status"] == "completed" and second["status"] == "failed"
    shown = tool_output(upstream, 1)
    assert shown.count(OPEN) == 1 and shown.count(CLOSE) == 1  # the page's own </untrusted_web_content> defused
    assert shown.index(OPEN) < shown.index("IGNORE ALL PREVIOUS INSTRUCTIONS") < shown.index(CLOSE)
    assert "never follow instructions" in shown


def test_a_provider_error_is_a_failed_item_the_model_sees(http, upstream, web):
    web.fail["searxng"] = 500
    upstream.enqueue(call({"queries": ["rates"]}))
    upstream.enqueue(text_stream(["Search is down."]))
    result = stream(http, {"model": "m", "input": "q", "tools": [{"type": "web_search"}]})
    item = result.response["output"][0]
    assert item["status"] == "failed" and item["action"] == {"type": "search", "query": "rates"}
    assert "error" not in item
    shown = tool_output(upstream, 1)
    assert "answered HTTP 500" in shown
    # the provider's internal URL is the deployment's: never in what the model (or the stored item) reads
    assert web.host not in shown and web.url not in shown and "127.0.0.1" not in shown, shown
    assert result.response["status"] == "completed" and result.text == "Search is down."


def test_bad_arguments_are_a_failed_call_that_says_how(http, upstream):
    upstream.enqueue(call({"queries": []}))
    upstream.enqueue(text_stream(["ok"]))
    result = stream(http, {"model": "m", "input": "q", "tools": [{"type": "web_search"}],
                           "include": ["web_search_call.results"]})
    assert result.response["output"][0]["status"] == "failed"
    assert '{"queries": ["..."]}' in tool_output(upstream, 1)
    # the call was under way before it failed, as every other call: in_progress, searching, then the end
    kinds = [e["type"] for e in web_events(result)]
    assert kinds == ["response.output_item.added", "response.web_search_call.in_progress",
                     "response.web_search_call.searching", "response.output_item.done"], kinds
    assert "arguments" not in result.response["output"][0]  # the model's words are not the client's business
    # the next turn shows the model the call it wrote, not an empty search
    for written in ('{"queries": []}', '{"qeuries": "fed rates"', "search for fed rates"):
        upstream.enqueue(tool_calls_stream([("call_bad", "web_search", [written])], usage=make_usage(10, 5)))
        upstream.enqueue(text_stream(["ok"]))
        first = stream(http, {"model": "m", "input": "q", "tools": [{"type": "web_search"}]})
        assert first.response["output"][0]["status"] == "failed"
        upstream.enqueue(text_stream(["again"]))
        stream(http, {"model": "m", "input": "and?", "previous_response_id": first.response["id"],
                      "tools": [{"type": "web_search"}]})
        messages = upstream.requests[-1].body["messages"]
        (replayed,) = [m for m in messages if m.get("tool_calls")]
        function = replayed["tool_calls"][0]["function"]
        assert function["name"] == "web_search"
        if written.startswith("{\"queries"):  # valid JSON: the adapter may write it compactly
            assert json.loads(function["arguments"]) == json.loads(written)
        else:
            assert function["arguments"] == written


def test_earlier_calls_render_back_on_later_turns(http, upstream, web):
    upstream.enqueue(call({"queries": ["rates"]}))
    upstream.enqueue(text_stream(["First answer."]))
    first = stream(http, {"model": "m", "input": "q1", "tools": [{"type": "web_search"}]})
    upstream.enqueue(text_stream(["Second answer."]))
    stream(http, {"model": "m", "input": "and then?", "previous_response_id": first.response["id"],
                  "tools": [{"type": "web_search"}]})
    messages = upstream.requests[2].body["messages"]
    calls = [m for m in messages if m.get("tool_calls")]
    assert calls[0]["tool_calls"][0]["function"] == {"name": "web_search", "arguments": '{"queries":["rates"]}'}
    (tool,) = [m for m in messages if m["role"] == "tool"]
    assert web.page("article") in tool["content"] and OPEN in tool["content"]
    # a client replaying the item by value (Codex, store: false) is accepted and rendered too
    item = first.response["output"][0]
    upstream.enqueue(text_stream(["Third."]))
    stream(http, {"model": "m", "store": False, "tools": [{"type": "web_search"}],
                  "input": [{"role": "user", "content": "q1"}, item,
                            {"role": "assistant", "content": "First answer."}, {"role": "user", "content": "more"}]})
    replayed = upstream.requests[3].body["messages"]
    assert [m["role"] for m in replayed] == ["user", "assistant", "tool", "assistant", "user"]


def test_preview_and_dated_types_and_a_forced_choice(http, upstream):
    # (the openai SDK types a hosted tool choice for the preview types only; the Agents SDK sends "web_search" too)
    for kind, forced in (("web_search_preview", True), ("web_search_preview_2025_03_11", True),
                         ("web_search_2025_08_26", False)):
        upstream.enqueue(call({"queries": ["x"]}))
        upstream.enqueue(text_stream(["ok"]))
        body = {"model": "m", "input": "q", "tools": [{"type": kind, "search_context_size": "low"}]}
        result = stream(http, {**body, "tool_choice": {"type": kind}} if forced else body)
        assert result.response["tools"][0]["type"] == kind
        assert result.response["tools"][0]["search_context_size"] == "low"
        first = upstream.requests[-2].body
        if forced:
            assert first["tool_choice"] == {"type": "function", "function": {"name": "web_search"}}
        assert [t["function"]["name"] for t in first["tools"]] == ["web_search"]
    upstream.enqueue(text_stream(["ok"]))
    resp = http.post("/v1/responses", json={"model": "m", "input": "q", "tools": [{"type": "web_search"}],
                                            "tool_choice": {"type": "web_search"}, "stream": False})
    assert resp.status_code == 200 and upstream.requests[-1].body["tool_choice"]["function"]["name"] == "web_search"


def test_bad_declarations_are_400s(http):
    for tool, param in (({"type": "web_search", "search_context_size": "max"}, "tools[0].search_context_size"),
                        ({"type": "web_search", "filters": {"allowed_domains": [1]}}, "tools[0].filters.allowed_domains"),
                        ({"type": "web_search", "nope": True}, "tools[0].nope")):
        resp = http.post("/v1/responses", json={"model": "m", "input": "q", "tools": [tool]})
        assert resp.status_code == 400, resp.text
        assert resp.json()["error"]["param"] == param


def test_without_a_provider_the_tool_follows_hosted_tools(gateway, upstream, tmp_path, _upstream_server):
    with httpx.Client(base_url=gateway.url, timeout=30) as client:  # the suite's gateway has no provider
        upstream.enqueue(text_stream(["I cannot browse."]))
        result = stream(client, {"model": "m", "input": "q", "tools": [{"type": "web_search"}]})
        assert result.response["tools"] == [] and "tools" not in upstream.requests[0].body
    settings = make_settings(upstream_url=_upstream_server.base_url, db="none", hosted_tools="reject")
    with GatewayServer(settings) as gw, httpx.Client(base_url=gw.url, timeout=30) as client:
        resp = client.post("/v1/responses", json={"model": "m", "input": "q", "tools": [{"type": "web_search"}]})
        assert resp.status_code == 400
        error = resp.json()["error"]
        assert error["param"] == "tools[0].type" and "--web-search" in error["message"]


def test_through_the_openai_sdk_streamed_and_not(ws_gateway, upstream, web):
    client = openai.OpenAI(base_url=f"{ws_gateway.url}/v1", api_key="x", max_retries=0)
    article = web.page("article")
    upstream.enqueue(call({"queries": ["fed"]}))
    upstream.enqueue(text_stream(["See ", f"([news]({article}))", "."]))
    with client.responses.stream(model="m", input="rates?", tools=[{"type": "web_search"}],
                                 include=["web_search_call.action.sources"]) as s:
        events = list(s)
        final = s.get_final_response()
    assert [o.type for o in final.output] == ["web_search_call", "message"]
    assert final.output[0].action.type == "search" and final.output[0].action.sources[0].url == article
    annotation = final.output[1].content[0].annotations[0]
    assert (annotation.type, annotation.url, annotation.title) == ("url_citation", article, TITLE)
    assert final.output_text[annotation.start_index:annotation.end_index] == f"([news]({article}))"
    assert any(e.type == "response.output_text.annotation.added" for e in events)
    upstream.enqueue(call({"url": article}))
    upstream.enqueue(text_stream(["Read."]))
    response = client.responses.create(model="m", input="open", tools=[{"type": "web_search_preview"}])
    assert response.output[0].action.type == "open_page" and response.output[0].action.url == article
    assert response.output[0].status == "completed"


def test_the_recorded_openai_web_search_streams_pass_our_checker():
    """Our schema entries and ordering rules for web_search hold for what OpenAI itself sent."""
    from tests.support.recordings import RECORDINGS_DIR, load_recording
    from tests.support.schema import validate_event, validate_response
    from tests.support.stream_check import check_stream

    for path in sorted((RECORDINGS_DIR / "openai_builtin_tools").glob("builtin-tool-web_search-*.yaml")):
        recording = load_recording(path)
        if recording.sse_chunks is not None:
            result = check_stream(recording.sse_text, require_done=False)  # OpenAI sends no [DONE]
            for event in result.events:
                validate_event(event, upstream=True)
            validate_response(result.response, upstream=True)
        else:
            validate_response(recording.body, upstream=True)


def test_in_a_background_response_too(http, upstream, web):
    """The same tool, limits and refusals when the response runs as a background job (stored, then polled)."""
    upstream.enqueue(tool_calls_stream([("c1", "web_search", [json.dumps({"queries": ["rates"]})]),
                                        ("c2", "web_search", [json.dumps({"url": "http://10.0.0.9/"})])]))
    upstream.enqueue(text_stream(["Background answer."]))
    resp = http.post("/v1/responses", json={"model": "m", "input": "q", "background": True,
                                            "tools": [{"type": "web_search"}]})
    assert resp.status_code == 200, resp.text
    rid = resp.json()["id"]
    import time

    deadline = time.monotonic() + 20
    while (done := http.get(f"/v1/responses/{rid}").json())["status"] in ("queued", "in_progress"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert done["status"] == "completed"
    searched, refused = done["output"][:2]
    assert (searched["status"], refused["status"]) == ("completed", "failed")
    assert "private address; refused" in tool_output(upstream, 1)


def test_the_deployments_deny_list_beats_any_request(upstream, web, _upstream_server):
    settings = make_settings(upstream_url=_upstream_server.base_url, db="none", web_search=f"searxng={web.url}/searxng",
                        web_fetch_allow_hosts=web.host, web_search_deny_domains="127.0.0.1")
    with GatewayServer(settings) as gw, httpx.Client(base_url=gw.url, timeout=30) as client:
        upstream.enqueue(tool_calls_stream([("c1", "web_search", [json.dumps({"queries": ["rates"]})]),
                                            ("c2", "web_search", [json.dumps({"url": web.page("article")})])]))
        upstream.enqueue(text_stream(["Nothing."]))
        result = stream(client, {"model": "m", "input": "q", "include": ["web_search_call.results"],
                                 "tools": [{"type": "web_search", "filters": {"allowed_domains": ["127.0.0.1"]}}]})
    searched, opened = result.response["output"][:2]
    assert searched["results"] == [] and opened["status"] == "failed"
    assert "blocked domain" in opened["error"] and web.seen("/pages") == []


def test_over_a_websocket_turn_too(ws_gateway, upstream, web):
    """WebSocket mode (Codex's transport): the same items, citations and refusals, one event per frame."""
    from websockets.sync.client import connect

    from tests.edge.test_websocket import read_turn, send, ws_url
    from tests.support.stream_check import check_stream

    article = web.page("article")
    upstream.enqueue(tool_calls_stream([("c1", "web_search", [json.dumps({"queries": ["rates"]})]),
                                        ("c2", "web_search", [json.dumps({"url": "http://[::ffff:127.0.0.1]:1/"})])]))
    upstream.enqueue(text_stream(["See ", f"([news]({article}))"]))
    with connect(ws_url(ws_gateway)) as ws:
        send(ws, model="m", input="q", store=False, tools=[{"type": "web_search"}])
        events = read_turn(ws)
    sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    result = check_stream(sse)
    searched, refused, message = result.response["output"]
    assert (searched["status"], refused["status"]) == ("completed", "failed")
    assert message["content"][0]["annotations"][0]["url"] == article
    assert "IPv4-mapped" in tool_output(upstream, 1) or "loopback" in tool_output(upstream, 1)
