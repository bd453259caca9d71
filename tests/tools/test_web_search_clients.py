"""web_search through the clients people point at the gateway: the Agents SDK's `WebSearchTool`, the Vercel AI
SDK's `openai.tools.webSearch`, and the Codex CLI with its web search on. The gateway runs the search (fake
SearXNG and pages on loopback, tests/support/fake_web.py); the fake model calls the `web_search` function the
gateway offers, then answers citing a page."""

from __future__ import annotations

import asyncio
import json

import openai
import pytest

from responses_gateway.configure import make as make_settings
from tests.support import needs
from tests.support.fake_chat import make_usage, text_stream, tool_calls_stream
from tests.support.node import require_node_packages, run_node_script
from tests.support.server import GatewayServer

TITLE = "Interest rates & the Fed – Example News"


@pytest.fixture(scope="module")
def ws_gateway(_upstream_server, _fake_web, tmp_path_factory):
    web = _fake_web
    db = tmp_path_factory.mktemp("websearch-clients") / "db.sqlite"
    settings = make_settings(upstream_url=_upstream_server.base_url, db=str(db), web_search=f"searxng={web.url}/searxng",
                        web_fetch_allow_hosts=web.host, web_search_cache_ttl=0)
    with GatewayServer(settings) as gw:
        yield gw


def script(upstream, web, model="fake-model"):
    """The model searches, then answers citing the article."""
    article = web.page("article")
    upstream.enqueue(tool_calls_stream([("call_ws", "web_search", [json.dumps({"queries": ["fed rate"]})])],
                                       model=model, usage=make_usage(100, 10)))
    upstream.enqueue(text_stream(["The range is 3.50% to 3.75% ", f"([127.0.0.1]({article}))", "."], model=model,
                                 usage=make_usage(200, 20)))
    return article


def test_the_agents_sdk_web_search_tool(ws_gateway, upstream, web):
    needs.python_package("agents")
    from agents import Agent, OpenAIResponsesModel, Runner, WebSearchTool, set_tracing_disabled
    from agents.items import MessageOutputItem, ToolCallItem

    set_tracing_disabled(True)
    article = script(upstream, web)

    async def main():
        async with openai.AsyncOpenAI(base_url=f"{ws_gateway.url}/v1", api_key="x", max_retries=0) as client:
            agent = Agent(name="a", instructions="Search.", tools=[WebSearchTool(search_context_size="low")],
                          model=OpenAIResponsesModel(model="fake-model", openai_client=client))
            return await Runner.run(agent, "What is the rate?")

    result = asyncio.run(asyncio.wait_for(main(), 60))
    calls = [i for i in result.new_items if isinstance(i, ToolCallItem)]
    assert [c.raw_item.type for c in calls] == ["web_search_call"]
    assert calls[0].raw_item.action.type == "search" and calls[0].raw_item.action.query == "fed rate"
    assert result.final_output == f"The range is 3.50% to 3.75% ([127.0.0.1]({article}))."
    message = next(i for i in result.new_items if isinstance(i, MessageOutputItem))
    (annotation,) = message.raw_item.content[0].annotations
    assert (annotation.url, annotation.title) == (article, TITLE)
    sent = upstream.requests[0].body
    assert [t["function"]["name"] for t in sent["tools"]] == ["web_search"]


@pytest.mark.parametrize("mode", ["stream", "generate"])
def test_the_vercel_ai_sdk_web_search_tool(ws_gateway, upstream, web, mode):
    node = require_node_packages("vercel", "ai", "@ai-sdk/openai")
    article = script(upstream, web)
    out, detail = run_node_script(node, "vercel", "websearch.mjs",
                                  ["--base-url", f"{ws_gateway.url}/v1", "--mode", mode, "--prompt", "rate?"], 60)
    assert out.get("streamErrors", []) == [], detail
    assert out["text"] == f"The range is 3.50% to 3.75% ([127.0.0.1]({article})).", detail
    assert out["calls"] == [{"toolName": "web_search", "providerExecuted": True}], detail
    (result,) = out["results"]
    assert result["output"]["action"] == {"type": "search", "query": "fed rate"}, detail
    # the SDK asked for the sources (include) and made them into url sources (it then leaves the url_citation
    # annotations aside, as it does with OpenAI)
    assert [s["url"] for s in out["sources"]] == [article, web.page("plain")], detail
    body = out["requests"][0]["body"]
    assert body["include"] == ["web_search_call.action.sources"], detail
    assert body["tools"][0]["type"] == "web_search" and body["tools"][0]["search_context_size"] == "low", detail


def test_the_codex_cli_with_web_search_on(ws_gateway, upstream, web, tmp_path):
    from tests.clients.test_codex_e2e import API_KEY_VAR, CONFIG, MODEL, codex_bin, jsonl, run_codex

    binary = codex_bin()
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    config = 'web_search = "live"\n' + CONFIG.format(model=MODEL, base_url=f"{ws_gateway.url}/v1",
                                                     key_var=API_KEY_VAR)
    (home / ".codex" / "config.toml").write_text(config)
    work = tmp_path / "work"
    work.mkdir()
    article = script(upstream, web, model=MODEL)
    result = run_codex(binary, "What is the US interest rate? Search the web.", home, work)
    diagnostics = f"codex exit code {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, diagnostics
    first = upstream.requests[0].body
    offered = [t["function"]["name"] for t in first["tools"]]
    assert "web_search" in offered, diagnostics  # Codex's hosted web_search, run by the gateway
    events = jsonl(result.stdout)
    completed = [e["item"] for e in events if e.get("type") == "item.completed"]
    searches = [i for i in completed if i.get("type") == "web_search"]
    assert searches and searches[0].get("query") == "fed rate", diagnostics
    messages = [i.get("text") for i in completed if i.get("type") == "agent_message"]
    assert messages and messages[-1] == f"The range is 3.50% to 3.75% ([127.0.0.1]({article})).", diagnostics
    assert len(web.seen("/searxng/search")) == 1
