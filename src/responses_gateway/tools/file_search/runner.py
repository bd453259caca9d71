"""The file_search calls of one response: search, record what was found, and cite it.

A call goes `in_progress` (when the model starts it) → `searching` → `completed`, or `failed` with the
reason the model then reads (a store gone meanwhile, embeddings down, a deadline passed). Its results are
numbered for citation after every result already in the conversation, and the response's annotator
(citations.py) knows them all, earlier turns' included.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson

from ...errors import APIError
from ...generation import ToolCallStart
from ...ids import new_id
from ...protocol.tools import ToolSet
from ..frame import Annotator, Calls, Context, Events, Item, OpenItem, Spec
from .citations import Citations
from .declaration import FileSearchConfig
from .service import FileSearch

MAX_QUERIES = 10


class FileSearchRunner:
    def __init__(self, config: FileSearchConfig, context: Context[FileSearch]):
        self.config = config
        self.context = context
        self.service = context.service
        self.timeout: float = context.service.settings.file_search_timeout
        self.sources: dict[int, dict[str, Any]] = {}
        self.next_number = 1
        for item in context.history:  # earlier turns' results stay citable under the numbers the model read
            if item.get("type") == "file_search_call" and item.get("results"):
                self._number(item["results"], int(item.get("cite_from") or 1))  # as kit.lower numbers them

    def _number(self, results: list[dict[str, Any]], first: int) -> None:
        for n, result in enumerate(results, start=first):
            if result.get("file_id"):
                self.sources[n] = {"file_id": result["file_id"], "filename": result.get("filename") or ""}
        self.next_number = max(self.next_number, first + len(results))

    async def prelude(self, calls: Calls, tools: ToolSet) -> AsyncIterator[Events]:
        return
        yield

    def item(self, start: ToolCallStart) -> Item:
        return {"id": new_id("fs"), "type": "file_search_call", "status": "in_progress", "queries": [],
                "results": None}

    def added(self, call: OpenItem) -> list[Spec]:
        return [("response.file_search_call.in_progress", {})]

    def delta(self, call: OpenItem, text: str) -> list[Spec]:
        return []  # the queries are shown whole, in the item

    def complete(self, call: OpenItem) -> tuple[list[Spec], bool]:
        call.item["queries"] = _queries(call.arguments) or []
        return [], True

    async def run(self, call: OpenItem, calls: Calls) -> AsyncIterator[Events]:
        queries = _queries(call.arguments)
        if not queries:
            yield calls.fail_call(call, "The arguments must be an object with 'queries', a list of strings.")
            return
        call.item["status"] = "searching"
        yield calls.call_events(call, [("response.file_search_call.searching", {})])
        config = self.config
        try:
            found = await self.service.searcher.search(config.vector_store_ids, self.context.owner, queries,
                                                       config.filters, config.max_num_results, config.ranking)
        except APIError as exc:
            yield calls.fail_call(call, exc.message)
            return
        results = [{"attributes": r.attributes or {}, "file_id": r.file_id, "filename": r.filename,
                    "score": r.score, "text": r.text} for r in found]
        call.item["results"] = results
        call.item["cite_from"] = self.next_number
        self._number(results, self.next_number)
        yield calls.end_call(call, "completed", [("response.file_search_call.completed", {})])

    def failed(self, call: OpenItem, message: str) -> tuple[str | None, list[Spec]]:
        call.item["error"] = message
        call.item["results"] = None
        return "failed", []

    def annotator(self) -> Annotator | None:
        return Citations(self.sources)

    async def aclose(self) -> None:
        pass


def _queries(arguments: str) -> list[str] | None:
    """The model's `queries` (a lone `query` string is taken too); None if the arguments make no sense."""
    try:
        value = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    queries = value.get("queries", value.get("query"))
    if isinstance(queries, str):
        queries = [queries]
    if not isinstance(queries, list):
        return None
    clean = [q.strip() for q in queries if isinstance(q, str) and q.strip()]
    return clean[:MAX_QUERIES] or None
