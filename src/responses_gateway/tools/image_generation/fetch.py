"""An image behind a URL, fetched behind the SSRF guard: an images server's URL answer (LocalAI and Xinference
answer `data: [{url}]` whatever was asked), or an `input_image` / `input_image_mask` given by URL.

The URL is checked before any connection (`net.urls.check_url`: http or https, no credentials, a host whose every
address is public unless the operator admitted it — the images server's own host always is, it is the operator's),
and the connection goes to exactly the address that was checked (`net.pinning`). No redirect is followed (an
image URL that redirects is refused: the next hop would need its own check, and no server this tool meets
redirects), no cookies, no proxy from the environment. Bounded: the caller's deadline for the whole fetch, and
at most `max_bytes` of body — a larger image is refused as soon as it passes the limit, never read whole.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx2

from ...net.urls import check_url, safe_url

ALLOW_FLAG = "--image-generation-allow-hosts"
USER_AGENT = "responses-gateway (image_generation)"


class FetchError(Exception):
    """The image could not be fetched; `str(exc)` is safe for the model and the logs (no query string)."""


async def fetch_image(url: str, *, allow_hosts: tuple[str, ...], max_bytes: int, what: str = "the image URL") -> bytes:
    """The body of `url`, at most `max_bytes` long. The caller bounds the time."""
    shown = safe_url(url)
    try:
        parts = urlsplit(url)
    except ValueError:
        raise FetchError(f"{what} is not a valid URL") from None
    if parts.username is not None or parts.password is not None:
        raise FetchError(f"{what} {shown} carries credentials; refused")
    try:
        address = await check_url(url, allow_hosts, what=what, allow_flag=ALLOW_FLAG)
    except ValueError as exc:
        raise FetchError(str(exc)) from None
    from ...net.pinning import pinned_transport  # (it imports the MCP SDK: only when an image URL is fetched)

    client = httpx2.AsyncClient(transport=pinned_transport(parts.hostname, address), follow_redirects=False,
                                trust_env=False, timeout=None, headers={"user-agent": USER_AGENT, "accept": "image/*"})
    try:
        async with client.stream("GET", url) as resp:
            if resp.status_code >= 300:
                raise FetchError(f"{what} {shown} answered HTTP {resp.status_code}")
            declared = resp.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise FetchError(f"{what} {shown} is {int(declared)} bytes, more than the {max_bytes} allowed")
            chunks: list[bytes] = []
            size = 0
            async for chunk in resp.aiter_raw():
                size += len(chunk)
                if size > max_bytes:
                    raise FetchError(f"{what} {shown} is more than the {max_bytes} bytes allowed")
                chunks.append(chunk)
            return b"".join(chunks)
    except httpx2.HTTPError as exc:
        raise FetchError(f"{what} {shown} could not be fetched ({type(exc).__name__})") from None
    finally:
        await client.aclose()
