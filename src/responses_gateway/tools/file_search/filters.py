"""`filters` of a search (the tool's, or POST /v1/vector_stores/{id}/search's), on the files' attributes.

A comparison (`eq`, `ne`, `gt`, `gte`, `lt`, `lte`, `in`, `nin`) of one attribute with a value, or a compound
(`and`, `or`) of filters, as openai-python's `ComparisonFilter` and `CompoundFilter`. Checked at the request
boundary (a 400 naming the offending field) and bounded in depth and size. A filter selects files, not
chunks, so it is decided once per file (`matches`) and the search is then limited to those files in SQL.

A file without the attribute matches `ne` and `nin` only; ordering comparisons hold between two numbers or
two strings, never across types.
"""

from __future__ import annotations

from typing import Any

from ...errors import invalid

COMPARISONS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin")
COMPOUNDS = ("and", "or")
MAX_DEPTH = 8
MAX_NODES = 128

Filter = dict[str, Any]


def parse_filters(value: Any, where: str) -> Filter | None:
    if value is None:
        return None
    count = [0]
    _check(value, where, 1, count)
    return dict(value)


def _check(node: Any, where: str, depth: int, count: list[int]) -> None:
    count[0] += 1
    if depth > MAX_DEPTH or count[0] > MAX_NODES:
        raise invalid(f"Invalid '{where}': filters may nest at most {MAX_DEPTH} deep and hold at most {MAX_NODES} "
                      "filters.", where)
    if not isinstance(node, dict):
        raise invalid(f"Invalid type for '{where}': expected an object.", where, "invalid_type")
    kind = node.get("type")
    if kind in COMPOUNDS:
        inner = node.get("filters")
        if not isinstance(inner, list) or not inner or set(node) != {"type", "filters"}:
            raise invalid(f"Invalid '{where}': a compound filter has 'type' and a non-empty list of 'filters'.",
                          f"{where}.filters")
        for i, child in enumerate(inner):
            _check(child, f"{where}.filters[{i}]", depth + 1, count)
        return
    if kind not in COMPARISONS:
        raise invalid(f"Invalid value for '{where}.type': expected one of {', '.join(COMPARISONS + COMPOUNDS)}.",
                      f"{where}.type")
    if set(node) != {"type", "key", "value"}:
        raise invalid(f"Invalid '{where}': a comparison filter has exactly 'type', 'key' and 'value'.", where)
    if not isinstance(node["key"], str) or not node["key"]:
        raise invalid(f"Invalid '{where}.key': expected a non-empty string.", f"{where}.key")
    value = node["value"]
    if kind in ("in", "nin"):
        if not isinstance(value, list) or not all(_scalar(v) and not isinstance(v, bool) for v in value):
            raise invalid(f"Invalid '{where}.value': '{kind}' takes a list of strings or numbers.", f"{where}.value")
    elif not _scalar(value):
        raise invalid(f"Invalid '{where}.value': expected a string, a number or a boolean.", f"{where}.value")
    elif kind in ("gt", "gte", "lt", "lte") and isinstance(value, bool):
        raise invalid(f"Invalid '{where}.value': '{kind}' compares numbers or strings.", f"{where}.value")


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def _same(a: Any, b: Any) -> bool:
    """Comparable: both booleans, both numbers, or both strings."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    return (isinstance(a, (int, float)) and isinstance(b, (int, float))) or (isinstance(a, str) and isinstance(b, str))


def matches(node: Filter | None, attributes: dict[str, Any] | None) -> bool:
    if node is None:
        return True
    kind = node["type"]
    if kind == "and":
        return all(matches(child, attributes) for child in node["filters"])
    if kind == "or":
        return any(matches(child, attributes) for child in node["filters"])
    attrs = attributes or {}
    present = node["key"] in attrs
    have, want = attrs.get(node["key"]), node["value"]
    if kind == "in":
        return present and any(_same(have, v) and have == v for v in want)
    if kind == "nin":
        return not present or not any(_same(have, v) and have == v for v in want)
    if kind == "ne":
        return not present or not (_same(have, want) and have == want)
    if not present or not _same(have, want):
        return False
    if kind == "eq":
        return bool(have == want)
    if kind == "gt":
        return bool(have > want)
    if kind == "gte":
        return bool(have >= want)
    if kind == "lt":
        return bool(have < want)
    return bool(have <= want)
