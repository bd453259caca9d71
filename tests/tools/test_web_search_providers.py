"""Each web search provider against its fake (tests/support/fake_web.py) over loopback: the request as its API
defines it, the results read out of its answer, its errors; the fallback chain, the rate limit, the result cache,
live access off; an MCP server's search tool (a real MCP server, the official SDK's); the page fetcher's DNS
pinning. Everything runs over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket

import pytest
from mcp.server.mcpserver import MCPServer

from responses_gateway.config import Settings
from responses_gateway.tools.web_search.brave import Brave
from responses_gateway.tools.web_search.config import (
    ProviderConfig,
    WebSearchConfig,
    from_settings,
    parse_spec,
)
from responses_gateway.tools.web_search.domains import DomainPolicy
from responses_gateway.tools.web_search.exa import Exa
from responses_gateway.tools.web_search.fetch import FetchError, fetch
from responses_gateway.tools.web_search.mcp import MCPSearch, parse_output
from responses_gateway.tools.web_search.options import Location
from responses_gateway.tools.web_search.provider import ProviderError, Query
from responses_gateway.tools.web_search.searxng import SearXNG
from responses_gateway.tools.web_search.service import WebSearch
from responses_gateway.tools.web_search.settings import WebSearchSettings
from responses_gateway.tools.web_search.tavily import Tavily
from tests.support.mcp_server import build_app
from tests.support.server import UvicornThread

BERLIN = Location(city="Berlin", country="DE", region="Berlin", timezone="Europe/Berlin")


def run(coro):
    return asyncio.run(coro)


async def ask(provider, query):
    try:
        return await provider.search(query)
    finally:
        await provider.aclose()


def test_searxng(web):
    web.results["q site:a.example"] = [("https://a.example/1", "A &amp; B", "one <b>two</b>")]
    found = run(ask(SearXNG(f"{web.url}/searxng"), Query("q", 5, 100, BERLIN, ("a.example",))))
    assert [(r.url, r.title, r.snippet) for r in found] == [("https://a.example/1", "A & B", "one two")]
    (seen,) = web.seen("/searxng/search")
    assert (seen.method, seen.query) == ("GET", {"q": "q site:a.example", "format": "json", "pageno": "1",
                                                 "language": "de-DE"})


def test_brave(web):
    found = run(ask(Brave(f"{web.url}/brave", "brave-key"), Query("fed", 3, 60, BERLIN)))
    assert [r.url for r in found] == [web.page("article"), web.page("plain")]
    assert "<strong>" not in found[0].snippet and len(found[0].snippet) <= 60
    (seen,) = web.seen("/brave/res/v1/web/search")
    assert seen.query == {"q": "fed", "count": "3", "result_filter": "web", "text_decorations": "false",
                          "country": "de"}
    assert seen.headers["x-subscription-token"] == "brave-key" and seen.headers["accept"] == "application/json"
    assert (seen.headers["x-loc-city"], seen.headers["x-loc-country"], seen.headers["x-loc-timezone"],
            seen.headers["x-loc-state-name"]) == ("Berlin", "DE", "Europe/Berlin", "Berlin")
    with pytest.raises(ProviderError, match=r"^brave answered HTTP 401: The provided subscription token"):
        run(ask(Brave(f"{web.url}/brave"), Query("fed", 3, 60)))


def test_tavily(web):
    found = run(ask(Tavily(f"{web.url}/tavily", "tvly-key"), Query("fed", 2, 100, BERLIN, ("a.example",),
                                                                    ("b.example",))))
    assert len(found) == 2
    (seen,) = web.seen("/tavily/search")
    assert seen.headers["authorization"] == "Bearer tvly-key"
    assert seen.body == {"query": "fed", "max_results": 2, "search_depth": "basic", "topic": "general",
                         "include_answer": False, "include_raw_content": False, "include_images": False,
                         "include_domains": ["a.example"], "exclude_domains": ["b.example"], "country": "germany"}
    with pytest.raises(ProviderError, match="answered HTTP 401: Unauthorized"):
        run(ask(Tavily(f"{web.url}/tavily", "wrong"), Query("fed", 2, 100)))


def test_exa(web):
    found = run(ask(Exa(f"{web.url}/exa", "exa-key"), Query("fed", 4, 80, BERLIN, ("a.example",))))
    assert found[0].snippet.startswith("The Federal Reserve kept")
    (seen,) = web.seen("/exa/search")
    assert seen.headers["x-api-key"] == "exa-key"
    assert seen.body == {"query": "fed", "numResults": 4, "type": "auto",
                         "contents": {"highlights": {"maxCharacters": 80}}, "includeDomains": ["a.example"],
                         "userLocation": "DE"}


def test_keys_never_appear_in_errors(web):
    web.fail["brave"] = 429
    with pytest.raises(ProviderError) as err:
        run(ask(Brave(f"{web.url}/brave", "sk-secret-brave"), Query("fed", 3, 60)))
    assert "sk-secret-brave" not in str(err.value) and "rate limit exceeded" in str(err.value).lower()
    assert "sk-secret" not in repr(ProviderConfig("brave", "https://x", "sk-secret"))


def chain(web, *kinds, rate=0.0, ttl=0.0):
    urls = {"searxng": f"{web.url}/searxng", "brave": f"{web.url}/brave", "tavily": f"{web.url}/tavily",
            "exa": f"{web.url}/exa"}
    keys = {"brave": "k", "tavily": "tvly-k", "exa": "k"}
    return WebSearch(WebSearchConfig(tuple(ProviderConfig(k, urls[k], keys.get(k), rate, ttl, 5.0) for k in kinds)))


def test_the_chain_falls_back_and_the_cache_answers(web):
    async def go():
        search = chain(web, "brave", "tavily", ttl=60)
        web.fail["brave"] = 500
        try:
            first = await search.search(Query("fed", 2, 100))
            again = await search.search(Query("fed", 2, 100))
            assert first == again
            assert len(web.seen("/brave")) == 1 and len(web.seen("/tavily")) == 1  # the second from the cache
            with pytest.raises(ProviderError, match="external_web_access: false"):
                await search.search(Query("other", 2, 100), live=False)
            assert await search.search(Query("fed", 2, 100), live=False) == first
            web.fail["tavily"] = 500
            with pytest.raises(ProviderError, match="^brave answered HTTP 500.*tavily answered HTTP 500"):
                await search.search(Query("new", 2, 100))
        finally:
            await search.aclose()

    run(go())


def test_the_rate_limit_holds_per_provider(web):
    async def go():
        search = chain(web, "searxng", "exa", rate=1)
        try:
            await search.search(Query("a", 2, 100))
            await search.search(Query("b", 2, 100))  # searxng is out of tokens: exa answers
            assert (len(web.seen("/searxng")), len(web.seen("/exa"))) == (1, 1)
            loop = asyncio.get_running_loop()
            start = loop.time()
            await search.search(Query("c", 2, 100))  # both out: waits for the first to have room (about 1 s)
            assert 0.3 < loop.time() - start < 3
            assert len(web.seen("/searxng")) + len(web.seen("/exa")) == 3
        finally:
            await search.aclose()

    run(go())


def test_the_flag_and_the_routing_file(tmp_path, monkeypatch):
    assert parse_spec("searxng=http://127.0.0.1:8888, brave") == [("searxng", "http://127.0.0.1:8888"),
                                                                  ("brave", "https://api.search.brave.com")]
    for bad, says in (("bing=http://x", "unknown provider kind"), ("searxng", "needs a URL"),
                      ("mcp=ftp://x", "must be http")):
        with pytest.raises(ValueError, match=says):
            parse_spec(bad)
    group = WebSearchSettings(web_search="brave,exa", brave_api_key="b", exa_api_key="e", web_search_rate=2)
    config = from_settings(Settings(), group)
    assert [(p.kind, p.api_key, p.rate) for p in config.providers] == [("brave", "b", 2.0), ("exa", "e", 2.0)]
    toml = tmp_path / "routes.toml"
    toml.write_text('[[routes]]\nmatch = "*"\nbase_url = "http://127.0.0.1:1/v1"\n\n[web_search]\n'
                    'deny_domains = ["bad.example"]\n[[web_search.providers]]\nkind = "tavily"\n'
                    'api_key_env = "MY_TAVILY"\nrate = 1\ncache_ttl = 0\n[[web_search.providers]]\nkind = "searxng"\n'
                    'url = "http://127.0.0.1:8888"\n')
    config = from_settings(Settings(config=str(toml)), WebSearchSettings(), {"MY_TAVILY": "tvly-x"})
    assert [(p.kind, p.url, p.api_key, p.rate, p.cache_ttl) for p in config.providers] == [
        ("tavily", "https://api.tavily.com", "tvly-x", 1.0, 0.0), ("searxng", "http://127.0.0.1:8888", None, 5.0, 600.0)]
    assert config.deny_domains == ("bad.example",)
    toml.write_text('[web_search]\n[[web_search.providers]]\nkind = "searxng"\nurl = "http://x"\nspeed = 3\n')
    with pytest.raises(ValueError, match=r"providers\[0\]: unknown keys \['speed'\]"):
        from_settings(Settings(config=str(toml)), WebSearchSettings())
    assert from_settings(Settings(), WebSearchSettings()) is None


class SearchServer(UvicornThread):
    """A real MCP server whose search tool prints results as text, as hosted search servers do."""

    def __init__(self, page_url: str):
        mcp = MCPServer(name="search", log_level="WARNING")
        self.asked: list[dict] = []

        @mcp.tool(description="Search the web.")
        def web_search_exa(query: str, numResults: int = 5) -> str:  # noqa: N803 - the server's own naming
            self.asked.append({"query": query, "numResults": numResults})
            return (f"Title: Interest rates\nURL: {page_url}\nPublished Date: 2025-12-10\n"
                    "Text: The Federal Reserve kept its target range.\n\n"
                    "Title: Another\nURL: https://b.example/2\nText: More.")

        @mcp.tool(description="Unrelated.")
        def add(a: int, b: int) -> int:
            return a + b

        super().__init__(build_app(mcp), name="mcp-search")


def test_an_mcp_servers_search_tool(web):
    with SearchServer(web.page("article")) as server:
        provider = MCPSearch(f"{server.url}/mcp")
        found = run(ask(provider, Query("fed rates", 3, 200)))
        assert [(r.url, r.title, r.snippet) for r in found] == [
            (web.page("article"), "Interest rates", "The Federal Reserve kept its target range."),
            ("https://b.example/2", "Another", "More.")]
        assert server.asked == [{"query": "fed rates", "numResults": 3}]
        with pytest.raises(ProviderError, match="offers no a tool named 'nope'"):
            run(ask(MCPSearch(f"{server.url}/mcp#nope"), Query("x", 3, 200)))
    assert [r.url for r in parse_output('{"results": [{"url": "https://a.example", "title": "A", "content": "c"}]}',
                                        50)] == ["https://a.example"]
    assert [r.title for r in parse_output("1. [A page](https://a.example/x) - about it", 50)] == ["A page"]


def test_the_fetcher_connects_to_the_address_it_checked(web, monkeypatch):
    """DNS rebinding: the first lookup says 127.0.0.1 (admitted), every later one 127.0.0.2 (nothing listens
    there): the fetch still reaches the page, because it never asks again."""
    real = socket.getaddrinfo
    lookups = []

    def rebinding(host, port, *args, **kwargs):
        if (host.decode() if isinstance(host, bytes) else host) != "rebind.test":
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        return real("127.0.0.1" if len(lookups) == 1 else "127.0.0.2", port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    url = web.page("article").replace("127.0.0.1", "rebind.test")
    fetched = run(fetch(url, policy=DomainPolicy(), allow_hosts=("127.0.0.1/32",), timeout=5))
    assert b"Federal Reserve" in fetched.body and len(lookups) == 1
    with pytest.raises(FetchError, match="loopback address; refused"):
        run(fetch(url, policy=DomainPolicy(), allow_hosts=(), timeout=5))
