"""The web console (docs/console.md), driven by headless Chromium against a real gateway with real stored
traffic: login, the lists, a response with a tool call and its chain, a background response's event log, a live
stream followed to its end, a stored `<script>` shown as text, a forged form refused, a wrong key. Each view's
screenshot is saved (RG_CONSOLE_SCREENSHOTS=dir also writes them there: docs/console/) and checked non-blank."""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest

from responses_gateway import tap
from responses_gateway.configure import make
from tests.operations.test_check_command import png_size_and_colours
from tests.support import needs
from tests.support.fake_chat import Sleep, Stream, make_usage, text_stream, tool_calls_stream
from tests.support.server import GatewayServer

KEY = "console-admin-key-0123456789"
HOSTILE = '<script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'">'
WEATHER = {"type": "function", "name": "get_weather", "description": "The weather of a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


class Shots:
    def __init__(self, where: Path):
        self.where = where
        self.also = os.environ.get("RG_CONSOLE_SCREENSHOTS")
        self.taken: list[str] = []

    def take(self, page, name: str) -> None:
        path = self.where / f"{name}.png"
        png = page.screenshot(path=str(path), full_page=False)
        assert png_size_and_colours(png)[2] > 20, f"the {name} screenshot is blank"
        self.taken.append(name)
        if self.also:
            Path(self.also).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(self.also) / path.name)


@pytest.fixture(scope="module")
def console_gateway(_upstream_server, tmp_path_factory):
    db = tmp_path_factory.mktemp("console") / "responses.db"
    settings = make(upstream_url=_upstream_server.base_url, db=str(db), console=True, console_key=KEY,
                    api_keys="sk-alice,sk-bob")
    with GatewayServer(settings) as server:
        yield server
    assert tap.WATCHER is None  # the app's shutdown took its watcher off the response path


@pytest.fixture(scope="module")
def browser():
    needs.playwright()
    executable = needs.chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def api(gateway, key: str = "sk-alice") -> httpx.Client:
    return httpx.Client(base_url=gateway.url, timeout=30, headers={"authorization": f"Bearer {key}"})


def logged_in(browser, gateway):
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    page.goto(f"{gateway.url}/console/responses")
    assert page.url.endswith("/console/login")  # not logged in: the login page
    page.fill("input[name=key]", KEY)
    page.click("button:has-text('Log in')")
    page.wait_for_url("**/console/responses")
    return context, page


