"""What bounds one file's extraction, and how it fails: shared by the reader (extract.py) and the PDF's
child process (pdf.py, pdf_child.py, over isolated.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    max_chars: int
    max_pdf_pages: int
    pdf_seconds: float = 60.0  # a PDF's reader is killed past this (wall clock; its CPU is capped the same)
    pdf_memory: int = 1024 << 20  # bytes of address space a PDF's reader may use


class ExtractError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message
