"""The Files API: `POST /v1/files` (multipart upload), list, retrieve, delete and `GET /v1/files/{id}/content`.

Files belong to the API key that uploaded them (another key's file is a 404, as a stored response is). The
upload is bounded while it arrives (`--max-file-bytes`: a 413 as soon as the body passes it, never after
reading it all) and by the key's quota (`--file-quota-bytes`); its bytes are spooled to a temporary file by
the multipart parser, then copied where the store keeps them (store/files.py) in a worker thread. Deleting a
file also removes it from every vector store (as OpenAI does).
"""

from __future__ import annotations

import time
import unicodedata
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Message

from ...api.paging import page_body
from ...api.request import json_response, owner, served, stored
from ...errors import APIError, invalid
from ...ids import new_id
from ...store import Store
from .settings import FileSearchSettings
from .store import VectorStoreQueries

PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
EXPIRY_SECONDS = (3600, 30 * 24 * 3600)  # expires_after.seconds: 1 hour to 30 days
BATCH_EXPIRY = 30 * 24 * 3600  # purpose=batch files expire after 30 days unless told otherwise
MULTIPART_SLACK = 64 * 1024  # the form's other fields and boundaries, beyond the file itself
MAX_LIST = 10_000  # GET /v1/files takes limit up to 10,000 (and defaults to it), as OpenAI's does
MAX_FILENAME = 255


def file_not_found(file_id: str) -> APIError:
    return APIError(404, f"No such File object: {file_id}", param="id", code=None)


def files_store(request: Request) -> Store:
    return stored(request, "files")


def clean_filename(name: str | None) -> str:
    """The name as the file object shows it: the last path component, without control characters."""
    base = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if unicodedata.category(ch)[0] != "C").strip()
    return base[:MAX_FILENAME] or "upload"


class TooLarge(Exception):
    pass


def _counting(request: Request, limit: int) -> Request:
    """The same request, its body refused (TooLarge) as soon as more than `limit` bytes have come."""
    received = 0
    receive = request.receive

    async def counted() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                raise TooLarge()
        return message

    return Request(request.scope, counted)


def _expiry(form: Any, purpose: str, now: int) -> int | None:
    anchor, seconds = form.get("expires_after[anchor]"), form.get("expires_after[seconds]")
    if anchor is None and seconds is None:
        return now + BATCH_EXPIRY if purpose == "batch" else None
    if anchor != "created_at":
        raise invalid(f"Invalid value for 'expires_after.anchor': expected 'created_at', got {anchor!r}.",
                      "expires_after.anchor")
    try:
        after = int(str(seconds))
    except ValueError:
        raise APIError(400, "Invalid type for 'expires_after.seconds': expected an integer.",
                       param="expires_after.seconds", code="invalid_type") from None
    low, high = EXPIRY_SECONDS
    if not low <= after <= high:
        raise invalid(f"Invalid 'expires_after.seconds': expected a value between {low} and {high}, but got "
                      f"{after} instead.", "expires_after.seconds")
    return now + after


