"""The Files API's and file_search's settings (docs/file-search.md), declared once (settings.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ...settings import setting


@dataclass(frozen=True)
class FileSearchSettings:
    """Files and file_search (docs/file-search.md)"""

    max_file_bytes: int = setting(
        512 * 1024 * 1024, check="positive", shown="512 MiB", help="largest file POST /v1/files accepts (413 beyond)",
        doc="largest file `POST /v1/files` accepts: 413 `file_too_large` as soon as the upload passes it "
            "([docs/file-search.md](docs/file-search.md))")
    file_quota_bytes: int = setting(
        10 * 1024 * 1024 * 1024, check="non_negative", shown="10 GiB",
        help="bytes of files one API key may keep, 0 for no quota (413 beyond)",
        doc="bytes of files one API key may keep (`0`: no quota); an upload past it is a 413 `quota_exceeded`")
    embeddings_model: str | None = setting(
        None, metavar="NAME", help="embedding model for file_search; without one, search is keyword-only",
        doc="embedding model for vector stores and `file_search` (hybrid keyword + vector search); without one, "
            "search is keyword-only ([docs/file-search.md](docs/file-search.md#embeddings))")
    embeddings_url: str | None = setting(
        None, metavar="URL", shown="the upstream's URL",
        help="OpenAI-compatible base URL serving /embeddings (vLLM, Ollama, llama.cpp, TEI, OpenAI)")
    embeddings_api_key: str | None = setting(None, metavar="KEY", secret=True, shown="the upstream's key",
                                             help="bearer token for --embeddings-url")
    embeddings_batch: int = setting(64, check="positive", help="texts per embeddings request")
    embeddings_timeout: float = setting(60.0, check="positive", help="seconds each embeddings request may take")
    ingest_workers: int = setting(
        2, check="positive", help="vector store files ingested at once per process (jobs are leased: --lease-timeout)")
    max_pdf_pages: int = setting(2000, check="positive",
                                 help="pages read from one PDF (more: the file fails, invalid_file)")
    max_extracted_chars: int = setting(64 * 1024 * 1024, check="positive", shown="64 Mi",
                                       help="characters of text one file may yield (more: the file fails)")
    pdf_timeout: float = setting(
        60.0, check="positive",
        help="seconds one PDF's reader, a child process, may run (then it is killed; the file fails)")
    pdf_max_memory_mb: int = setting(1024, check="positive",
                                     help="MiB of memory one PDF's reader may use (more: the file fails)")
    file_search_timeout: float = setting(
        30.0, check="positive", help="seconds one file_search call may take (then a failed item the model sees)")

    def validate(self) -> None:
        if self.embeddings_url and not self.embeddings_url.startswith(("http://", "https://")):
            raise ValueError(f"--embeddings-url must be an http(s) URL; got {self.embeddings_url!r}")
