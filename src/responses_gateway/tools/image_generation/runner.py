"""One response's image_generation calls, in the tool loop (tools/loop.py).

A call streams as OpenAI's do: `output_item.added` ({id: "ig_…", type, status: "in_progress"}), then
`response.image_generation_call.in_progress`; running it sends `.generating`, each partial image the images
server streams as `.partial_image` (`partial_image_b64`, `partial_image_index` from 0, and the size, quality,
format and background), then `.completed` and `output_item.done` with the item whole: `result` (the image,
base64), `revised_prompt`, and the `size`, `quality`, `output_format`, `background` and `action` used.

Which image a call edits is history.choose's decision (the latest image, one the model names, or the images the
user gave in this turn); editing goes through the images server's /images/edits with those images and the
declaration's `input_image_mask`. The images this response makes are remembered, so the model can draw and then
change its own picture within one response.

A call that cannot be made — arguments the model got wrong, no image to edit, an image that cannot be read, the
images server refusing (its reason), down, slower than --image-generation-timeout, or an image larger than
--image-generation-max-bytes — is a `failed` item whose `error` the model reads on its next step; never a failed
response. Nothing of a failed call is kept.

A stored response keeps the image in the files store (storage.py): the item keeps `result_file_id`, and the
store's copy of the item drops `result` (the kit's `stored`); reads put it back (the kit's `restore`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any, TypeVar

from ...generation import ToolCallStart
from ...ids import new_id
from ...pictures import BadImage, Picture, picture, size_of
from ...protocol.tools import ToolSet
from ..frame import Annotator, Calls, Context, Declared, Events, Item, OpenItem, Spec
from . import b64
from .client import Ask, ImagesError, Made, Partial
from .function import parse_arguments
from .history import ITEM, NoImage, Source, choose, images_in, this_turn
from .options import Options
from .service import ImageGeneration

T = TypeVar("T")
log = logging.getLogger("responses_gateway.image_generation")
EVENT = "response.image_generation_call."
HEAD_CHARS = 64 * 1024  # base64 read for the format and size (a JPEG's frame header may follow its metadata)
KEEP_SLACK = 30.0  # seconds the loop allows beyond --image-generation-timeout: reading sources, keeping the image


class Expired(Exception):
    """The call's deadline passed."""


