"""The file_search kit: `{"type": "file_search", "vector_store_ids": [...], ...}` and `file_search_call` items.

The model is offered one function, `file_search(queries)`. The gateway searches only the request's vector
stores — the caller's own: another key's store is a 404 before the response starts (`preflight`) — with the
tool's `filters`, `max_num_results` and `ranking_options`. Everything here is pure but `preflight`; the runner
(runner.py) does the searching, citations.py the markers and annotations.

What a client sees of a `file_search_call` is OpenAI's shape: `queries`, `status`, and `results` only with
`include: ["file_search_call.results"]` (else null). The store keeps the item whole, with two fields of the
gateway's own that no client sees: `error` (why a search failed, for the model) and `cite_from` (the number
of its first result's marker), so that the model reads the same thing on later turns as it did live.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson

from ...errors import APIError, invalid
from ...protocol.tools import Tool
from ..frame import Context, Declared, Item, Kit, Runner, Start, Unavailable
from . import NAME
from .citations import render
from .declaration import FileSearchConfig
from .files_api import ROUTES as FILES_ROUTES
from .filters import parse_filters
from .ranking import parse_ranking
from .runner import FileSearchRunner
from .search import DEFAULT_RESULTS, MAX_RESULTS
from .service import FileSearch, FileSearchStore
from .settings import FileSearchSettings
from .store import VectorStoreQueries
from .vector_stores_api import ROUTES as VECTOR_STORES_ROUTES

if TYPE_CHECKING:
    from ...store import Store

RESULTS = "file_search_call.results"
HIDDEN = ("error", "cite_from")  # stored, never shown
MAX_STORES = 10
EXTRA = ("numpy", "pypdf", "bpe_openai")  # the file-search extra


@functools.cache
def function() -> Tool:
    """What the model is offered (made once, on first use)."""
    return Tool(
        "function", NAME, NAME,
        "Search the user's uploaded files (their vector stores) for passages relevant to the queries. Use it "
        "whenever the answer may be in those files. Give one or more short, self-contained search queries.",
        {"type": "object", "properties": {"queries": {"type": "array", "items": {"type": "string"},
                                                      "description": "Search queries, e.g. [\"refund policy\"]."}},
         "required": ["queries"]},
        runner=NAME,
    )


def parse(spec: dict[str, Any], where: str) -> Declared:
    for key in spec:
        if key not in ("type", "vector_store_ids", "filters", "max_num_results", "ranking_options"):
            raise invalid(f"Unknown parameter: '{where}.{key}'.", f"{where}.{key}", "unknown_parameter")
    ids = spec.get("vector_store_ids")
    if ids is None:
        raise APIError(400, f"Missing required parameter: '{where}.vector_store_ids'.", param=f"{where}.vector_store_ids",
                       code="missing_required_parameter")
    if not isinstance(ids, list) or not ids or len(ids) > MAX_STORES or not all(isinstance(i, str) and i for i in ids):
        raise invalid(f"Invalid '{where}.vector_store_ids': expected a list of 1 to {MAX_STORES} vector store ids.",
                      f"{where}.vector_store_ids")
    filters = parse_filters(spec.get("filters"), f"{where}.filters")
    count = spec.get("max_num_results")
    if count is None:
        count = DEFAULT_RESULTS
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_RESULTS:
        raise invalid(f"Invalid '{where}.max_num_results': expected an integer between 1 and {MAX_RESULTS}.",
                      f"{where}.max_num_results")
    ranking = parse_ranking(spec.get("ranking_options"), f"{where}.ranking_options")
    options = dict(spec.get("ranking_options") or {})
    options.setdefault("ranker", "auto")
    options.setdefault("score_threshold", ranking.score_threshold)
    config = FileSearchConfig(tuple(dict.fromkeys(ids)), filters, count, ranking, options)
    return Declared(KIT, where, config, (function(),))


def check(declared: Sequence[Declared]) -> None:
    if len(declared) > 1:
        raise invalid(f"Invalid '{declared[1].where}': only one file_search tool may be given.", declared[1].where)


def echo(declared: Declared) -> dict[str, Any]:
    config: FileSearchConfig = declared.config
    return {"type": NAME, "vector_store_ids": list(config.vector_store_ids), "filters": config.filters,
            "max_num_results": config.max_num_results, "ranking_options": config.ranking_options}


def normalize(item: dict[str, Any], where: str) -> Item:
    queries = item.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise APIError(400, f"Missing required parameter: '{where}.queries'.", param=f"{where}.queries",
                       code="missing_required_parameter")
    out = {"type": "file_search_call", "queries": list(queries), "status": item.get("status") or "completed",
           "results": item.get("results")}
    if isinstance(item.get("id"), str):
        out["id"] = item["id"]
    return out


def lower(item: Item) -> tuple[Item, Item]:
    """An earlier search as the model saw it: its call, then its results (or why it failed)."""
    call_id = item.get("id") or "fs"
    call = {"type": "function_call", "call_id": call_id, "name": NAME,
            "arguments": orjson.dumps({"queries": item.get("queries") or []}).decode()}
    if item.get("status") == "failed":
        output = f"The search failed: {item.get('error') or 'unknown error'}"
    elif item.get("results") is None:
        output = "The results of this search are no longer available."
    else:
        output = render(item["results"], int(item.get("cite_from") or 1))
    return call, {"type": "function_call_output", "call_id": call_id, "output": output}


def shown(item: Item, include: frozenset[str]) -> Item:
    out = {k: v for k, v in item.items() if k not in HIDDEN}
    if RESULTS not in include:
        out["results"] = None
    return out


def start(declared: Sequence[Declared], context: Context[FileSearch]) -> Runner:
    return FileSearchRunner(declared[0].config, context)


async def serve(start: Start[FileSearchSettings]) -> FileSearch | Unavailable:
    """The process's search and ingestion, where there is a store and the `file-search` extra is installed."""
    if start.store is None:
        return Unavailable("file_search needs a store (it is off with --db none)")
    if any(importlib.util.find_spec(name) is None for name in EXTRA):
        return Unavailable("file_search needs pip install 'responses-gateway[file-search]'")
    store = start.store.role(FileSearchStore)
    await store.ensure_search_index()  # the engine's own keyword index of vector store chunks
    service = FileSearch(start.settings, start.group, store)
    service.start()
    return service


async def preflight(declared: Sequence[Declared], service: FileSearch, owner: str) -> None:
    """The request's vector stores exist and are the caller's (a 404 before the response starts)."""
    for one in declared:
        await service.searcher.stores(one.config.vector_store_ids, owner)


async def purge(store: Store) -> str:
    return f"{await store.role(VectorStoreQueries).purge_vector_stores()} expired vector stores"


KIT: Kit[FileSearchSettings, FileSearch] = Kit(
    name=NAME, types=(NAME,), item_types=("file_search_call",), parse=parse, echo=echo, normalize=normalize,
    lower=lower, start=start, shown=shown, includes=(RESULTS,), check=check, preflight=preflight,
    settings=FileSearchSettings, serve=serve, routes=(*FILES_ROUTES, *VECTOR_STORES_ROUTES), purge=purge)
