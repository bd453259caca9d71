"""Events put back in `sequence_number` order, duplicates dropped."""

from __future__ import annotations

import logging
from typing import Any

from .events import TERMINAL

log = logging.getLogger("responses_gateway.client")

SEEN_LIMIT = 8192  # sequence numbers remembered for spotting duplicates


class Reorder:
    """Releases events in `sequence_number` order, drops duplicates, waits at most `window` events for a gap."""

    def __init__(self, window: int):
        self.window = window
        self.next: int | None = None
        self.held: dict[int, dict[str, Any]] = {}
        self.seen: dict[int, Any] = {}
        self.trusted = True
        self.duplicates = 0

    def push(self, ev: dict[str, Any]) -> list[dict[str, Any]]:
        seq = ev.get("sequence_number")
        if not self.trusted or type(seq) is not int:
            return [*self.drain(), ev] if self.held and not self.trusted else [ev]
        known = self.seen.get(seq)
        if known is not None:
            if known == ev.get("type"):
                self.duplicates += 1
                return []
            # Two different events with one number: the numbering means nothing; arrival order from here on.
            log.info("sequence_number %s used twice; reading in arrival order", seq)
            self.trusted = False
            return [*self.drain(), ev]
        self.seen[seq] = ev.get("type")
        if len(self.seen) > SEEN_LIMIT and self.next is not None:
            # Numbers far behind the stream are forgotten: a duplicate that late is not worth the memory.
            floor = self.next - SEEN_LIMIT // 2
            self.seen = {k: v for k, v in self.seen.items() if k >= floor}
        if self.next is None:
            self.next = seq
        if seq < self.next:
            return [ev]  # late, after its gap was given up on: applied where it lands
        self.held[seq] = ev
        if ev.get("type") in TERMINAL:
            return self.drain()
        out: list[dict[str, Any]] = []
        while True:
            while self.next in self.held:
                out.append(self.held.pop(self.next))
                self.next += 1
            if len(self.held) <= self.window:
                return out
            self.next = min(self.held)  # stop waiting for a number that never came

    def drain(self) -> list[dict[str, Any]]:
        if not self.held:
            return []
        out = [self.held[k] for k in sorted(self.held)]
        self.next = max(self.held) + 1
        self.held.clear()
        return out
