"""What the PDF's child process runs (isolated.py sets its limits first, then calls `read`): the text of
each page, or the file's error as data (running out of memory is the child's exit status: isolated.py)."""

from __future__ import annotations

from .bounds import ExtractError, Limits
from .extract import pdf_text


def read(data: bytes, args: list[str]) -> dict[str, object]:
    max_chars, max_pages = (int(x) for x in args)
    try:
        return {"text": pdf_text(data, Limits(max_chars, max_pages))}
    except ExtractError as exc:
        return {"error": {"code": exc.code, "message": exc.message}}
