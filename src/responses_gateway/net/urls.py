"""Refusing URLs the gateway must not connect to (SSRF) — MCP servers, web pages — and URLs made safe to show."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit


def safe_url(url: str) -> str:
    """The URL without userinfo, query or fragment: safe to put in messages and logs."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port is not None else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "<invalid url>"


def _allow_entries(allow_hosts: Iterable[str]) -> tuple[set[str], list[ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    names: set[str] = set()
    networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for entry in allow_hosts:
        entry = entry.strip().lower()
        if not entry:
            continue
        if "/" in entry:
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
        names.add(entry)
        if entry.startswith("[") and "]" in entry:  # "[::1]" or "[::1]:8080"
            names.add(entry[1:].replace("]", "", 1))
    return names, networks


# IANA's IPv4 and IPv6 special-purpose address registries (plus multicast and the old site-local range),
# written out rather than taken from `ipaddress`'s flags, whose tables differ between Python versions
# (3.11 lets 192.0.0.8 through, for one). Addresses that embed an IPv4 address are unwrapped and checked
# as that address first (see `_embedded`).
_DENY = [(ipaddress.ip_network(net), what) for net, what in (
    ("0.0.0.0/8", "unspecified"), ("10.0.0.0/8", "private"), ("100.64.0.0/10", "shared (carrier-grade NAT)"),
    ("127.0.0.0/8", "loopback"), ("169.254.0.0/16", "link-local"), ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "IETF protocol assignment"), ("192.0.2.0/24", "documentation"),
    ("192.31.196.0/24", "AS112"), ("192.52.193.0/24", "AMT"), ("192.88.99.0/24", "6to4 relay anycast"),
    ("192.168.0.0/16", "private"), ("192.175.48.0/24", "AS112"), ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"), ("203.0.113.0/24", "documentation"), ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"), ("255.255.255.255/32", "broadcast"),
    ("::/128", "unspecified"), ("::1/128", "loopback"), ("::/96", "IPv4-compatible"),
    ("::ffff:0:0/96", "IPv4-mapped"), ("64:ff9b::/96", "NAT64"), ("64:ff9b:1::/48", "NAT64 (local)"),
    ("100::/64", "discard-only"), ("2001::/23", "IETF protocol assignment"), ("2001:db8::/32", "documentation"),
    ("2002::/16", "6to4"), ("3fff::/20", "documentation"), ("5f00::/16", "segment routing"),
    ("fc00::/7", "unique local"), ("fe80::/10", "link-local"), ("fec0::/10", "site-local"), ("ff00::/8", "multicast"),
)]
# 2001::/23 holds a few globally reachable assignments (IANA marks them so); Teredo (2001::/32) is
# refused through its embedded client address, or as Teredo when that is public.
_ALLOW_IN_DENIED = [ipaddress.ip_network(net) for net in (
    "2001:1::1/128", "2001:1::2/128", "2001:3::/32", "2001:4:112::/48", "2001:20::/28", "2001:30::/28",
)]


def _embedded(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address inside an IPv4-mapped/compatible, NAT64, 6to4 or Teredo address."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]  # (server, client): the client is where traffic ends up
    packed = ip.packed
    if packed[:12] in (bytes(12), _NAT64) and int(ip) > 1:  # IPv4-compatible ::a.b.c.d (not :: or ::1), NAT64
        return ipaddress.IPv4Address(packed[12:])
    return None


_NAT64 = ipaddress.IPv6Address("64:ff9b::").packed[:12]


def _refusal(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why `ip` must not be connected to, or None when it is a public unicast address."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded(ip)
        if inner is not None:
            why = _refusal(inner)
            if why is not None:
                return f"{why} (embedded {inner})"
    if any(ip in net for net in _ALLOW_IN_DENIED if net.version == ip.version):
        return None
    for net, what in _DENY:
        if net.version == ip.version and ip in net:
            return what
    return None


async def check_url(url: str, allow_hosts: Iterable[str] = (), *, resolve_timeout: float = 5.0,
                    what: str = "server_url", allow_flag: str = "--mcp-allow-hosts") -> str | None:
    """Refuse a URL the gateway must not connect to (an MCP `server_url`, a web page); raises `ValueError` with
    the reason, naming the URL as `what` and the flag that admits a host as `allow_flag`.

    The scheme must be http or https. Unless the host (as written, or "host:port", or a resolved IP, or a
    CIDR entry such as "10.0.0.0/8" containing it) is in `allow_hosts`, every address the host resolves to
    must be public: every special-purpose range of IANA's registries is refused (loopback, private, shared,
    link-local, documentation, NAT64, 6to4, Teredo, ...), and so are addresses embedding a refused IPv4.
    Resolution uses the event loop's resolver (non-blocking).

    Returns the address to connect to for a hostname that was resolved and checked (None for an IP literal
    or a host allowed by name): the session connects to exactly that address (`PinnedBackend`), so a
    resolver answering differently on a second lookup (DNS rebinding) cannot redirect the connection.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{what} is not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"{what} must be http or https, not {scheme + ':' if scheme else 'a relative URL'}")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise ValueError(f"{what} has no host")
    port = port if port is not None else (443 if scheme == "https" else 80)
    names, networks = _allow_entries(allow_hosts)
    if host in names or f"{host}:{port}" in names or f"[{host}]:{port}" in names:
        return None

    literal: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    try:
        literal = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(resolve_timeout):
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except TimeoutError:
            raise ValueError(f"cannot resolve host {host!r}: timed out after {resolve_timeout:g}s") from None
        except (socket.gaierror, UnicodeError, OSError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise ValueError(f"cannot resolve host {host!r}: {reason}") from None
        addresses = []
        for info in infos:
            try:
                addresses.append(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))
            except ValueError:
                continue
        if not addresses:
            raise ValueError(f"cannot resolve host {host!r}: no usable address")

    for ip in addresses:
        if str(ip) in names or any(ip in net for net in networks if net.version == ip.version):
            continue
        kind = _refusal(ip)
        if kind is not None:
            shown = host if literal is not None else f"{host} ({ip})"
            raise ValueError(
                f"{what} host {shown} is a {kind} address; refused (the operator can allow it with {allow_flag})"
            )
    return None if literal is not None else str(addresses[0])
