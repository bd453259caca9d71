"""The image_generation kit: `{"type": "image_generation"}` declarations, `image_generation_call` items, and the
runner that calls the images server.

Everything here is pure; `serve` makes the process's service (the images server's client) and `start` imports
the runner. A stored item keeps its image in the files store (`stored` drops `result` when `result_file_id` holds
it; `restore` puts it back for a client's read); the model is shown earlier calls as text (`lower`), never their
bytes. The gateway's own fields of an item (`result_file_id`, `edited`) are never shown to a client.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import APIError, invalid
from ..frame import Context, Declared, Item, Kit, Runner, Start, Unavailable
from . import history, options, storage
from .function import function
from .settings import ImageGenerationSettings

if TYPE_CHECKING:
    from ...store import Store
    from .service import ImageGeneration

log = logging.getLogger("responses_gateway.image_generation")

STATUSES = ("in_progress", "completed", "generating", "failed")
HOW = ("no images server is configured: start the gateway with --image-generation URL (an OpenAI-compatible "
       "images server's /v1 base URL: docs/image-generation.md)")
SHOWN = ("id", "type", "status", "result", "revised_prompt", "action", "background", "output_format", "quality",
         "size", "error")


def parse(spec: dict[str, Any], where: str) -> Declared:
    parsed = options.parse(spec, where)
    return Declared(KIT, where, parsed, (function(parsed.action),))


def check(declared: Sequence[Declared]) -> None:
    if len(declared) > 1:
        raise invalid(f"Invalid '{declared[1].where}': only one image_generation tool may be declared.",
                      declared[1].where)


def admit(declared: Sequence[Declared], items: Sequence[Item], service: Any = None) -> None:
    """A mask needs an image to apply to: one the user gives, or one drawn earlier in the conversation."""
    one = declared[0]
    opts: options.Options = one.config
    if opts.mask is not None and not history.has_image(items):
        param = f"{one.where}.input_image_mask"
        raise APIError(400, f"'{param}' was given, but there is no image to apply it to: send the image as an "
                       "input_image in the message, or edit an image drawn earlier in the conversation.",
                       param=param, code="invalid_value")


def echo(declared: Declared) -> dict[str, Any]:
    opts: options.Options = declared.config
    return opts.echo()


def normalize(item: dict[str, Any], where: str) -> Item:
    """An `image_generation_call` a client sends back (by value, or `{type, id}` alone as OpenAI takes it)."""
    status = item.get("status") or "completed"
    if status not in STATUSES:
        raise invalid(f"Invalid value: '{status}'. Supported values are: "
                      + ", ".join(f"'{s}'" for s in STATUSES) + ".", f"{where}.status")
    for key in ("id", "result", "revised_prompt", "result_file_id", "edited"):
        if item.get(key) is not None and not isinstance(item[key], str):
            raise APIError(400, f"Invalid type for '{where}.{key}': expected a string.", param=f"{where}.{key}",
                           code="invalid_type")
    out: Item = {k: item[k] for k in (*SHOWN, *history.PRIVATE) if k in item}
    out.update(type=history.ITEM, status=status)
    return out


def shown(item: Item, include: frozenset[str]) -> Item:
    if not any(key in item for key in history.PRIVATE):
        return item
    return {k: v for k, v in item.items() if k not in history.PRIVATE}


def stored(item: Item) -> Item:
    """The store's copy: the image is in the files store when `result_file_id` names it."""
    if item.get("result_file_id") and item.get("result"):
        return {**item, "result": None}
    return item


async def restore(items: list[Item], store: Store, owner: str) -> None:
    await storage.restore(items, store, owner)


async def serve(start: Start[ImageGenerationSettings]) -> ImageGeneration | Unavailable:
    group = start.group
    if not group.image_generation_url:
        return Unavailable(HOW)
    from .service import ImageGeneration, Limits  # the images server's client: only where one is configured

    allow = tuple(h.strip() for h in (group.image_generation_allow_hosts or "").split(",") if h.strip())
    limits = Limits(group.image_generation_timeout, group.image_generation_max_bytes, allow)
    service = ImageGeneration(group.image_generation_url, group.image_generation_api_key, group.image_generation_model,
                              limits, start.store, math.ceil(start.settings.retention_days * 86400))
    log.info("image_generation: %s", service.label)
    return service


def start(declared: Sequence[Declared], context: Context[ImageGeneration]) -> Runner:
    from .runner import ImageRunner  # the images server's client: only for requests that declare the tool

    return ImageRunner(declared, context)


KIT: Kit[ImageGenerationSettings, ImageGeneration] = Kit(
    name="image_generation",
    types=(options.TYPE,),
    item_types=(history.ITEM,),
    parse=parse,
    echo=echo,
    normalize=normalize,
    lower=history.lower,
    start=start,
    shown=shown,
    settings=ImageGenerationSettings,
    serve=serve,
    check=check,
    admit=admit,
    stored=stored,
    restore=restore,
)
