"""The images server's client: OpenAI's Images API, as the openai SDK speaks it.

`POST {base}/images/generations` with a JSON body, or `POST {base}/images/edits` with a multipart one (the images
to edit and the mask as files, the rest as text fields). With partial images wanted, `stream: true` and
`partial_images` are asked: a server that streams answers in OpenAI's SSE shape (`image_generation.partial_image`
… `image_generation.completed`, `image_edit.*` for an edit), whose partials are handed on as they come; one that
does not stream answers JSON, and there are no partials. Base64 is always asked for (`response_format:
"b64_json"`); a server that answers with a URL anyway (LocalAI, Xinference) has it fetched behind the SSRF guard
(fetch.py), within the same size limit.

Servers differ in the optional fields they take. One that refuses a field as an unknown parameter (OpenAI's GPT
image models refuse `response_format`; a server without streaming may refuse `stream`) is asked again without
it, and this process remembers not to send that field to that endpoint again: a field the server cannot honour
is ignored, never a failed call. Any other refusal — a size or format the server does not make, a bad key — is
an `ImagesError` carrying the server's own message, which the model reads.

Bounded: an answer larger than the limit (the image's bytes as base64, and room for the JSON around it) is cut
off and refused while it arrives, never read whole; the caller bounds the time. The HTTP/1.1 client is the
gateway's own (net/http1.py): keep-alive connections to the images server are pooled.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from ... import causes
from ...net import http1
from ...net.urls import safe_url
from ...pictures import Picture, decoded_length
from ...sse import SSEDecoder
from . import b64, multipart
from .fetch import FetchError, fetch_image

log = logging.getLogger("responses_gateway.image_generation")

JSON_SLACK = 64 * 1024  # room for the JSON around an image's base64
ERROR_BYTES = 64 * 1024  # an error answer read at most
ALWAYS = ("prompt", "model", "n")  # never dropped: without them the request would not be what was meant
META = ("size", "quality", "output_format", "background")


class ImagesError(Exception):
    """The images server refused or failed; the message is the server's own reason when it gave one (safe to
    show the model: it never holds the key), with OpenAI's error fields."""

    def __init__(self, message: str, *, code: str | None = None, param: str | None = None,
                 kind: str = "image_generation_error"):
        super().__init__(message)
        self.message, self.code, self.param, self.kind = message, code, param, kind

    def error(self) -> dict[str, Any]:
        """As an `image_generation_call`'s `error`: {type, code, message, param}."""
        return {"type": self.kind, "code": self.code, "message": self.message, "param": self.param}


@dataclass(frozen=True)
class Ask:
    """One image to make: a generation, or an edit of `images` (with `mask`). `fields`: the Images API's
    optional fields as the tool sets them (size, quality, ...); `partials`: partial images wanted (0-3)."""

    prompt: str
    fields: dict[str, Any] = field(default_factory=dict)
    partials: int = 0
    images: tuple[Picture, ...] = ()
    mask: Picture | None = None

    @property
    def path(self) -> str:
        return "/images/edits" if self.images else "/images/generations"


@dataclass(frozen=True)
class Partial:
    index: int
    b64: str
    meta: dict[str, str] = field(default_factory=dict)  # size, quality, output_format, background it reported


@dataclass(frozen=True)
class Made:
    """The final image as the server gave it (base64), and what it says of it."""

    b64: str
    revised_prompt: str | None = None
    meta: dict[str, str] = field(default_factory=dict)  # size, quality, output_format, background it reported


