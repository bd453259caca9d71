"""Text extraction: formats, encodings, the bounds, and what fails with which code."""

import pytest

from responses_gateway.tools.file_search.bounds import ExtractError, Limits
from responses_gateway.tools.file_search.extract import extract, html_text, readable
from tests.support.pdfs import pdf_bytes

LIMITS = Limits(max_chars=10_000, max_pdf_pages=5)


def test_text_formats_are_read_as_they_are():
    assert extract(b"# Title\n\nbody", "a.md", LIMITS) == "# Title\n\nbody"
    assert extract(b'{"a": 1}', "data.json", LIMITS) == '{"a": 1}'
    assert extract(b"a,b\n1,2", "t.csv", LIMITS) == "a,b\n1,2"
    assert extract(b"def f():\n    return 1", "x.py", LIMITS).startswith("def f")
    assert extract("caf\u00e9".encode(), "noext", LIMITS) == "caf\u00e9"  # sniffed as text
    assert extract(b"\xef\xbb\xbfbom", "a.txt", LIMITS) == "bom"
    assert extract("utf16 text".encode("utf-16"), "a.txt", LIMITS) == "utf16 text"


def test_html_keeps_the_visible_text_only():
    page = (b"<html><head><title>T</title><style>.x{}</style></head><body><script>alert(1)</script>"
            b"<h1>Head</h1><p>One &amp; two</p><noscript>no</noscript><div>Three</div></body></html>")
    assert extract(page, "p.html", LIMITS) == "Head\nOne & two\nThree"
    assert html_text("<p>a<b>b</b></p>", LIMITS) == "ab"


def test_pdfs_page_by_page_and_their_failures():
    text = extract(pdf_bytes(["first page", "second page"]), "r.pdf", LIMITS)
    assert text == "first page\n\nsecond page"
    for data, code, words in ((pdf_bytes(["x"], encrypt=True), "unsupported_file", "encrypted"),
                              (pdf_bytes(["", ""]), "invalid_file", "no text"),
                              (pdf_bytes(["p"] * 6), "invalid_file", "6 pages"),
                              (b"%PDF-1.4 truncated", "invalid_file", "could not be read")):
        with pytest.raises(ExtractError) as err:
            extract(data, "x.pdf", LIMITS)
        assert err.value.code == code and words in err.value.message


@pytest.mark.parametrize("data, name, code", [
    (b"\x89PNG\r\n\x1a\n\x00\x00", "i.png", "unsupported_file"),
    (b"PK\x03\x04" + b"\x00" * 20, "a.zip", "unsupported_file"),
    (b"text with a \x00 NUL", "a.bin", "unsupported_file"),
    (b"   ", "a.txt", "invalid_file"),
    (b"x" * 10_001, "a.txt", "invalid_file"),
    (b"y" * 40_001, "a.txt", "invalid_file"),  # refused before it is decoded at all
    (b"<p>" + b"y" * 10_001 + b"</p>", "a.html", "invalid_file"),
])
def test_what_cannot_be_indexed(data, name, code):
    with pytest.raises(ExtractError) as err:
        extract(data, name, LIMITS)
    assert err.value.code == code


def test_what_may_be_read_is_known_from_the_first_bytes():
    assert readable(b"%PDF-1.7", "x.bin") and readable(b"\x00\x01", "notes.txt") and readable(b"plain", "noext")
    assert not readable(b"PK\x03\x04\x00\x00", "a.zip") and not readable(b"\x89PNG\r\n\x1a\n\x00", "i.png")
