"""Earlier images in a history, as pure functions: what the model is shown of earlier calls, which images a
call may edit, and which one it edits.

The model never sees an image's bytes through this tool: an earlier `image_generation_call` renders as the call
it made (its prompt, as the server used it) and one line saying what became of it — drawn, with its id, size and
format, or why it failed. The bytes stay with the item (or in the files store, `result_file_id`) and are read
only for the one image a later call edits.

The images a call may edit, newest last: every `image_generation_call` that has a result (its own `result`, or a
kept copy) and every `input_image` of a user's message. A call that names none edits:
- with the declaration's `action: "edit"`, the images the user gave in this turn, else the latest image;
- with `action: "auto"`, the images the user gave in this turn (a user who attaches an image and asks for a
  picture asks for that image to be used), else — when the declaration has an `input_image_mask` — the latest
  image; otherwise it draws a new one;
- with `action: "generate"`, nothing: it always draws.
`"edit": "latest"` is the newest image of all; `"edit": "ig_…"` that image.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .function import LATEST, NAME, Arguments, arguments_of

ITEM = "image_generation_call"
PRIVATE = ("result_file_id", "edited")  # the gateway's own fields of a stored item: never shown to a client
MAX_IMAGES = 16  # images one edit takes (OpenAI's limit)

Item = dict[str, Any]


class NoImage(ValueError):
    """The call asked to edit an image the conversation does not have; `str(exc)` tells the model."""


@dataclass(frozen=True)
class Source:
    """An image a call may edit: a generated one (`id`, its `result` or kept `file_id`), or one the user gave
    (`image_url`: a data URL or an http(s) URL, or `file_id` of the Files API)."""

    id: str | None = None
    result: str | None = None
    file_id: str | None = None
    image_url: str | None = None
    kept: bool = False  # `file_id` is a result this tool kept (else a file the user uploaded)

    @property
    def available(self) -> bool:
        return bool(self.result or self.file_id or self.image_url)

    @property
    def name(self) -> str:
        return self.id or "the user's image"


def rendered(item: Item) -> str:
    """What the model reads of an earlier call's outcome."""
    item_id = item.get("id") or "the image"
    if item.get("status") == "completed":
        done = "edited" if item.get("action") == "edit" else "drawn"
        facts = ", ".join(str(item[k]) for k in ("size", "output_format") if item.get(k))
        return (f"Image {item_id} was {done}{f' ({facts})' if facts else ''} and shown to the user. To change it "
                f"later, call {NAME} with \"edit\": \"{item_id}\".")
    error = item.get("error")
    reason = error.get("message") if isinstance(error, dict) else None
    reason = reason or f"the call ended {item.get('status') or 'unfinished'}"
    return f"The image could not be made: {reason.rstrip('.')}."


def lower(item: Item) -> tuple[Item, Item]:
    """An earlier call as upstreams see it: the function call and what the model was told."""
    call_id = item.get("id") or "ig"
    call = {"type": "function_call", "call_id": call_id, "name": NAME, "arguments": arguments_of(item)}
    return call, {"type": "function_call_output", "call_id": call_id, "output": rendered(item)}


def generated(item: Item) -> Source:
    return Source(id=item.get("id"), result=item.get("result") or None, file_id=item.get("result_file_id"),
                  kept=bool(item.get("result_file_id")))


def _given(part: dict[str, Any]) -> Source | None:
    url, file_id = part.get("image_url"), part.get("file_id")
    if isinstance(url, str) and url:
        return Source(image_url=url)
    if isinstance(file_id, str) and file_id:
        return Source(file_id=file_id)
    return None


def _user_images(item: Item) -> list[Source]:
    if item.get("type") != "message" or item.get("role") != "user" or not isinstance(item.get("content"), list):
        return []
    return [s for part in item["content"] if isinstance(part, dict) and part.get("type") == "input_image"
            and (s := _given(part)) is not None]


def images_in(items: Sequence[Item]) -> list[Source]:
    """Every image of the history a call may edit, oldest first (generated ones without a result included:
    naming them says why they cannot be edited)."""
    out: list[Source] = []
    for item in items:
        if item.get("type") == ITEM:
            if item.get("status") == "completed":
                out.append(generated(item))
        else:
            out += _user_images(item)
    return out


def this_turn(items: Sequence[Item]) -> list[Source]:
    """The images of the user's message(s) that end the history (this request's turn)."""
    found: list[Source] = []
    for item in reversed(items):
        if item.get("type") != "message" or item.get("role") not in ("user", "system", "developer"):
            break
        found = _user_images(item) + found
    return found


def has_image(items: Sequence[Item]) -> bool:
    """Whether a mask would have an image to apply to."""
    return any(source.available for source in images_in(items))


def choose(args: Arguments, action: str, history: Sequence[Source], turn: Sequence[Source],
           made: Sequence[Source] = (), masked: bool = False) -> list[Source] | None:
    """The images this call edits, or None to draw a new one. `history`: `images_in` of the items before this
    response; `turn`: the user's images of this turn; `made`: images made earlier in this response."""
    if action == "generate":
        return None
    everything = [*history, *made]
    wanted = args.edit
    if wanted is None:
        if turn:
            return list(turn[-MAX_IMAGES:])
        if action == "auto" and not masked:
            return None
        wanted = LATEST
    if wanted.lower() == LATEST:
        if not everything:
            raise NoImage("There is no image in this conversation to edit; draw a new one (leave out \"edit\").")
        return [_usable(everything[-1])]
    for source in reversed(everything):
        if source.id == wanted:
            return [_usable(source)]
    known = [s.id for s in everything if s.id]
    listed = f" The images that can be edited are: {', '.join(known)}, or \"latest\"." if known else \
        " Use \"latest\" for the most recent image."
    raise NoImage(f"There is no image {wanted!r} in this conversation.{listed}")


def _usable(source: Source) -> Source:
    if not source.available:
        raise NoImage(f"Image {source.name} is no longer available to edit (its response was not stored); draw a "
                      "new one instead.")
    return source
