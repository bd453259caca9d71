"""SearXNG, self-hosted, no key: `GET /search?q=...&format=json` (the JSON output format must be enabled in the
instance's settings.yml, `search.formats`; otherwise it answers 403).

Mapped: the country of `user_location` → `language` (a locale such as en-US); one allowed domain → a `site:`
operator. SearXNG takes no city, region or timezone.
"""

from __future__ import annotations

from typing import Any

from . import locales
from .provider import HTTPProvider, Query, Result, endpoint, read_results


class SearXNG(HTTPProvider):
    kind = "searxng"

    async def search(self, query: Query) -> list[Result]:
        params = {"q": query.site_query(), "format": "json", "pageno": "1"}
        language = locales.SEARXNG.get(query.location.country or "")
        if language:
            params["language"] = language
        data = await self.exchange("GET", endpoint(self.url, "/search"), params=params)
        found = data.get("results") if isinstance(data, dict) else None
        return read_results(found, lambda x: x.get("content"), query.snippet)

    def explain(self, status: int, raw: bytes) -> str:
        if status == 403:
            return " (is `json` in the instance's search.formats, settings.yml?)"
        return super().explain(status, raw)

    def error_text(self, data: Any) -> str | None:
        return data.get("error") if isinstance(data, dict) and isinstance(data.get("error"), str) else None
