"""web_search's settings (docs/web-search.md), declared once (settings.py). The routing file's `[web_search]`
table (config.py of this package) replaces the providers and domain lists when present."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...settings import setting

KINDS = ("searxng", "brave", "tavily", "exa", "mcp")
PUBLIC_URLS = {"brave": "https://api.search.brave.com", "tavily": "https://api.tavily.com",
               "exa": "https://api.exa.ai"}


@dataclass(frozen=True)
class WebSearchSettings:
    """Web search (docs/web-search.md)"""

    OWN_TABLE: ClassVar[bool] = True  # `[web_search]` in --config has providers of its own shape (config.py)

    web_search: str | None = setting(
        None, metavar="KIND=URL,...",
        help="search providers for the web_search tool, a fallback chain: searxng=URL, brave, tavily, exa (their "
             "public API unless =URL), mcp=URL[#tool]",
        doc="search providers for the `web_search` tool, a fallback chain: `searxng=URL`, `brave`, `tavily`, "
            "`exa` (their public API unless `=URL`), `mcp=URL[#tool]`; needs "
            "`pip install 'responses-gateway[web-search]'` ([docs/web-search.md](docs/web-search.md)); or a "
            "`[web_search]` table in `--config`")
    brave_api_key: str | None = setting(None, metavar="KEY", secret=True,
                                        help="Brave's API key (set it in the environment; never logged or stored)")
    tavily_api_key: str | None = setting(None, metavar="KEY", secret=True,
                                         help="Tavily's API key (set it in the environment; never logged or stored)")
    exa_api_key: str | None = setting(None, metavar="KEY", secret=True,
                                      help="Exa's API key (set it in the environment; never logged or stored)")
    web_search_mcp_key: str | None = setting(None, metavar="KEY", secret=True,
                                             help="bearer token for the mcp search provider")
    web_search_allow_domains: str | None = setting(
        None, metavar="D1,D2",
        help="results and pages from these domains (and subdomains) only; a request's filters can only narrow this")
    web_search_deny_domains: str | None = setting(None, metavar="D1,D2",
                                                  help="never results or pages from these domains")
    web_search_rate: float = setting(5.0, check="non_negative",
                                     help="requests per second to each provider (0: unlimited)")
    web_search_cache_ttl: float = setting(600.0, check="non_negative",
                                          help="seconds a provider's results are cached (0: off)")
    web_search_timeout: float = setting(10.0, check="positive", help="seconds per provider request")
    web_fetch_timeout: float = setting(15.0, check="positive",
                                       help="seconds to fetch a page the model opens, redirects included")
    web_fetch_max_bytes: int = setting(8 * 1024 * 1024, check="positive", shown="8 MiB",
                                       help="bytes of a page read (a larger page is cut)")
    web_extract_timeout: float = setting(
        5.0, check="positive",
        help="seconds of CPU (and of wall clock) to make one fetched page readable; a page that needs more (a "
             "hostile nesting) fails alone, its reader killed")
    web_fetch_allow_hosts: str | None = setting(
        None, metavar="H1,H2",
        help="page hosts admitted although loopback/private (host, host:port, IP or CIDR), as --mcp-allow-hosts")

    def validate(self) -> None:
        if self.web_search:
            parse_spec(self.web_search)  # a wrong provider stops the gateway at startup, naming it


def parse_spec(spec: str) -> list[tuple[str, str]]:
    """"searxng=http://127.0.0.1:8888,brave" → [(kind, url)]; a provider with a public API may omit its URL."""
    out = []
    for entry in (e.strip() for e in spec.split(",")):
        if not entry:
            continue
        kind, _, url = entry.partition("=")
        kind, url = kind.strip().lower(), url.strip()
        out.append((kind, check_provider(kind, url, f"--web-search entry {entry!r}")))
    if not out:
        raise ValueError("--web-search names no provider")
    return out


def check_provider(kind: str, url: str, where: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"{where}: unknown provider kind {kind!r} (one of {', '.join(KINDS)})")
    url = url or PUBLIC_URLS.get(kind, "")
    if not url:
        raise ValueError(f"{where}: {kind} needs a URL, e.g. {kind}=http://127.0.0.1:8888")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{where}: the URL must be http(s); got {url!r}")
    return url
