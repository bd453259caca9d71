"""Which hosts web search results and opened pages may come from.

Two layers, both "a domain and its subdomains": the deployment's allow and deny lists (`--web-search-allow-domains`,
`--web-search-deny-domains`), which no request can widen, and the request's `filters.allowed_domains` /
`blocked_domains`. A host passes when it is in every allow list given and in no deny list.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_DOMAINS = 100  # per list in a request, as OpenAI caps allowed_domains


def normalize_domain(entry: str) -> str:
    """"https://Docs.Example.com/path" → "docs.example.com"; "*.example.com" → "example.com"; "" when it has
    no host."""
    text = entry.strip().lower()
    if "://" in text:
        text = text.split("://", 1)[1]
    text = text.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    text = text.rsplit("@", 1)[-1]
    if text.startswith("[") and "]" in text:  # an IPv6 literal, with or without a port
        return text[1:text.index("]")]
    text = text.split(":", 1)[0]
    return text.removeprefix("*.").strip(".")


def host_of(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").rstrip(".").lower()
    except ValueError:
        return ""


def in_domains(host: str, domains: Iterable[str]) -> bool:
    """`host` is one of `domains` or a subdomain of one."""
    return any(host == d or host.endswith("." + d) for d in domains)


@dataclass(frozen=True)
class DomainPolicy:
    """`allow`: tuples of domains, each list one must match (empty: no list); `deny`: domains never allowed."""

    allow: tuple[tuple[str, ...], ...] = ()
    deny: tuple[str, ...] = ()

    @classmethod
    def of(cls, allow: Iterable[str] = (), deny: Iterable[str] = ()) -> DomainPolicy:
        allowed = tuple(d for d in (normalize_domain(e) for e in allow) if d)
        return cls((allowed,) if allowed else (), tuple(d for d in (normalize_domain(e) for e in deny) if d))

    def narrowed(self, allow: Iterable[str] = (), deny: Iterable[str] = ()) -> DomainPolicy:
        """This policy with a request's own lists added (it can only narrow what the deployment allows)."""
        more = DomainPolicy.of(allow, deny)
        return DomainPolicy(self.allow + more.allow, self.deny + more.deny)

    @property
    def open(self) -> bool:
        return not self.allow and not self.deny

    def allows(self, url: str) -> bool:
        host = host_of(url)
        if not host:
            return False
        if self.deny and in_domains(host, self.deny):
            return False
        return all(in_domains(host, domains) for domains in self.allow)

    def why_not(self, url: str) -> str:
        host = host_of(url) or url
        if self.deny and in_domains(host, self.deny):
            return f"{host} is a blocked domain for web search here"
        return f"{host} is outside the domains web search may use here"

    def only(self) -> tuple[str, ...]:
        """The domains a provider may be asked to search within (the narrowest allow list), or ()."""
        return min(self.allow, key=len) if self.allow else ()
