"""Log lines as text (the default) or one JSON object per line (`--log-format json`) for log collectors.

A JSON line carries time, level, logger, message and, while a response is being served, its id: the
pipeline and `respond.start` set RESPONSE_ID in the serving task's context, so every line logged on the
way — upstream, store, tools — is tagged without passing the id around.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime

RESPONSE_ID: ContextVar[str | None] = ContextVar("response_id", default=None)
REPLICA: ContextVar[str | None] = ContextVar("replica", default=None)  # a pool's replica the request went to
TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        response_id = RESPONSE_ID.get()
        if response_id is not None:
            line["response_id"] = response_id
        fields = getattr(record, "fields", None)  # `extra={"fields": {...}}`: a line's own fields (access.py)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def setup(level: str, fmt: str) -> None:
    """One handler on the root logger, in every process (the workers of `--workers N` call it too). uvicorn
    is started without its own logging config, so its lines reach this handler: one format for every line,
    text or JSON."""
    handler = logging.StreamHandler()
    handler.setFormatter(JSONFormatter() if fmt == "json" else logging.Formatter(TEXT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
