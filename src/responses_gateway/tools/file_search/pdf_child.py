"""Reads one PDF's text in a process of its own: `python -m responses_gateway.tools.file_search.pdf_child
MAX_CHARS MAX_PAGES MEMORY_BYTES CPU_SECONDS`, the PDF on stdin, one JSON object on stdout.

A PDF is the one format whose reading is not linear in its size: a content stream of a few kilobytes,
deflated, can hold millions of text operators (an 8.8 KB file took 10 s of CPU in pypdf, and one under its
75 MB decompression cap takes minutes). In a thread of the gateway such a file could not be stopped and its
reader would hold the GIL the event loop needs; here the kernel bounds it (address space and CPU seconds,
`setrlimit`) and the parent kills it at its deadline (pdf.py).
"""

from __future__ import annotations

import resource
import sys

import orjson


def main(argv: list[str]) -> int:
    max_chars, max_pages, memory, cpu = (int(x) for x in argv)
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU at the soft limit, SIGKILL one second on
    data = sys.stdin.buffer.read()
    from .bounds import ExtractError, Limits
    from .extract import pdf_text

    try:
        result: dict[str, object] = {"text": pdf_text(data, Limits(max_chars, max_pages))}
    except ExtractError as exc:
        result = {"error": {"code": exc.code, "message": exc.message}}
    except MemoryError:
        result = {"error": {"code": "invalid_file",
                            "message": f"The PDF needs more than {memory >> 20} MiB of memory to read."}}
    sys.stdout.buffer.write(orjson.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