class ImageRunner:
    def __init__(self, declared: Sequence[Declared], context: Context[ImageGeneration]):
        self.options: Options = declared[0].config  # (check: one image_generation tool per request)
        self.service = context.service
        self.owner = context.owner
        self.timeout = self.service.limits.timeout + KEEP_SLACK  # the loop's deadline; ours fires first
        self.history = images_in(context.history)
        self.turn = this_turn(context.history)
        self.keeps = self.service.store is not None and context.request.store is not False
        self.made: list[Source] = []  # images made earlier in this response, newest last

    async def prelude(self, calls: Calls, tools: ToolSet) -> AsyncIterator[Events]:
        return
        yield

    def item(self, start: ToolCallStart) -> Item:
        return {"id": new_id("ig"), "type": ITEM, "status": "in_progress"}

    def added(self, call: OpenItem) -> list[Spec]:
        return [(EVENT + "in_progress", {})]

    def delta(self, call: OpenItem, text: str) -> list[Spec]:
        return []  # the arguments are the gateway's business: the item shows the prompt as used when done

    def complete(self, call: OpenItem) -> tuple[list[Spec], bool]:
        return [], True

    async def run(self, call: OpenItem, calls: Calls) -> AsyncIterator[Events]:
        deadline = asyncio.get_running_loop().time() + self.service.limits.timeout
        try:
            args = parse_arguments(call.arguments)
        except ValueError as exc:
            yield calls.fail_call(call, str(exc))
            return
        yield calls.call_events(call, [(EVENT + "generating", {})])
        item = call.item
        keeping: asyncio.Task[None] | None = None
        try:
            sources = choose(args, self.options.action, self.history, self.turn, self.made,
                             masked=self.options.mask is not None)
            edited = [await self._within(deadline, self.service.source(self.owner, s)) for s in sources or ()]
            mask = None
            if sources and self.options.mask is not None:
                mask = await self._within(deadline, self.service.mask(self.owner, self.options.mask))
            ask = Ask(args.prompt, self._fields(edit=bool(sources)), self.options.partials, tuple(edited), mask)
            made: Made | None = None
            sent = 0
            async for got in self._answers(deadline, ask):
                if isinstance(got, Partial):
                    if sent < self.options.partials:  # (a server sending more than asked: the rest dropped)
                        fields = {"partial_image_b64": got.b64, "partial_image_index": sent, **got.meta}
                        sent += 1
                        yield calls.call_events(call, [(EVENT + "partial_image", fields)])
                else:
                    made = got
            if made is None:
                raise ImagesError("The images server answered without an image.", code="images_server_error")
            result, head = _head(made.b64)
            item.update(self._echo(made, head, bool(sources)), revised_prompt=made.revised_prompt or args.prompt)
            if sources and sources[0].id:
                item["edited"] = sources[0].id
            item["result"] = result
            if self.keeps:  # written while the client receives the image
                keeping = asyncio.ensure_future(self._keep(call, result, head.format))
        except ImagesError as exc:
            item["error"] = exc.error()
            yield calls.fail_call(call, exc.message)
            return
        except (NoImage, BadImage) as exc:
            yield calls.fail_call(call, str(exc))
            return
        except Expired:
            late = ImagesError(f"The images server did not answer within {self.service.limits.timeout:g} seconds "
                               "(--image-generation-timeout).", code="images_server_timeout")
            item["error"] = late.error()
            yield calls.fail_call(call, late.message)
            return
        self.made.append(Source(id=call.id, result=result))
        try:
            yield calls.end_call(call, "completed", [(EVENT + "completed", {})])
            if keeping is not None:
                await keeping  # kept before the model's next step, long before the response is stored
        finally:
            if keeping is not None and not keeping.done():
                keeping.cancel()  # the response ended meanwhile: the image is stored inline, if at all

    def failed(self, call: OpenItem, message: str) -> tuple[str | None, list[Spec]]:
        item = call.item
        for key in ("result_file_id", "edited"):
            item.pop(key, None)  # nothing of a failed call is kept
        item["result"] = None
        item.setdefault("error", {"type": "image_generation_error", "code": None, "message": message, "param": None})
        return "failed", []

    def annotator(self) -> Annotator | None:
        return None

    async def aclose(self) -> None:
        pass

    # -- helpers ---------------------------------------------------------------------------------------------

    async def _keep(self, call: OpenItem, result: str, kind: str) -> None:
        """The image kept in the files store: the stored item then names its file instead of carrying it. A store
        that fails here loses nothing: the item is stored with its image inline."""
        try:
            data = await b64.decode_in_turns(result)
            async with asyncio.timeout(KEEP_SLACK):
                call.item["result_file_id"] = await self.service.keep(self.owner, call.id, Picture(data, kind))
        except Exception as exc:  # (TimeoutError included)
            log.warning("image_generation: %s was not kept in the files store (%s); it is stored inline", call.id,
                        type(exc).__name__)

    def _fields(self, edit: bool) -> dict[str, Any]:
        fields = self.options.asked(edit)
        model = self.options.model or self.service.model
        return {"model": model, **fields} if model else fields

    def _echo(self, made: Made, head: Picture, edit: bool) -> dict[str, Any]:
        """The fields OpenAI's item carries: what the server said it used, else what the image itself is, else
        what was asked."""
        asked = self.options.given
        return {
            "action": "edit" if edit else "generate",
            "background": made.meta.get("background") or asked.get("background") or "auto",
            "output_format": made.meta.get("output_format") or head.format,
            "quality": made.meta.get("quality") or asked.get("quality") or "auto",
            "size": made.meta.get("size") or size_of(head.data) or asked.get("size") or "auto",
        }

    async def _answers(self, deadline: float, ask: Ask) -> AsyncIterator[Partial | Made]:
        """The images server's answers, each awaited within the call's deadline (never across a yield)."""
        answers = self.service.client.run(ask)
        try:
            while True:
                try:
                    got = await self._within(deadline, anext(answers))
                except StopAsyncIteration:
                    return
                yield got
        finally:
            await answers.aclose()

    @staticmethod
    async def _within(deadline: float, awaitable: Awaitable[T]) -> T:
        try:
            async with asyncio.timeout_at(deadline):
                return await awaitable
        except TimeoutError:
            raise Expired() from None


def _head(text: str) -> tuple[str, Picture]:
    """(the base64 to send, the image's first bytes): enough to know its format and size, and that it is an
    image, without decoding megabytes. Line breaks and the URL-safe alphabet are made standard (a few C scans)."""
    if "\n" in text or "\r" in text or " " in text or "-" in text or "_" in text:
        text = "".join(text.split()).replace("-", "+").replace("_", "/")
    try:
        head = b64.decode(text[:HEAD_CHARS], validate=True)
    except b64.Error:
        raise ImagesError("The images server's image is not valid base64.", code="images_server_error") from None
    try:
        return text, picture(head, "the images server's answer")
    except BadImage as exc:
        raise ImagesError(str(exc), code="images_server_error") from None