class ImagesClient:
    def __init__(self, base_url: str, api_key: str | None, *, max_bytes: int, allow_hosts: tuple[str, ...] = (),
                 connect_timeout: float = 30.0):
        self.base_url = base_url.rstrip("/")
        self.max_bytes = max_bytes
        host = _host_port(self.base_url)
        self.allow_hosts = (*allow_hosts, host) if host else allow_hosts  # the operator's own server
        self.http = http1.Client(connect_timeout=connect_timeout)
        self.headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if api_key:
            self.headers["authorization"] = f"Bearer {api_key}"
        self.refused: set[tuple[str, str]] = set()  # (path, field) the server answered "unknown parameter" to
        self.label = safe_url(self.base_url)

    def close(self) -> None:
        self.http.close()

    @property
    def answer_cap(self) -> int:
        """Bytes of one answer (or one SSE event): the image as base64 and the JSON around it."""
        return self.max_bytes * 4 // 3 + JSON_SLACK

    def body_fields(self, ask: Ask) -> dict[str, Any]:
        """What is sent besides the files, less what this server refused before."""
        wanted: dict[str, Any] = {"prompt": ask.prompt, **ask.fields, "response_format": "b64_json"}
        if ask.partials:
            wanted |= {"stream": True, "partial_images": ask.partials}
        return {k: v for k, v in wanted.items() if (ask.path, k) not in self.refused}

    async def run(self, ask: Ask) -> AsyncGenerator[Partial | Made, None]:
        """The partial images as they come, then the final one. Raises `ImagesError`."""
        url = self.base_url + ask.path
        while True:
            fields = self.body_fields(ask)
            if ask.images:
                body, content_type = multipart.encode(fields, ask.images, ask.mask)
                headers = {**self.headers, "content-type": content_type}
            else:
                body, headers = orjson.dumps(fields), self.headers
            resp = await self._post(url, headers, body)
            try:
                if resp.status >= 400:
                    error = _error(resp.status, await _read(resp, ERROR_BYTES, cut=True))
                    dropped = error.param if error.code == "unknown_parameter" or "unknown parameter" in \
                        error.message.lower() else None
                    if dropped in fields and dropped not in ALWAYS:
                        log.info("image_generation: %s%s takes no %r; asking without it from now on", self.label,
                                 ask.path, dropped)
                        self.refused.add((ask.path, dropped))
                        if dropped in ("stream", "partial_images"):
                            self.refused |= {(ask.path, "stream"), (ask.path, "partial_images")}
                        continue
                    if resp.status == 404:  # a base URL without /v1, or a server that cannot edit
                        error.message = f"The images server has no {ask.path} (HTTP 404: {error.message})"
                    raise error
                if resp.content_type == "text/event-stream":
                    async for got in self._events(resp):
                        yield got
                    return
                yield await self._made(orjson_object(await _read(resp, self.answer_cap), "answer"))
                return
            finally:
                resp.release()

    async def _post(self, url: str, headers: dict[str, str], body: bytes) -> http1.Response:
        try:
            return await self.http.post(url, headers, body)
        except (OSError, http1.ClientError) as exc:
            log.warning("image_generation: the images server %s is unreachable: %s", self.label, causes.cause(exc))
            raise ImagesError(f"The images server could not be reached ({causes.kind(exc)}).",
                              code="images_server_unreachable") from None

    async def _events(self, resp: http1.Response) -> AsyncIterator[Partial | Made]:
        decoder = SSEDecoder()
        unframed = 0  # bytes since the last read that completed a frame: what the decoder may be holding
        while True:
            chunk = await _take(resp)
            frames = decoder.feed(chunk) if chunk else decoder.flush()
            unframed = len(chunk) if frames else unframed + len(chunk)
            if unframed > self.answer_cap:
                raise ImagesError(f"An event of the images server's stream is larger than "
                                  f"--image-generation-max-bytes ({self.max_bytes} bytes) allows.",
                                  code="image_too_large")
            for _, data in frames:
                event = orjson_object(data, "event")
                kind = str(event.get("type") or "")
                if kind.endswith(".partial_image"):
                    text = event.get("b64_json")
                    if isinstance(text, str):
                        yield Partial(int(event.get("partial_image_index") or 0), text, _meta(event))
                elif kind.endswith(".completed"):
                    yield await self._made({"data": [event], **{k: event.get(k) for k in META}})
                    return
                elif kind == "error" or "error" in event:
                    raise _error(500, data)
            if not chunk:
                raise ImagesError("The images server's stream ended without the image.", code="images_server_error")

    async def _made(self, answer: dict[str, Any]) -> Made:
        data = answer.get("data")
        first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else None
        if first is None:
            raise ImagesError("The images server answered without an image.", code="images_server_error")
        meta = _meta(answer)
        revised = first.get("revised_prompt") if isinstance(first.get("revised_prompt"), str) else None
        text = first.get("b64_json")
        if isinstance(text, str) and text:
            if decoded_length(text) > self.max_bytes:
                raise too_large(self.max_bytes)
            return Made(text, revised, meta)
        url = first.get("url")
        if not isinstance(url, str) or not url:
            raise ImagesError("The images server answered without an image.", code="images_server_error")
        if url.startswith("data:"):
            text = url.partition(",")[2]
            if decoded_length(text) > self.max_bytes:
                raise too_large(self.max_bytes)
            return Made(text, revised, meta)
        try:
            image = await fetch_image(url, allow_hosts=self.allow_hosts, max_bytes=self.max_bytes,
                                      what="the image URL the images server answered")
        except FetchError as exc:
            raise ImagesError(str(exc), code="image_fetch_failed") from None
        return Made(b64.encode(image), revised, meta)


