"""The web_search calls of one response, in the tool loop (tools/loop.py).

A call's item is added as OpenAI shows it — `{id, type, status: "in_progress"}` — with
`response.web_search_call.in_progress`; running it sends `.searching`, does the action, and ends with
`.completed` and the item's `action` (and, stored, the `results` the model is shown next: tools/web_search/
render.py). A call that fails — a provider error, a refused or unreadable page, arguments the model got wrong — is
a `failed` item whose error the model reads on its next step; never a failed response.

- search: every query at once (at most `actions.MAX_QUERIES`), each through the deployment's provider chain
  (service.py), with the response's domain policy applied to what comes back; results merged by rank, duplicate
  pages once. `action.sources` lists them (shown with include `web_search_call.action.sources`).
- open_page: fetched behind the SSRF guard (fetch.py), made readable (extract.py) in a child process killed at
  its deadline or with the call (readable.py), kept in this response's page cache; the model sees the start of
  it (search_context_size decides how much).
- find_in_page: the text found in a page (fetched first if this response has not opened it).

The URLs found and opened feed the response's citations (citations.py).
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from typing import Any

from ...generation import ToolCallStart
from ...ids import new_id
from ...protocol.tools import ToolSet
from ..frame import Annotator, Calls, Context, Events, Item, OpenItem, Spec
from . import extract as extraction
from .actions import ARGUMENTS, MAX_ARGUMENTS, Action, parse_arguments
from .citations import Citations, canonical
from .domains import DomainPolicy
from .fetch import FetchError, fetch
from .options import Options
from .provider import ProviderError, Query, Result, gather_bounded
from .readable import readable
from .service import MAX_WAIT, WebSearch

log = logging.getLogger("responses_gateway.web_search")

PAGES = 16  # pages one response keeps (its page cache)
MATCHES = 8  # find_in_page: passages shown
AROUND = 240  # find_in_page: characters shown on each side of a match

class WebSearchRunner:
    def __init__(self, options: Options, context: Context[WebSearch]):
        self.options = options
        self.context = context
        self.service: WebSearch = context.service
        config = self.service.config
        # the loop's deadline for one call: the whole provider chain (and a rate-limit wait), or a fetch and its
        # extraction (and a wait for an extraction slot)
        chain = sum(p.timeout for p in config.providers) + MAX_WAIT
        self.timeout: float = max(chain, config.fetch_timeout + 2 * config.extract_timeout) + 5.0
        self.policy: DomainPolicy = self.service.policy.narrowed(options.allowed, options.blocked)
        self.pages: dict[str, extraction.Page] = {}  # canonical URL -> page, this response's
        self.known: dict[str, str] = {}  # canonical URL -> title: what citations may point at
        self.citations = Citations(self.known)

    async def prelude(self, calls: Calls, tools: ToolSet) -> AsyncIterator[Events]:
        return
        yield

    def item(self, start: ToolCallStart) -> Item:
        return {"id": new_id("ws"), "type": "web_search_call", "status": "in_progress"}

    def added(self, call: OpenItem) -> list[Spec]:
        return [("response.web_search_call.in_progress", {})]

    def delta(self, call: OpenItem, text: str) -> list[Spec]:
        return []  # the arguments are the gateway's business: the item shows the action when done

    def complete(self, call: OpenItem) -> tuple[list[Spec], bool]:
        return [], True

    async def run(self, call: OpenItem, calls: Calls) -> AsyncIterator[Events]:
        try:
            action = parse_arguments(call.arguments)
        except ValueError as exc:  # the call is under way all the same (OpenAI's order: searching, then the end)
            call.item["action"] = {"type": "search", "query": ""}
            yield calls.call_events(call, [("response.web_search_call.searching", {})])
            yield calls.fail_call(call, str(exc))
            return
        call.item["action"] = action.item()
        yield calls.call_events(call, [("response.web_search_call.searching", {})])
        try:
            if action.kind == "search":
                results = await self._search(action)
                call.item["action"]["sources"] = [{"type": "url", "url": r["url"]} for r in results]
            elif action.kind == "open_page":
                results = [await self._open(action.url)]
            else:
                results = [await self._find(action)]
        except (ProviderError, FetchError) as exc:
            yield calls.fail_call(call, str(exc))
            return
        call.item["results"] = results
        yield calls.end_call(call, "completed", [("response.web_search_call.completed", {})])

    def failed(self, call: OpenItem, message: str) -> tuple[str | None, list[Spec]]:
        call.item.setdefault("action", {"type": "search", "query": ""})
        call.item["error"] = message
        # what the model wrote, so that a later turn shows it its own call (kit.lower), not an empty search
        call.item[ARGUMENTS] = call.arguments[:MAX_ARGUMENTS]
        return "failed", []

    def annotator(self) -> Annotator | None:
        return self.citations

    async def aclose(self) -> None:
        pass

    # -- actions --------------------------------------------------------------------------------------------

    async def _search(self, action: Action) -> list[dict[str, Any]]:
        budget = self.options.budget
        policy = self.policy
        ask = budget.results if policy.open else budget.results * 2  # room for what the policy filters out
        queries = [Query(q, ask, budget.snippet, self.options.location, policy.only(), policy.deny)
                   for q in action.queries]
        answers = await gather_bounded([self.service.search(q, live=self.options.live) for q in queries],
                                       len(queries))
        failures = [a for a in answers if isinstance(a, BaseException)]
        lists = [[r for r in a if policy.allows(r.url)] for a in answers if not isinstance(a, BaseException)]
        if not lists and failures:
            first = failures[0]
            if isinstance(first, ProviderError):
                raise first
            raise ProviderError(f"the search failed ({type(first).__name__})")
        merged = _merge(lists, budget.results * max(1, len(action.queries)) if len(action.queries) > 1
                        else budget.results)
        for r in merged:
            self.known.setdefault(canonical(r.url), r.title)
        return [r.public() for r in merged]

    async def _page(self, url: str) -> extraction.Page:
        key = canonical(url)
        page = self.pages.get(key)
        if page is not None:
            return page
        if not self.options.live:
            raise FetchError("live web access is off for this request (external_web_access: false): pages are "
                             "not fetched")
        config = self.service.config
        fetched = await fetch(url, policy=self.policy, allow_hosts=config.fetch_allow_hosts,
                              timeout=config.fetch_timeout, max_bytes=config.fetch_max_bytes)
        page = await readable(fetched, config.extract_timeout, self.service.extracting)
        if len(self.pages) >= PAGES:
            self.pages.pop(next(iter(self.pages)))
        self.pages[key] = page
        self.pages[canonical(page.url)] = page
        title = page.title or self.known.get(key) or page.url
        self.known[key] = title
        self.known.setdefault(canonical(page.url), title)
        return page

    async def _open(self, url: str) -> dict[str, Any]:
        page = await self._page(url)
        limit = self.options.budget.page
        text = page.text[:limit]
        return {"url": page.url, "title": page.title or page.url, "text": text, "chars": len(page.text)}

    async def _find(self, action: Action) -> dict[str, Any]:
        page = await self._page(action.url)
        return {"url": page.url, "title": page.title or page.url, "matches": find(page.text, action.pattern)}


def _merge(lists: list[list[Result]], limit: int) -> list[Result]:
    """Several result lists by rank (first of each, then second of each...), each page once."""
    out: list[Result] = []
    seen: set[str] = set()
    for rank in range(max((len(x) for x in lists), default=0)):
        for results in lists:
            if rank < len(results):
                r = results[rank]
                key = canonical(r.url)
                if key not in seen:
                    seen.add(key)
                    out.append(r)
    return out[:limit]


def find(text: str, pattern: str) -> list[str]:
    """Passages of `text` around each occurrence of `pattern` (case-insensitive; whitespace-insensitive)."""
    words = pattern.split()
    if not words:
        return []
    regex = re.compile(r"\s+".join(re.escape(w) for w in words), re.IGNORECASE)
    out: list[str] = []
    last_end = -1
    for match in regex.finditer(text):
        if match.start() < last_end:
            continue
        start, end = max(0, match.start() - AROUND), min(len(text), match.end() + AROUND)
        last_end = end
        passage = " ".join(text[start:end].split())
        out.append(("…" if start > 0 else "") + passage + ("…" if end < len(text) else ""))
        if len(out) >= MATCHES:
            break
    return out
