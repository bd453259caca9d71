"""Images kept in the files store, so a history read does not carry megabytes of base64.

A finished image is written to the files store (store/files.py: its bytes beside the SQLite file or in
PostgreSQL, a `file` row owned by the caller) as `ig_….png` with purpose `assistants_output` (OpenAI's purpose
for files a tool made), expiring with the response (`--retention-days`): `GET /v1/files/{id}/content` downloads
it. The stored item keeps `result_file_id` instead of `result`; reading the response back (`GET
/v1/responses/{id}`, its input items, a conversation's items) puts `result` back (`restore`), so a client sees
the item as OpenAI returns it. Only the one image a later call edits is read during a response.

The bytes go first and the row last (as an upload): an item never names a file whose bytes are not whole.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterable
from typing import Any

from ...ids import new_id
from ...pictures import BadImage, Picture
from ...store import Store
from . import b64

PURPOSE = "assistants_output"


async def keep(store: Store, owner: str, item_id: str, image: Picture, retention_seconds: int) -> str:
    """Write the image as the caller's file; its file id."""
    file_id = new_id("file")
    written = await store.blobs.put(file_id, io.BytesIO(image.data))
    now = int(time.time())
    file = {"id": file_id, "object": "file", "bytes": written, "created_at": now, "filename": image.filename(item_id),
            "purpose": PURPOSE, "status": "processed", "expires_at": now + retention_seconds, "status_details": None}
    try:
        await store.add_file(file, owner, 0)
    except BaseException:
        await store.blobs.delete([file_id])
        raise
    return file_id


async def load(store: Store, owner: str, file_id: str, max_bytes: int, what: str = "the image") -> bytes | None:
    """A file's bytes (None when the caller has no such file); BadImage when it is over `max_bytes`."""
    found = await store.get_file(file_id, owner)
    if found is None:
        return None
    if int(found.get("bytes") or 0) > max_bytes:
        raise BadImage(f"{what} is {found['bytes']} bytes, more than --image-generation-max-bytes allows "
                       f"({max_bytes})")
    return b"".join([part async for part in store.blobs.read(file_id)])


async def restore(items: Iterable[dict[str, Any]], store: Store, owner: str) -> None:
    """Put `result` back into stored items that keep their image in the files store (in place). A file gone
    meanwhile (deleted through the Files API, expired) leaves `result` null. Needs only the store: a response
    stored while an images server was configured reads back whole after it no longer is."""
    for item in items:
        file_id = item.get("result_file_id")
        if item.get("type") != "image_generation_call" or not isinstance(file_id, str) or item.get("result"):
            continue
        data = await load(store, owner, file_id, 1 << 40)
        item["result"] = b64.encode(data) if data is not None else None
