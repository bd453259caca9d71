"""A PDF's text, read in a child process with a deadline and a memory cap (pdf_child.py says why).

Called from ingestion's worker thread (extract.py), so the wait is a blocking `subprocess.run`: the thread
sleeps in `waitpid`, holding neither the GIL nor the event loop. Starting the child costs about 0.1–0.2 s
(Python and pypdf), small beside reading any real PDF and paid only by ingestion.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys

import orjson

from .bounds import ExtractError, Limits

CHILD = "responses_gateway.tools.file_search.pdf_child"
KEPT_ENV = ("PATH", "PYTHONPATH", "LANG", "LC_ALL")  # what the child needs to start; no keys, no settings


def child_env() -> dict[str, str]:
    """The child's environment: the file is hostile, so none of the gateway's secrets (API keys, database
    URLs in RG_* variables) are within its reach, should a PDF ever take over its reader."""
    return {name: os.environ[name] for name in KEPT_ENV if name in os.environ}


def pdf_text_isolated(data: bytes, limits: Limits) -> str:
    """The text of each page, as `extract.pdf_text` gives it; ExtractError when the child fails, runs past
    `limits.pdf_seconds` or needs more than `limits.pdf_memory` bytes."""
    seconds = limits.pdf_seconds
    args = [sys.executable, "-m", CHILD, str(limits.max_chars), str(limits.max_pdf_pages), str(limits.pdf_memory),
            str(max(1, math.ceil(seconds)))]
    try:
        done = subprocess.run(args, input=data, capture_output=True, timeout=seconds, check=False,
                              env=child_env())
    except subprocess.TimeoutExpired:  # run() killed the child
        raise ExtractError("invalid_file", f"The PDF took more than {seconds:g} s to read (--pdf-timeout); "
                                           "it is not indexed.") from None
    if done.returncode != 0 or not done.stdout:
        if done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
            why = f"it needed more than {seconds:g} s of CPU (--pdf-timeout)"
        elif b"MemoryError" in done.stderr:
            why = f"it needed more than {limits.pdf_memory >> 20} MiB of memory (--pdf-max-memory-mb)"
        else:
            why = f"its reader exited with status {done.returncode}"
        raise ExtractError("invalid_file", f"The PDF could not be read: {why}.")
    result = orjson.loads(done.stdout)
    if "error" in result:
        raise ExtractError(result["error"]["code"], result["error"]["message"])
    text: str = result["text"]
    return text
