"""A fake images server on loopback that speaks OpenAI's Images API, for the image_generation tests.

One aiohttp server (in a thread of its own, like fake_web.FakeWeb) answers as OpenAI's endpoint does, as the
openai SDK's types define it (ImagesResponse, ImageGenPartialImageEvent, ImageGenCompletedEvent,
ImageEditPartialImageEvent, ImageEditCompletedEvent) and with OpenAI's error body:

    POST /v1/images/generations   JSON {prompt, model, n, size, quality, output_format, output_compression,
                                  background, moderation, stream, partial_images, response_format, user}
    POST /v1/images/edits         multipart/form-data: image (or image[] repeated), mask, prompt and the same
                                  fields as text parts (no moderation, as OpenAI's edit takes none;
                                  input_fidelity besides)
    GET  /files/<name>            the pictures of the URL-answering mode

Answers are real PNGs it draws (tests/support/pngs.py): a generation is a picture of a colour taken from the
prompt; an edit keeps the size of the first image and its top-left colour, with a square of the prompt's colour
over it (so a test can tell which image was edited). `stream: true` answers in OpenAI's SSE shape: each partial
as `event: image_generation.partial_image` (`image_edit.partial_image` for an edit), then one
`image_generation.completed` (`image_edit.completed`) with the final picture and its usage.

Modes, set on the instance: `api_key` (a bearer key required), `answer = "url"` (LocalAI and Xinference answer
`data: [{url}]` whatever was asked; `url_base` points those URLs elsewhere), `streams = False` (a server without
streaming: it ignores `stream` and answers JSON), `accepts_response_format = False` (as OpenAI's GPT image models:
`response_format` is an unknown parameter), `sizes` / `formats` (what it accepts, else OpenAI's 400 naming the
param), `delay` (seconds before answering), `image_bytes` (results are noise PNGs of about that size),
`revise` (a revised_prompt comes back, as DALL·E 3 did), `drop_after_partial` (the connection is cut after the
first partial). Every request is recorded (`seen`), and when each answer was written whole (`sent_at`).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Self

import orjson
from aiohttp import BodyPartReader, web

from tests.support import pngs

GENERATION_FIELDS = {"prompt", "model", "n", "size", "quality", "output_format", "output_compression", "background",
                     "moderation", "stream", "partial_images", "response_format", "user", "style"}
EDIT_FIELDS = {"image", "image[]", "mask", "prompt", "model", "n", "size", "quality", "output_format",
               "output_compression", "background", "input_fidelity", "stream", "partial_images", "response_format",
               "user"}
MAGIC = {b"\x89PNG\r\n\x1a\n": "image/png", b"\xff\xd8\xff": "image/jpeg", b"RIFF": "image/webp"}


@dataclass
class Upload:
    """A file part of a multipart edit."""

    name: str  # the form field: image, image[] or mask
    filename: str | None
    content_type: str | None
    data: bytes


@dataclass
class Seen:
    path: str
    headers: dict[str, str]  # lower-cased names
    fields: dict[str, Any]  # the JSON body, or the text parts of a multipart body
    files: list[Upload] = field(default_factory=list)
    content_type: str = ""


class Refused(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.body = status, {"error": {"message": message, "type": kind, "param": param, "code": code}}


def color_of(text: str) -> tuple[int, int, int]:
    digest = hashlib.sha256(text.encode()).digest()
    return digest[0], digest[1], digest[2]


class FakeImages:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.url = ""
        self.host = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._lock = threading.Lock()
        self._noise: dict[int, bytes] = {}
        self.reset()

    def reset(self) -> None:
        self.api_key: str | None = None
        self.answer = "b64"
        self.url_base: str | None = None
        self.streams = True
        self.accepts_response_format = True
        self.sizes: set[str] | None = None
        self.formats = {"png"}
        self.delay = 0.0
        self.partial_delay = 0.0
        self.image_bytes: int | None = None
        self.revise = False
        self.drop_after_partial = False
        self.stored: dict[str, bytes] = {}
        self.answered = 0
        self.sent_at: list[float] = []  # when each answer was written whole (perf_counter, this process)
        with self._lock:
            self.seen.clear()

    # -- lifecycle -----------------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="fake-images", daemon=True)
        self._thread.start()
        port = asyncio.run_coroutine_threadsafe(self._serve(), loop).result(timeout=10)
        self.host = f"127.0.0.1:{port}"
        self.url = f"http://{self.host}"
        return self

    def __exit__(self, *exc: object) -> None:
        loop = self._loop
        if loop is None:
            return
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        assert self._thread is not None
        self._thread.join(timeout=10)
        loop.close()

    @property
    def base_url(self) -> str:
        """What the gateway is given: the `/v1` base, as for the openai SDK."""
        return f"{self.url}/v1"

    def requests(self, kind: str = "") -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.path.endswith(kind)]

    async def _serve(self) -> int:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/images/generations", self._generations)
        app.router.add_post("/v1/images/edits", self._edits)
        app.router.add_get("/files/{name}", self._file)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return int(self._runner.addresses[0][1])

    # -- the API ----------------------------------------------------------------------------------------------

    async def _generations(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        seen = Seen(request.path, _headers(request), {}, content_type=request.content_type)
        self._record(seen)
        try:
            self._authorized(request)
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise Refused(400, "We could not parse the JSON body of your request.") from None
            if not isinstance(body, dict):
                raise Refused(400, "Invalid type for body: expected an object.")
            seen.fields = body
            self._check(body, GENERATION_FIELDS)
            width, height = self._size(body.get("size"))
            picture = self._picture(width, height, color_of(body["prompt"]), None)
        except Refused as exc:
            return web.json_response(exc.body, status=exc.status)
        return await self._answer(request, body, picture, "image_generation")

    async def _edits(self, request: web.Request) -> web.StreamResponse:
        seen = Seen(request.path, _headers(request), {}, content_type=request.content_type)
        self._record(seen)
        try:
            self._authorized(request)
            if request.content_type != "multipart/form-data":
                raise Refused(400, "Invalid Content-Type header (application/json), expected multipart/form-data.")
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                if not isinstance(part, BodyPartReader) or part.name is None:
                    continue
                if part.filename is not None or part.name in ("image", "image[]", "mask"):
                    seen.files.append(Upload(part.name, part.filename, part.headers.get("Content-Type"),
                                             await part.read()))
                else:
                    seen.fields[part.name] = await part.text()
            fields = dict(seen.fields)
            for key in ("n", "partial_images", "output_compression"):
                if key in fields:
                    fields[key] = int(fields[key])
            if "stream" in fields:
                fields["stream"] = fields["stream"] == "true"
            self._check(fields | {u.name: True for u in seen.files}, EDIT_FIELDS)
            images = [u for u in seen.files if u.name in ("image", "image[]")]
            if not images:
                raise Refused(400, "Missing required parameter: 'image'.", "image", "missing_required_parameter")
            for upload in images:
                if _sniff(upload.data) is None:
                    raise Refused(400, "Invalid image file or mode for image 1, please check your image file.",
                                  "image", "invalid_image_file")
            first = images[0].data
            base = pngs.read(first) if first.startswith(pngs.SIGNATURE) else None
            width, height = (base.width, base.height) if base else (64, 64)
            masks = [u for u in seen.files if u.name == "mask"]
            if masks and (not masks[0].data.startswith(pngs.SIGNATURE) or pngs.size(masks[0].data) != (width, height)):
                raise Refused(400, "Invalid mask image format - mask size does not match image size", "mask",
                              "invalid_value")
            if fields.get("size") not in (None, "auto"):
                width, height = self._size(fields["size"])
            background = base.at(0, 0)[:3] if base else (128, 128, 128)
            picture = self._picture(width, height, (background[0], background[1], background[2]),
                                    color_of(fields["prompt"]))
        except Refused as exc:
            return web.json_response(exc.body, status=exc.status)
        return await self._answer(request, fields, picture, "image_edit")

    async def _file(self, request: web.Request) -> web.Response:
        data = self.stored.get(request.match_info["name"])
        if data is None:
            return web.Response(status=404)
        return web.Response(body=data, content_type="image/png")

    # -- helpers ------------------------------------------------------------------------------------------------

    def _record(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)

    def _authorized(self, request: web.Request) -> None:
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            raise Refused(401, "Incorrect API key provided.", None, "invalid_api_key")

    def _check(self, body: dict[str, Any], known: set[str]) -> None:
        for key in body:
            if key not in known or (key == "response_format" and not self.accepts_response_format):
                raise Refused(400, f"Unknown parameter: '{key}'.", key, "unknown_parameter")
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise Refused(400, "Missing required parameter: 'prompt'.", "prompt", "missing_required_parameter")
        if body.get("output_format", "png") not in self.formats:
            raise Refused(400, f"Invalid value: '{body['output_format']}'. Supported values are: "
                          + ", ".join(f"'{f}'" for f in sorted(self.formats)) + ".", "output_format", "invalid_value")
        partials = body.get("partial_images", 0)
        if not isinstance(partials, int) or not 0 <= partials <= 3:
            raise Refused(400, f"Invalid 'partial_images': integer above maximum value. Expected a value <= 3, "
                          f"but got {partials} instead.", "partial_images", "integer_above_max_value")

    def _size(self, size: Any) -> tuple[int, int]:
        if size in (None, "auto"):
            return 64, 64
        if self.sizes is not None and size not in self.sizes:
            raise Refused(400, f"Invalid value: '{size}'. Supported values are: "
                          + ", ".join(f"'{s}'" for s in sorted(self.sizes)) + ", and 'auto'.", "size", "invalid_value")
        try:
            width, height = (int(x) for x in str(size).split("x"))
        except ValueError:
            raise Refused(400, f"Invalid value: '{size}'.", "size", "invalid_value") from None
        return width, height

    def _picture(self, width: int, height: int, color: tuple[int, int, int],
                 square: tuple[int, int, int] | None) -> bytes:
        if self.image_bytes is not None:  # made once per size: a 1 MiB noise PNG takes tens of milliseconds
            noise = self._noise.get(self.image_bytes)
            if noise is None:
                noise = self._noise[self.image_bytes] = pngs.noise(self.image_bytes)
            return noise
        return pngs.draw(width, height, color, square=square)

    def _meta(self, body: dict[str, Any], picture: bytes) -> dict[str, Any]:
        width, height = pngs.size(picture)
        return {"background": "opaque" if body.get("background") in (None, "auto") else body["background"],
                "output_format": body.get("output_format") or "png",
                "quality": "medium" if body.get("quality") in (None, "auto") else body["quality"],
                "size": f"{width}x{height}"}

    async def _answer(self, request: web.Request, body: dict[str, Any], picture: bytes,
                      kind: str) -> web.StreamResponse:
        if self.delay:
            await asyncio.sleep(self.delay)
        self.answered += 1
        usage = {"input_tokens": 50, "input_tokens_details": {"image_tokens": 40, "text_tokens": 10},
                 "output_tokens": 272, "total_tokens": 322}
        meta = self._meta(body, picture)
        if body.get("stream") and self.streams:
            return await self._stream(request, body, picture, kind, meta, usage)
        if self.answer == "url":
            name = f"{hashlib.sha256(picture).hexdigest()[:16]}.png"
            self.stored[name] = picture
            data: dict[str, Any] = {"url": f"{self.url_base or self.url}/files/{name}"}
        else:
            data = {"b64_json": base64.b64encode(picture).decode()}
        if self.revise:
            data["revised_prompt"] = f"A detailed picture: {body['prompt']}"
        resp = web.Response(body=orjson.dumps({"created": int(time.time()), **meta, "data": [data], "usage": usage}),
                            content_type="application/json")
        await resp.prepare(request)
        await resp.write_eof()
        self.sent_at.append(time.perf_counter())  # the answer handed to the socket whole (bench/image_generation.py)
        return resp

    async def _stream(self, request: web.Request, body: dict[str, Any], picture: bytes, kind: str,
                      meta: dict[str, Any], usage: dict[str, Any]) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(request)
        width, height = pngs.size(picture)
        for index in range(int(body.get("partial_images") or 0)):
            rough = pngs.draw(width, height, (index * 40, index * 40, index * 40))
            event = {"type": f"{kind}.partial_image", "b64_json": base64.b64encode(rough).decode(),
                     "created_at": int(time.time()), **meta, "partial_image_index": index}
            await resp.write(b"event: %s.partial_image\ndata: %s\n\n" % (kind.encode(), orjson.dumps(event)))
            if self.drop_after_partial:
                assert request.transport is not None
                request.transport.close()
                return resp
            if self.partial_delay:
                await asyncio.sleep(self.partial_delay)
        done = {"type": f"{kind}.completed", "b64_json": base64.b64encode(picture).decode(),
                "created_at": int(time.time()), **meta, "usage": usage}
        await resp.write(b"event: %s.completed\ndata: %s\n\n" % (kind.encode(), orjson.dumps(done)))
        await resp.write_eof()
        self.sent_at.append(time.perf_counter())
        return resp


def _headers(request: web.Request) -> dict[str, str]:
    return {k.lower(): v for k, v in request.headers.items()}


def _sniff(data: bytes) -> str | None:
    for magic, media in MAGIC.items():
        if data.startswith(magic) and (media != "image/webp" or data[8:12] == b"WEBP"):
            return media
    return None
