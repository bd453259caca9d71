"""The timings and token counts of one response, turned into metrics once each — never per token.

`respond.start` makes one when the request is accepted; the pipeline marks the upstream opening, its first
events, the first output event sent and the terminal event. Each mark is an attribute check on the hot
path; the histogram observations happen once per response.
"""

from __future__ import annotations

from time import monotonic
from typing import Any

from . import metrics


class Observation:
    __slots__ = ("route", "model", "started", "opened", "upstream_seen", "first_output")

    def __init__(self, route: str, model: str, started: float | None = None):
        self.route = route
        self.model = model
        self.started = monotonic() if started is None else started
        self.opened: float | None = None
        self.upstream_seen = False
        self.first_output = False

    def opening(self) -> None:
        """The first upstream request is about to be sent (later steps of a tool loop are not measured)."""
        if self.opened is None:
            self.opened = monotonic()

    def upstream_events(self) -> None:
        """The upstream's first events arrived: its latency to first byte."""
        self.upstream_seen = True
        if self.opened is not None:
            metrics.upstream_latency.labels(self.route).observe(monotonic() - self.opened)

    def output(self) -> None:
        """The first output event is going out: time to first token."""
        self.first_output = True
        metrics.time_to_first_token.labels(self.route).observe(monotonic() - self.started)

    def finished(self, final: dict[str, Any]) -> None:
        metrics.duration.labels(self.route, final["status"]).observe(monotonic() - self.started)
        usage = final.get("usage")
        if usage:
            metrics.tokens.labels("input", self.model, self.route).inc(usage.get("input_tokens") or 0)
            metrics.tokens.labels("output", self.model, self.route).inc(usage.get("output_tokens") or 0)
