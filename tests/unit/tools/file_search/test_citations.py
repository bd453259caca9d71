"""The citation annotator: markers held back and removed whatever the delta boundaries, annotations at the
right offsets, and text that only looks like a marker left alone."""

from hypothesis import given
from hypothesis import strategies as st

from responses_gateway.tools.file_search.citations import MAX_MARKER, Citations, render

SOURCES = {1: {"file_id": "file_a", "filename": "a.txt"}, 2: {"file_id": "file_b", "filename": "b.txt"}}


def run(pieces: list[str]) -> tuple[str, list[dict]]:
    annotator = Citations(SOURCES)
    sent, notes = "", []
    for piece in pieces:
        text, more = annotator.feed(piece, len(sent))
        sent += text
        notes += more
    held, more = annotator.flush(len(sent))
    return sent + held, notes + more


def test_markers_become_annotations_at_their_place():
    text, notes = run(["Alpha【1】 beta【2】.", " Gamma【1†a.txt】"])
    assert text == "Alpha beta. Gamma"
    assert [(n["file_id"], n["index"]) for n in notes] == [("file_a", 5), ("file_b", 10), ("file_a", 17)]
    assert all(set(n) == {"type", "file_id", "filename", "index"} and n["type"] == "file_citation" for n in notes)


def test_unknown_numbers_are_removed_without_annotation_and_lookalikes_stay():
    assert run(["x【7】y"]) == ("xy", [])
    assert run(["【note】 and 【12a】"]) == ("【note】 and 【12a】", [])
    long = "【" + "1" * (MAX_MARKER + 5)
    assert run([long]) == (long, [])  # never closed: released, not held forever
    assert run(["open 【1"]) == ("open 【1", [])  # the part ended inside it: what was held goes out


@given(st.lists(st.sampled_from(["a", " ", "【", "1", "2", "】", "†", "x", "。"]), max_size=40), st.data())
def test_any_split_gives_the_same_text_and_annotations(chars, data):
    whole = "".join(chars)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(whole)), max_size=6)))
    pieces, at = [], 0
    for cut in cuts:
        pieces.append(whole[at:cut])
        at = cut
    pieces.append(whole[at:])
    assert run(pieces) == run([whole])


def test_results_are_rendered_with_their_numbers():
    shown = render([{"filename": "a.txt", "score": 0.5, "text": "hello"}], 3)
    assert "【3】 a.txt (score 0.500)\nhello" in shown and "e.g. 【3】" in shown
    assert render([], 1) == "No results were found in the files."