def _meta(answer: dict[str, Any]) -> dict[str, str]:
    return {k: v for k in META if isinstance(v := answer.get(k), str)}


def too_large(limit: int) -> ImagesError:
    return ImagesError(f"The image is larger than --image-generation-max-bytes allows ({limit} bytes); nothing was "
                       "kept.", code="image_too_large")


def orjson_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise ImagesError(f"The images server sent an {what} that is not JSON.", code="images_server_error") from None
    if not isinstance(obj, dict):
        raise ImagesError(f"The images server sent an {what} that is not a JSON object.",
                          code="images_server_error")
    return obj


def _error(status: int, raw: bytes) -> ImagesError:
    """OpenAI's error body ({"error": {message, type, param, code}}), or what else the server said."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        text = raw.decode(errors="replace").strip()[:500]
        return ImagesError(f"The images server answered HTTP {status}" + (f": {text}" if text else "."),
                           code="images_server_error")
    err = obj.get("error", obj) if isinstance(obj, dict) else obj
    if not isinstance(err, dict):
        return ImagesError(f"The images server answered HTTP {status}: {str(err)[:500]}", code="images_server_error")
    message = str(err.get("message") or err.get("detail") or f"HTTP {status}")[:2000]
    code = err.get("code")
    param = err.get("param")
    kind = err.get("type")
    return ImagesError(message, code=str(code) if code is not None else None,
                       param=param if isinstance(param, str) else None,
                       kind=kind if isinstance(kind, str) and kind else "image_generation_error")


async def _take(resp: http1.Response) -> bytes:
    """The body's next bytes (b"" at its end); a connection that breaks off is the server's failure."""
    try:
        while (data := resp.take()) is None:
            await resp.wait()
    except (OSError, http1.ClientError) as exc:
        raise ImagesError(f"The images server's answer broke off ({causes.kind(exc)}).",
                          code="images_server_error") from None
    return data


async def _read(resp: http1.Response, cap: int, *, cut: bool = False) -> bytes:
    """The whole body, refused once it passes `cap` (an error body is cut there instead, with `cut`)."""
    parts: list[bytes] = []
    size = 0
    while chunk := await _take(resp):
        size += len(chunk)
        if size > cap:
            if cut:
                parts.append(chunk[:cap - size + len(chunk)])
                break
            raise ImagesError("The images server's answer is larger than --image-generation-max-bytes allows; "
                              "nothing was kept.", code="image_too_large")
        parts.append(chunk)
    return b"".join(parts)


def _host_port(url: str) -> str | None:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        if not parts.hostname:
            return None
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}"
