"""The Brave Search API: `GET /res/v1/web/search` with the key in `X-Subscription-Token`.

Mapped: `count` (at most 20), the country of `user_location` → `country` (when Brave lists it) and the location
headers (`X-Loc-City`, `X-Loc-State-Name`, `X-Loc-Country`, `X-Loc-Timezone`); one allowed domain → a `site:`
operator. Result descriptions carry <strong> marks, removed.
"""

from __future__ import annotations

from typing import Any

from . import locales
from .provider import HTTPProvider, Query, Result, endpoint, read_results

MAX_COUNT = 20


class Brave(HTTPProvider):
    kind = "brave"

    async def search(self, query: Query) -> list[Result]:
        params = {"q": query.site_query(), "count": str(min(query.count, MAX_COUNT)), "result_filter": "web",
                  "text_decorations": "false"}
        loc = query.location
        if loc.country in locales.BRAVE:
            params["country"] = loc.country.lower()
        headers = {"accept": "application/json", "accept-encoding": "gzip"}
        if self.api_key:
            headers["x-subscription-token"] = self.api_key
        for header, value in (("x-loc-city", loc.city), ("x-loc-state-name", loc.region),
                              ("x-loc-country", loc.country), ("x-loc-timezone", loc.timezone)):
            if value and value.isascii():
                headers[header] = value
        data = await self.exchange("GET", endpoint(self.url, "/res/v1/web/search"), params=params,
                                   headers=headers)
        web = data.get("web") if isinstance(data, dict) else None
        found = web.get("results") if isinstance(web, dict) else None
        return read_results(found, _snippet, query.snippet)

    def error_text(self, data: Any) -> str | None:
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict):
            return str(error.get("detail") or error.get("code") or "") or None
        return None


def _snippet(item: dict[str, Any]) -> str:
    extra = item.get("extra_snippets")
    parts = [item.get("description") or ""]
    if isinstance(extra, list):
        parts += [s for s in extra if isinstance(s, str)]
    return " ".join(p for p in parts if p)
