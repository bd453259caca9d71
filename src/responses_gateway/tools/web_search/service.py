"""The process's web search: its providers as a fallback chain, each with its rate limit and result cache, and
the deployment's domain policy. Made at start-up by the kit's `serve` when a provider is configured, closed at
shutdown; every response's runner uses it.

A search is tried on each provider in order: a cached answer first (any provider's), then the first provider
whose rate limit lets it through and that answers. A provider that fails (unreachable, timed out, an HTTP error,
a body that is not its API's) hands over to the next; when every one is at its rate limit, the search waits for
the first to have room (within `MAX_WAIT`). With live access off (`external_web_access: false`), only the cache
answers.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from urllib.parse import urlsplit

from ... import metrics
from ...net.urls import safe_url
from .brave import Brave
from .config import WebSearchConfig
from .domains import DomainPolicy
from .exa import Exa
from .extract import CONCURRENT
from .limits import TokenBucket, TTLCache
from .mcp import MCPSearch
from .provider import Provider, ProviderError, Query, Result
from .searxng import SearXNG
from .tavily import Tavily

log = logging.getLogger("responses_gateway.web_search")

MAX_WAIT = 5.0  # seconds a search waits for a rate-limited provider before giving up
KINDS: dict[str, type[SearXNG] | type[Brave] | type[Tavily] | type[Exa] | type[MCPSearch]] = {
    "searxng": SearXNG, "brave": Brave, "tavily": Tavily, "exa": Exa, "mcp": MCPSearch,
}


@dataclass
class Slot:
    """One provider of the chain and its limits."""

    provider: Provider
    limiter: TokenBucket
    cache: TTLCache[list[Result]]


class WebSearch:
    def __init__(self, config: WebSearchConfig, providers: list[Provider] | None = None):
        self.config = config
        made = providers or [KINDS[p.kind](p.url, p.api_key, p.timeout) for p in config.providers]
        self.slots = [Slot(provider, TokenBucket(p.rate), TTLCache[list[Result]](p.cache_ttl))
                      for provider, p in zip(made, config.providers, strict=True)]
        self.policy = DomainPolicy.of(config.allow_domains, config.deny_domains)
        self.hidden = hidden_parts(config)
        self.extracting = asyncio.Semaphore(CONCURRENT)  # pages being made readable at once (readable.py)

    @property
    def label(self) -> str:
        return " → ".join(s.provider.label for s in self.slots)

    def describe(self) -> str:
        return self.label

    async def aclose(self) -> None:
        """Each provider's connections (at shutdown)."""
        for slot in self.slots:
            try:
                await slot.provider.aclose()
            except Exception:  # closing must never stop the shutdown
                log.debug("closing %s failed", slot.provider.label, exc_info=True)

    async def search(self, query: Query, *, live: bool = True) -> list[Result]:
        """The results of the first provider that answers (or of the cache); `ProviderError` when none does."""
        key = (query.text, query.count, query.snippet, query.location, query.domains, query.blocked)
        for slot in self.slots:
            cached = slot.cache.get(key)
            if cached is not None:
                metrics.web_search_requests.labels(slot.provider.kind, "cached").inc()
                return cached
        if not live:
            raise ProviderError("live web access is off for this request (external_web_access: false) and no "
                                "cached results exist for this query")
        failures: list[str] = []
        limited: list[Slot] = []
        for slot in self.slots:
            if not slot.limiter.take():
                metrics.web_search_requests.labels(slot.provider.kind, "rate_limited").inc()
                limited.append(slot)
                continue
            found = await self._ask(slot, query, key, failures)
            if found is not None:
                return found
        if limited and len(limited) == len(self.slots):
            slot = min(limited, key=lambda s: s.limiter.wait())
            delay = slot.limiter.wait()
            if delay <= MAX_WAIT:
                await asyncio.sleep(delay)
                if slot.limiter.take():
                    found = await self._ask(slot, query, key, failures)
                    if found is not None:
                        return found
            failures.append("every search provider is at its rate limit; try again shortly")
        raise ProviderError(self.hide("; ".join(failures)) or "no search provider answered")

    def hide(self, message: str) -> str:
        """A message for the model without the providers' URLs (an error text that echoes one, an MCP
        client's): each is named by its kind."""
        for part, kind in self.hidden:
            message = message.replace(part, kind)
        return message

    async def _ask(self, slot: Slot, query: Query, key: object, failures: list[str]) -> list[Result] | None:
        provider = slot.provider
        try:
            found = await provider.search(query)
        except ProviderError as exc:
            metrics.web_search_requests.labels(provider.kind, "error").inc()
            log.warning("web search: %s (%s)", exc, provider.label)
            failures.append(str(exc))
            return None
        metrics.web_search_requests.labels(provider.kind, "ok").inc()
        slot.cache.put(key, found)
        return found


def hidden_parts(config: WebSearchConfig) -> list[tuple[str, str]]:
    """(what of a provider's URL a message must not show, the kind it is replaced by), longest first: the URL
    as configured and as `safe_url` shows it, then its host and port."""
    parts: set[tuple[str, str]] = set()
    for p in config.providers:
        try:
            netloc = urlsplit(p.url).netloc.rpartition("@")[2]
        except ValueError:
            netloc = ""
        for part in (p.url.rstrip("/"), safe_url(p.url).rstrip("/"), netloc):
            if len(part) > 3:
                parts.add((part, p.kind))
    return sorted(parts, key=lambda x: -len(x[0]))


def serve(config: WebSearchConfig) -> WebSearch:
    return WebSearch(config)
