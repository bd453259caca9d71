"""The timings and token counts of one response, turned into metrics once each — never per token — and,
when tracing is on (tracing.py), into a span with a child span per upstream step, one for the store, and
those the MCP loop opens with `child` (a tool listing, a tool call).

`respond.start` makes one when the request is accepted; the pipeline marks the upstream opening, its first
events, the first output event sent and the terminal event. Each mark is an attribute check on the hot
path; the histogram observations happen once per response.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from time import monotonic, time_ns
from typing import Any

from . import metrics, tracing
from .logs import REPLICA


class Observation:
    __slots__ = ("route", "model", "started", "opened", "upstream_seen", "first_output", "span", "step")

    def __init__(self, route: str, model: str, started: float | None = None):
        self.route = route
        self.model = model
        self.started = monotonic() if started is None else started
        self.opened: float | None = None
        self.upstream_seen = False
        self.first_output = False
        self.span: Any = None  # the response's span, when tracing
        self.step: Any = None  # the open upstream step's span
        if tracing.TRACER is not None:
            began = time_ns() - int((monotonic() - self.started) * 1e9)
            self.span = tracing.TRACER.start_span("response", start_time=began, attributes={
                "gen_ai.request.model": model, "responses_gateway.route": route})

    def opening(self) -> None:
        """An upstream request is about to be sent (latency is measured for the first one only)."""
        if self.opened is None:
            self.opened = monotonic()
        if self.span is not None:
            self.step_done()
            self.step = self._child("upstream")

    def step_done(self) -> None:
        """The upstream step's stream is closed."""
        if self.step is not None:
            self.step.end()
            self.step = None

    @contextlib.contextmanager
    def storing(self) -> Iterator[None]:
        """One store write: its latency (when it succeeds) and its span."""
        began = monotonic()
        with self.child("store"):
            yield
        metrics.store_latency.observe(monotonic() - began)

    @contextlib.contextmanager
    def child(self, name: str, attributes: dict[str, Any] | None = None) -> Iterator[Any]:
        """A child span of the response's around the block — None when not tracing. An exception leaving the
        block ends it in error; `failed` marks a failure that is not one."""
        if self.span is None:
            yield None
            return
        span = self._child(name, attributes)
        try:
            yield span
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(_error(str(exc)))
            raise
        finally:
            span.end()

    def _child(self, name: str, attributes: dict[str, Any] | None = None) -> Any:
        from opentelemetry.trace import set_span_in_context

        assert tracing.TRACER is not None
        return tracing.TRACER.start_span(name, context=set_span_in_context(self.span), attributes=attributes)

    def upstream_events(self) -> None:
        """The upstream's first events arrived: its latency to first byte."""
        self.upstream_seen = True
        if self.opened is not None:
            _child(metrics.upstream_latency, self.route).observe(monotonic() - self.opened)

    def output(self) -> None:
        """The first output event is going out: time to first token."""
        self.first_output = True
        _child(metrics.time_to_first_token, self.route).observe(monotonic() - self.started)

    def finished(self, final: dict[str, Any]) -> None:
        _child(metrics.duration, self.route, final["status"]).observe(monotonic() - self.started)
        usage = final.get("usage")
        if usage:
            _child(metrics.tokens, "input", self.model, self.route).inc(usage.get("input_tokens") or 0)
            _child(metrics.tokens, "output", self.model, self.route).inc(usage.get("output_tokens") or 0)
        if self.span is not None:
            self.span.set_attributes({"responses_gateway.response_id": final["id"],
                                      "responses_gateway.status": final["status"]})
            replica = REPLICA.get()
            if replica is not None:
                self.span.set_attribute("responses_gateway.replica", replica)
            if usage:
                self.span.set_attributes({"gen_ai.usage.input_tokens": usage.get("input_tokens") or 0,
                                          "gen_ai.usage.output_tokens": usage.get("output_tokens") or 0})
            if final["status"] == "failed":
                self.span.set_status(_error((final.get("error") or {}).get("message") or "failed"))

    def abandon(self, exc: BaseException) -> None:
        """The response ends before its first event (the upstream refused or timed out)."""
        if self.span is not None:
            self.span.set_status(_error(str(exc)))
        self.close()

    def close(self) -> None:
        """The response is over, whichever way (a client that left ends it here, unfinished)."""
        if self.span is not None:
            self.step_done()
            self.span.end()
            self.span = None


@functools.lru_cache(maxsize=4096)
def _child(metric: Any, *labels: str) -> Any:
    """A metric's child for these labels, looked up once (prometheus_client takes a lock and builds a key on
    every `labels()`: five of them per response)."""
    return metric.labels(*labels)


def failed(span: Any, error_type: str, message: str) -> None:
    """A span of `child` (None: not tracing) ends in error: a failure reported as a result, not raised."""
    if span is not None:
        span.set_attribute("error.type", error_type)
        span.set_status(_error(message))


def _error(message: str) -> Any:
    from opentelemetry.trace import Status, StatusCode

    return Status(StatusCode.ERROR, message)