def test_the_console_shows_stored_traffic_and_follows_a_live_stream(console_gateway, upstream, browser, tmp_path):
    shots = Shots(tmp_path)
    upstream.enqueue(tool_calls_stream([("call_w1", "get_weather", ['{"city": ', '"Paris"}'])],
                                       usage=make_usage(30, 8)),
                     text_stream(["It is sunny ", "in Paris."], usage=make_usage(50, 6)),
                     text_stream(["I only show ", "text."], usage=make_usage(12, 4)),
                     text_stream(["Queued, ", "then done."], usage=make_usage(9, 3)))
    with api(console_gateway) as alice, api(console_gateway, "sk-bob") as bob:
        first = alice.post("/v1/responses", json={"model": "fake-model", "input": "Weather in Paris?",
                                                  "tools": [WEATHER]}).json()
        assert first["output"][-1]["type"] == "function_call"
        second = alice.post("/v1/responses", json={
            "model": "fake-model", "previous_response_id": first["id"], "tools": [WEATHER],
            "input": [{"type": "function_call_output", "call_id": "call_w1", "output": '{"sky": "sunny"}'}]}).json()
        assert second["status"] == "completed"
        hostile = bob.post("/v1/responses", json={"model": "fake-model", "input": HOSTILE,
                                                  "instructions": HOSTILE}).json()
        background = alice.post("/v1/responses", json={"model": "fake-model", "input": "later",
                                                       "background": True}).json()
        for _ in range(200):
            if alice.get(f"/v1/responses/{background['id']}").json()["status"] == "completed":
                break
            time.sleep(0.05)
        conversation = alice.post("/v1/conversations", json={"items": [
            {"type": "message", "role": "user", "content": HOSTILE}]}).json()
        # files, a vector store with a file that fails to ingest, a container with a file
        notes = alice.post("/v1/files", files={"file": ("notes.txt", b"hello", "text/plain")},
                           data={"purpose": "assistants"}).json()
        broken = alice.post("/v1/files", files={"file": ("broken.pdf", b"%PDF-1.4 not really", "application/pdf")},
                            data={"purpose": "assistants"}).json()
        store = alice.post("/v1/vector_stores", json={"name": "<i>docs</i>", "file_ids": [notes["id"], broken["id"]]}
                           ).json()
        for _ in range(200):
            listed = alice.get(f"/v1/vector_stores/{store['id']}/files").json()["data"]
            if all(f["status"] != "in_progress" for f in listed):
                break
            time.sleep(0.05)
        box = alice.post("/v1/containers", json={"name": "box"}).json()
        assert alice.post(f"/v1/containers/{box['id']}/files",
                          files={"file": ("data.csv", b"a,b\n1,2\n", "text/csv")}).status_code == 200

    context, page = logged_in(browser, console_gateway)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        # the list: newest first, each response's model, status and key owner (an HMAC id, never the key)
        text = page.inner_text("main")
        assert all(one["id"] in text for one in (first, second, hostile, background))
        created = page.locator("tbody tr td:first-child").all_inner_texts()
        assert len(created) == 4 and created == sorted(created, reverse=True)  # newest first
        assert "sk-alice" not in page.content() and "sk-bob" not in page.content()
        shots.take(page, "responses")
        owner = page.locator(f"tr:has-text('{hostile['id']}') td").nth(4).inner_text()
        assert re.fullmatch(r"[0-9a-zA-Z_-]{8,}", owner), owner
        page.goto(f"{console_gateway.url}/console/responses?owner={owner}")
        assert hostile["id"] in page.inner_text("main") and first["id"] not in page.inner_text("main")
        page.goto(f"{console_gateway.url}/console/responses?status=failed")
        assert "no stored responses match" in page.inner_text("main")

        # a response with a tool call: its arguments, its result in the next turn, the chain as links
        page.goto(f"{console_gateway.url}/console/responses/{second['id']}")
        main = page.inner_text("main")
        assert "tool result" in main and '{"sky": "sunny"}' in main and "It is sunny in Paris." in main
        page.click(f"p.chain a:has-text('{first['id']}')")
        page.wait_for_url(f"**/console/responses/{first['id']}")
        main = page.inner_text("main")
        assert "tool call get_weather" in main and '"city": "Paris"' in main and second["id"] in main
        shots.take(page, "response-tool-call")

        # stored hostile text renders as text: no script ran, no image tag was made
        page.goto(f"{console_gateway.url}/console/responses/{hostile['id']}")
        assert page.title() != "pwned" and "pwned" not in page.title()
        assert HOSTILE in page.inner_text("main")
        assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
        csp = page.request.get(page.url).headers["content-security-policy"]
        assert "script-src" not in csp and "default-src 'none'" in csp
        shots.take(page, "xss-as-text")

        # a background response: its stored event log as a timeline
        page.goto(f"{console_gateway.url}/console/responses/{background['id']}")
        assert "Event log" in page.inner_text("main") and "response.completed" in page.inner_text("ol.events")
        shots.take(page, "background-event-log")

        page.goto(f"{console_gateway.url}/console/conversations/{conversation['id']}")
        assert HOSTILE in page.inner_text("main") and page.title() != "pwned"
        shots.take(page, "conversation")
        page.goto(f"{console_gateway.url}/console/files")
        main = page.inner_text("main")
        assert notes["id"] in main and "broken.pdf" in main and "<i>docs</i>" in main and "failed: 1" in main
        shots.take(page, "files")
        page.click(f"a:has-text('{store['id']}')")
        page.wait_for_url(f"**/console/vector_stores/{store['id']}")
        assert "The PDF could not be read" in page.inner_text("main")
        shots.take(page, "vector-store")
        page.goto(f"{console_gateway.url}/console/containers")
        assert box["id"] in page.inner_text("main") and "data.csv" in page.inner_text("main")
        shots.take(page, "containers")
        page.goto(f"{console_gateway.url}/console/usage")
        shots.take(page, "usage")
        assert page.locator("svg.plot").count() >= 3 and "fake-model" in page.inner_text("main")

        # live: a slow stream is listed while in flight, opened, and followed to its end
        upstream.enqueue(Stream(text_stream(["slowly ", "arriving ", "words"])[:3] + [Sleep(2.5)]
                                + text_stream(["slowly ", "arriving ", "words"])[3:]))
        done: list[dict] = []

        def stream_it():
            body = {"model": "fake-model", "input": "go slowly", "stream": True}
            with api(console_gateway) as alice, alice.stream("POST", "/v1/responses", json=body) as r:
                done.append({"lines": list(r.iter_lines())})

        runner = threading.Thread(target=stream_it)
        runner.start()
        try:
            for _ in range(100):
                page.goto(f"{console_gateway.url}/console/live")
                if page.locator("#in-flight a").count():
                    break
                time.sleep(0.1)
            shots.take(page, "live")
            page.locator("#in-flight a").first.click(no_wait_after=True)
            page.wait_for_selector("ol.events li", timeout=15_000)
            page.wait_for_selector("#ended", timeout=20_000)
            events = page.inner_text("ol.events")
            assert "response.created" in events and "response.output_text.delta" in events
            assert "arriving" in events and "response.completed" in events
            assert "completed" in page.inner_text("#ended")
            shots.take(page, "live-followed")
        finally:
            runner.join(30)
        assert done and any("response.completed" in line for line in done[0]["lines"])
        assert not dialogs
    finally:
        context.close()
    assert len(shots.taken) == 11


