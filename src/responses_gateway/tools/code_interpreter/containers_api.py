"""The Containers API: /v1/containers and /v1/containers/{id}/files, shaped as openai-python's types.

A container belongs to the key that made it (another key gets a 404, as for a container that does not
exist); its files are uploaded as multipart form data (`file`) or copied from the Files API by JSON
`{"file_id": ...}`, listed, read, deleted, and downloaded from `/content`. Files the code writes in
/mnt/data appear here with `source: "assistant"`. The code interpreter of the gateway (tools/code_interpreter)
keeps them; without it (`--code-interpreter off`, `--db none`) these routes answer 400 saying so.
"""

from __future__ import annotations

import mimetypes
from collections.abc import AsyncGenerator
from typing import Any
from urllib.parse import quote

import orjson
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartParser
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...api.paging import page_body, page_params
from ...api.request import json_response, owner, read_body, running, served
from ...errors import APIError, invalid
from ...store.base import Page
from . import NAME
from .registry import Registry, not_found, public_container, public_file
from .service import CodeInterpreter


def _service(request: Request) -> CodeInterpreter:
    return running(request, NAME, CodeInterpreter, "Containers")


def _registry(request: Request) -> Registry:
    registry: Registry = _service(request).registry
    return registry


async def _object(request: Request) -> dict[str, Any]:
    raw = await read_body(request, served(request).settings.max_body_bytes)
    try:
        body = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError:
        raise APIError(400, "We could not parse the JSON body of your request.", code="invalid_json") from None
    if not isinstance(body, dict):
        raise APIError(400, "Invalid type for body: expected an object.", code="invalid_type")
    return body


async def create_container(request: Request) -> Response:
    registry = _registry(request)
    body = await _object(request)
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise APIError(400, "Missing required parameter: 'name'.", param="name", code="missing_required_parameter")
    minutes = None
    expires = body.get("expires_after")
    if expires is not None:
        if not isinstance(expires, dict) or expires.get("anchor") != "last_active_at":
            raise invalid("Invalid 'expires_after': expected {\"anchor\": \"last_active_at\", \"minutes\": ...}.",
                          "expires_after.anchor")
        minutes = expires.get("minutes")
        if not isinstance(minutes, int) or isinstance(minutes, bool) or not 1 <= minutes <= 20:
            raise invalid("Invalid 'expires_after.minutes': expected an integer between 1 and 20.",
                          "expires_after.minutes")
    policy = body.get("network_policy")
    if policy is not None and (not isinstance(policy, dict) or policy.get("type") != "disabled"):
        raise APIError(400, "'network_policy': this gateway's containers have no network; only "
                       "{\"type\": \"disabled\"} is supported.", param="network_policy", code="unsupported_parameter")
    if body.get("skills"):
        raise APIError(400, "'skills' are not supported by this gateway.", param="skills",
                       code="unsupported_parameter")
    file_ids = body.get("file_ids") or []
    if not isinstance(file_ids, list) or not all(isinstance(f, str) for f in file_ids):
        raise APIError(400, "Invalid type for 'file_ids': expected an array of strings.", param="file_ids",
                       code="invalid_type")
    memory = registry.memory_limit(body.get("memory_limit"), "memory_limit")
    who = owner(request)
    uploads = await _service(request).uploads(who, file_ids)
    row = await registry.create(who, name=name, memory_limit=memory, minutes=minutes, uploads=uploads)
    return json_response(public_container(row))


async def list_containers(request: Request) -> Response:
    registry = _registry(request)
    limit, order = page_params(request.query_params)
    page = await registry.store.list_containers(owner(request), after=request.query_params.get("after"),
                                                limit=limit, order=order, name=request.query_params.get("name"))
    return json_response(page_body(Page([public_container(row) for row in page.items], page.has_more)))


async def _container(request: Request) -> dict[str, Any]:
    cid = request.path_params["container_id"]
    row = await _registry(request).get(owner(request), cid)
    if row is None:
        raise not_found(cid)
    return row


async def get_container(request: Request) -> Response:
    return json_response(public_container(await _container(request)))


async def delete_container(request: Request) -> Response:
    cid = request.path_params["container_id"]
    if not await _registry(request).delete(owner(request), cid):
        raise not_found(cid)
    return json_response({"id": cid, "object": "container.deleted", "deleted": True})


