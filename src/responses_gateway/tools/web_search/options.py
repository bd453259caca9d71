"""The `web_search` declaration: checked at the request boundary and echoed in the response's `tools` as OpenAI
echoes it (its defaults filled in: `search_context_size: "medium"`, a `user_location` that falls back to the
United States, `filters: null`).

`{"type": "web_search"}` (and `web_search_2025_08_26`) and `{"type": "web_search_preview"}` (and
`web_search_preview_2025_03_11`) are one tool here; each is echoed under the type the request used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...errors import APIError, invalid
from .domains import MAX_DOMAINS, normalize_domain

TYPES = ("web_search", "web_search_2025_08_26", "web_search_preview", "web_search_preview_2025_03_11")
PREVIEW = ("web_search_preview", "web_search_preview_2025_03_11")
SIZES = ("low", "medium", "high")
LOCATION_FIELDS = ("city", "country", "region", "timezone")
DEFAULT_COUNTRY = "US"  # OpenAI's fallback when user_location is omitted or null


@dataclass(frozen=True)
class Budget:
    """What `search_context_size` buys: results per search, characters per result snippet, characters of a
    page shown at once."""

    results: int
    snippet: int
    page: int


BUDGETS = {"low": Budget(3, 300, 4_000), "medium": Budget(5, 600, 12_000), "high": Budget(10, 1_200, 32_000)}


@dataclass(frozen=True)
class Location:
    city: str | None = None
    country: str | None = None  # ISO 3166-1 alpha-2, upper case
    region: str | None = None
    timezone: str | None = None

    def echo(self) -> dict[str, Any]:
        return {"type": "approximate", "city": self.city, "country": self.country, "region": self.region,
                "timezone": self.timezone}


@dataclass(frozen=True)
class Options:
    kind: str  # the declaration's type, echoed as given
    size: str = "medium"
    location: Location = Location(country=DEFAULT_COUNTRY)
    allowed: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()
    live: bool = True  # external_web_access (false: cached results only)
    filters: dict[str, Any] | None = None  # as given, for the echo

    @property
    def budget(self) -> Budget:
        return BUDGETS[self.size]

    def echo(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind}
        if self.kind not in PREVIEW:
            out["filters"] = self.filters
        out["search_context_size"] = self.size
        out["user_location"] = self.location.echo()
        if not self.live:
            out["external_web_access"] = False
        return out


KNOWN = {"type", "filters", "search_context_size", "user_location", "external_web_access", "search_content_types",
         "image_settings"}


def parse(spec: dict[str, Any], where: str) -> Options:
    """A declaration → Options; a 400 naming the field for anything wrong."""
    unknown = sorted(set(spec) - KNOWN)
    if unknown:
        raise APIError(400, f"Unknown parameter: '{where}.{unknown[0]}'.", param=f"{where}.{unknown[0]}",
                       code="unknown_parameter")
    size = spec.get("search_context_size")
    if size is None:
        size = "medium"
    elif size not in SIZES:
        raise invalid(f"Invalid value: '{size}'. Supported values are: 'low', 'medium', and 'high'.",
                      f"{where}.search_context_size")
    live = spec.get("external_web_access")
    if live is not None and not isinstance(live, bool):
        raise APIError(400, f"Invalid type for '{where}.external_web_access': expected a boolean.",
                       param=f"{where}.external_web_access", code="invalid_type")
    types = spec.get("search_content_types")
    if types is not None and (not isinstance(types, list) or any(t not in ("text", "image") for t in types)):
        raise invalid(f"Invalid '{where}.search_content_types': expected a list of 'text' and 'image'.",
                      f"{where}.search_content_types")
    allowed, blocked, filters = _filters(spec.get("filters"), f"{where}.filters")
    return Options(str(spec["type"]), size, _location(spec.get("user_location"), f"{where}.user_location"),
                   allowed, blocked, live is not False, filters)


def _filters(value: Any, where: str) -> tuple[tuple[str, ...], tuple[str, ...], dict[str, Any] | None]:
    if value is None:
        return (), (), None
    if not isinstance(value, dict):
        raise APIError(400, f"Invalid type for '{where}': expected an object.", param=where, code="invalid_type")
    unknown = sorted(set(value) - {"allowed_domains", "blocked_domains"})
    if unknown:
        raise APIError(400, f"Unknown parameter: '{where}.{unknown[0]}'.", param=f"{where}.{unknown[0]}",
                       code="unknown_parameter")
    lists: list[tuple[str, ...]] = []
    for key in ("allowed_domains", "blocked_domains"):
        domains = value.get(key)
        if domains is None:
            lists.append(())
            continue
        if not isinstance(domains, list) or not all(isinstance(d, str) for d in domains):
            raise APIError(400, f"Invalid type for '{where}.{key}': expected an array of strings.",
                           param=f"{where}.{key}", code="invalid_type")
        if len(domains) > MAX_DOMAINS:
            raise invalid(f"Invalid '{where}.{key}': at most {MAX_DOMAINS} domains.", f"{where}.{key}",
                          "array_above_max_length")
        normal = []
        for i, d in enumerate(domains):
            n = normalize_domain(d)
            if not n or " " in n:
                raise invalid(f"Invalid '{where}.{key}[{i}]': '{d}' is not a domain.", f"{where}.{key}[{i}]")
            normal.append(n)
        lists.append(tuple(normal))
    return lists[0], lists[1], value


def _location(value: Any, where: str) -> Location:
    if value is None:
        return Location(country=DEFAULT_COUNTRY)
    if not isinstance(value, dict):
        raise APIError(400, f"Invalid type for '{where}': expected an object.", param=where, code="invalid_type")
    unknown = sorted(set(value) - {"type", *LOCATION_FIELDS})
    if unknown:
        raise APIError(400, f"Unknown parameter: '{where}.{unknown[0]}'.", param=f"{where}.{unknown[0]}",
                       code="unknown_parameter")
    if value.get("type", "approximate") not in ("approximate", None):
        raise invalid(f"Invalid value: '{value.get('type')}'. Supported values are: 'approximate'.", f"{where}.type")
    fields: dict[str, str | None] = {}
    for key in LOCATION_FIELDS:
        field = value.get(key)
        if field is not None and not isinstance(field, str):
            raise APIError(400, f"Invalid type for '{where}.{key}': expected a string.", param=f"{where}.{key}",
                           code="invalid_type")
        fields[key] = field.strip() or None if isinstance(field, str) else None
    country = fields["country"]
    if country is not None:
        if len(country) != 2 or not country.isascii() or not country.isalpha():
            raise invalid(f"Invalid '{where}.country': expected a two-letter ISO country code, e.g. 'US'.",
                          f"{where}.country")
        fields["country"] = country.upper()
    return Location(**fields)