def test_a_forged_form_and_a_wrong_key_are_refused(console_gateway, browser, tmp_path):
    shots = Shots(tmp_path)
    context = browser.new_context(viewport={"width": 1000, "height": 600})
    page = context.new_page()
    try:
        page.goto(f"{console_gateway.url}/console/login")
        page.fill("input[name=key]", "not-the-key-at-all")
        with page.expect_response("**/console/login") as answer:
            page.click("button:has-text('Log in')")
        assert answer.value.status == 401 and "Wrong key." in page.inner_text("main")
        page.goto(f"{console_gateway.url}/console/usage")
        assert page.url.endswith("/console/login")
        shots.take(page, "wrong-key")
        # an API key is not the console's key
        page.fill("input[name=key]", "sk-alice")
        page.click("button:has-text('Log in')")
        assert "Wrong key." in page.inner_text("main")
    finally:
        context.close()

    context, page = logged_in(browser, console_gateway)
    try:
        cookie = next(c for c in context.cookies() if c["name"] == "rg_console")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        # a form of another page, posting to the console with a token it had to guess: refused, nothing changed
        page.set_content(f'<form method="post" action="{console_gateway.url}/console/logout">'
                         '<input name="csrf" value="guessed"><button>go</button></form>')
        with page.expect_response("**/console/logout") as answer:
            page.click("button")
        assert answer.value.status == 403 and "Nothing was changed" in page.inner_text("main")
        shots.take(page, "csrf-refused")
        page.goto(f"{console_gateway.url}/console/responses")
        assert page.url.endswith("/console/responses")  # still logged in
        # the real logout form, with its token, works
        page.click("button:has-text('Log out')")
        page.wait_for_url("**/console/login")
        page.goto(f"{console_gateway.url}/console/responses")
        assert page.url.endswith("/console/login")
    finally:
        context.close()

    # the same checks over plain HTTP: no token, a token of another session
    with httpx.Client(base_url=console_gateway.url) as http:
        assert http.post("/console/login", data={"key": KEY}).status_code == 403
        assert http.get("/console/live").status_code == 303
        assert http.get("/v1/models", headers={"authorization": f"Bearer {KEY}"}).status_code == 401


def test_without_console_nothing_is_served_or_tapped(upstream, tmp_path):
    settings = make(upstream_url=upstream.base_url, db=str(tmp_path / "r.db"))
    with GatewayServer(settings) as server:
        assert not hasattr(server.app.state, "console")  # (the tap is the process's: tap.WATCHER, checked above)
        assert httpx.get(f"{server.url}/console/login").status_code == 404
        assert httpx.get(f"{server.url}/console/responses").status_code == 404


def test_the_console_needs_its_own_key_and_a_store():
    with pytest.raises(ValueError, match="RG_CONSOLE_KEY"):
        make(console=True)
    with pytest.raises(ValueError, match="RG_CONSOLE_KEY"):
        make(console=True, console_key="short")
    with pytest.raises(ValueError, match="not one of the API keys"):
        make(console=True, console_key=KEY, api_keys=f"sk-1,{KEY}")
    with pytest.raises(ValueError, match="needs a database"):
        make(console=True, console_key=KEY, db="none")
