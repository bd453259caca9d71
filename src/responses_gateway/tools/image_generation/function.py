"""What the model is offered for image generation — one function, `image_generation` — and its arguments.

`{"prompt": "..."}` draws a new image; `{"prompt": "...", "edit": "latest"}` (or the id of an image drawn earlier,
`ig_…`) changes an image already in the conversation — one the model drew, or one the user gave. With the
declaration's `action: "generate"` the function has no `edit`; with `action: "edit"` it always edits (the latest
image when `edit` is left out). Arguments are read leniently (a bare string is the prompt; `image` or `image_id`
are taken for `edit`), since small models write them loosely; what cannot be read is a failed call whose message
tells the model how to call it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from ...protocol.tools import Tool

NAME = "image_generation"
LATEST = "latest"
MAX_PROMPT = 32_000  # characters, as OpenAI's GPT image models take

DESCRIPTION = (
    "Draw an image, or change one already in the conversation, from a text description. The image is shown "
    "to the user, not to you: you are told what was drawn and its id. In `prompt`, describe the whole picture "
    "you want (subject, composition, style, any text to render in it)."
)
EDIT = ("To change an image that is already in the conversation instead of drawing a new one: \"latest\" for the "
        "most recent image (one you drew or one the user gave), or the id of an image you drew earlier (ig_...). "
        "Leave it out to draw a new image.")
EDIT_ALWAYS = ("Which image to change: \"latest\" (the most recent image, one you drew or one the user gave; the "
               "default), or the id of an image you drew earlier (ig_...).")


def parameters(action: str) -> dict[str, Any]:
    properties: dict[str, Any] = {"prompt": {"type": "string", "description": "What to draw, or the change to make."}}
    if action != "generate":
        properties["edit"] = {"type": "string", "description": EDIT_ALWAYS if action == "edit" else EDIT}
    return {"type": "object", "properties": properties, "required": ["prompt"]}


@functools.cache
def function(action: str = "auto") -> Tool:
    """The function offered (made on first use: protocol.tools imports the kits' registry, which imports this)."""
    from ...protocol.tools import Tool

    return Tool("function", NAME, NAME, DESCRIPTION, parameters(action), runner=NAME)


@dataclass(frozen=True)
class Arguments:
    prompt: str
    edit: str | None = None  # "latest" or an ig_ id; None: draw a new image


def parse_arguments(raw: str) -> Arguments:
    """The model's arguments; ValueError with what the model should send instead."""
    how = 'call image_generation with {"prompt": "a description of the image"} (and "edit": "latest" to change ' \
          'the latest image)'
    try:
        value: Any = orjson.loads(raw) if raw.strip() else {}
    except orjson.JSONDecodeError:
        value = raw.strip()  # a bare prompt
    if isinstance(value, str):
        value = {"prompt": value}
    if not isinstance(value, dict):
        raise ValueError(f"The arguments were not understood: {how}.")
    prompt = value.get("prompt") or value.get("description")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"No prompt was given: {how}.")
    if len(prompt) > MAX_PROMPT:
        raise ValueError(f"The prompt is {len(prompt)} characters long; at most {MAX_PROMPT} are taken.")
    edit = next((value[k] for k in ("edit", "image", "image_id") if value.get(k) not in (None, "", False)), None)
    if edit is True:
        edit = LATEST
    if edit is not None and not isinstance(edit, str):
        raise ValueError(f"'edit' must be \"latest\" or the id of an earlier image: {how}.")
    return Arguments(prompt.strip(), edit.strip() if isinstance(edit, str) else None)


def arguments_of(item: dict[str, Any]) -> str:
    """An earlier call's arguments as the model is shown them again (its prompt as the server used it)."""
    args: dict[str, Any] = {"prompt": item.get("revised_prompt") or ""}
    if item.get("action") == "edit" and isinstance(item.get("edited"), str):
        args["edit"] = item["edited"]
    return orjson.dumps(args).decode()
