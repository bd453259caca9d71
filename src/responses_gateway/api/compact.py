"""POST /v1/responses/compact: the conversation so far → the messages kept verbatim and one compaction item.

The same compaction as a `/v1/responses` request whose input ends with a compaction trigger (respond.start
runs it), returned as OpenAI's `response.compaction` object. Nothing is stored. A client that leaves
before the answer closes the upstream request, as for any non-streamed response.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from .. import offload
from ..compaction.history import kept_messages
from ..protocol.request import parse_compact
from ..respond import start
from ..services import of
from ..state import with_ids
from .errors import error_response
from .request import ClientGone, cancelled_if_client_leaves, owner, read_body


async def compact_response(request: Request) -> Response:
    req = (await offload.run(parse_compact, await read_body(request))).as_trigger()
    try:
        async with cancelled_if_client_leaves(request):
            started = await start(of(request.app), req, owner(request))
            last: list[dict[str, Any]] = []
            async for batch in started.batches:
                last = batch  # the terminal batch, with the `error` event of a failure
    except ClientGone:
        return Response(status_code=499)  # nobody reads it; the upstream call was closed
    final = started.final
    if final["status"] != "completed":  # the precise code of the `error` event (e.g. upstream_idle_timeout)
        error = final["error"] or {}
        code = next((e["code"] for e in last if e["type"] == "error"), error.get("code"))
        return error_response(502, {"error": {"message": error.get("message"), "type": "server_error",
                                              "param": None, "code": code}})
    body = {"id": final["id"], "object": "response.compaction", "created_at": final["created_at"],
            "output": [*with_ids(kept_messages(started.history)), *final["output"]], "usage": final["usage"]}
    return Response(orjson.dumps(body), media_type="application/json")
