"""A deployment's web search: its providers (a fallback chain, tried in order), their keys and limits, the domain
policy and the fetcher's bounds — from the flags (`--web-search KIND=URL,...`) or from the routing file's
`[web_search]` table, which replaces the flag when present:

    [web_search]
    allow_domains = []                 # when set, results and pages come from these domains only
    deny_domains = ["example.net"]     # never from these
    [[web_search.providers]]
    kind = "searxng"                   # searxng | brave | tavily | exa | mcp
    url = "http://127.0.0.1:8888"      # optional for brave, tavily and exa (their public API)
    api_key_env = "BRAVE_API_KEY"      # the key is read from this variable, never from the file
    rate = 5                           # requests per second to this provider (0: unlimited)
    cache_ttl = 600                    # seconds a result is cached (0: no cache)
    timeout = 10                       # seconds per request

Every entry is checked at startup: an unknown kind or key, a value of the wrong type stops the gateway, naming it.
Keys come from their own flags or environment variables (`RG_BRAVE_API_KEY`, ...), never from the command line
in examples, and are never logged.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ...settings import load_table
from .settings import KINDS, WebSearchSettings, check_provider, parse_spec

if TYPE_CHECKING:
    from ...config import Settings

__all__ = ["KINDS", "ProviderConfig", "WebSearchConfig", "from_settings", "parse_spec"]

KEY_SETTINGS = {"brave": "brave_api_key", "tavily": "tavily_api_key", "exa": "exa_api_key",
                "mcp": "web_search_mcp_key"}
PROVIDER_KEYS = {"kind", "url", "api_key_env", "rate", "cache_ttl", "timeout"}
TABLE_KEYS = {"providers", "allow_domains", "deny_domains"}


@dataclass(frozen=True)
class ProviderConfig:
    kind: str
    url: str
    api_key: str | None = field(default=None, repr=False)
    rate: float = 5.0
    cache_ttl: float = 600.0
    timeout: float = 10.0


@dataclass(frozen=True)
class WebSearchConfig:
    providers: tuple[ProviderConfig, ...]
    allow_domains: tuple[str, ...] = ()
    deny_domains: tuple[str, ...] = ()
    fetch_timeout: float = 15.0
    fetch_max_bytes: int = 8 * 1024 * 1024
    fetch_allow_hosts: tuple[str, ...] = ()
    extract_timeout: float = 5.0  # seconds (CPU and wall clock) to make one page readable (readable.py)


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


def from_settings(settings: Settings, group: WebSearchSettings,
                  environ: Mapping[str, str] | None = None) -> WebSearchConfig | None:
    """The deployment's web search, or None when it has no provider (the tool is then unavailable)."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    table = None
    if settings.config:
        table = load_table(settings.config, "web_search")
    base = WebSearchConfig((), _split(group.web_search_allow_domains), _split(group.web_search_deny_domains),
                           group.web_fetch_timeout, group.web_fetch_max_bytes,
                           _split(group.web_fetch_allow_hosts), group.web_extract_timeout)
    if table is None and not group.web_search:
        return None
    if importlib.util.find_spec("selectolax") is None:
        raise ValueError("web search needs the web-search extra: pip install 'responses-gateway[web-search]'")
    if table is not None:
        return _from_table(table, group, env, f"{settings.config}: [web_search]", base)
    assert group.web_search is not None
    providers = tuple(ProviderConfig(kind, url, getattr(group, KEY_SETTINGS[kind], None) if kind in KEY_SETTINGS
                                     else None, group.web_search_rate, group.web_search_cache_ttl,
                                     group.web_search_timeout)
                      for kind, url in parse_spec(group.web_search))
    return replace(base, providers=providers)


def _from_table(table: Any, group: WebSearchSettings, env: Mapping[str, str], where: str,
                base: WebSearchConfig) -> WebSearchConfig:
    if not isinstance(table, dict):
        raise ValueError(f"{where} must be a table")
    unknown = set(table) - TABLE_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    domains = {}
    for name in ("allow_domains", "deny_domains"):
        value = table.get(name, [])
        if not isinstance(value, list) or not all(isinstance(d, str) for d in value):
            raise ValueError(f"{where}: {name} must be a list of domains")
        domains[name] = tuple(value) or getattr(base, name)
    entries = table.get("providers")
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{where}: [[web_search.providers]] lists no provider")
    providers = []
    for i, entry in enumerate(entries):
        here = f"{where} providers[{i}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{here} must be a table")
        unknown = set(entry) - PROVIDER_KEYS
        if unknown:
            raise ValueError(f"{here}: unknown keys {sorted(unknown)}")
        kind = entry.get("kind")
        if not isinstance(kind, str):
            raise ValueError(f"{here}: 'kind' is required ({', '.join(KINDS)})")
        given = entry.get("url", "")
        if not isinstance(given, str):
            raise ValueError(f"{here}: url must be a string")
        url = check_provider(kind, given, here)
        key: str | None = getattr(group, KEY_SETTINGS[kind], None) if kind in KEY_SETTINGS else None
        if "api_key_env" in entry:
            if not isinstance(entry["api_key_env"], str):
                raise ValueError(f"{here}: api_key_env must be the name of an environment variable")
            key = env.get(entry["api_key_env"]) or None
            if key is None:
                raise ValueError(f"{here}: environment variable {entry['api_key_env']} is not set")
        numbers = {"rate": group.web_search_rate, "cache_ttl": group.web_search_cache_ttl,
                   "timeout": group.web_search_timeout}
        for name in numbers:
            if name in entry:
                value = entry[name]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 \
                        or (name == "timeout" and value <= 0):
                    raise ValueError(f"{here}: {name} must be a {'positive' if name == 'timeout' else 'non-negative'}"
                                     f" number; got {value!r}")
                numbers[name] = float(value)
        providers.append(ProviderConfig(kind, url, key, numbers["rate"], numbers["cache_ttl"], numbers["timeout"]))
    return replace(base, providers=tuple(providers), allow_domains=domains["allow_domains"],
                   deny_domains=domains["deny_domains"])
