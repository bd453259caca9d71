"""PDFs read in a child process: the same text as before, and a hostile PDF stopped by its deadline and its
memory cap while the process that asked is untouched."""

from __future__ import annotations

import time

import pytest

from responses_gateway.tools.file_search.bounds import ExtractError, Limits
from responses_gateway.tools.file_search.extract import extract
from tests.support.pdfs import pdf_bytes, slow_pdf


def test_the_child_reads_what_the_thread_read():
    assert extract(pdf_bytes(["first page", "second page"]), "r.pdf", Limits(10_000, 5)) == "first page\n\nsecond page"


def test_a_pdf_that_reads_for_ever_is_killed_at_its_deadline():
    data = slow_pdf()
    assert len(data) < 20_000
    started = time.monotonic()
    with pytest.raises(ExtractError) as err:
        extract(data, "bomb.pdf", Limits(10**8, 10, pdf_seconds=1.0))
    assert time.monotonic() - started < 5.0
    assert err.value.code == "invalid_file" and "--pdf-timeout" in err.value.message


def test_a_pdf_that_needs_too_much_memory_fails_alone():
    """Two million operators in 55 KB: pypdf holds each parsed operator as Python objects, which outgrow a
    128 MiB cap within about two seconds; the child reports the cap, the caller only gets the file's error."""
    started = time.monotonic()
    with pytest.raises(ExtractError) as err:
        extract(slow_pdf(2_000_000), "big.pdf", Limits(10**8, 10, pdf_seconds=60.0, pdf_memory=128 << 20))
    assert time.monotonic() - started < 30.0
    assert err.value.code == "invalid_file" and "128 MiB" in err.value.message, err.value.message


def test_the_child_gets_none_of_the_gateways_secrets(monkeypatch):
    from responses_gateway.tools.file_search.pdf import child_env

    monkeypatch.setenv("RG_UPSTREAM_API_KEY", "sk-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other")
    env = child_env()
    assert "sk-secret" not in env.values() and "sk-other" not in env.values()
    assert set(env) <= {"PATH", "PYTHONPATH", "LANG", "LC_ALL"}
