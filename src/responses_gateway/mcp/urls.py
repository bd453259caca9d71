"""Refusing MCP server URLs the gateway must not connect to (SSRF), and URLs made safe to show."""

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


def _refusal(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return _refusal(ip.ipv4_mapped)
    for attr, what in (
        ("is_unspecified", "unspecified"),
        ("is_loopback", "loopback"),
        ("is_link_local", "link-local"),
        ("is_multicast", "multicast"),
        ("is_reserved", "reserved"),
        ("is_private", "private"),
    ):
        if getattr(ip, attr):
            return what
    if not ip.is_global:
        return "non-public"
    return None


async def check_url(url: str, allow_hosts: Iterable[str] = (), *, resolve_timeout: float = 5.0) -> None:
    """Refuse an MCP `server_url` the gateway must not connect to; raises `ValueError` with the reason.

    The scheme must be http or https. Unless the host (as written, or "host:port", or a resolved IP, or a
    CIDR entry such as "10.0.0.0/8" containing it) is in `allow_hosts`, every address the host resolves to
    must be public: loopback, private, link-local, multicast, reserved and unspecified addresses are refused.
    Resolution uses the event loop's resolver (non-blocking). Note: a hostname is resolved again when the
    SDK connects, so this does not defeat DNS rebinding by a hostile resolver.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"server_url is not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"server_url must be http or https, not {scheme + ':' if scheme else 'a relative URL'}")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise ValueError("server_url has no host")
    port = port if port is not None else (443 if scheme == "https" else 80)
    names, networks = _allow_entries(allow_hosts)
    if host in names or f"{host}:{port}" in names or f"[{host}]:{port}" in names:
        return

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
        what = _refusal(ip)
        if what is not None:
            shown = host if literal is not None else f"{host} ({ip})"
            raise ValueError(
                f"server_url host {shown} is a {what} address; refused (the operator can allow it with "
                f"--mcp-allow-hosts)"
            )
