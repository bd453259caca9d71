"""client/reorder.py: events released in `sequence_number` order, duplicates dropped, a gap waited for at most
`window` events, and arrival order once the numbering proves meaningless."""

from __future__ import annotations

from responses_gateway.client.reorder import Reorder


def ev(seq, kind="response.output_text.delta"):
    return {"type": kind, "sequence_number": seq}


def seqs(events):
    return [e["sequence_number"] for e in events]


def test_out_of_order_events_come_out_in_order():
    r = Reorder(window=8)
    assert seqs(r.push(ev(0))) == [0]
    assert r.push(ev(2)) == [] and r.push(ev(3)) == []
    assert seqs(r.push(ev(1))) == [1, 2, 3]


def test_a_duplicate_of_the_same_type_is_dropped_and_counted():
    r = Reorder(window=8)
    r.push(ev(0))
    assert r.push(ev(0)) == [] and r.duplicates == 1


def test_a_gap_is_waited_for_at_most_window_events():
    r = Reorder(window=2)
    r.push(ev(0))
    assert r.push(ev(2)) == [] and r.push(ev(3)) == []
    assert seqs(r.push(ev(4))) == [2, 3, 4]  # 1 never came: given up on
    assert seqs(r.push(ev(1))) == [1]  # late: applied where it lands


def test_a_terminal_event_releases_everything_held():
    r = Reorder(window=8)
    r.push(ev(0))
    r.push(ev(3))
    assert seqs(r.push(ev(2, "response.completed"))) == [2, 3]


def test_one_number_for_two_events_means_arrival_order_from_then_on():
    r = Reorder(window=8)
    r.push(ev(0))
    r.push(ev(2))
    out = r.push(ev(2, "response.output_item.added"))
    assert seqs(out) == [2, 2] and not r.trusted
    assert seqs(r.push(ev(1))) == [1]


def test_events_without_a_number_pass_as_they_come():
    r = Reorder(window=8)
    assert r.push({"type": "x"}) == [{"type": "x"}]
