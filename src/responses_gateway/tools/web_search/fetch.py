"""Fetching a page the model asked for, behind the SSRF guard.

The URL comes from the model — which read it in a search result or in a page, so from anyone on the web. Each hop
(the URL, then every redirect) is checked before any connection: http(s) only, no credentials in the URL, inside
the response's domain policy, and a host whose every address is public (`net.urls.check_url`, unless the operator
admitted it with `--web-fetch-allow-hosts`); the connection then goes to exactly the address that was checked
(`net.pinning`), so a second DNS answer cannot redirect it. No cookies, no proxy from the environment, no
credentials. Bounded: one deadline for the whole fetch (redirects included), at most `MAX_REDIRECTS` hops, a
content-type allow-list, and at most `max_bytes` of the (decompressed) body — a larger page is cut there and read
as far as it came.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx2

from ... import metrics
from ...net.pinning import pinned_transport
from ...net.urls import check_url, safe_url
from .domains import DomainPolicy

MAX_REDIRECTS = 5
ALLOW_FLAG = "--web-fetch-allow-hosts"
USER_AGENT = "Mozilla/5.0 (compatible; responses-gateway web_search)"
ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.1"
# Content types read as text; anything else (PDFs, images, archives...) is refused before its body is read.
TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain", "text/markdown", "text/csv", "text/xml",
              "application/xml", "application/json", "application/ld+json", "application/rss+xml",
              "application/atom+xml")


class FetchError(Exception):
    """The page could not be fetched; `str(exc)` says why, safely (for the model and the logs)."""

    def __init__(self, message: str, outcome: str = "error"):
        super().__init__(message)
        self.outcome = outcome


@dataclass(frozen=True)
class Fetched:
    url: str  # where the body came from, after redirects
    content_type: str  # "text/html", ... ("" when the server said nothing)
    charset: str | None
    body: bytes
    truncated: bool  # the body was longer than max_bytes and was cut there


async def fetch(url: str, *, policy: DomainPolicy, allow_hosts: tuple[str, ...] = (), timeout: float = 15.0,
                max_bytes: int = 8 * 1024 * 1024) -> Fetched:
    try:
        async with asyncio.timeout(timeout):
            fetched = await _follow(url, policy, allow_hosts, max_bytes)
    except TimeoutError:
        metrics.web_fetches.labels("error").inc()
        raise FetchError(f"{safe_url(url)} did not answer within {timeout:g} s") from None
    except FetchError as exc:
        metrics.web_fetches.labels(exc.outcome).inc()
        raise
    metrics.web_fetches.labels("too_large" if fetched.truncated else "ok").inc()
    return fetched


async def _follow(url: str, policy: DomainPolicy, allow_hosts: tuple[str, ...], max_bytes: int) -> Fetched:
    for _ in range(MAX_REDIRECTS + 1):
        address = await _admit(url, policy, allow_hosts)
        host = urlsplit(url).hostname
        client = httpx2.AsyncClient(transport=pinned_transport(host, address), follow_redirects=False,
                                    trust_env=False, timeout=None,
                                    headers={"user-agent": USER_AGENT, "accept": ACCEPT,
                                             "accept-encoding": "gzip, deflate"})
        try:
            async with client.stream("GET", url) as resp:
                if resp.status_code in (301, 302, 303, 307, 308) and resp.headers.get("location"):
                    url = urljoin(url, resp.headers["location"])
                    continue
                if resp.status_code >= 400:
                    raise FetchError(f"{safe_url(url)} answered HTTP {resp.status_code}")
                content_type, _, params = (resp.headers.get("content-type") or "").partition(";")
                content_type = content_type.strip().lower()
                if content_type and content_type not in TEXT_TYPES:
                    raise FetchError(f"{safe_url(url)} is {content_type}, which is not read here (text and HTML "
                                     "pages only)", "refused")
                body, truncated = await _body(resp, max_bytes)
                return Fetched(str(resp.url), content_type, _charset(params), body, truncated)
        except httpx2.HTTPError as exc:
            raise FetchError(f"{safe_url(url)} could not be fetched ({type(exc).__name__})") from None
        finally:
            await client.aclose()
    raise FetchError(f"more than {MAX_REDIRECTS} redirects from {safe_url(url)}")


async def _admit(url: str, policy: DomainPolicy, allow_hosts: tuple[str, ...]) -> str | None:
    """Check a hop before connecting; the address to connect to (None: connect by name, or a literal IP)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        raise FetchError("the URL is not valid", "refused") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise FetchError(f"only http and https URLs are opened, not {parts.scheme or 'a relative URL'}", "refused")
    if parts.username is not None or parts.password is not None:
        raise FetchError("URLs with credentials are not opened", "refused")
    if not policy.allows(url):
        raise FetchError(f"{safe_url(url)} was not opened: {policy.why_not(url)}", "refused")
    try:
        return await check_url(url, allow_hosts, what="the URL", allow_flag=ALLOW_FLAG)
    except ValueError as exc:
        raise FetchError(f"{safe_url(url)} was not opened: {exc}", "refused") from None


async def _body(resp: httpx2.Response, max_bytes: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.aiter_bytes():
        if size + len(chunk) > max_bytes:  # cut here; the rest is never read
            chunks.append(chunk[:max_bytes - size])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


def _charset(params: str) -> str | None:
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            return value.strip().strip('"').lower()
    return None
