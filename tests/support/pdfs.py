"""Real PDFs made with pypdf for the file_search tests: ordinary ones, and hostile ones."""

from __future__ import annotations

import io
from typing import Any


def _pdf(contents: list[bytes | None], deflate: bool = False, encrypt: bool = False) -> bytes:
    """One page per content stream (None: a page without text), each with Helvetica as /F1."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    for content in contents:
        page = writer.add_blank_page(width=612, height=792)
        font = DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
                                 NameObject("/BaseFont"): NameObject("/Helvetica")})
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject(
            {NameObject("/F1"): writer._add_object(font)})})
        stream: Any = DecodedStreamObject()
        if content is not None:
            stream.set_data(content)
        page[NameObject("/Contents")] = writer._add_object(stream.flate_encode() if deflate else stream)
    if encrypt:
        writer.encrypt("secret")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def pdf_bytes(pages: list[str], encrypt: bool = False) -> bytes:
    """A real PDF made with pypdf: one page per text (empty strings make pages without text)."""
    def content(text: str) -> bytes | None:
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        return f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode() if text else None

    return _pdf([content(text) for text in pages], encrypt=encrypt)


def slow_pdf(operators: int = 300_000) -> bytes:
    """A PDF of a few kilobytes whose one page holds `operators` deflated text operators: pypdf takes about
    10 s of CPU per 300,000 of them (measured: 8.8 KB, 10.0 s), the non-linear case the child exists for."""
    return _pdf([b"BT /F1 12 Tf 72 720 Td " + b"(a) Tj 1 0 Td " * operators + b"ET"], deflate=True)
