"""A file's text, for chunking: plain text, Markdown, source code, JSON, CSV, HTML and PDF.

Runs in a worker thread (ingest.py), never on the event loop, and is bounded: a PDF is read in a child process
(pdf.py) with a deadline (`--pdf-timeout`) and a memory cap (`--pdf-max-memory-mb`), page by page up to
`--max-pdf-pages` (a longer one fails at once, before its pages are parsed), pypdf's own decompression limits
hold against compression bombs, and no file may yield more than `--max-extracted-chars` characters. What
cannot be read is an `ExtractError` whose code is the vector store file's `last_error.code`:
`unsupported_file` (a format it does not read, an encrypted PDF) or `invalid_file` (a broken PDF, a PDF with
no text, a file with nothing to index).
"""

from __future__ import annotations

import codecs
import html.parser
import io
import logging

from .bounds import ExtractError, Limits
from .pdf import pdf_text_isolated

log = logging.getLogger("responses_gateway.file_search")

# Extensions read as text (source code and data formats included). Anything else is sniffed: UTF-8 (or a BOM)
# without NUL bytes is text; a PDF is recognised by its header; the rest is unsupported.
TEXT_EXTENSIONS = frozenset(["txt", "text", "md", "markdown", "rst", "adoc", "org", "tex", "log", "csv", "tsv", "json", "jsonl", "ndjson", "yaml", "yml", "toml", "ini", "cfg", "conf", "xml", "py", "pyi", "js", "mjs", "cjs", "ts", "tsx", "jsx", "java", "kt", "kts", "scala", "go", "rs", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "cs", "rb", "php", "pl", "pm", "swift", "m", "mm", "r", "jl", "lua", "sh", "bash", "zsh", "fish", "ps1", "bat", "sql", "graphql", "proto", "css", "scss", "less", "vue", "svelte", "dart", "ex", "exs", "erl", "hrl", "hs", "ml", "fs", "clj"])
HTML_EXTENSIONS = frozenset(("html", "htm", "xhtml"))
SNIFF_BYTES = 8192


def extension(filename: str) -> str:
    return filename.rsplit(".", 1)[-1].lower() if "." in filename else ""


def extract(data: bytes, filename: str, limits: Limits) -> str:
    """The text of a file, or ExtractError."""
    ext = extension(filename)
    is_pdf = data.startswith(b"%PDF-") or ext == "pdf"
    if not is_pdf and len(data) > 4 * limits.max_chars:  # at least a character per 4 bytes: fail before decoding
        raise ExtractError("invalid_file", f"The file has more than {limits.max_chars} characters of text "
                                           "(--max-extracted-chars).")
    if is_pdf:
        text = pdf_text_isolated(data, limits)
    elif ext in HTML_EXTENSIONS:
        text = html_text(decode(data, filename), limits)
    elif ext in TEXT_EXTENSIONS or looks_like_text(data):
        text = decode(data, filename)
    else:
        raise not_supported(filename)
    if len(text) > limits.max_chars:
        raise ExtractError("invalid_file", f"The file has more than {limits.max_chars} characters of text "
                                           "(--max-extracted-chars).")
    if not text.strip():
        raise ExtractError("invalid_file", "The file has no text to index.")
    return text


def not_supported(filename: str) -> ExtractError:
    return ExtractError("unsupported_file", f"The file type of '{filename}' is not supported: file_search reads "
                                            "text, Markdown, HTML, JSON, CSV, source code and PDF.")


def readable(head: bytes, filename: str) -> bool:
    """Whether a file that starts with `head` may be read at all (before the rest of it is fetched)."""
    ext = extension(filename)
    return head.startswith(b"%PDF-") or ext in ("pdf", *HTML_EXTENSIONS, *TEXT_EXTENSIONS) or looks_like_text(head)


def looks_like_text(data: bytes) -> bool:
    head = data[:SNIFF_BYTES]
    if head.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return True
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3  # only a character cut by the sniff window
    return True


def decode(data: bytes, filename: str) -> str:
    if data.startswith(codecs.BOM_UTF8):
        return data[3:].decode("utf-8", errors="replace")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", errors="replace")
    if b"\x00" in data[:SNIFF_BYTES]:
        raise ExtractError("unsupported_file", f"'{filename}' is binary, not text.")
    return data.decode("utf-8", errors="replace")


class _HTMLText(html.parser.HTMLParser):
    """The visible text of an HTML page: no scripts, styles or markup; blocks on lines of their own."""

    SKIP = frozenset(("script", "style", "noscript", "template", "head"))
    BLOCKS = frozenset(("p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
                        "header", "footer", "pre", "blockquote", "table", "ul", "ol", "title"))

    def __init__(self, max_chars: int):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.size = 0
        self.skipping = 0
        self.max_chars = max_chars

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIP:
            self.skipping += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and self.skipping:
            self.skipping -= 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.skipping:
            return
        self.parts.append(data)
        self.size += len(data)
        if self.size > self.max_chars:
            raise ExtractError("invalid_file", f"The file has more than {self.max_chars} characters of text "
                                               "(--max-extracted-chars).")


def html_text(source: str, limits: Limits) -> str:
    parser = _HTMLText(limits.max_chars)
    parser.feed(source)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def pdf_text(data: bytes, limits: Limits) -> str:
    """The text of each page, pages separated by a blank line. Run by the child process of pdf.py only."""
    import pypdf
    from pypdf.errors import PdfReadError, PyPdfError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # a broken PDF is the file's failure, not log noise
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            raise ExtractError("unsupported_file", "The PDF is encrypted: file_search cannot read it.")
        count = len(reader.pages)
        if count > limits.max_pdf_pages:
            raise ExtractError("invalid_file", f"The PDF has {count} pages; at most {limits.max_pdf_pages} are read "
                                               "(--max-pdf-pages).")
        pages: list[str] = []
        size = 0
        for page in reader.pages:
            text = page.extract_text() or ""
            size += len(text)
            if size > limits.max_chars:
                raise ExtractError("invalid_file", f"The PDF has more than {limits.max_chars} characters of text "
                                                   "(--max-extracted-chars).")
            pages.append(text.strip())
    except ExtractError:
        raise
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError,
            RecursionError, OSError, AssertionError, ZeroDivisionError) as exc:
        raise ExtractError("invalid_file", f"The PDF could not be read: {type(exc).__name__}: {str(exc)[:200]}") \
            from None
    text = "\n\n".join(p for p in pages if p)
    if not text.strip():
        raise ExtractError("invalid_file", "The PDF has no text layer (a scan?): there is no text to index.")
    return text
