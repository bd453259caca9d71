"""The image generation of one gateway process: the images server's client (its pooled connections and what it
learnt the server refuses), the limits, and the files store the images are kept in. Made at start-up by the kit's
`serve` when an images server is configured, closed at shutdown; every response's runner uses it.

Besides calling the images server, it reads the images a call edits: an earlier result (inline, or kept in the
files store), an `input_image` or `input_image_mask` (a data URL, an http(s) URL fetched behind the SSRF guard,
or a file of the Files API) — each bounded by --image-generation-max-bytes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ...pictures import BadImage, Picture, data_url_payload, decoded_length, picture
from ...store import Store
from . import b64, storage
from .client import ImagesClient
from .fetch import FetchError, fetch_image
from .history import Source
from .options import Mask

log = logging.getLogger("responses_gateway.image_generation")


@dataclass(frozen=True)
class Limits:
    timeout: float  # seconds for one call: the images server's answer, and the images it edits
    max_bytes: int  # bytes of one image, in or out
    allow_hosts: tuple[str, ...] = ()  # image URL hosts admitted although private (besides the server's own)


class ImageGeneration:
    def __init__(self, url: str, api_key: str | None, model: str | None, limits: Limits,
                 store: Store | None = None, retention_seconds: int = 30 * 24 * 3600):
        self.client = ImagesClient(url, api_key, max_bytes=limits.max_bytes, allow_hosts=limits.allow_hosts,
                                   connect_timeout=min(limits.timeout, 30.0))
        self.model = model
        self.limits = limits
        self.store = store  # images are kept in its files store (storage.py); None with --db none
        self.retention = retention_seconds
        self.label = self.client.label

    def describe(self) -> str:
        model = f", model {self.model}" if self.model else ""
        return f"images from {self.label}{model}, {self.limits.timeout:g} s a call"

    async def aclose(self) -> None:
        """The images server's pooled connections (at shutdown)."""
        self.client.close()

    async def source(self, owner: str, source: Source, what: str | None = None) -> Picture:
        """The bytes of an image a call edits (or of its mask). BadImage says why it cannot be used."""
        what = what or (f"image {source.id}" if source.id else "the user's image")
        if source.result:
            return await self.decoded(source.result, what)
        if source.image_url:
            return await self.url(source.image_url, what)
        if source.file_id:
            return await self.file(owner, source.file_id, what)
        raise BadImage(f"{what} is no longer available")

    async def mask(self, owner: str, mask: Mask) -> Picture:
        return await self.source(owner, Source(image_url=mask.image_url, file_id=mask.file_id), "the input_image_mask")

    async def url(self, url: str, what: str) -> Picture:
        if url.startswith("data:"):
            return await self.decoded(data_url_payload(url, what), what)
        try:
            data = await fetch_image(url, allow_hosts=self.limits.allow_hosts, max_bytes=self.limits.max_bytes,
                                     what=what)
        except FetchError as exc:
            raise BadImage(str(exc)) from None
        return picture(data, what)

    async def decoded(self, text: str, what: str) -> Picture:
        """Base64 from a result or a data URL: bounded before any work, checked, decoded in turns (b64.py)."""
        self._bounded(decoded_length(text), what)
        try:
            data = await b64.decode_in_turns(text, validate=True)
        except b64.Error:
            raise BadImage(f"{what} is not valid base64") from None
        return picture(data, what)

    async def keep(self, owner: str, item_id: str, image: Picture) -> str:
        """The image kept in the files store (the store is there: the runner asks only then); its file id."""
        if self.store is None:
            raise RuntimeError("no store to keep the image in")
        return await storage.keep(self.store, owner, item_id, image, self.retention)

    async def file(self, owner: str, file_id: str, what: str) -> Picture:
        if self.store is None:
            raise BadImage(f"{what} is a file ({file_id}), and this gateway keeps no files (--db none)")
        data = await storage.load(self.store, owner, file_id, self.limits.max_bytes, what)
        if data is None:
            raise BadImage(f"{what} is file {file_id}, which does not exist (or has expired)")
        return picture(data, what)

    def _bounded(self, size: int, what: str) -> None:
        if size > self.limits.max_bytes:
            raise BadImage(f"{what} is {size} bytes, more than --image-generation-max-bytes allows "
                           f"({self.limits.max_bytes})")
