"""Any MCP server that offers a search tool, as a provider: the gateway's MCP client (tools/mcp/session.py) calls
the tool with the query and reads the results out of what it returns.

The tool is the one named after the URL's `#fragment` (`mcp=https://host/mcp#web_search_exa`), or the first tool
whose name contains "search" and which takes a string query (`query`, `q`, `search_query`...). A count argument
(`num_results`, `count`, `max_results`...) gets the result budget when the tool has one. Results are read from
structured JSON (`results: [{url, title, content|snippet|text|description}]`, or a list of such objects),
falling back to text that lists a URL per result (as most search servers print them).

The server is the operator's, like every provider: it is not checked against the SSRF guard. One session per
process, opened on first use and reopened after a failure.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ...net.urls import safe_url
from .provider import ProviderError, Query, Result, result

QUERY_NAMES = ("query", "q", "search_query", "searchQuery", "search_term", "question", "text")
COUNT_NAMES = ("num_results", "numResults", "count", "max_results", "maxResults", "limit", "top_k", "topn",
               "n_results")
_URL = re.compile(r"https?://[^\s<>\"'\])]+")
_MD_LINK = re.compile(r"\[([^\]\n]{1,300})\]\((https?://[^\s)]+)\)")


class MCPSearch:
    kind = "mcp"

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 10.0):
        parts = urlsplit(url)
        self.url = urlunsplit(parts._replace(fragment=""))
        self.tool_name = parts.fragment or None
        self.api_key = api_key
        self.timeout = timeout
        self.label = f"mcp at {safe_url(self.url)}"
        self._session: Any = None
        self._tool: tuple[str, str, str | None] | None = None  # name, query argument, count argument
        self._lock = asyncio.Lock()

    async def _connect(self) -> tuple[Any, tuple[str, str, str | None]]:
        from ..mcp.declaration import MCPServer
        from ..mcp.errors import MCPError
        from ..mcp.session import MCPSession

        async with self._lock:
            if self._session is not None and self._tool is not None:
                return self._session, self._tool
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            server = MCPServer(label="web_search", url=self.url, headers=headers, require_approval="never")
            session = MCPSession(server, timeout=self.timeout)
            try:
                await session.connect()
                tools = await session.list_tools()
            except MCPError as exc:
                await session.aclose()
                raise ProviderError(f"{self.kind}: {exc}") from None
            tool = pick_tool(tools, self.tool_name)
            if tool is None:
                await session.aclose()
                wanted = f"a tool named {self.tool_name!r}" if self.tool_name else "a search tool taking a query"
                raise ProviderError(f"{self.kind} offers no {wanted}")
            self._session, self._tool = session, tool
            return session, tool

    async def search(self, query: Query) -> list[Result]:
        from ..mcp.errors import MCPError

        session, (name, query_arg, count_arg) = await self._connect()
        arguments: dict[str, Any] = {query_arg: query.site_query()}
        if count_arg:
            arguments[count_arg] = query.count
        try:
            text, is_error = await session.call_tool(name, arguments, timeout=self.timeout)
        except MCPError as exc:
            await self.aclose()  # reconnect next time
            raise ProviderError(f"{self.kind}: {exc}") from None
        if is_error:
            raise ProviderError(f"{self.kind}: the tool {name!r} failed: {text[:300]}")
        return parse_output(text, query.snippet)[:query.count]

    async def aclose(self) -> None:
        session, self._session, self._tool = self._session, None, None
        if session is not None:
            await session.aclose()


def pick_tool(tools: list[dict[str, Any]], wanted: str | None) -> tuple[str, str, str | None] | None:
    """(tool name, its query argument, its count argument) of the search tool to use."""
    for tool in tools:
        name = tool.get("name") or ""
        if wanted is not None and name != wanted:
            continue
        if wanted is None and "search" not in name.lower():
            continue
        props = (tool.get("input_schema") or {}).get("properties") or {}
        query_arg = next((n for n in QUERY_NAMES if (props.get(n) or {}).get("type") == "string"), None)
        if query_arg is None:
            strings = [n for n, p in props.items() if isinstance(p, dict) and p.get("type") == "string"]
            query_arg = strings[0] if len(strings) == 1 or wanted is not None and strings else None
        if query_arg is None:
            continue
        count_arg = next((n for n in COUNT_NAMES if (props.get(n) or {}).get("type") in ("integer", "number")), None)
        return name, query_arg, count_arg
    return None


def parse_output(text: str, snippet: int) -> list[Result]:
    """Results out of a search tool's output: JSON when it is JSON, else one result per URL listed."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if data is not None:
        items = data.get("results") if isinstance(data, dict) else data
        if isinstance(items, list):
            found = []
            for x in items:
                if not isinstance(x, dict):
                    continue
                body = next((x[k] for k in ("content", "snippet", "description", "text", "summary")
                             if isinstance(x.get(k), str)), None)
                if body is None and isinstance(x.get("highlights"), list):
                    body = " … ".join(h for h in x["highlights"] if isinstance(h, str))
                r = result(x.get("url") or x.get("link"), x.get("title") or x.get("name"), body, snippet)
                if r is not None:
                    found.append(r)
            return found
    return _from_text(text, snippet)


def _from_text(text: str, snippet: int) -> list[Result]:
    """Plain or markdown text: blocks separated by blank lines or rules, each with its first URL."""
    found: list[Result] = []
    seen: set[str] = set()
    for block in re.split(r"\n\s*(?:-{3,}\s*)?\n", text):
        link = _MD_LINK.search(block)
        url = link.group(2) if link else (m.group(0) if (m := _URL.search(block)) else None)
        if url is None or url in seen:
            continue
        seen.add(url)
        title = link.group(1) if link else None
        lines = [ln.strip() for ln in block.strip().splitlines() if ln.strip()]
        rest = []
        for ln in lines:
            key = ln.split(":", 1)[0].strip().lower()
            if key == "title" and title is None:
                title = ln.split(":", 1)[1].strip()
            elif key in ("url", "link", "published date", "author", "id") or ln == url:
                continue
            elif title is None and url not in ln:
                title = ln.lstrip("#*- ").strip()
            else:
                rest.append(ln.split(":", 1)[1].strip() if key in ("text", "snippet", "content", "summary")
                            else ln)
        r = result(url, title, " ".join(rest), snippet)
        if r is not None:
            found.append(r)
    return found
