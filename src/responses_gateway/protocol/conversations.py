"""Request bodies of the Conversations API, validated at the boundary with OpenAI's error shapes."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import ValidationError

from ..errors import invalid
from .items import normalize_item
from .request import StrictModel, check_metadata, to_api_error
from .tools import Toolbox

M = TypeVar("M", bound=StrictModel)

MAX_ITEMS = 20  # per create or add call, as at OpenAI


class CreateConversation(StrictModel):
    items: list[dict[str, Any]] | None = None
    metadata: dict[str, str] | None = None


class UpdateConversation(StrictModel):
    metadata: dict[str, str]


class AddItems(StrictModel):
    items: list[dict[str, Any]]


def _parse(model: type[M], raw: bytes | bytearray) -> M:
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        raise to_api_error(exc) from None


def _items(items: list[dict[str, Any]] | None, toolbox: Toolbox) -> list[dict[str, Any]]:
    if items is None:
        return []
    if len(items) > MAX_ITEMS:
        raise invalid(f"Invalid 'items': array too long. Expected an array with maximum length {MAX_ITEMS}, "
                      f"but got an array with length {len(items)} instead.", "items", "array_above_max_length")
    return [normalize_item(item, f"items[{i}]", toolbox) for i, item in enumerate(items)]


def parse_create(raw: bytes | bytearray, toolbox: Toolbox) -> tuple[list[dict[str, Any]], dict[str, str]]:
    body = _parse(CreateConversation, raw)
    check_metadata(body.metadata)
    return _items(body.items, toolbox), body.metadata or {}


def parse_update(raw: bytes | bytearray) -> dict[str, str]:
    body = _parse(UpdateConversation, raw)
    check_metadata(body.metadata)
    return body.metadata


def parse_items(raw: bytes | bytearray, toolbox: Toolbox) -> list[dict[str, Any]]:
    return _items(_parse(AddItems, raw).items, toolbox)
