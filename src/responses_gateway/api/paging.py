"""List endpoints' shared query parameters (`limit`, `order`) and page body, as OpenAI shapes them."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import QueryParams

from ..errors import APIError, invalid
from ..store.base import Page


def page_params(q: QueryParams) -> tuple[int, str]:
    order = q.get("order", "desc")
    if order not in ("asc", "desc"):
        raise invalid(f"Invalid value: '{order}'. Supported values are: 'asc' and 'desc'.", "order")
    try:
        limit = int(q.get("limit", "20"))
    except ValueError:
        raise APIError(400, "Invalid type for 'limit': expected an integer.", param="limit",
                       code="invalid_type") from None
    if not 1 <= limit <= 100:
        raise invalid(f"Invalid 'limit': expected a value between 1 and 100, but got {limit} instead.", "limit")
    return limit, order


def page_body(page: Page) -> dict[str, Any]:
    data = page.items
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": page.has_more,
    }
