"""container_file_citation while the answer streams: held back only while a path may still be written, never
changed, and the same annotations whichever way the text is split."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from responses_gateway.tools.code_interpreter.annotate import Citations

FILES = {"/mnt/data/report.csv": "cfile_r", "/mnt/data/plots/fig 1.png": "cfile_p", "/mnt/data/a.txt": "cfile_a"}
TEXT = ("See [the report](sandbox:/mnt/data/report.csv), the file /mnt/data/a.txt. and "
        "/mnt/data/unknown.txt; sand /mnt/dat sandbox:/mnt/data/report.csv")


def run(pieces: list[str]) -> tuple[str, list[dict]]:
    citations = Citations(lambda path: ("cntr_1", FILES[path]) if path in FILES else None)
    sent, notes = "", []
    for piece in pieces:
        out, more = citations.feed(piece, len(sent))
        sent += out
        notes += more
    out, more = citations.flush(len(sent))
    return sent + out, notes + more


def test_known_paths_are_cited_over_their_text():
    text, notes = run([TEXT])
    assert text == TEXT
    assert [(text[n["start_index"]:n["end_index"]], n["file_id"], n["filename"]) for n in notes] == [
        ("sandbox:/mnt/data/report.csv", "cfile_r", "report.csv"),
        ("/mnt/data/a.txt", "cfile_a", "a.txt"),
        ("sandbox:/mnt/data/report.csv", "cfile_r", "report.csv"),
    ]
    assert all(n["type"] == "container_file_citation" and n["container_id"] == "cntr_1" for n in notes)


@given(st.lists(st.integers(min_value=0, max_value=len(TEXT)), max_size=12))
def test_any_split_gives_the_same_text_and_annotations(cuts):
    cuts = sorted(set(cuts))
    pieces = [TEXT[a:b] for a, b in zip([0, *cuts], [*cuts, len(TEXT)], strict=True)]
    assert run(pieces) == run([TEXT])


def test_text_is_held_only_while_it_may_become_a_path():
    citations = Citations(lambda path: None)
    assert citations.feed("plain words ", 0) == ("plain words ", [])
    assert citations.feed("then /mnt/da", 12)[0] == "then "
    assert citations.feed("ta/x.csv", 17)[0] == ""
    assert citations.feed(" done", 17)[0] == "/mnt/data/x.csv done"
