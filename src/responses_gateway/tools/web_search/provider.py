"""What every search provider shares: the query it is asked, the results it gives, its errors, and the HTTP
exchange with a provider's JSON API.

A provider is configured by the operator (its URL and key), so its URL is not checked against the SSRF guard:
a self-hosted SearXNG on 127.0.0.1 is the recommended setup. Its key goes in a header and nowhere else — never
in a message, a log line or the stored response. Its URL is the deployment's business too: errors (which the
model reads, and which are stored in the item) name the provider by its kind and give the HTTP status, with the
provider's own error text; the logs add the provider's `label` (its kind and host).
"""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiohttp
import orjson

from ...net.urls import safe_url
from .options import Location

MAX_RESPONSE_BYTES = 4 * 1024 * 1024  # a provider's answer; results pages are far smaller
USER_AGENT = "responses-gateway (web_search)"
_TAGS = re.compile(r"<[^>]{0,200}>")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Query:
    """One search as a provider is asked it."""

    text: str
    count: int  # results wanted
    snippet: int  # characters per snippet
    location: Location = Location()
    domains: tuple[str, ...] = ()  # search within these (and their subdomains) only; () = anywhere
    blocked: tuple[str, ...] = ()  # never from these

    def site_query(self) -> str:
        """The query with a `site:` operator when it must stay within one domain (engines that take no domain
        filter of their own; the results are filtered again afterwards in any case)."""
        return f"{self.text} site:{self.domains[0]}" if len(self.domains) == 1 else self.text


@dataclass(frozen=True)
class Result:
    url: str
    title: str
    snippet: str

    def public(self) -> dict[str, str]:
        return {"url": self.url, "title": self.title, "snippet": self.snippet}


class ProviderError(Exception):
    """A provider failed; `str(exc)` is safe to show the model and the logs (no key, no query string)."""


class Provider(Protocol):
    kind: str  # "searxng", "brave", ... (metrics, logs, and the errors the model reads)
    label: str  # the kind and host: for the logs and the start-up summary only

    async def search(self, query: Query) -> list[Result]: ...

    async def aclose(self) -> None: ...


def clean(value: Any, limit: int) -> str:
    """A snippet or title as plain text: tags dropped (Brave marks matches with <strong>), entities decoded,
    whitespace collapsed, cut at `limit` characters."""
    if not isinstance(value, str) or not value:
        return ""
    text: str = value
    if "<" in text:
        text = _TAGS.sub("", text)
    if "&" in text:
        text = html.unescape(text)
    text = _SPACE.sub(" ", text).strip()
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def result(url: Any, title: Any, snippet: Any, limit: int) -> Result | None:
    """A result from a provider's fields, or None when it has no usable http(s) URL."""
    if not isinstance(url, str):
        return None
    try:
        if urlsplit(url).scheme not in ("http", "https"):
            return None
    except ValueError:
        return None
    return Result(url, clean(title, 300) or url, clean(snippet, limit))


def read_results(found: Any, snippet: Callable[[dict[str, Any]], Any], limit: int) -> list[Result]:
    """A provider's list of result objects (url, title, and `snippet(item)`) → Results; anything else → []."""
    if not isinstance(found, list):
        return []
    return [r for r in (result(x.get("url"), x.get("title"), snippet(x), limit) for x in found if isinstance(x, dict))
            if r is not None]


def endpoint(base: str, path: str) -> str:
    """The provider's endpoint: its base URL with the API path appended, unless the URL already ends with it."""
    base = base.rstrip("/")
    return base if base.endswith(path) else base + path


class HTTPProvider:
    """A provider behind a JSON HTTP API, over one pooled aiohttp session (made on first use, in the loop)."""

    kind = "http"

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 10.0):
        self.url = url
        self.api_key = api_key
        self.timeout = timeout
        self.label = f"{self.kind} at {safe_url(url)}"
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                headers={"user-agent": USER_AGENT, "accept": "application/json"},
                trust_env=False,
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def exchange(self, method: str, url: str, *, params: dict[str, str] | None = None,
                       body: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> Any:
        """One request; the answer's JSON, or `ProviderError` saying what went wrong (never the key)."""
        data = orjson.dumps(body) if body is not None else None
        all_headers = {**(headers or {}), **({"content-type": "application/json"} if data is not None else {})}
        try:
            async with self.session.request(method, url, params=params, data=data, headers=all_headers,
                                            allow_redirects=False) as resp:
                raw = await _read(resp)
                status = resp.status
        except TimeoutError:
            raise ProviderError(f"{self.kind} did not answer within {self.timeout:g} s") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise ProviderError(f"{self.kind} could not be reached ({type(exc).__name__})") from None
        if status >= 400:
            raise ProviderError(f"{self.kind} answered HTTP {status}{self.explain(status, raw)}")
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ProviderError(f"{self.kind} answered with a body that is not JSON") from None

    def explain(self, status: int, raw: bytes) -> str:
        """The provider's own error message from an error body, as ': message' ('' when there is none)."""
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            data = None
        message = self.error_text(data) if data is not None else None
        return f": {clean(message, 300)}" if message else ""

    def error_text(self, data: Any) -> str | None:
        return None


async def _read(resp: aiohttp.ClientResponse) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise ProviderError(f"the provider's answer is larger than {MAX_RESPONSE_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def gather_bounded(coros: list[Any], limit: int) -> list[Any]:
    """Run coroutines at most `limit` at a time; results (or exceptions) in order."""
    gate = asyncio.Semaphore(limit)

    async def one(coro: Any) -> Any:
        async with gate:
            return await coro

    return await asyncio.gather(*(one(c) for c in coros), return_exceptions=True)
