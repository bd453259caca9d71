"""The `image_generation` declaration: checked at the request boundary (a 400 naming the field, as OpenAI's), echoed
in the response's `tools` with OpenAI's defaults, and turned into what the images server is asked.

Every field of OpenAI's tool is taken (openai SDK: `ImageGeneration`). Those that are fields of the Images API too
go to the images server as given, and only when given — a server that does not know one refuses it as an unknown
parameter and is asked again without it (client.py), so it is ignored, never a failure:

    model                          `model` (else --image-generation-model, else the server's default)
    size, quality, output_format,  the same fields of /images/generations and /images/edits
    output_compression, background
    complexity, frame_count,       the same fields (newer GPT image models)
    frame_duration_ms
    moderation                     /images/generations only (OpenAI's edits take none)
    input_fidelity                 /images/edits only
    partial_images                 `stream: true` + `partial_images` (docs/image-generation.md)
    input_image_mask               the edit's `mask` file
    action                         the gateway's: generate, edit, or the model decides (auto)
    svg                            accepted and echoed; not sent (multipart has no form for it here)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import APIError, invalid

TYPE = "image_generation"
ACTIONS = ("auto", "generate", "edit")
CHOICES: dict[str, tuple[str, ...]] = {
    "action": ACTIONS,
    "background": ("transparent", "opaque", "auto"),
    "input_fidelity": ("high", "low"),
    "moderation": ("auto", "low"),
    "output_format": ("png", "webp", "jpeg", "gif", "svg"),
    "quality": ("low", "medium", "high", "xhigh", "max", "auto"),
    "complexity": ("low", "medium", "high"),
}
INTEGERS = {"output_compression": (0, 100), "partial_images": (0, 3), "frame_count": (2, 16),
            "frame_duration_ms": (0, 655_350)}
SENT = ("size", "quality", "output_format", "output_compression", "background", "moderation", "input_fidelity",
        "complexity", "frame_count", "frame_duration_ms")
GENERATIONS_ONLY = ("moderation",)
EDITS_ONLY = ("input_fidelity",)
KNOWN = {"type", "model", "svg", "input_image_mask", *CHOICES, *INTEGERS, "size"}
MASK_FIELDS = ("image_url", "file_id")
DEFAULTS = {"background": "auto", "moderation": "auto", "output_compression": 100, "output_format": "png",
            "quality": "auto", "size": "auto"}


@dataclass(frozen=True)
class Mask:
    """`input_image_mask`: a data URL or an http(s) URL of the mask, or a file of the Files API."""

    image_url: str | None = None
    file_id: str | None = None


@dataclass(frozen=True)
class Options:
    action: str = "auto"
    model: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)  # the Images API fields given (SENT)
    partials: int = 0
    mask: Mask | None = None
    given: dict[str, Any] = field(default_factory=dict)  # the declaration as it came, for the echo

    def asked(self, edit: bool) -> dict[str, Any]:
        """The fields an images server is asked: a generation's or an edit's."""
        skip = GENERATIONS_ONLY if edit else EDITS_ONLY
        return {k: v for k, v in self.fields.items() if k not in skip}

    def echo(self) -> dict[str, Any]:
        """As OpenAI echoes the tool: its defaults filled in, what was given kept."""
        out: dict[str, Any] = {"type": TYPE}
        for key in ("action", "background", "input_fidelity", "input_image_mask", "model", "moderation",
                    "output_compression", "output_format", "partial_images", "quality", "size", "complexity",
                    "frame_count", "frame_duration_ms", "svg"):
            if key in self.given:
                out[key] = self.given[key]
            elif key in DEFAULTS:
                out[key] = DEFAULTS[key]
        return out


def parse(spec: dict[str, Any], where: str) -> Options:
    """A declaration → Options; a 400 naming the field for anything wrong."""
    unknown = sorted(set(spec) - KNOWN)
    if unknown:
        raise APIError(400, f"Unknown parameter: '{where}.{unknown[0]}'.", param=f"{where}.{unknown[0]}",
                       code="unknown_parameter")
    given = {k: v for k, v in spec.items() if k != "type" and v is not None}
    for key, allowed in CHOICES.items():
        value = given.get(key)
        if value is not None and value not in allowed:
            raise invalid(f"Invalid value: '{value}'. Supported values are: "
                          + ", ".join(f"'{a}'" for a in allowed) + ".", f"{where}.{key}")
    for key, (low, high) in INTEGERS.items():
        value = given.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise APIError(400, f"Invalid type for '{where}.{key}': expected an integer.", param=f"{where}.{key}",
                           code="invalid_type")
        if not low <= value <= high:
            raise invalid(f"Invalid '{where}.{key}': expected a value between {low} and {high}, but got {value} "
                          "instead.", f"{where}.{key}")
    size = given.get("size")
    if size is not None and not (isinstance(size, str) and (size == "auto" or _dimensions(size))):
        raise invalid(f"Invalid value: '{size}'. Expected 'auto' or WIDTHxHEIGHT, e.g. '1024x1024'.", f"{where}.size")
    model = given.get("model")
    if model is not None and (not isinstance(model, str) or not model):
        raise APIError(400, f"Invalid type for '{where}.model': expected a string.", param=f"{where}.model",
                       code="invalid_type")
    svg = given.get("svg")
    if svg is not None and not isinstance(svg, dict):
        raise APIError(400, f"Invalid type for '{where}.svg': expected an object.", param=f"{where}.svg",
                       code="invalid_type")
    return Options(action=given.get("action", "auto"), model=model,
                   fields={k: given[k] for k in SENT if k in given}, partials=given.get("partial_images", 0),
                   mask=_mask(given.get("input_image_mask"), f"{where}.input_image_mask"), given=given)


def _dimensions(size: str) -> bool:
    width, sep, height = size.partition("x")
    return bool(sep) and width.isdigit() and height.isdigit() and int(width) > 0 and int(height) > 0


def _mask(value: Any, where: str) -> Mask | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise APIError(400, f"Invalid type for '{where}': expected an object.", param=where, code="invalid_type")
    unknown = sorted(set(value) - set(MASK_FIELDS))
    if unknown:
        raise APIError(400, f"Unknown parameter: '{where}.{unknown[0]}'.", param=f"{where}.{unknown[0]}",
                       code="unknown_parameter")
    for key in MASK_FIELDS:
        if value.get(key) is not None and not isinstance(value[key], str):
            raise APIError(400, f"Invalid type for '{where}.{key}': expected a string.", param=f"{where}.{key}",
                           code="invalid_type")
    url, file_id = value.get("image_url"), value.get("file_id")
    if not url and not file_id:
        raise APIError(400, f"Missing required parameter: '{where}.image_url' (or '{where}.file_id').",
                       param=f"{where}.image_url", code="missing_required_parameter")
    if url and not url.startswith(("data:", "http://", "https://")):
        raise invalid(f"Invalid '{where}.image_url': expected a data URL (data:image/png;base64,...) or an http(s) "
                      "URL.", f"{where}.image_url")
    return Mask(url or None, file_id or None)
