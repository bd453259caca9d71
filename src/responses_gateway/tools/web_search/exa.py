"""Exa: `POST /search` with the key in `x-api-key`, highlights as snippets.

Mapped: `numResults`, domains → `includeDomains` (or `excludeDomains`: Exa takes one or the other), the country
of `user_location` → `userLocation`; the snippet budget → `contents.highlights.maxCharacters`. Exa takes no
city, region or timezone.
"""

from __future__ import annotations

from typing import Any

from .provider import HTTPProvider, Query, Result, endpoint, read_results


class Exa(HTTPProvider):
    kind = "exa"

    async def search(self, query: Query) -> list[Result]:
        body: dict[str, Any] = {"query": query.text, "numResults": query.count, "type": "auto",
                                "contents": {"highlights": {"maxCharacters": query.snippet}}}
        if query.domains:
            body["includeDomains"] = list(query.domains)
        elif query.blocked:
            body["excludeDomains"] = list(query.blocked)
        if query.location.country:
            body["userLocation"] = query.location.country
        headers = {"x-api-key": self.api_key} if self.api_key else {}
        data = await self.exchange("POST", endpoint(self.url, "/search"), body=body, headers=headers)
        found = data.get("results") if isinstance(data, dict) else None
        return read_results(found, _snippet, query.snippet)

    def error_text(self, data: Any) -> str | None:
        error = data.get("error") if isinstance(data, dict) else None
        return error if isinstance(error, str) else None


def _snippet(item: dict[str, Any]) -> str:
    highlights = item.get("highlights")
    if isinstance(highlights, list) and highlights:
        return " … ".join(h for h in highlights if isinstance(h, str))
    text = item.get("text") or item.get("summary")
    return text if isinstance(text, str) else ""