# -- files ----------------------------------------------------------------------------------------------------


async def create_file(request: Request) -> Response:
    registry = _registry(request)
    cid = request.path_params["container_id"]
    who = owner(request)
    await registry.usable(who, cid)
    limit = min(served(request).settings.max_body_bytes, registry.options.stored_file_bytes)
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        filename, content = await _upload(request, limit)
    else:
        body = await _object(request)
        file_id = body.get("file_id")
        if not isinstance(file_id, str) or not file_id:
            raise APIError(400, "Missing required parameter: 'file' or 'file_id'.", param="file",
                           code="missing_required_parameter")
        uploads = await _service(request).uploads(who, [file_id])
        filename, content = uploads[0]
    if len(content) > limit:
        raise APIError(413, f"The file is larger than this gateway's limit of {limit:,} bytes.", param="file",
                       code="file_too_large")
    stored = await registry.add_file(who, cid, filename, content, "user")
    return json_response(public_file(stored))


async def _upload(request: Request, limit: int) -> tuple[str, bytes]:
    raw = await read_body(request, limit + 64 * 1024)

    async def chunks() -> AsyncGenerator[bytes, None]:
        yield bytes(raw)

    try:
        form = await MultiPartParser(request.headers, chunks(), max_files=1, max_fields=8).parse()
    except Exception as exc:  # python-multipart's errors: a body that is not the form it says it is
        raise APIError(400, f"Could not parse the multipart body: {exc}", code="invalid_request") from None
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise APIError(400, "Missing required parameter: 'file'.", param="file", code="missing_required_parameter")
    try:
        content = await upload.read()
    finally:
        await upload.close()
        await form.close()
    return upload.filename or "file", content


async def list_files(request: Request) -> Response:
    registry = _registry(request)
    limit, order = page_params(request.query_params)
    cid = request.path_params["container_id"]
    page = await registry.store.container_files(cid, owner(request), after=request.query_params.get("after"),
                                                limit=limit, order=order)
    if page is None:
        raise not_found(cid)
    return json_response(page_body(Page([public_file(row) for row in page.items], page.has_more)))


async def _file(request: Request) -> dict[str, Any]:
    cid, fid = request.path_params["container_id"], request.path_params["file_id"]
    registry = _registry(request)
    found = await registry.store.container_file(cid, fid, owner(request))
    if found is None:
        if await registry.get(owner(request), cid) is None:
            raise not_found(cid)
        raise APIError(404, f"File with id '{fid}' not found in container '{cid}'.", code=None)
    return found


async def get_file(request: Request) -> Response:
    return json_response(public_file(await _file(request)))


async def get_file_content(request: Request) -> Response:
    found = await _file(request)
    content = await _registry(request).store.container_file_content(found["container_id"], found["id"],
                                                                     owner(request))
    if content is None:
        raise APIError(404, f"File with id '{found['id']}' not found.", code=None)
    kind = mimetypes.guess_type(found["path"])[0] or "application/octet-stream"
    name = quote(found["path"].rsplit("/", 1)[-1])
    return Response(content, media_type=kind, headers={"content-disposition": f"attachment; filename*=UTF-8''{name}"})


async def delete_file(request: Request) -> Response:
    found = await _file(request)
    await _registry(request).remove_file(owner(request), found["container_id"], found["id"])
    return json_response({"id": found["id"], "object": "container.file.deleted", "deleted": True})


C = "/v1/containers/{container_id}"
ROUTES = (
    Route("/v1/containers", create_container, methods=["POST"]),
    Route("/v1/containers", list_containers, methods=["GET"]),
    Route(C, get_container, methods=["GET"]),
    Route(C, delete_container, methods=["DELETE"]),
    Route(f"{C}/files", create_file, methods=["POST"]),
    Route(f"{C}/files", list_files, methods=["GET"]),
    Route(f"{C}/files/{{file_id}}", get_file, methods=["GET"]),
    Route(f"{C}/files/{{file_id}}", delete_file, methods=["DELETE"]),
    Route(f"{C}/files/{{file_id}}/content", get_file_content, methods=["GET"]),
)
