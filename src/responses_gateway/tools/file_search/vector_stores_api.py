"""The Vector Stores API: stores, their files, file batches and search, shaped as openai-python's types.

Everything belongs to the API key that made it (another key's store or file is a 404). Adding files starts
their ingestion (tools/file_search/ingest.py) and answers at once with `in_progress`; reads of something still
in progress carry `openai-poll-after-ms`, which the SDK's `*_and_poll` helpers follow. Requests are checked
before anything is stored: a bad `chunking_strategy`, `filters`, `ranking_options`, `attributes` or
`metadata` is a 400 naming the field, an unknown file or store a 404.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...api.paging import page_body, page_params
from ...api.request import json_response, owner, read_object, running
from ...errors import APIError, invalid
from ...ids import new_id
from . import NAME
from .chunking import parse_strategy
from .files_api import file_not_found
from .filters import parse_filters
from .ranking import parse_ranking
from .search import DEFAULT_RESULTS, MAX_RESULTS, Result, store_not_found
from .service import FileSearch

POLL_AFTER_MS = "250"  # what the SDK's polling helpers wait between reads of something in progress
MAX_BODY = 4 * 1024 * 1024
MAX_FILES_PER_REQUEST = 2000  # a batch's files, as OpenAI's limit
EXPIRY_DAYS = (1, 365)
FILE_STATUSES = ("in_progress", "completed", "failed", "cancelled")


def service(request: Request) -> FileSearch:
    return running(request, NAME, FileSearch, "Vector stores")


async def _body(request: Request) -> dict[str, Any]:
    return await read_object(request, MAX_BODY)


def _known(body: dict[str, Any], allowed: tuple[str, ...]) -> None:
    for key in body:
        if key not in allowed:
            raise invalid(f"Unknown parameter: '{key}'.", key, "unknown_parameter")


def check_metadata(value: Any, where: str = "metadata") -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) > 16:
        raise invalid(f"Invalid '{where}': expected an object of at most 16 string values.", where)
    for key, item in value.items():
        if len(key) > 64 or not isinstance(item, str) or len(item) > 512:
            raise invalid(f"Invalid '{where}.{key[:64]}': keys are at most 64 characters and values strings of at "
                          "most 512.", f"{where}.{key[:64]}")
    return dict(value)


def check_attributes(value: Any, where: str = "attributes") -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) > 16:
        raise invalid(f"Invalid '{where}': expected an object of at most 16 values.", where)
    for key, item in value.items():
        ok = isinstance(item, (bool, int, float)) or (isinstance(item, str) and len(item) <= 512)
        if len(key) > 64 or not ok or (isinstance(item, float) and item != item):
            raise invalid(f"Invalid '{where}.{key[:64]}': keys are at most 64 characters; values are strings of at "
                          "most 512 characters, numbers or booleans.", f"{where}.{key[:64]}")
    return dict(value)


def _expiry(value: Any, last_active: int, where: str = "expires_after") -> tuple[dict[str, Any] | None, int | None]:
    if value is None:
        return None, None
    if not isinstance(value, dict) or value.get("anchor") != "last_active_at" or set(value) != {"anchor", "days"}:
        raise invalid(f"Invalid '{where}': expected {{\"anchor\": \"last_active_at\", \"days\": N}}.", where)
    days = value["days"]
    low, high = EXPIRY_DAYS
    if not isinstance(days, int) or isinstance(days, bool) or not low <= days <= high:
        raise invalid(f"Invalid '{where}.days': expected an integer between {low} and {high}.", f"{where}.days")
    return {"anchor": "last_active_at", "days": days}, last_active + days * 86400


def _file_ids(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise invalid(f"Invalid '{where}': expected a list of file ids.", where, "invalid_type")
    if len(value) > MAX_FILES_PER_REQUEST:
        raise invalid(f"Invalid '{where}': at most {MAX_FILES_PER_REQUEST} files at once.", where)
    return list(dict.fromkeys(value))


async def _owned_files(fs: FileSearch, ids: list[str], who: str) -> None:
    found = await fs.store.get_files(ids, who)
    for file_id in ids:
        if file_id not in found:
            raise file_not_found(file_id)


def _polled(obj: dict[str, Any]) -> Response:
    headers = {"openai-poll-after-ms": POLL_AFTER_MS} if obj.get("status") == "in_progress" else None
    return json_response(obj, headers=headers)


async def _existing(request: Request, fs: FileSearch) -> dict[str, Any]:
    vs_id = request.path_params["vector_store_id"]
    found = await fs.store.get_vector_store(vs_id, owner(request))
    if found is None:
        raise store_not_found(vs_id)
    return found


def _list_params(request: Request) -> tuple[int, str, str | None, str | None]:
    limit, order = page_params(request.query_params)
    return limit, order, request.query_params.get("after"), request.query_params.get("before")


# -- vector stores ----------------------------------------------------------------------------------------


async def create_vector_store(request: Request) -> Response:
    fs = service(request)
    body = await _body(request)
    _known(body, ("name", "file_ids", "chunking_strategy", "expires_after", "metadata", "description"))
    who = owner(request)
    name = body.get("name")
    if name is not None and not isinstance(name, str):
        raise invalid("Invalid type for 'name': expected a string.", "name", "invalid_type")
    description = body.get("description")
    if description is not None and not isinstance(description, str):
        raise invalid("Invalid type for 'description': expected a string.", "description", "invalid_type")
    metadata = check_metadata(body.get("metadata"))
    chunking = parse_strategy(body.get("chunking_strategy"), "chunking_strategy")
    ids = _file_ids(body.get("file_ids", []), "file_ids")
    now = int(time.time())
    expires_after, expires_at = _expiry(body.get("expires_after"), now)
    await _owned_files(fs, ids, who)
    vector_store: dict[str, Any] = {"id": new_id("vs"), "object": "vector_store", "created_at": now, "name": name or "",
                    "description": description, "metadata": metadata or {}, "expires_after": expires_after,
                    "expires_at": expires_at}
    await fs.store.create_vector_store(vector_store, who, fs.embedding_model)
    if ids:
        await fs.store.add_vector_store_files(vector_store["id"], who, [(f, None, chunking) for f in ids], None)
        fs.ingestor.wake()
    found = await fs.store.get_vector_store(vector_store["id"], who)
    assert found is not None
    return _polled(found)


async def list_vector_stores(request: Request) -> Response:
    fs = service(request)
    limit, order, after, before = _list_params(request)
    page = await fs.store.list_vector_stores(owner(request), after=after, before=before, limit=limit, order=order)
    return json_response(page_body(page))


async def get_vector_store(request: Request) -> Response:
    fs = service(request)
    return _polled(await _existing(request, fs))


async def update_vector_store(request: Request) -> Response:
    fs = service(request)
    body = await _body(request)
    _known(body, ("name", "metadata", "expires_after"))
    found = await _existing(request, fs)
    stored = {k: found.get(k) for k in ("id", "object", "created_at", "name", "description", "metadata",
                                          "expires_after", "expires_at")}
    if "name" in body and body["name"] is not None:
        if not isinstance(body["name"], str):
            raise invalid("Invalid type for 'name': expected a string.", "name", "invalid_type")
        stored["name"] = body["name"]
    if "metadata" in body and body["metadata"] is not None:
        stored["metadata"] = check_metadata(body["metadata"])
    if "expires_after" in body:
        stored["expires_after"], stored["expires_at"] = _expiry(body["expires_after"], int(found["last_active_at"]))
    await fs.store.update_vector_store(found["id"], owner(request), stored, stored["expires_at"])
    updated = await fs.store.get_vector_store(found["id"], owner(request))
    assert updated is not None
    return _polled(updated)


async def delete_vector_store(request: Request) -> Response:
    fs = service(request)
    vs_id = request.path_params["vector_store_id"]
    if not await fs.store.delete_vector_store(vs_id, owner(request)):
        raise store_not_found(vs_id)
    return json_response({"id": vs_id, "object": "vector_store.deleted", "deleted": True})


# -- their files ------------------------------------------------------------------------------------------


def _vs_file_not_found(file_id: str, vs_id: str) -> APIError:
    return APIError(404, f"No file found with id '{file_id}' in vector store '{vs_id}'.", param="file_id", code=None)


async def create_vector_store_file(request: Request) -> Response:
    fs = service(request)
    body = await _body(request)
    _known(body, ("file_id", "attributes", "chunking_strategy"))
    file_id = body.get("file_id")
    if not isinstance(file_id, str) or not file_id:
        raise APIError(400, "Missing required parameter: 'file_id'.", param="file_id",
                       code="missing_required_parameter")
    attributes = check_attributes(body.get("attributes"))
    chunking = parse_strategy(body.get("chunking_strategy"), "chunking_strategy")
    vector_store = await _existing(request, fs)
    who = owner(request)
    await _owned_files(fs, [file_id], who)
    await fs.store.add_vector_store_files(vector_store["id"], who, [(file_id, attributes, chunking)], None)
    fs.ingestor.wake()
    found = await fs.store.get_vector_store_file(vector_store["id"], file_id, who)
    assert found is not None
    return _polled(found)


async def list_vector_store_files(request: Request) -> Response:
    fs = service(request)
    limit, order, after, before = _list_params(request)
    status = _status_filter(request)
    vector_store = await _existing(request, fs)
    page = await fs.store.list_vector_store_files(vector_store["id"], owner(request), status=status, batch_id=None,
                                                  after=after, before=before, limit=limit, order=order)
    return json_response(page_body(page))


def _status_filter(request: Request) -> str | None:
    status = request.query_params.get("filter")
    if status is not None and status not in FILE_STATUSES:
        raise invalid(f"Invalid value for 'filter': expected one of {', '.join(FILE_STATUSES)}.", "filter")
    return status


async def _vs_file(request: Request, fs: FileSearch) -> dict[str, Any]:
    vs_id, file_id = request.path_params["vector_store_id"], request.path_params["file_id"]
    found = await fs.store.get_vector_store_file(vs_id, file_id, owner(request))
    if found is None:
        raise _vs_file_not_found(file_id, vs_id)
    return found


async def get_vector_store_file(request: Request) -> Response:
    return _polled(await _vs_file(request, service(request)))


async def update_vector_store_file(request: Request) -> Response:
    fs = service(request)
    body = await _body(request)
    _known(body, ("attributes",))
    if "attributes" not in body:
        raise APIError(400, "Missing required parameter: 'attributes'.", param="attributes",
                       code="missing_required_parameter")
    attributes = check_attributes(body["attributes"])
    found = await _vs_file(request, fs)
    await fs.store.update_file_attributes(found["vector_store_id"], found["id"], owner(request), attributes)
    return _polled({**found, "attributes": attributes})


async def delete_vector_store_file(request: Request) -> Response:
    fs = service(request)
    vs_id, file_id = request.path_params["vector_store_id"], request.path_params["file_id"]
    if not await fs.store.delete_vector_store_file(vs_id, file_id, owner(request)):
        raise _vs_file_not_found(file_id, vs_id)
    return json_response({"id": file_id, "object": "vector_store.file.deleted", "deleted": True})


async def vector_store_file_content(request: Request) -> Response:
    """The file's text as ingested: its chunks' spans put back together (overlaps once)."""
    fs = service(request)
    found = await _vs_file(request, fs)
    # a file being ingested has no content yet (its chunks go in by batches, or are an earlier version's)
    chunks = await fs.store.file_chunks(found["vector_store_id"], found["id"]) \
        if found["status"] == "completed" else []
    pieces, at = [], 0
    for c in chunks:
        if c.end > at:
            pieces.append(c.text[max(0, at - c.start):])
            at = c.end
    data = [{"type": "text", "text": "".join(pieces)}] if pieces else []
    return json_response({"object": "vector_store.file_content.page", "data": data, "has_more": False,
                          "next_page": None})


# -- batches ----------------------------------------------------------------------------------------------


async def create_file_batch(request: Request) -> Response:
    fs = service(request)
    body = await _body(request)
    _known(body, ("file_ids", "files", "attributes", "chunking_strategy"))
    entries: list[tuple[str, dict[str, Any] | None, dict[str, Any]]] = []
    if "files" in body:
        if "file_ids" in body:
            raise invalid("'file_ids' and 'files' are mutually exclusive.", "files")
        files = body["files"]
        if not isinstance(files, list) or not files or len(files) > MAX_FILES_PER_REQUEST:
            raise invalid(f"Invalid 'files': expected a list of 1 to {MAX_FILES_PER_REQUEST} objects.", "files")
        for i, entry in enumerate(files):
            where = f"files[{i}]"
            if not isinstance(entry, dict) or not isinstance(entry.get("file_id"), str):
                raise invalid(f"Invalid '{where}': expected an object with a 'file_id'.", f"{where}.file_id")
            _known({k: v for k, v in entry.items()}, ("file_id", "attributes", "chunking_strategy"))
            entries.append((entry["file_id"], check_attributes(entry.get("attributes"), f"{where}.attributes"),
                            parse_strategy(entry.get("chunking_strategy"), f"{where}.chunking_strategy")))
    else:
        ids = _file_ids(body.get("file_ids"), "file_ids")
        if not ids:
            raise invalid("Invalid 'file_ids': expected at least one file id.", "file_ids")
        attributes = check_attributes(body.get("attributes"))
        chunking = parse_strategy(body.get("chunking_strategy"), "chunking_strategy")
        entries = [(f, attributes, chunking) for f in ids]
    vector_store = await _existing(request, fs)
    who = owner(request)
    await _owned_files(fs, list(dict.fromkeys(e[0] for e in entries)), who)
    batch_id = new_id("vsfb")
    await fs.store.create_batch(batch_id, vector_store["id"], who, int(time.time()))
    await fs.store.add_vector_store_files(vector_store["id"], who, list({e[0]: e for e in entries}.values()),
                                          batch_id)
    fs.ingestor.wake()
    found = await fs.store.get_batch(batch_id, vector_store["id"], who)
    assert found is not None
    return _polled(found)


async def _batch(request: Request, fs: FileSearch) -> dict[str, Any]:
    vs_id, batch_id = request.path_params["vector_store_id"], request.path_params["batch_id"]
    found = await fs.store.get_batch(batch_id, vs_id, owner(request))
    if found is None:
        raise APIError(404, f"No file batch found with id '{batch_id}' in vector store '{vs_id}'.", param="batch_id",
                       code=None)
    return found


async def get_file_batch(request: Request) -> Response:
    return _polled(await _batch(request, service(request)))


async def cancel_file_batch(request: Request) -> Response:
    fs = service(request)
    found = await _batch(request, fs)
    await fs.store.cancel_batch(found["id"], found["vector_store_id"], owner(request))
    return _polled(await _batch(request, fs))


async def list_file_batch_files(request: Request) -> Response:
    fs = service(request)
    limit, order, after, before = _list_params(request)
    status = _status_filter(request)
    found = await _batch(request, fs)
    page = await fs.store.list_vector_store_files(found["vector_store_id"], owner(request), status=status,
                                                  batch_id=found["id"], after=after, before=before, limit=limit,
                                                  order=order)
    return json_response(page_body(page))


# -- search -----------------------------------------------------------------------------------------------


def parse_queries(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        queries = [value]
    elif isinstance(value, list) and value and all(isinstance(q, str) for q in value):
        queries = list(value)
    else:
        raise invalid(f"Invalid '{where}': expected a string or a non-empty list of strings.", where)
    if not any(q.strip() for q in queries):
        raise invalid(f"Invalid '{where}': the query is empty.", where)
    if len(queries) > 10 or any(len(q) > 4096 for q in queries):
        raise invalid(f"Invalid '{where}': at most 10 queries of at most 4096 characters.", where)
    return queries


def parse_max_results(value: Any, where: str) -> int:
    if value is None:
        return DEFAULT_RESULTS
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_RESULTS:
        raise invalid(f"Invalid '{where}': expected an integer between 1 and {MAX_RESULTS}.", where)
    return value


def result_object(result: Result) -> dict[str, Any]:
    return {"file_id": result.file_id, "filename": result.filename, "score": result.score,
            "attributes": result.attributes or {}, "content": [{"type": "text", "text": result.text}]}


async def search_vector_store(request: Request) -> Response:
    fs = service(request)
    body = await _body(request)
    _known(body, ("query", "filters", "max_num_results", "ranking_options", "rewrite_query"))
    if "query" not in body:
        raise APIError(400, "Missing required parameter: 'query'.", param="query", code="missing_required_parameter")
    queries = parse_queries(body["query"], "query")
    filters = parse_filters(body.get("filters"), "filters")
    limit = parse_max_results(body.get("max_num_results"), "max_num_results")
    ranking = parse_ranking(body.get("ranking_options"), "ranking_options")
    if body.get("rewrite_query") not in (None, True, False):
        raise invalid("Invalid type for 'rewrite_query': expected a boolean.", "rewrite_query", "invalid_type")
    vs_id = request.path_params["vector_store_id"]
    results = await fs.searcher.search([vs_id], owner(request), queries, filters, limit, ranking)
    return json_response({"object": "vector_store.search_results.page", "search_query": queries,
                          "data": [result_object(r) for r in results], "has_more": False, "next_page": None})


VS = "/v1/vector_stores/{vector_store_id}"
ROUTES = (
    Route("/v1/vector_stores", create_vector_store, methods=["POST"]),
    Route("/v1/vector_stores", list_vector_stores, methods=["GET"]),
    Route(VS, get_vector_store, methods=["GET"]),
    Route(VS, update_vector_store, methods=["POST"]),
    Route(VS, delete_vector_store, methods=["DELETE"]),
    Route(f"{VS}/search", search_vector_store, methods=["POST"]),
    Route(f"{VS}/files", create_vector_store_file, methods=["POST"]),
    Route(f"{VS}/files", list_vector_store_files, methods=["GET"]),
    Route(f"{VS}/files/{{file_id}}", get_vector_store_file, methods=["GET"]),
    Route(f"{VS}/files/{{file_id}}", update_vector_store_file, methods=["POST"]),
    Route(f"{VS}/files/{{file_id}}", delete_vector_store_file, methods=["DELETE"]),
    Route(f"{VS}/files/{{file_id}}/content", vector_store_file_content, methods=["GET"]),
    Route(f"{VS}/file_batches", create_file_batch, methods=["POST"]),
    Route(f"{VS}/file_batches/{{batch_id}}", get_file_batch, methods=["GET"]),
    Route(f"{VS}/file_batches/{{batch_id}}/cancel", cancel_file_batch, methods=["POST"]),
    Route(f"{VS}/file_batches/{{batch_id}}/files", list_file_batch_files, methods=["GET"]),
)