async def create_file(request: Request) -> Response:
    store = files_store(request)
    settings = served(request).settings.group(FileSearchSettings)
    limit = settings.max_file_bytes
    too_large = APIError(413, f"File too large: the limit is {limit} bytes.", param="file", code="file_too_large")
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit + MULTIPART_SLACK:
        raise too_large
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise invalid("Invalid request: expected a multipart/form-data body with 'file' and 'purpose'.", "file")
    try:
        form = await _counting(request, limit + MULTIPART_SLACK).form(max_files=1, max_fields=16)
    except TooLarge:
        raise too_large from None
    except Exception as exc:  # the multipart parser's own refusals (malformed body, too many parts)
        if isinstance(exc, APIError):
            raise
        detail = getattr(exc, "detail", None) or str(exc) or type(exc).__name__
        raise invalid(f"Invalid multipart body: {detail}", "file") from None
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise APIError(400, "Missing required parameter: 'file'.", param="file",
                           code="missing_required_parameter")
        purpose = form.get("purpose")
        if not isinstance(purpose, str) or not purpose:
            raise APIError(400, "Missing required parameter: 'purpose'.", param="purpose",
                           code="missing_required_parameter")
        if purpose not in PURPOSES:
            raise invalid(f"Invalid value for 'purpose': '{purpose[:64]}'. Supported values are: "
                          f"{', '.join(repr(p) for p in PURPOSES)}.", "purpose")
        size = upload.size if upload.size is not None else 0
        if size > limit:
            raise too_large
        now = int(time.time())
        expires_at = _expiry(form, purpose, now)
        quota = settings.file_quota_bytes
        who = owner(request)
        if quota > 0 and await store.file_usage(who) + size > quota:
            raise _over_quota(quota)
        file_id = new_id("file")
        written = await store.blobs.put(file_id, upload.file)
        file = {"id": file_id, "object": "file", "bytes": written, "created_at": now,
                "filename": clean_filename(upload.filename), "purpose": purpose, "status": "processed",
                "expires_at": expires_at, "status_details": None}
        try:
            added = await store.add_file(file, who, quota)
        except BaseException:
            await store.blobs.delete([file_id])
            raise
        if not added:
            await store.blobs.delete([file_id])
            raise _over_quota(quota)
        return json_response(file)
    finally:
        await form.close()


def _over_quota(quota: int) -> APIError:
    return APIError(413, f"Storage quota exceeded: this API key's files may take at most {quota} bytes; delete "
                    "some files first.", param="file", code="quota_exceeded")


def _list_limit(request: Request) -> tuple[int, str]:
    q = request.query_params
    order = q.get("order", "desc")
    if order not in ("asc", "desc"):
        raise invalid(f"Invalid value: '{order}'. Supported values are: 'asc' and 'desc'.", "order")
    try:
        limit = int(q.get("limit", str(MAX_LIST)))
    except ValueError:
        raise APIError(400, "Invalid type for 'limit': expected an integer.", param="limit",
                       code="invalid_type") from None
    if not 1 <= limit <= MAX_LIST:
        raise invalid(f"Invalid 'limit': expected a value between 1 and {MAX_LIST}, but got {limit} instead.",
                      "limit")
    return limit, order


async def list_files(request: Request) -> Response:
    limit, order = _list_limit(request)
    purpose = request.query_params.get("purpose") or None
    page = await files_store(request).list_files(owner(request), purpose=purpose,
                                                 after=request.query_params.get("after"), limit=limit, order=order)
    return json_response(page_body(page))


async def get_file(request: Request) -> Response:
    file_id = request.path_params["file_id"]
    found = await files_store(request).get_file(file_id, owner(request))
    if found is None:
        raise file_not_found(file_id)
    return json_response(found)


async def delete_file(request: Request) -> Response:
    file_id = request.path_params["file_id"]
    store = files_store(request)
    if await store.get_file(file_id, owner(request)) is None:
        raise file_not_found(file_id)
    vector_stores = store.role(VectorStoreQueries)  # the store that keeps files keeps vector stores too
    await vector_stores.detach_file(file_id, owner(request))  # it leaves every vector store, as OpenAI's does
    if not await store.delete_file(file_id, owner(request)):
        raise file_not_found(file_id)
    return json_response({"id": file_id, "object": "file", "deleted": True})


async def file_content(request: Request) -> Response:
    file_id = request.path_params["file_id"]
    store = files_store(request)
    found = await store.get_file(file_id, owner(request))
    if found is None:
        raise file_not_found(file_id)
    name = found["filename"].replace('"', "")
    ascii_name = name.encode("ascii", "replace").decode().replace("?", "_")
    return StreamingResponse(store.blobs.read(file_id), media_type="application/octet-stream", headers={
        "content-length": str(found["bytes"]),
        "content-disposition": f'attachment; filename="{ascii_name}"',
    })


ROUTES = (
    Route("/v1/files", create_file, methods=["POST"]),
    Route("/v1/files", list_files, methods=["GET"]),
    Route("/v1/files/{file_id}", get_file, methods=["GET"]),
    Route("/v1/files/{file_id}", delete_file, methods=["DELETE"]),
    Route("/v1/files/{file_id}/content", file_content, methods=["GET"]),
)
