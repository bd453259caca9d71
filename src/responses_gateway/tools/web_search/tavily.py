"""Tavily: `POST /search` with the key as a bearer token.

Mapped: `max_results` (at most 20), domains → `include_domains` / `exclude_domains`, the country of
`user_location` → `country` (Tavily names countries in English; topic `general`). Tavily takes no city, region
or timezone.
"""

from __future__ import annotations

from typing import Any

from . import locales
from .provider import HTTPProvider, Query, Result, endpoint, read_results

MAX_COUNT = 20


class Tavily(HTTPProvider):
    kind = "tavily"

    async def search(self, query: Query) -> list[Result]:
        body: dict[str, Any] = {"query": query.text, "max_results": min(query.count, MAX_COUNT),
                                "search_depth": "basic", "topic": "general", "include_answer": False,
                                "include_raw_content": False, "include_images": False}
        if query.domains:
            body["include_domains"] = list(query.domains)
        if query.blocked:
            body["exclude_domains"] = list(query.blocked)
        country = locales.TAVILY.get(query.location.country or "")
        if country:
            body["country"] = country
        headers = {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        data = await self.exchange("POST", endpoint(self.url, "/search"), body=body, headers=headers)
        found = data.get("results") if isinstance(data, dict) else None
        return read_results(found, lambda x: x.get("content"), query.snippet)

    def error_text(self, data: Any) -> str | None:
        detail = data.get("detail") if isinstance(data, dict) else None
        if isinstance(detail, dict):
            return str(detail.get("error") or "") or None
        return detail if isinstance(detail, str) else None
