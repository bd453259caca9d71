"""A PDF's text, read in a child process with a deadline and a memory cap (`isolated.py` says why).

A PDF is the one format whose reading is not linear in its size: a content stream of a few kilobytes,
deflated, can hold millions of text operators (an 8.8 KB file took 10 s of CPU in pypdf, and one under its
75 MB decompression cap takes minutes). Called from ingestion's worker thread (extract.py), so the wait is a
blocking one (`isolated.run`). Starting the child costs about 0.1–0.2 s (Python and pypdf), small beside
reading any real PDF and paid only by ingestion.
"""

from __future__ import annotations

from ...isolated import Bounds, ChildFailed, child_env, run
from .bounds import ExtractError, Limits

__all__ = ["child_env", "pdf_text_isolated"]

READER = "responses_gateway.tools.file_search.pdf_child:read"


def pdf_text_isolated(data: bytes, limits: Limits) -> str:
    """The text of each page, as `extract.pdf_text` gives it; ExtractError when the child fails, runs past
    `limits.pdf_seconds` or needs more than `limits.pdf_memory` bytes."""
    bounds = Bounds(limits.pdf_seconds, limits.pdf_memory, "--pdf-timeout", "--pdf-max-memory-mb")
    try:
        result = run(READER, data, [str(limits.max_chars), str(limits.max_pdf_pages)], bounds)
    except ChildFailed as exc:
        if exc.reason == "time" and "CPU" not in exc.why:
            raise ExtractError("invalid_file", f"The PDF took more than {limits.pdf_seconds:g} s to read "
                                               "(--pdf-timeout); it is not indexed.") from None
        raise ExtractError("invalid_file", f"The PDF could not be read: {exc.why}.") from None
    if "error" in result:
        raise ExtractError(result["error"]["code"], result["error"]["message"])
    text: str = result["text"]
    return text
